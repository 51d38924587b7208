#!/usr/bin/env bash
# Session 11, run 71: where the seed problem's fused BiCGStab solve (delta 0.001) spends its
# wall time: the solver's debug lines (host microseconds per phase; a phase that ends in a
# host read includes its GPU time), three main jobs.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export QCD_SOLVE_TUNE_CACHE=/tmp/seed-tune.tsv
base="configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/seed --method bicgstab --reliable-delta 0.001"
$q -q $base >/dev/null 2>&1 # the tune cache
for rep in 1 2 3; do
    echo "== solve $rep"
    RUST_LOG=info,qcd_solve::solver=debug $q $base 2>&1 | grep -E "DEBUG|step: solve " | grep -v "solver iteration" | sed 's/^.*\(DEBUG\|INFO\) //'
done
date -u +%Y-%m-%dT%H:%M:%SZ
