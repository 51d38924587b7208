#!/usr/bin/env bash
# Session 15, run 116 (issue 13 item 1, 16^3x32): the fused CR's stencil (the dot entry in
# columns, 65536 threads in single) at smaller blocks: V3_DOT_BLOCK=128 and 64 (host-read;
# the default launches it at its bound, 256), against the default, alternating, twice.
# gpu-fused and gpu-solvers with 128.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
for t in gpu-fused gpu-solvers; do
    echo "===== $t-tests V3_DOT_BLOCK=128"
    QCD_SOLVE_KERNEL_DEFINES="V3_DOT_BLOCK=128" timeout 200 .device/$t-tests --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"
done
rows='triad|iteration fused (even-odd )?(double|single) r1'
for rep in 1 2; do
    for defs in "" "V3_DOT_BLOCK=128" "V3_DOT_BLOCK=64"; do
        echo "===== floor 16 ${defs:-default}"
        QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims 16,16,16,32 --repeat 200 2>&1 | grep -E "$rows|rror"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
