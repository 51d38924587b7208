#!/usr/bin/env bash
# Session 11, run 68: the fused BiCGStab on the device. Its GPU tests (gpu-solvers: fused and
# host loop against the CPU, the point source's breakdown; gpu-memory: books against the
# estimate), then the seed problem's main job (16x16x16x32, even-odd, single-double, r12)
# with CR, the fused BiCGStab and the host-loop BiCGStab, five solves each, the fused
# BiCGStab over reliable_delta and check_every, `ablate`'s methods table and `validate`.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export QCD_SOLVE_TUNE_CACHE=/tmp/seed-tune.tsv
echo "===== gpu-solvers-tests"
timeout 300 .device/gpu-solvers-tests --test-threads=1 --nocapture 2>&1 | grep -E "^test |test result|bicgstab|failures|panicked"
echo "===== gpu-memory-tests"
timeout 150 .device/gpu-memory-tests --test-threads=1 2>&1 | grep -E "^test |test result|panicked"
base="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/seed"
$q -q configs/16x16x16x32.toml $base >/dev/null 2>&1 # the tune cache
one() { # label, config, options...: five main-job solves; the solve step's seconds and the result
    local label=$1 cfg=$2
    shift 2
    for rep in 1 2 3 4 5; do
        out=$(RUST_LOG=info $q "$cfg" $base "$@" 2>&1)
        echo "$label solve_s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//') $(echo "$out" | grep -E '^(result|residual|solver) ' | tr -s ' ' | tr '\n' ' ')"
    done
}
echo "===== seed main job"
one cr configs/16x16x16x32.toml
one bicgstab-fused configs/16x16x16x32.toml --method bicgstab
one bicgstab-host configs/16x16x16x32.toml --method bicgstab --iteration seed
for d in 0.01 0.001 0.0001; do
    sed "s/^check_every = 16/check_every = 16\nreliable_delta = $d/" configs/16x16x16x32.toml >/tmp/delta-$d.toml
    one "bicgstab-fused-delta-$d" /tmp/delta-$d.toml --method bicgstab
done
for k in 1 2 4; do
    one "bicgstab-fused-every-$k" /tmp/delta-0.001.toml --method bicgstab --check-every $k
done
echo "===== ablate"
timeout 200 $q -q ablate configs/16x16x16x32.toml --kernels 3.0 --repeat 5 --out /tmp/seed-ab 2>&1 | grep -A14 "^methods"
echo "===== validate"
timeout 200 $q -q validate configs/16x16x16x32.toml --kernel 3.0 2>&1 | grep -E "bicgstab|FAIL|rows|pass" | head -30
date -u +%Y-%m-%dT%H:%M:%SZ
