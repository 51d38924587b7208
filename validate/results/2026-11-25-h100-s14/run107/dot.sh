#!/usr/bin/env bash
# Session 14, run 107: run 106's second part again (its main jobs ran with -q, which
# prints no report): session 13's 128-thread dot failure outside the test, the main job's
# fused CR, single-double, full lattice, on 8x8x8x16 (gpu_decomposed's lattice), 8x8x8x8
# and 16x16x16x32, every dot launch at 128 and at 256 threads on the plain dot entry
# (V3_TCOL=1 V3_DOT_BLOCK=b), and the default columns at 128; then double at 128.
q=.device/qcd-solve
r=validate/results/2026-11-25-h100-s14/run106
date -u +%Y-%m-%dT%H:%M:%SZ
mkdir -p /tmp/r106
for cfg in $r/8x8x8x16.toml configs/8x8x8x8.toml configs/16x16x16x32.toml; do
    for v in "V3_TCOL=1 V3_DOT_BLOCK=128" "V3_TCOL=1 V3_DOT_BLOCK=256" "V3_DOT_BLOCK=128"; do
        for p in single-double double; do
            echo "===== $(basename $cfg) $v $p"
            QCD_SOLVE_KERNEL_DEFINES="$v" timeout 100 $q $cfg --device cuda --kernel 3.0 --method cr --iteration fused \
                --precision $p --preconditioning none --output /tmp/r106/out 2>&1 | grep -E "^(result|residual)|rror" | cut -c1-160
        done
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
