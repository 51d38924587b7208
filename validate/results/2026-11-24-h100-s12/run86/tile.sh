#!/usr/bin/env bash
# Session 12, run 86 (issue 13 item 1): the sites in t-blocked order (QCD_SOLVE_KERNEL_DEFINES
# V3_TILE_T=T: x, y, t within a block of T slices, z, t block), so that t neighbours are
# read close together and hit in L2. floor at 32x32x32x64 (and 16x16x16x32) for T = 0
# (as now), 4, 8, 16, 32, then 0 again; ncu's DRAM bytes for the full launch at T = 16;
# the 3.0 GPU tests with T = 16.
q=.device/qcd-solve
ncu=/usr/local/cuda/bin/ncu
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
for dims in 32,32,32,64:50 16,16,16,32:200; do
    for tt in 0 4 8 16 32 0; do
        echo "===== floor ${dims%:*} V3_TILE_T=$tt"
        QCD_SOLVE_KERNEL_DEFINES="V3_TILE_T=$tt" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
done
m=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct,lts__throughput.avg.pct_of_peak_sustained_elapsed
for kernel in stencil_v3 stencil_v3_parity; do
    echo "===== ncu $kernel V3_TILE_T=16"
    QCD_SOLVE_KERNEL_DEFINES="V3_TILE_T=16" timeout 200 $ncu --kernel-name $kernel --launch-skip 3 --launch-count 1 --metrics $m \
        $q floor -q --dims 32,32,32,64 --repeat 5 2>&1 | grep -E "^ +[a-z0-9_]+__|stencil_v3 |==ERR|rror" | head -12
done
for t in gpu-fast-tests gpu-fused-tests gpu-decomposed-tests; do
    echo "===== $t V3_TILE_T=16"
    QCD_SOLVE_KERNEL_DEFINES="V3_TILE_T=16" timeout 200 .device/$t --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"
done
date -u +%Y-%m-%dT%H:%M:%SZ
