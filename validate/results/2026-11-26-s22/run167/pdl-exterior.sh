#!/usr/bin/env bash
# Session 22, run 167 (nvidia-h200-x4): the exterior kernels, cr_global and cr_peer_sum
# now launched with programmatic dependent launch (each calls qcd_pdl_wait first), and
# the peer sums on by default. gpu_decomposed and gpu_nccl with --include-ignored (the
# split operators and solves against one GPU; two processes on two GPUs), then the main
# job at 32^3x64 a GPU: the new default, without PDL (QCD_SOLVE_PDL=0) and without peer
# sums (QCD_SOLVE_PEER_SUMS=0), alternating; one time line.
set -uo pipefail
source validate/device-env.sh
stamp
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
for t in gpu-decomposed gpu-nccl; do
    timeout 400 .device/$t-tests --test-threads=1 --include-ignored 2>&1 | grep -E "test result|panicked|FAILED|failed" | head -8
done
zt="w4zt 32x32x64x128 1,1,2,2 0,1,2,3"
t="w4t 32x32x32x256 1,1,1,4 0,1,2,3"
w1="w1 32x32x32x64 1,1,1,1 0"
one $w1 base
for rep in 1 2; do
    one $zt new$rep
    one $zt nopdl$rep QCD_SOLVE_PDL=0
    one $zt nopeer$rep QCD_SOLVE_PEER_SUMS=0
    one $t new$rep
    one $t nopeer$rep QCD_SOLVE_PEER_SUMS=0
done
one $w1 base2
grep -h "rror\|panick\|cannot reach" $b/log-* | sort | uniq -c | head
stamp
