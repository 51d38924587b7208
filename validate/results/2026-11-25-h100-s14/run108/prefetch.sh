#!/usr/bin/env bash
# Session 14, run 108 (issue 13 item 1, 16^3x32): V3_PREFETCH_L1=1, each hop first asks L1
# (prefetch.global.L1) for the next hop's spinor and link elements, so that a thread's
# hops overlap their memory waits (at 16^3x32 the column kernels run one wave of ~250
# threads an SM, 32 hops a thread in double). floor at 16x16x16x32 and 32x32x32x64, the
# default first and last; gpu-fast-tests with the prefetch.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
echo "===== gpu-fast-tests V3_PREFETCH_L1=1"
QCD_SOLVE_KERNEL_DEFINES="V3_PREFETCH_L1=1" timeout 200 .device/gpu-fast-tests --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"
rows='triad|dslash full (double|single) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
for dims in 16,16,16,32:200 32,32,32,64:50; do
    for defs in "" "V3_PREFETCH_L1=1" "V3_PREFETCH_L1=1 V3_TCOL=1" ""; do
        echo "===== floor ${dims%:*} ${defs:-default}"
        QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
