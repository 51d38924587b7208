#!/usr/bin/env bash
# Session 11, run 70: the seed problem's fused BiCGStab (delta 0.001) with and without
# graphs (QCD_SOLVE_BI_GRAPHS), ten main-job solves each, and one solve's kernel table.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export QCD_SOLVE_TUNE_CACHE=/tmp/seed-tune.tsv
base="configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/seed --method bicgstab --reliable-delta 0.001"
$q -q $base >/dev/null 2>&1 # the tune cache
for g in 1 0 1 0; do
    export QCD_SOLVE_BI_GRAPHS=$g
    for rep in 1 2 3 4 5; do
        out=$(RUST_LOG=info $q $base 2>&1)
        echo "graphs-$g solve_s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//') $(echo "$out" | grep -E '^result ' | tr -s ' ')"
    done
    echo "$out" | grep -E "^  kernel|^time|^solver"
done
date -u +%Y-%m-%dT%H:%M:%SZ
