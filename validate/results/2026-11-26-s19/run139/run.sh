#!/usr/bin/env bash
# Session 19, run 139 (nvidia-h200-x4): the CR graphs recorded while the device is busy
# (the first start unrecorded, the batch's graph during it, the start's during the first
# batch) and the global sums of dot, norm2 and the residual gathered on the device (one
# host wait instead of three). Run 138's steps (w1, w4 twice each), the GPU test targets
# that cover the split and fused paths (the multi-GPU ones included), then scale along t.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so && export LD_LIBRARY_PATH=/tmp/nccl-link:${LD_LIBRARY_PATH:-}
bash validate/results/2026-11-26-s19/run138/steps.sh
for t in gpu-fused-tests gpu-decomposed-tests gpu-nccl-tests gpu-solvers-tests; do
    echo "== $t"; timeout 300 .device/$t --test-threads=1 --include-ignored 2>&1 | grep -E "^test |test result|panicked|FAILED" | tail -40
done
echo "== scale"
big=/tmp/qcd-big; mkdir -p $big
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' \
    configs/32x32x32x64.toml >"$big/32x32x32x64-fast.toml"
QCD_SOLVE_TUNE_CACHE=/tmp/d/tune.tsv timeout 300 .device/qcd-solve scale "$big/32x32x32x64-fast.toml" --gpus 1,2,4 --split t --device cuda --repeat 3 --out /tmp/scale-t 2>&1 | tail -20
cp -r /tmp/scale-t $OUT/ 2>/dev/null
date -u +%Y-%m-%dT%H:%M:%SZ
