#!/usr/bin/env bash
# Session 13, run 96 (issue 13 item 1): fewer sites in flight. With V3_MAX_BLOCK=256 the
# double builds may take 146-168 registers (no spill) instead of 128, so an SM holds 256
# threads at block 256, 384 at block 128, 448 at block 64 (512 now): a shorter window of
# sites in flight, so that the z and t data other blocks read again is still in L2.
# floor at 32x32x32x64 and 16x16x16x32, the default first and last; also V3_BOX 2,4,1.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
for dims in 32,32,32,64:50 16,16,16,32:200; do
    for c in "-:256" "V3_MAX_BLOCK=256:256" "V3_MAX_BLOCK=256:128" "V3_MAX_BLOCK=256:64" "V3_MAX_BLOCK=256 V3_BOX_Y=2 V3_BOX_Z=4:256" "-:256"; do
        defs=${c%:*}; blk=${c##*:}; [ "$defs" = - ] && defs=""
        echo "===== floor ${dims%:*} ${defs:-default} block $blk"
        QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" --block $blk 2>&1 | grep -E "$rows|rror"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
