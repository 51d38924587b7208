#!/usr/bin/env bash
# Session 18, run 134 (issue 13 item 1): the full dslash rows at 16^3x32 by block size
# (floor --block b; the full-mode entries are capped at 128), default (128) first and last.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1'
for b in 128 64 32 96 128 64 32 96; do
    echo "===== floor 16 --block $b"
    timeout 200 $q floor -q --dims 16,16,16,32 --repeat 200 --block $b 2>&1 | grep -E "$rows|rror"
done
echo "===== floor 32 --block 64"
timeout 200 $q floor -q --dims 32,32,32,64 --repeat 50 --block 64 2>&1 | grep -E "$rows|rror"
date -u +%Y-%m-%dT%H:%M:%SZ
