#!/usr/bin/env bash
# Session 14, run 102: run 101's gpu_decomposed solve failures in full (each case's
# iterations, history and solution differences): the default, no columns (V3_TCOL=1),
# the default again (is it deterministic?).
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0
for v in "" "V3_TCOL=1" ""; do
    echo "===== solves ${v:-default}"
    QCD_SOLVE_KERNEL_DEFINES="$v" timeout 200 .device/gpu-decomposed-tests solves_ --test-threads=1 --nocapture 2>&1 |
        grep -E "iterations|FAILED|panicked|test result|differs|stopped|disagree"
done
date -u +%Y-%m-%dT%H:%M:%SZ
