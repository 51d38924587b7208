#!/usr/bin/env bash
# check_every sweep on the seed problem (best options), 3 runs each, solve step seconds.
q=.device/qcd-solve
export QCD_SOLVE_TUNE_CACHE=/tmp/ce-tune.tsv
$q -q configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/ce >/dev/null 2>&1
for rep in 1 2 3; do
for k in 5 10 16 25 50; do
  out=$(RUST_LOG=info $q configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --check-every $k --output /tmp/ce 2>&1)
  s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//')
  r=$(echo "$out" | grep "^result" | sed 's/result *//')
  g=$(echo "$out" | grep "kernel cr graph" | sed 's/ *kernel cr graph *//')
  echo "k=$k solve_s=$s | $r | graphs $g"
done; done
