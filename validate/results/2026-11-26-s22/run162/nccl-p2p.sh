#!/usr/bin/env bash
# Session 22, run 162 (nvidia-h200-x4): is the z-t split's extra time the faces'
# exchange? The eager halo books of run 152 gave z-t 4x t's exchange time a hop and the
# main stream waiting for it; here the graphs with the exchange ablated, and with NCCL's
# point-to-point channels per peer raised (NCCL_NCHANNELS_PER_PEER, NCCL_MIN_P2P_NCHANNELS)
# and smaller NVLink chunks (NCCL_P2P_NVL_CHUNKSIZE). The main job at 32^3x64 a GPU.
set -uo pipefail
source validate/device-env.sh
stamp
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
nvidia-smi topo -m | head -6
one w1 32x32x32x64 1,1,1,1 0 warm
one w4zt 32x32x64x128 1,1,2,2 0,1,2,3 warm-info NCCL_DEBUG=INFO
grep -h "p2p channels\|Chunksize\|Channel 00/0 : 0\[" $b/log-w4zt-warm-info.txt | sort | uniq -c | head -8
zt="w4zt 32x32x64x128 1,1,2,2 0,1,2,3"
t="w4t 32x32x32x256 1,1,1,4 0,1,2,3"
one w1 32x32x32x64 1,1,1,1 0 base
one $zt base
one $zt no-exchange QCD_SOLVE_ABLATE_COMM=exchange
one $zt pp8 NCCL_NCHANNELS_PER_PEER=8 NCCL_MIN_P2P_NCHANNELS=32
one $zt pp16 NCCL_NCHANNELS_PER_PEER=16 NCCL_MIN_P2P_NCHANNELS=32
one $zt pp8-128k NCCL_NCHANNELS_PER_PEER=8 NCCL_MIN_P2P_NCHANNELS=32 NCCL_P2P_NVL_CHUNKSIZE=131072
one $zt base2
one $t base
one $t pp8 NCCL_NCHANNELS_PER_PEER=8 NCCL_MIN_P2P_NCHANNELS=32
one $t pp16 NCCL_NCHANNELS_PER_PEER=16 NCCL_MIN_P2P_NCHANNELS=32
one $t base2
one w1 32x32x32x64 1,1,1,1 0 base2
grep -h "rror\|panick" $b/log-* | sort | uniq -c | head
stamp
