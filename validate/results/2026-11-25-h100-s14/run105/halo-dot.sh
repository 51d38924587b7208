#!/usr/bin/env bash
# Session 14, run 105: (1) the decomposition's cost with the columns: floor --halo at
# 32^3x64 (D split in 2 along t on this GPU against the undecomposed D, issue 11's target
# <= 1.10), default and V3_TCOL=1; (2) session 13's unexplained failure (runs 97-98: the
# undecomposed single-double fused CR with dot launches at 128 threads took 440
# iterations): V3_DOT_BLOCK=128 (host: every dot launch at 128 threads) on the plain dot
# entry (V3_TCOL=1) and with the columns, in gpu_decomposed's solves (each case printed),
# gpu_fused and gpu_solvers.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0
for v in "" "V3_TCOL=1"; do
    echo "===== floor --halo 32 ${v:-default}"
    QCD_SOLVE_KERNEL_DEFINES="$v" timeout 200 $q floor -q --dims 32,32,32,64 --repeat 50 --halo 2>&1 | tail -6
done
for v in "V3_DOT_BLOCK=128 V3_TCOL=1" "V3_DOT_BLOCK=128"; do
    echo "===== decomposed solves $v"
    QCD_SOLVE_KERNEL_DEFINES="$v" timeout 200 .device/gpu-decomposed-tests solves_ --test-threads=1 --nocapture 2>&1 |
        grep -E "fused CR even_odd=false|FAILED|panicked|test result|^    \""
    for t in gpu-fused-tests gpu-solvers-tests; do
        echo "===== $t $v"
        QCD_SOLVE_KERNEL_DEFINES="$v" timeout 200 .device/$t --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED|^    \""
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
