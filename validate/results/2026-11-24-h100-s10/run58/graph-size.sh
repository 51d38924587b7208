#!/usr/bin/env bash
# Graph size against the seed solve: QCD_SOLVE_GRAPH_ITERS g (unset: the whole batch).
q=.device/qcd-solve
export QCD_SOLVE_TUNE_CACHE=/tmp/ce-tune.tsv
a="configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/ce"
$q -q $a >/dev/null 2>&1
for rep in 1 2 3; do
for g in "" 1 2 5; do
for k in 10 16; do
  out=$(QCD_SOLVE_GRAPH_ITERS=$g RUST_LOG=info $q $a --check-every $k 2>&1)
  s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//')
  gr=$(echo "$out" | grep "CUDA graph recorded" | grep -o "[a-z_]*ms=[0-9.]*" | awk -F= '{s+=$2} END {printf "%.3f", s}')
  gl=$(echo "$out" | grep "kernel cr graph" | sed 's/ *kernel cr graph *//')
  echo "g=${g:-k} k=$k solve_ms=$(awk "BEGIN{print 1e3*$s}") record+inst+first_ms=$gr graphs: $gl"
done; done; done
echo "ablate:"
for g in "" 5 1; do
echo "g=${g:-k}"; QCD_SOLVE_GRAPH_ITERS=$g $q -q ablate configs/16x16x16x32.toml --kernels 3.0 --repeat 7 --out /tmp/ce-ab 2>&1 | grep -E "fused\+eo\+single\+r12 |^cr        eo\+single"
done
