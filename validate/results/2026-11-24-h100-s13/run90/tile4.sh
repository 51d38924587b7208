#!/usr/bin/env bash
# Session 13, run 90 (issue 13 item 1): the full mode's sites in 4D tiles (V3_TILE4, tile
# V3_TB_X x Y x Z x T sites, both parities; a block's half is one tile's sites of one
# parity when the tile holds 2 x 128 sites and the block 256 threads), so that z and t
# neighbours, not only x and y, are read within the block. floor at 32x32x32x64 and
# 16x16x16x32 for the plain build (TILE4=0) first and last and for several tile shapes;
# 512-site tiles with --block 512.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1|iteration fused (double|single) r1'
for dims in 32,32,32,64:50 16,16,16,32:200; do
    for shape in 0 8,4,4,2 8,4,2,4 8,2,4,4 16,4,2,2 8,8,2,2 16,2,2,4 4,4,4,4 8,4,4,4:512 16,4,4,2:512 0:512 0; do
        blk=256
        case $shape in *:*) blk=${shape#*:}; shape=${shape%:*} ;; esac
        if [ "$shape" = 0 ]; then defs="V3_TILE4=0"; else
            IFS=, read -r bx by bz bt <<<"$shape"
            defs="V3_TILE4=1 V3_TB_X=$bx V3_TB_Y=$by V3_TB_Z=$bz V3_TB_T=$bt"
        fi
        echo "===== floor ${dims%:*} tile $shape block $blk"
        QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" --block $blk 2>&1 | grep -E "$rows|rror"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
