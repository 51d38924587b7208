#!/usr/bin/env bash
# Weak scaling again: scale --gpus 1,2 with --repeat 5, and the main job weak1/weak2 three times each.
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so && export LD_LIBRARY_PATH=/tmp/nccl-link:$LD_LIBRARY_PATH
q=.device/qcd-solve; b=/tmp/x2b; mkdir -p $b
date -u +%Y-%m-%dT%H:%M:%SZ
export QCD_SOLVE_TUNE_CACHE=$b/tune.tsv
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' configs/32x32x32x64.toml > $b/fast.toml
$q scale $b/fast.toml --gpus 1,2 --device cuda --repeat 5 --out $OUT/scale-x2-r5 2>&1 | grep -v "^wrote"
sed -e "s/^LT = .*/LT = 128/" configs/32x32x32x64.toml > $b/32x32x32x128.toml
fast="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"
for rep in 1 2 3; do
  for run in 1:configs/32x32x32x64.toml:1,1,1,1 2:$b/32x32x32x128.toml:1,1,1,2; do
    IFS=: read -r n cfg g <<<"$run"
    out=$(RUST_LOG=info $q $cfg $fast --grid $g --output $b/o-$n 2>&1)
    echo "weak$n solve_s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//') $(echo "$out" | grep -E '^result' | tr -s ' ')"
  done
done
