#!/usr/bin/env bash
# The seed solve's host costs: graph recording, allocations, with and without a kept pool.
q=.device/qcd-solve
export QCD_SOLVE_TUNE_CACHE=/tmp/ce-tune.tsv
a="configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/ce"
$q -q $a >/dev/null 2>&1
for rep in 1 2 3; do
for keep in "" 1024; do
for k in 10 16 25; do
  out=$(QCD_SOLVE_POOL_KEEP_MIB=$keep RUST_LOG=info,qcd_solve::backend::cuda::seam=debug $q $a --check-every $k 2>&1)
  s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//')
  al=$(echo "$out" | grep "field allocated" | grep -o "ms=[0-9.e-]*" | sed 's/ms=//' | awk '{s+=$1; n++} END {printf "%d allocs %.3f ms", n, s}')
  gr=$(echo "$out" | grep "CUDA graph recorded" | sed 's/.*INFO[^:]*: //' | grep -o "[a-z_]*ms=[0-9.]*" | tr '\n' ' ')
  echo "keep=${keep:-0} k=$k solve_ms=$(awk "BEGIN{print 1e3*$s}") | $al | graph $gr"
done; done; done
echo "ablate:"
for keep in "" 1024; do
QCD_SOLVE_POOL_KEEP_MIB=$keep $q -q ablate configs/16x16x16x32.toml --kernels 3.0 --repeat 5 --out /tmp/ce-ab 2>&1 | grep -E "fused\+eo\+single\+r12 |^cr        eo"
done
