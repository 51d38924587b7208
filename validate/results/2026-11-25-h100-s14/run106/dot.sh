#!/usr/bin/env bash
# Session 14, run 106: (1) the halo cost with the columns again, now with rank 0's phases
# (floor --halo, 32^3x64, default / V3_TCOL=2 / V3_TCOL=1); (2) session 13's 128-thread dot
# failure outside the test: the main job's fused CR, single-double, full lattice, on
# 8x8x8x16 (the test's lattice), 8x8x8x8 and 16x16x16x32, with every dot launch at 128 and
# at 256 threads on the plain dot entry (V3_TCOL=1 V3_DOT_BLOCK=b), and with the default
# columns at 128.
q=.device/qcd-solve
r=validate/results/2026-11-25-h100-s14/run106
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0
for v in "" "V3_TCOL=2" "V3_TCOL=1"; do
    echo "===== floor --halo 32 ${v:-default}"
    QCD_SOLVE_KERNEL_DEFINES="$v" timeout 200 $q floor -q --dims 32,32,32,64 --repeat 100 --halo 2>&1 | tail -5
done
mkdir -p /tmp/r106
for cfg in $r/8x8x8x16.toml configs/8x8x8x8.toml configs/16x16x16x32.toml; do
    for v in "V3_TCOL=1 V3_DOT_BLOCK=128" "V3_TCOL=1 V3_DOT_BLOCK=256" "V3_DOT_BLOCK=128"; do
        echo "===== $(basename $cfg) $v"
        QCD_SOLVE_KERNEL_DEFINES="$v" timeout 100 $q -q $cfg --device cuda --kernel 3.0 --method cr --iteration fused \
            --precision single-double --preconditioning none --output /tmp/r106/out 2>&1 | grep -E "^(result|residual)|rror" | cut -c1-200
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
