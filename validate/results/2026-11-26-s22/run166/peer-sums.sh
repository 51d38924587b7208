#!/usr/bin/env bash
# Session 22, run 166 (nvidia-h200-x4): the fused CR's reductions over peer memory
# (QCD_SOLVE_PEER_SUMS=1: cr_peer_sum, one kernel for the all-gather and the sum, instead
# of NCCL's all-gather and cr_global; run 164's time line: those two steps about 10 us a
# reduction, two reductions an iteration). First gpu_nccl's one-rank tests (the new
# one: the peer sums' bits against NCCL's), then the main job at 32^3x64 a GPU, base and
# peer sums alternating, and one time line with them.
set -uo pipefail
source validate/device-env.sh
stamp
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
CUDA_VISIBLE_DEVICES=0 timeout 300 .device/gpu-nccl-tests --test-threads=1 --nocapture peer_sums fused_cr 2>&1 | grep -E "peer sums|fused CR|test result|panicked|FAILED" | head -20
zt="w4zt 32x32x64x128 1,1,2,2 0,1,2,3"
t="w4t 32x32x32x256 1,1,1,4 0,1,2,3"
w1="w1 32x32x32x64 1,1,1,1 0"
one $w1 base
for rep in 1 2; do
    one $zt base$rep
    one $zt peer$rep QCD_SOLVE_PEER_SUMS=1
    one $t base$rep
    one $t peer$rep QCD_SOLVE_PEER_SUMS=1
done
one $zt peer-tl QCD_SOLVE_PEER_SUMS=1 QCD_SOLVE_TIMELINE=1
one $w1 base2
grep -h "rror\|panick\|cannot reach" $b/log-* | sort | uniq -c | head
mkdir -p "$OUT" && cp $b/log-w4zt-peer-tl.txt $b/log-w4zt-peer1.txt "$OUT"/ 2>/dev/null
python3 validate/timeline.py $b/log-w4zt-peer-tl.txt "rank 0"
stamp
