#!/usr/bin/env bash
# Why is the undecomposed one-GPU solve slower than the split code with one rank (32^3x64, fast path)?
q=.device/qcd-solve; b=/tmp/lead; mkdir -p $b
date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name --format=csv,noheader
export QCD_SOLVE_TUNE_CACHE=$b/tune.tsv
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' configs/32x32x32x64.toml > $b/fast.toml
fast="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"
$q -q configs/32x32x32x64.toml $fast --output $b/o >/dev/null 2>&1
for rep in 1 2; do
  RUST_LOG=info $q configs/32x32x32x64.toml $fast --output $b/o > $b/main-$rep.txt 2>&1
  grep -E "step: solve |launch geometry|^result|^ +kernel|^stencil|^time " $b/main-$rep.txt | sed 's/^.*INFO //'
done
$q scale $b/fast.toml --gpus 1 --repeat 3 --device cuda --out $b/scale 2>&1 | grep -v "^wrote"
RUST_LOG=info $q scale $b/fast.toml --gpus 1 --repeat 1 --device cuda --out $b/scale2 2>&1 | grep -E "launch geometry|step: solve " | sed 's/^.*INFO //' | head
