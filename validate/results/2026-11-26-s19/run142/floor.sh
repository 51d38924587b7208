#!/usr/bin/env bash
# Session 19, run 142 (nvidia-h100-x1): floor's stream rows timed past the launch books'
# first TIME_FIRST launches (STREAM_WARM; new, .device/qcd-solve) against the binary
# before (eaefb62, .device/qcd-solve-old, where 16 of a row's 200 timed launches carried
# two timing events). 16^3x32 three times each, alternating; 32^3x64 once each.
set -uo pipefail
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for i in 1 2 3; do
    for b in qcd-solve-old qcd-solve; do
        echo "== $b 16 #$i"
        .device/$b floor -q --dims 16,16,16,32 --repeat 200 2>&1 | grep -E "triad|dslash full|schur|CR fused" | tee $OUT/$b-16-$i.txt
    done
done
for b in qcd-solve-old qcd-solve; do
    echo "== $b 32"
    .device/$b floor -q --dims 32,32,32,64 --repeat 50 2>&1 | grep -E "triad|dslash full|schur|CR fused" | tee $OUT/$b-32.txt
done
date -u +%Y-%m-%dT%H:%M:%SZ
