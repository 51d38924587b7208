#!/usr/bin/env bash
# Session 12, run 82 (issue 13 item 1): the hops' neighbour spinors past L1 by direction
# (QCD_SOLVE_KERNEL_DEFINES "V3_FULL_SPIN_MASK=m V3_PARITY_SPIN_MASK=m", bit mu), floor's
# dslash, Schur and fused even-odd rows at 16x16x16x32 and 32x32x32x64; the unhinted
# build first and last (the noise between two processes).
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
for dims in 16,16,16,32:200 32,32,32,64:50; do
    for m in 0 8 12 15 0; do
        echo "===== floor ${dims%:*} spin mask $m"
        QCD_SOLVE_KERNEL_DEFINES="V3_FULL_SPIN_MASK=$m V3_PARITY_SPIN_MASK=$m" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
done
echo "===== gpu-fast-tests spin mask 12"
QCD_SOLVE_KERNEL_DEFINES="V3_FULL_SPIN_MASK=12 V3_PARITY_SPIN_MASK=12" timeout 200 .device/gpu-fast-tests --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"
date -u +%Y-%m-%dT%H:%M:%SZ
