#!/usr/bin/env bash
# Session 20, run 148 (nvidia-h100-x1): the GPU tests after cdb3598 (the global sums'
# buffer made at the halo's construction and booked): gpu_decomposed (with the new
# a_rank_books_the_halo_its_estimate_names), gpu_nccl (one rank, the captured graph),
# gpu_memory, gpu_fast; then the seed problem once and the split main job on one GPU.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
if [ -n "$nccl_lib" ]; then
    mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so
    export LD_LIBRARY_PATH=/tmp/nccl-link${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in gpu-decomposed gpu-nccl gpu-memory gpu-fast; do
    echo "===== $t"
    timeout 300 .device/$t-tests --test-threads=1 2>&1 | grep -E "^test |test result|panicked|FAILED|assert"
done
echo "===== split main job on one GPU (1,1,2,2), device memory lines"
RUST_LOG=info timeout 120 .device/qcd-solve configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd \
    --precision single-double --reconstruct 12 --grid 1,1,2,2 --output /tmp/split 2>&1 | grep -E "device memory|halo|^result|^residual" | cut -c1-400
date -u +%Y-%m-%dT%H:%M:%SZ
