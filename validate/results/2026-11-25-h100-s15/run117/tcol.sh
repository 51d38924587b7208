#!/usr/bin/env bash
# Session 15, run 117 (issue 13 item 1, 16^3x32): the columns' lengths again now that
# launches carry no event pair and overlap under PDL (run 103 chose 4 in double, 2 in
# single with both): V3_TCOL=1, 2, 4 against the default, twice at 16x16x16x32.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1|iteration fused (double|single) r1'
for rep in 1 2; do
    for defs in "" "V3_TCOL=1" "V3_TCOL=2" "V3_TCOL=4"; do
        echo "===== floor 16 ${defs:-default}"
        QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims 16,16,16,32 --repeat 200 2>&1 | grep -E "$rows|rror"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
