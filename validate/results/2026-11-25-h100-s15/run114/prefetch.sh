#!/usr/bin/env bash
# Session 15, run 114 (issue 13 item 1, 16^3x32): with programmatic dependent launch (the
# default since 09da8a6), each stencil launch asks L2 for the first V3_PDL_PREFETCH MiB of
# the links before it waits for the previous kernel (its blocks that are resident early
# use the DRAM the previous kernel's last blocks leave idle): 0, 16, 48 with the passes'
# trigger after their elements (2, the default) and 48 with it at their start (1). floor
# at 16x16x16x32 twice, 32x32x32x64 once (0 and 48). gpu-fast and gpu-fused with 48.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
for t in gpu-fast gpu-fused; do
    echo "===== $t-tests V3_PDL_PREFETCH=48"
    QCD_SOLVE_KERNEL_DEFINES="V3_PDL_PREFETCH=48" timeout 200 .device/$t-tests --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"
done
rows='triad|dslash full (double|single|half) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
for dims in 16,16,16,32:200 16,16,16,32:200 32,32,32,64:50; do
    for defs in "" "V3_PDL_PREFETCH=16" "V3_PDL_PREFETCH=48" "V3_PDL_PREFETCH=48 CR_PDL_TRIGGER=1"; do
        [ "${dims%:*}" = 32,32,32,64 ] && [ "$defs" = "V3_PDL_PREFETCH=16" ] && continue
        echo "===== floor ${dims%:*} ${defs:-default}"
        QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
