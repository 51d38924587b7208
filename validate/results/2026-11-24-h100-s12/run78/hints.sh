#!/usr/bin/env bash
# Session 12, run 78 (issue 13 item 1): cache hints on the stencil's loads, an experiment
# selected by QCD_SOLVE_KERNEL_DEFINES="V3_LOAD_HINT=n" (kernels/v3_core.cuh; 0 = the
# kernel as it was): floor at 16x16x16x32 and 32x32x32x64 for each level, then the
# 3.0 GPU tests (operators against the CPU) built with levels 1 and 2.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1|schur even-odd (double|single) r1|fused even-odd (double|single) r1'
for pf in 0 1 2; do
    echo "===== floor-16 V3_LOAD_HINT=$pf"
    QCD_SOLVE_KERNEL_DEFINES="V3_LOAD_HINT=$pf" timeout 200 $q floor -q --dims 16,16,16,32 --repeat 200 2>&1 | grep -E "$rows|rror"
done
for pf in 0 1 2; do
    echo "===== floor-32 V3_LOAD_HINT=$pf"
    QCD_SOLVE_KERNEL_DEFINES="V3_LOAD_HINT=$pf" timeout 200 $q floor -q --dims 32,32,32,64 --repeat 50 2>&1 | grep -E "$rows|rror"
done
for pf in 1 2; do
    for t in gpu-fast-tests gpu-fused-tests; do
        echo "===== $t V3_LOAD_HINT=$pf"
        QCD_SOLVE_KERNEL_DEFINES="V3_LOAD_HINT=$pf" timeout 200 .device/$t --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED|failures"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
