#!/usr/bin/env bash
# Session 15, run 110 (issue 13 item 1): timing events on a sample of launches (each
# kernel's first 16, then one in 64; timing.rs) as the default, against programmatic
# dependent launch on top (QCD_SOLVE_PDL=1), alternating, floor at 16x16x16x32 three times
# each and at 32x32x32x64 once each. gpu-tests (the sampled books' test). ncu: the full
# fused CR iteration's three kernels in single r18 at 16x16x16x32 (the main job), time and
# DRAM bytes, L2 left as it is (--cache-control none), clocks as they are.
q=.device/qcd-solve
ncu=/usr/local/cuda/bin/ncu
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
echo "===== gpu-tests"
timeout 200 .device/gpu-tests --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"
rows='triad|dslash full (double|single|half) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
for dims in 16,16,16,32:200 16,16,16,32:200 16,16,16,32:200 32,32,32,64:50; do
    for env in "" "QCD_SOLVE_PDL=1"; do
        echo "===== floor ${dims%:*} ${env:-default}"
        env $env timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
done
echo "===== main job: full fused CR, single-double r18, 16x16x16x32"
$q configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning none --precision single-double \
    --reconstruct 18 --method cr --iteration fused 2>&1 | grep -E "result|residual|time|kernel" | head -20
m=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active
echo "===== ncu, the same solve: launches 40-48 of its three kernels"
timeout 300 $ncu --clock-control none --cache-control none --kernel-name regex:"cr_xr_s|cr_p_s|stencil_v3_full_dot_col" \
    --launch-skip 40 --launch-count 9 --metrics $m \
    $q configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning none --precision single-double \
    --reconstruct 18 --method cr --iteration fused 2>&1 | grep -E "^  [a-z_0-9]+\(|^ +[a-z0-9_]+__|launch__|==ERR|rror" | head -70
date -u +%Y-%m-%dT%H:%M:%SZ
