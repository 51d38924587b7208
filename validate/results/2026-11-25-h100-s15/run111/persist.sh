#!/usr/bin/env bash
# Session 15, run 111 (issue 13 item 1, 16^3x32): L2 set aside for persisting accesses
# and the stencil's links marked persisting (QCD_SOLVE_L2_PERSIST=MiB, clamped to the
# device's limit; the hit ratio fills the set-aside), alone and with QCD_SOLVE_PDL=1.
# floor at 16x16x16x32 and 32x32x32x64; gpu-fused-tests with the set-aside.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
echo "===== gpu-fused-tests QCD_SOLVE_L2_PERSIST=32"
QCD_SOLVE_L2_PERSIST=32 timeout 200 .device/gpu-fused-tests --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"
echo "===== the set-aside the device grants"
QCD_SOLVE_L2_PERSIST=1000 RUST_LOG=info $q configs/8x8x8x8.toml --device cuda --kernel 3.0 2>&1 | grep -iE "set.aside|rror" | head -3
rows='triad|dslash full (double|single|half) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
for dims in 16,16,16,32:200 32,32,32,64:50; do
    for env in "" "QCD_SOLVE_L2_PERSIST=16" "QCD_SOLVE_L2_PERSIST=32" "QCD_SOLVE_L2_PERSIST=48" "QCD_SOLVE_L2_PERSIST=32 QCD_SOLVE_PDL=1" ""; do
        [ "${dims%:*}" = 32,32,32,64 ] && [ "$env" = "QCD_SOLVE_L2_PERSIST=16" ] && continue
        echo "===== floor ${dims%:*} ${env:-default}"
        env $env timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
