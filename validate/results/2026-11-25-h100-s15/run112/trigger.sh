#!/usr/bin/env bash
# Session 15, run 112 (issue 13 item 1, 16^3x32): when a stencil launch lets the next one
# start under programmatic dependent launch (QCD_SOLVE_PDL=1): V3_PDL_TRIGGER=1 at its
# start (run 110: single 3-6% faster, double r18 4% slower), 2 after its sites, 0 when its
# blocks exit; against the default (no PDL), alternating, twice, at 16x16x16x32; once at
# 32x32x32x64. gpu-fast-tests with PDL and trigger 2.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
echo "===== gpu-fast-tests QCD_SOLVE_PDL=1 V3_PDL_TRIGGER=2"
QCD_SOLVE_PDL=1 QCD_SOLVE_KERNEL_DEFINES="V3_PDL_TRIGGER=2" timeout 200 .device/gpu-fast-tests --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"
rows='triad|dslash full (double|single|half) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
for dims in 16,16,16,32:200 16,16,16,32:200 32,32,32,64:50; do
    for t in none 1 2 0; do
        echo "===== floor ${dims%:*} trigger $t"
        if [ $t = none ]; then
            timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
        else
            QCD_SOLVE_PDL=1 QCD_SOLVE_KERNEL_DEFINES="V3_PDL_TRIGGER=$t" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
        fi
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
