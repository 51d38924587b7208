#!/usr/bin/env bash
# Session 12, run 81 (issue 13 item 1): the full-mode entry (stencil_v3) streaming some
# directions' links past L1 (QCD_SOLVE_KERNEL_DEFINES="V3_FULL_STREAM_MASK=m", bit mu),
# now that it has its own registers, and the full dslash's block size: floor rows of the
# full lattice at 16x16x16x32 and 32x32x32x64.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1|cr iteration fused (double|single) r1'
for dims in 16,16,16,32:200 32,32,32,64:50; do
    for m in 0 12 8 3 15; do
        echo "===== floor ${dims%:*} mask $m"
        QCD_SOLVE_KERNEL_DEFINES="V3_FULL_STREAM_MASK=$m" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
    for b in 128 384 512; do
        echo "===== floor ${dims%:*} block $b"
        timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" --block $b 2>&1 | grep -E "$rows|rror"
    done
done
echo "===== gpu-fast-tests mask 12"
QCD_SOLVE_KERNEL_DEFINES="V3_FULL_STREAM_MASK=12" timeout 200 .device/gpu-fast-tests --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"
date -u +%Y-%m-%dT%H:%M:%SZ
