#!/usr/bin/env bash
# Session 20, run 151 (nvidia-h100-x1): the final binaries (the full operator's blocks up to its bound;
# tune_live's two sweeps through one closure): gpu_decomposed's collective tuning test, gpu_fast, and the main job with an
# empty tune cache on the full lattice (the hint sweep) and even-odd (no hints), then
# again from the cache.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_TUNE_CACHE=/tmp/tune-final.tsv
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 .device/gpu-decomposed-tests --test-threads=1 tuning 2>&1 | grep -E "^test |test result"
timeout 200 .device/gpu-fast-tests --test-threads=1 2>&1 | grep -E "test result|FAILED"
for i in 1 2; do
    for opt in "--kernel 3.0" "--kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"; do
        RUST_LOG=info timeout 100 .device/qcd-solve configs/16x16x16x32.toml --device cuda $opt --output /tmp/f 2>&1 |
            grep -E "launch geometry|^result" | sed -e 's/^.*INFO //' | cut -c1-260
    done
done
cat $QCD_SOLVE_TUNE_CACHE
date -u +%Y-%m-%dT%H:%M:%SZ
