#!/usr/bin/env bash
# Session 18, run 136 (issue 13 item 1): the full mode's L1 hint by direction at 16^3x32
# (V3_FULL_STREAM_MASK: bit mu, direction mu's links skip L1; default 8, the t links),
# the full dslash rows, default first and last in each round.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1'
for rep in 1 2; do
    for defs in "" "V3_FULL_STREAM_MASK=0" "V3_FULL_STREAM_MASK=15" "V3_FULL_STREAM_MASK=12"; do
        echo "===== floor 16 ${defs:-default}"
        QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims 16,16,16,32 --repeat 200 2>&1 | grep -E "$rows|rror"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
