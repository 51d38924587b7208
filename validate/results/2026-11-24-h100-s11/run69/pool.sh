#!/usr/bin/env bash
# Session 11, run 69: the seed problem's time to solution with the memory pool keeping freed
# memory (the default, 1024 MiB) against CUDA's default (QCD_SOLVE_POOL_KEEP_MIB=0), for the
# fused BiCGStab (delta 0.001, the best options) and the fused CR (the config's options);
# then gpu-memory (books against the free-memory drop, with the trim), gpu-fused, and
# `ablate`'s methods table and the 3.0 rows with the pool on.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export QCD_SOLVE_TUNE_CACHE=/tmp/seed-tune.tsv
base="configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/seed"
$q -q $base >/dev/null 2>&1 # the tune cache
one() { # label, options...: seven main-job solves; the solve step's seconds and the result
    local label=$1
    shift
    for rep in 1 2 3 4 5 6 7; do
        out=$(RUST_LOG=info $q $base "$@" 2>&1)
        echo "$label solve_s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//') $(echo "$out" | grep -E '^(result|time) ' | tr -s ' ' | tr '\n' ' ')"
    done
}
for keep in 1024 0; do
    export QCD_SOLVE_POOL_KEEP_MIB=$keep
    one "bicgstab-keep-$keep" --method bicgstab --reliable-delta 0.001
    one "cr-keep-$keep"
done
unset QCD_SOLVE_POOL_KEEP_MIB
echo "===== gpu-memory-tests"
timeout 150 .device/gpu-memory-tests --test-threads=1 --nocapture 2>&1 | grep -E "^test |test result|panicked|dropped by"
echo "===== gpu-fused-tests"
timeout 150 .device/gpu-fused-tests --test-threads=1 2>&1 | grep -E "test result|panicked|FAIL"
echo "===== ablate"
timeout 200 $q -q ablate configs/16x16x16x32.toml --kernels 3.0 --repeat 7 --out /tmp/seed-ab 2>&1 | grep -E -A14 "^ver|^methods"
date -u +%Y-%m-%dT%H:%M:%SZ
