#!/usr/bin/env bash
# Session 15, run 113 (issue 13 item 1, 16^3x32): under QCD_SOLVE_PDL=1 with the stencil
# letting the next launch start after its sites (V3_PDL_TRIGGER=2, run 112's best), when
# the fused CR passes do: CR_PDL_TRIGGER=1 at their start, 2 after their elements, 0 at
# their exit; against no PDL, alternating, twice at 16x16x16x32, once at 32x32x32x64. The
# seed problem (fused BiCGStab and CR, 3 processes each) with and without PDL.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single|half) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
for dims in 16,16,16,32:200 16,16,16,32:200 32,32,32,64:50; do
    for t in none 1 2 0; do
        echo "===== floor ${dims%:*} passes' trigger $t"
        if [ $t = none ]; then
            timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
        else
            QCD_SOLVE_PDL=1 QCD_SOLVE_KERNEL_DEFINES="V3_PDL_TRIGGER=2 CR_PDL_TRIGGER=$t" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
        fi
    done
done
for env in "" "QCD_SOLVE_PDL=1"; do
    echo "===== seed fused BiCGStab and CR ${env:-default} (V3_PDL_TRIGGER=2 CR_PDL_TRIGGER=2)"
    for m in bicgstab bicgstab bicgstab cr cr cr; do
        env $env QCD_SOLVE_KERNEL_DEFINES="V3_PDL_TRIGGER=2 CR_PDL_TRIGGER=2" timeout 100 $q configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd \
            --precision single-double --reconstruct 12 --method $m --reliable-delta 0.001 2>&1 |
            grep -E "^result|^time" | sed 's/: read.*solve/ ... solve/; s/, verify.*iteration/ ... /'
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
