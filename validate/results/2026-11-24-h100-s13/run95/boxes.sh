#!/usr/bin/env bash
# Session 13, run 95 (issue 13 items 1 and 4). Item 1: the full mode's x rows in boxes of
# V3_BOX_Y x V3_BOX_Z x V3_BOX_T rows (whole x rows, unlike run 90's tiles), so that a
# block of 8 rows holds some of its z and t neighbours; floor at 32x32x32x64 and
# 16x16x16x32, the default first and last. Item 4: the 48^3x96 main job's link upload
# against the pinned bandwidth of the same call (MODE=s8, three processes, ablate).
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1|iteration fused (double|single) r1'
for dims in 32,32,32,64:50 16,16,16,32:200; do
    for box in 1,1,1 2,2,2 4,2,1 4,1,2 2,1,4 2,4,1 4,2,2:512 2,2,4:512 1,1,1; do
        blk=256
        case $box in *:*) blk=${box#*:}; box=${box%:*} ;; esac
        IFS=, read -r by bz bt <<<"$box"
        echo "===== floor ${dims%:*} box $box block $blk"
        QCD_SOLVE_KERNEL_DEFINES="V3_BOX_Y=$by V3_BOX_Z=$bz V3_BOX_T=$bt" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" --block $blk 2>&1 | grep -E "$rows|rror"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
echo "===== item 4"
OUT=${OUT:-/tmp}/s8 MODE=s8 S8_ABLATE=1 S8_STAGES="3:2:cached 3:2:cached 3:2:cached" SKIP_TESTS=1 bash validate/on-device.sh 2>&1 | tail -14
date -u +%Y-%m-%dT%H:%M:%SZ
