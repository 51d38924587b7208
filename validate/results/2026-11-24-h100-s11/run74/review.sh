#!/usr/bin/env bash
# Session 11, run 74: the review's one-helper launch of the fused BiCGStab's passes: the GPU
# tests that run it (gpu-solvers, gpu-memory), five seed solves with the best options, and
# floor's rows at 16x16x16x32 (repeat 100).
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export QCD_SOLVE_TUNE_CACHE=/tmp/seed-tune.tsv
for t in gpu-solvers-tests gpu-memory-tests; do
    echo "===== $t"
    timeout 200 .device/$t --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED|failures"
done
base="configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/seed"
$q -q $base >/dev/null 2>&1 # the tune cache
for rep in 1 2 3 4 5; do
    out=$(RUST_LOG=info $q $base --method bicgstab --reliable-delta 0.001 2>&1)
    echo "bicgstab solve_s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//') $(echo "$out" | grep -E '^(result|residual) ' | tr -s ' ' | tr '\n' ' ')"
done
echo "===== floor-16"
timeout 200 $q floor -q --dims 16,16,16,32 --repeat 100 2>&1 | grep -E "triad|bicgstab"
date -u +%Y-%m-%dT%H:%M:%SZ
