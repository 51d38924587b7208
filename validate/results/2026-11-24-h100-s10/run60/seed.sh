#!/usr/bin/env bash
# The seed problem with its config (check_every 16) and the fast options: ablate and the main job.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export QCD_SOLVE_TUNE_CACHE=/tmp/seed-tune.tsv
a="configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/seed"
$q -q $a >/dev/null 2>&1
for rep in 1 2 3 4 5; do
  out=$(RUST_LOG=info $q $a 2>&1)
  echo "solve_s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//') $(echo "$out" | grep -E '^(result|solver) ' | tr -s ' ' | tr '\n' ' ')"
done
$q -q ablate configs/16x16x16x32.toml --kernels 3.0 --repeat 7 --out /tmp/seed-ab 2>&1 | grep -E "^ablation|fused\+eo\+single\+r12 |^cr  |^method"
