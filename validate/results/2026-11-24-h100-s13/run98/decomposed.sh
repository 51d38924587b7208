#!/usr/bin/env bash
# Session 13, run 98: run 97's gpu_decomposed failures in full (two split-lattice solve
# tests), with the full-mode bound of 128 (default) and of 512 (the old registers; the
# host launches at most 128 either way).
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0
for v in "" "V3_FULL_MAX_BLOCK=512"; do
    echo "===== gpu-decomposed-tests ${v:-default}"
    QCD_SOLVE_KERNEL_DEFINES="$v" timeout 200 .device/gpu-decomposed-tests --test-threads=1 solves_split 2>&1 | grep -vE "^\s*$" | head -60
done
date -u +%Y-%m-%dT%H:%M:%SZ
