#!/usr/bin/env bash
# Session 11, run 72: the solve's fields reserved in the memory pool before the solve's
# clock (Prepare::reserve): the seed problem's fused BiCGStab (delta 0.001, the best
# options) and fused CR (the config's), ten and five main-job solves, one with the solver's
# debug lines; then the GPU test targets the change touches (gpu-memory, gpu-solvers,
# gpu-fused, gpu-fast).
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export QCD_SOLVE_TUNE_CACHE=/tmp/seed-tune.tsv
base="configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/seed"
$q -q $base >/dev/null 2>&1 # the tune cache
echo "== phases"
RUST_LOG=info,qcd_solve::solver=debug $q $base --method bicgstab --reliable-delta 0.001 2>&1 | grep -E "DEBUG|step: (solve|prepare the backend) " | grep -v "solver iteration" | sed 's/^.*\(DEBUG\|INFO\) //'
one() { # label, count, options...: main-job solves; the solve step's seconds and the result
    local label=$1 n=$2
    shift 2
    for rep in $(seq "$n"); do
        out=$(RUST_LOG=info $q $base "$@" 2>&1)
        echo "$label solve_s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//') $(echo "$out" | grep -E '^(result|residual) ' | tr -s ' ' | tr '\n' ' ')"
    done
}
one bicgstab 10 --method bicgstab --reliable-delta 0.001
one cr 5
for t in gpu-memory-tests gpu-solvers-tests gpu-fused-tests gpu-fast-tests; do
    echo "===== $t"
    timeout 200 .device/$t --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED|failures"
done
date -u +%Y-%m-%dT%H:%M:%SZ
