#!/usr/bin/env bash
# Session 12, run 83 (issue 13 item 1): the full mode with blocks, not warps, alternating
# parity (QCD_SOLVE_KERNEL_DEFINES V3_FULL_BLOCKS=1: each block like a parity launch's,
# the two parities' partner blocks sharing links through L2), with the full mode's links
# past L1 in all (15), t (8) or no (0) directions; the default (warps alternate, mask 8)
# first and last. floor's full-lattice rows at 16x16x16x32 and 32x32x32x64, block sizes
# at 32^3x64, and the 3.0 GPU tests with blocks alternating.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1|cr iteration fused (double|single) r1'
variants=("" "V3_FULL_BLOCKS=1 V3_FULL_STREAM_MASK=15" "V3_FULL_BLOCKS=1 V3_FULL_STREAM_MASK=8" "V3_FULL_BLOCKS=1 V3_FULL_STREAM_MASK=0" "")
for dims in 16,16,16,32:200 32,32,32,64:50; do
    for v in "${variants[@]}"; do
        echo "===== floor ${dims%:*} ${v:-default}"
        QCD_SOLVE_KERNEL_DEFINES="$v" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
done
for b in 128 512; do
    echo "===== floor 32,32,32,64 blocks mask 15 block $b"
    QCD_SOLVE_KERNEL_DEFINES="V3_FULL_BLOCKS=1 V3_FULL_STREAM_MASK=15" timeout 200 $q floor -q --dims 32,32,32,64 --repeat 50 --block $b 2>&1 | grep -E "$rows|rror"
done
for t in gpu-fast-tests gpu-fused-tests gpu-decomposed-tests; do
    echo "===== $t blocks mask 15"
    QCD_SOLVE_KERNEL_DEFINES="V3_FULL_BLOCKS=1 V3_FULL_STREAM_MASK=15" timeout 200 .device/$t --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"
done
date -u +%Y-%m-%dT%H:%M:%SZ
