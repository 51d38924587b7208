#!/usr/bin/env bash
# Session 18, run 130 (issue 13 item 1, 16^3x32): L2 eviction hints so that the stencil's
# links outlast the CR passes' streams from one iteration to the next. CR_STREAM (bit 0
# the passes' loads ld.global.cs, bit 1 their stores st.global.cs, 4: xr's x alone),
# V3_L2_LAST_LINKS_FULL (the full mode's links evict-last, V3_L2_LAST_FRAC of the lines),
# V3_STORE_CS (the stencil's output st.global.cs), V3_L2_LAST_SPINOR_FULL (run 94's).
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full|iteration fused'
for rep in 1 2; do
    for defs in "" "CR_STREAM=4" "CR_STREAM=3" "V3_L2_LAST_LINKS_FULL=1" "CR_STREAM=3 V3_L2_LAST_LINKS_FULL=1" \
        "CR_STREAM=4 V3_L2_LAST_LINKS_FULL=1 V3_L2_LAST_FRAC=0.5" "V3_STORE_CS=1" "V3_L2_LAST_SPINOR_FULL=1" \
        "CR_STREAM=3 V3_L2_LAST_SPINOR_FULL=1"; do
        echo "===== floor 16 ${defs:-default}"
        QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims 16,16,16,32 --repeat 200 2>&1 | grep -E "$rows|rror"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
