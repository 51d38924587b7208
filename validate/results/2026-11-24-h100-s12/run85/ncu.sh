#!/usr/bin/env bash
# Session 12, run 85 (issue 13 item 1): ncu counters of one full-mode launch (stencil_v3)
# and one parity launch (stencil_v3_parity) of floor at 32x32x32x64, double r18, with the
# session's L1 hints and without them (QCD_SOLVE_KERNEL_DEFINES): where the traffic goes
# (DRAM, L1 -> L2 reads, hit rates) and which unit is busiest.
q=.device/qcd-solve
ncu=/usr/local/cuda/bin/ncu
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$ncu --version | tail -1
export QCD_SOLVE_PTX_CACHE=/tmp/ptx
m=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__block_size,l1tex__data_pipe_lsu_wavefronts_mem_lg.sum,smsp__inst_executed.sum
for kernel in stencil_v3 stencil_v3_parity; do
    for v in "" "V3_FULL_STREAM_MASK=0 V3_STREAM_LINKS=0"; do
        echo "===== $kernel ${v:-default}"
        QCD_SOLVE_KERNEL_DEFINES="$v" timeout 200 $ncu --kernel-name $kernel --launch-skip 3 --launch-count 1 --metrics $m \
            $q floor -q --dims 32,32,32,64 --repeat 5 2>&1 | grep -E "^ +[a-z_]+__|stencil_v3|==ERR|rror" | head -30
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
