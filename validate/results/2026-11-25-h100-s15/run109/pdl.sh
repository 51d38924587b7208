#!/usr/bin/env bash
# Session 15, run 109 (issue 13 item 1, 16^3x32): what a launch costs a short kernel.
# QCD_SOLVE_LAUNCH_EVENTS=0: no timing events around each launch (floor's dslash and Schur
# rows are stream launches, each between two event records); QCD_SOLVE_PDL=1: the stencil
# and the fused CR passes launched with programmatic dependent launch (common.cuh
# qcd_pdl_enter). Correctness under PDL: gpu-fast, gpu-fused, gpu-solvers; the seed
# problem. floor at 16x16x16x32 and 32x32x32x64 in the four settings, and at 8x8x8x16 and
# 24x24x24x48 (default and both) for the per-launch cost against the volume.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
for t in gpu-fast gpu-fused gpu-solvers; do
    echo "===== $t-tests QCD_SOLVE_PDL=1"
    QCD_SOLVE_PDL=1 timeout 200 .device/$t-tests --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"
done
for env in "" "QCD_SOLVE_PDL=1"; do
    echo "===== seed fused BiCGStab and CR ${env:-default}"
    for m in bicgstab cr; do
        env $env timeout 100 $q configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd \
            --precision single-double --reconstruct 12 --method $m --reliable-delta 0.001 2>&1 |
            grep -E "iteration|residual|time|rror" | head -8
    done
done
rows='triad|dslash full (double|single|half) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
for dims in 16,16,16,32:200 32,32,32,64:50; do
    for env in "" "QCD_SOLVE_LAUNCH_EVENTS=0" "QCD_SOLVE_LAUNCH_EVENTS=0 QCD_SOLVE_PDL=1" "QCD_SOLVE_PDL=1"; do
        echo "===== floor ${dims%:*} ${env:-default}"
        env $env timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
done
for dims in 8,8,8,16:400 24,24,24,48:100; do
    for env in "" "QCD_SOLVE_LAUNCH_EVENTS=0 QCD_SOLVE_PDL=1"; do
        echo "===== floor ${dims%:*} ${env:-default}"
        env $env timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
