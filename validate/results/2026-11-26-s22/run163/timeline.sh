#!/usr/bin/env bash
# Session 22, run 163 (nvidia-h200-x4): the fused CR graphs' time line
# (QCD_SOLVE_TIMELINE=1: an event record node after every captured launch and collective,
# read after the solve; PDL off with it). The main job at 32^3x64 a GPU: one GPU, t and z-t
# on four; each point also without marks, with and without PDL, to see what the marks cost.
set -uo pipefail
source validate/device-env.sh
stamp
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
zt="w4zt 32x32x64x128 1,1,2,2 0,1,2,3"
t="w4t 32x32x32x256 1,1,1,4 0,1,2,3"
w1="w1 32x32x32x64 1,1,1,1 0"
one $w1 warm
one $zt warm
one $w1 base
one $w1 pdl0 QCD_SOLVE_PDL=0
one $w1 tl QCD_SOLVE_TIMELINE=1
one $t base
one $t pdl0 QCD_SOLVE_PDL=0
one $t tl QCD_SOLVE_TIMELINE=1
one $zt base
one $zt pdl0 QCD_SOLVE_PDL=0
one $zt tl QCD_SOLVE_TIMELINE=1
one $zt base2
grep -h "rror\|panick" $b/log-* | sort | uniq -c | head
mkdir -p "$OUT" && cp $b/log-*-tl.txt "$OUT"/ 2>/dev/null
python3 validate/timeline.py $b/log-w1-tl.txt
python3 validate/timeline.py $b/log-w4t-tl.txt "rank 0"
python3 validate/timeline.py $b/log-w4zt-tl.txt "rank 0"
stamp
