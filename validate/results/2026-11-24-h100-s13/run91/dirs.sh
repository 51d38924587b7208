#!/usr/bin/env bash
# Session 13, run 91 (issue 13 item 1): which direction's reads miss L2. ncu's counters for
# one launch of the full mode (stencil_v3, floor's first row: dslash full double r18,
# 32x32x32x64) built with V3_DIR_MASK = m (only the hops of the directions in m; a probe,
# not the operator): DRAM bytes read against the m-direction floor (the links of those
# directions once, 0.30 GB a direction, and the input spinors once, 0.40 GB). Then the
# parity launch (stencil_v3_parity, the Schur row's) likewise, and the t-only probe
# without the t-blocked order (V3_TILE_T=0).
q=.device/qcd-solve
ncu=/usr/local/cuda/bin/ncu
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
m=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum
probe() { # kernel defines
    echo "===== ncu $1 $2"
    QCD_SOLVE_KERNEL_DEFINES="$2" timeout 200 $ncu --kernel-name $1 --launch-skip 3 --launch-count 1 --metrics $m \
        $q floor -q --dims 32,32,32,64 --repeat 5 2>&1 | grep -E "^ +[a-z0-9_]+__|==ERR|rror" | head -8
}
for mask in 15 1 2 4 8 3 12; do probe stencil_v3 "V3_DIR_MASK=$mask"; done
probe stencil_v3 "V3_DIR_MASK=8 V3_TILE_T=0"
probe stencil_v3 "V3_DIR_MASK=4 V3_TILE_T=0"
for mask in 15 4 8; do probe stencil_v3_parity "V3_DIR_MASK=$mask"; done
date -u +%Y-%m-%dT%H:%M:%SZ
