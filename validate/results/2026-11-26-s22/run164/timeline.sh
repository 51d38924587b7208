#!/usr/bin/env bash
# Session 22, run 164 (nvidia-h200-x4): run 163's time lines again, now kept from each
# graph's third launch (run 163 read the last replays, after convergence, where every
# kernel returns at once: the graphs' latency skeleton, not their work). The main job at
# 32^3x64 a GPU: one GPU, t and z-t on four (z-t also with the merged exterior).
set -uo pipefail
source validate/device-env.sh
stamp
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
zt="w4zt 32x32x64x128 1,1,2,2 0,1,2,3"
t="w4t 32x32x32x256 1,1,1,4 0,1,2,3"
w1="w1 32x32x32x64 1,1,1,1 0"
one $w1 tl QCD_SOLVE_TIMELINE=1
one $t tl QCD_SOLVE_TIMELINE=1
one $zt tl QCD_SOLVE_TIMELINE=1
one $zt tl-all QCD_SOLVE_TIMELINE=1 QCD_SOLVE_EXTERIOR=all
grep -h "rror\|panick" $b/log-* | sort | uniq -c | head
mkdir -p "$OUT" && cp $b/log-*-tl*.txt "$OUT"/ 2>/dev/null
python3 validate/timeline.py $b/log-w1-tl.txt
python3 validate/timeline.py $b/log-w4t-tl.txt "rank 0"
python3 validate/timeline.py $b/log-w4zt-tl.txt "rank 0" "rank 3"
python3 validate/timeline.py $b/log-w4zt-tl-all.txt "rank 0"
stamp
