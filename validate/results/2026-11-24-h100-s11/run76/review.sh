#!/usr/bin/env bash
# Session 11, run 76: the review's kernels (one generic ticket reduction, cr_for_each) and
# shared iteration: the GPU tests of the fused kernels, the stencil epilogue and the split
# operator, the seed problem (BiCGStab and CR: the same iterations and residuals as runs
# 72-74 expected), floor's CR and BiCGStab rows.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_TUNE_CACHE=/tmp/seed-tune.tsv
for t in gpu-fused-tests gpu-solvers-tests gpu-fast-tests gpu-decomposed-tests gpu-memory-tests; do
    echo "===== $t"
    timeout 200 .device/$t --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED|failures"
done
base="configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/seed"
$q -q $base >/dev/null 2>&1 # the tune cache
for m in "bicgstab --reliable-delta 0.001" cr; do
    for rep in 1 2 3; do
        out=$(RUST_LOG=info $q $base --method $m 2>&1)
        echo "$m solve_s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//') $(echo "$out" | grep -E '^(result|residual) ' | tr -s ' ' | tr '\n' ' ')"
    done
done
echo "===== floor-16"
timeout 200 $q floor -q --dims 16,16,16,32 --repeat 100 2>&1 | grep -E "triad|cr iteration|bicgstab|dslash full double r18"
date -u +%Y-%m-%dT%H:%M:%SZ
