#!/usr/bin/env bash
# Session 11, run 75: the fused BiCGStab on a hard, realistic problem: the thermalised
# beta 6.0 16x16x16x32 field (configs/heatbath-b6-16x16x16x32.toml, generated on the GPU) at
# kappa 0.155 (kappa_c about 0.157), point source, tol 1e-10, even-odd single-double r12:
# the fused BiCGStab against the host loop (delta 0.1 and 0.001) and the fused CR, three
# solves each; iterations, reliable updates, true residuals and solve times.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export QCD_SOLVE_TUNE_CACHE=/tmp/hard-tune.tsv
cfg=configs/heatbath-b6-16x16x16x32.toml
base="$cfg --device cuda --kernel 3.0 --kappa 0.155 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/hard"
timeout 300 $q -q $base >/dev/null 2>&1 # the field (cached) and the tune cache
echo "first run rc=$?"
one() { # label, options...: three solves
    local label=$1
    shift
    for rep in 1 2 3; do
        out=$(RUST_LOG=info timeout 120 $q $base "$@" 2>&1)
        echo "$label rc=$? solve_s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//') $(echo "$out" | grep -E '^(solver|result|residual) ' | tr -s ' ' | tr '\n' ' ')"
    done
}
one bicgstab-fused-0.1 --method bicgstab
one bicgstab-host-0.1 --method bicgstab --iteration seed
one bicgstab-fused-0.001 --method bicgstab --reliable-delta 0.001
one bicgstab-host-0.001 --method bicgstab --iteration seed --reliable-delta 0.001
one cr-fused --method cr --check-every 16
date -u +%Y-%m-%dT%H:%M:%SZ
