#!/usr/bin/env bash
# Session 13, run 93 (issue 13 item 1): links loaded with an L2 evict-first policy
# (V3_L2_FIRST_FULL / V3_L2_FIRST_PARITY, bit mu: direction mu's links), so that the
# spinors other blocks read again stay in L2; with and without run 92's best hop orders.
# floor at 32x32x32x64 and 16x16x16x32, the present build first and last; then the
# gpu_fast tests with every hint and the new orders on.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
ord="V3_ORDER_FULL=7,6,1,0,3,2,5,4 V3_ORDER_PARITY=0,1,2,3,7,4,6,5"
for dims in 32,32,32,64:50 16,16,16,32:200; do
    for defs in "V3_L2_FIRST_FULL=0" "V3_L2_FIRST_FULL=15 V3_L2_FIRST_PARITY=15" "V3_L2_FIRST_FULL=3" \
        "V3_L2_FIRST_FULL=12" "$ord" "$ord V3_L2_FIRST_FULL=15 V3_L2_FIRST_PARITY=15" "$ord V3_L2_FIRST_FULL=3 V3_L2_FIRST_PARITY=15" \
        "V3_L2_FIRST_FULL=0"; do
        echo "===== floor ${dims%:*} $defs"
        QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
done
echo "===== gpu-fast-tests $ord V3_L2_FIRST_FULL=15 V3_L2_FIRST_PARITY=15"
QCD_SOLVE_KERNEL_DEFINES="$ord V3_L2_FIRST_FULL=15 V3_L2_FIRST_PARITY=15" timeout 200 .device/gpu-fast-tests --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"
date -u +%Y-%m-%dT%H:%M:%SZ
