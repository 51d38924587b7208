#!/usr/bin/env bash
# Session 14, run 100 (issue 13 item 1): t columns and a register floor for the full mode.
# V3_TCOL=T: each full-mode thread makes T sites along t, reading each t link once for
# two hops (V3_TCOL_CARRY=1: and each t-neighbour spinor once for two); the host launches
# V/T threads. V3_FULL_MIN_BLOCKS_SINGLE=k: stencil_v3's single builds held to the
# registers of k blocks of 128 (8: 64 registers, so 16^3x32 is one wave of the H100).
# GPU tests with V3_TCOL=4 (carry) first, then floor at 16^3x32 and 32^3x64, the default
# first and last.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
for t in gpu-fast-tests gpu-fused-tests gpu-solvers-tests; do
    echo "===== $t V3_TCOL=4 V3_TCOL_CARRY=1"
    QCD_SOLVE_KERNEL_DEFINES="V3_TCOL=4 V3_TCOL_CARRY=1" timeout 200 .device/$t --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED|failures"
done
rows='triad|dslash full (double|single) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
for dims in 16,16,16,32:200 32,32,32,64:50; do
    for defs in "" "V3_TCOL=2" "V3_TCOL=4" "V3_TCOL=8" "V3_TCOL=4 V3_TCOL_CARRY=1" "V3_TCOL=8 V3_TCOL_CARRY=1" \
        "V3_FULL_MIN_BLOCKS_SINGLE=8" "V3_FULL_MIN_BLOCKS_SINGLE=6" ""; do
        echo "===== floor ${dims%:*} ${defs:-default}"
        QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
