#!/usr/bin/env bash
# Session 22, run 168 (nvidia-h200-x4): the reliable updates' queued part (x_d += x_s,
# A x_d in double) recorded as a CUDA graph from the second update on
# (QCD_SOLVE_RECORD_UPDATES=0 the ablation): on a split lattice each rank's host no longer
# queues their exchanges one by one. gpu_nccl (one rank: split over NCCL and one GPU,
# fused CR single-double with its reliable updates; the peer sums' bits), then the main
# job at 32^3x64 a GPU, records on and off alternating. Note: the records are booked as
# "cr graph" launches, so "graphs" now includes them where they are on.
set -uo pipefail
source validate/device-env.sh
stamp
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
CUDA_VISIBLE_DEVICES=0 timeout 300 .device/gpu-nccl-tests --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED|failed" | head -8
zt="w4zt 32x32x64x128 1,1,2,2 0,1,2,3"
t="w4t 32x32x32x256 1,1,1,4 0,1,2,3"
w1="w1 32x32x32x64 1,1,1,1 0"
for rep in 1 2; do
    one $w1 rec$rep
    one $w1 norec$rep QCD_SOLVE_RECORD_UPDATES=0
    one $zt rec$rep
    one $zt norec$rep QCD_SOLVE_RECORD_UPDATES=0
    one $t rec$rep
    one $t norec$rep QCD_SOLVE_RECORD_UPDATES=0
done
grep -h "rror\|panick\|cannot reach" $b/log-* | sort | uniq -c | head
stamp
