#!/usr/bin/env bash
# Session 22, run 165 (nvidia-h200-x4): run 164's time line put the z-t split's extra in
# the exterior launches (about 45 us an iteration), the interiors running 6-11 us longer
# than on one GPU (the exchange's NCCL blocks share the SMs with them?), the all-gathers
# and cr_global. Here without marks: NCCL's point-to-point channels per peer lowered
# (default 32: fewer blocks beside the interior), the merged exterior, and both.
set -uo pipefail
source validate/device-env.sh
stamp
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
zt="w4zt 32x32x64x128 1,1,2,2 0,1,2,3"
t="w4t 32x32x32x256 1,1,1,4 0,1,2,3"
w1="w1 32x32x32x64 1,1,1,1 0"
one $w1 base
for rep in 1 2; do
    one $zt base$rep
    one $zt all$rep QCD_SOLVE_EXTERIOR=all
    one $zt pp2-$rep NCCL_NCHANNELS_PER_PEER=2
    one $zt pp4-$rep NCCL_NCHANNELS_PER_PEER=4
    one $zt pp4all$rep NCCL_NCHANNELS_PER_PEER=4 QCD_SOLVE_EXTERIOR=all
done
one $t base1
one $t pp2 NCCL_NCHANNELS_PER_PEER=2
one $t pp4 NCCL_NCHANNELS_PER_PEER=4
one $t base2
one $w1 base2
grep -h "rror\|panick" $b/log-* | sort | uniq -c | head
stamp
