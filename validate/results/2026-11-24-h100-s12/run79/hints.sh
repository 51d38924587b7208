#!/usr/bin/env bash
# Session 12, run 79 (issue 13 item 1): which link loads skip L1, selected by
# QCD_SOLVE_KERNEL_DEFINES (kernels/stencil_v3.cu: V3_LOAD_HINT 0 none, 1 a parity
# launch's, 3 also the full mode's z and t, 5 all; V3_HINT_PATHS=1 the full and parity
# modes as two code paths): floor at 16x16x16x32 and 32x32x32x64 for each, then the 3.0
# GPU tests with two of them.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1|schur even-odd (double|single) r1|cr iteration fused (even-odd )?(double|single) r1'
variants=("V3_LOAD_HINT=0" "V3_LOAD_HINT=1" "V3_LOAD_HINT=3" "V3_LOAD_HINT=5" "V3_LOAD_HINT=1 V3_HINT_PATHS=1" "V3_LOAD_HINT=3 V3_HINT_PATHS=1")
for dims in 16,16,16,32:200 32,32,32,64:50; do
    for v in "${variants[@]}"; do
        echo "===== floor ${dims%:*} $v"
        QCD_SOLVE_KERNEL_DEFINES="$v" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
done
for v in "V3_LOAD_HINT=1" "V3_LOAD_HINT=3 V3_HINT_PATHS=1"; do
    for t in gpu-fast-tests gpu-fused-tests gpu-decomposed-tests; do
        echo "===== $t $v"
        QCD_SOLVE_KERNEL_DEFINES="$v" timeout 200 .device/$t --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED|failures"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
