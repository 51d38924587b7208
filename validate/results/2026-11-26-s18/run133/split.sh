#!/usr/bin/env bash
# Session 18, run 133 (issue 13 item 1): run 132 again after acc left local memory (role-dependent indices into it); the full mode's columns split over two warps
# (stencil_v3_col_split, V3_SPLIT=1, host-read) against the columns one thread each:
# gpu-fast and gpu-solvers with the split, floor at 16 (twice) and 32.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
for t in gpu-fast-tests gpu-solvers-tests gpu-tests; do
    echo "===== $t V3_SPLIT=1"
    QCD_SOLVE_KERNEL_DEFINES="V3_SPLIT=1" timeout 300 .device/$t --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED|failures|^    \""
done
rows='triad|dslash full (double|single) r1|iteration fused'
for rep in 1 2; do
    for defs in "" "V3_SPLIT=1"; do
        echo "===== floor 16 ${defs:-default}"
        QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims 16,16,16,32 --repeat 200 2>&1 | grep -E "$rows|rror"
    done
done
for defs in "" "V3_SPLIT=1"; do
    echo "===== floor 32 ${defs:-default}"
    QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims 32,32,32,64 --repeat 50 2>&1 | grep -E "$rows|rror"
done
date -u +%Y-%m-%dT%H:%M:%SZ
