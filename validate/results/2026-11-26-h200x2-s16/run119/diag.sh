#!/usr/bin/env bash
# Session 16, run 119 (nvidia-h200-x2): as run 118 (../run118/diag.sh) after the copy
# path's fix (each GPU given access to the other's memory pool): gpu_decomposed with the
# copy-engine exchange across both GPUs, then `scale --gpus 1,2 --repeat 5` (32^3x64 fast
# path) with copy engines (QCD_SOLVE_EXCHANGE=copies), NCCL (the default, the
# communication stream at the highest priority), NCCL with at most 2 and 8 channels.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so && export LD_LIBRARY_PATH=/tmp/nccl-link:${LD_LIBRARY_PATH:-}
q=$PWD/.device/qcd-solve; b=/tmp/x2d; mkdir -p $b
export QCD_SOLVE_TUNE_CACHE=$b/tune.tsv
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
nvidia-smi topo -m
ls -l "$nccl_lib"
echo "== gpu_decomposed (solves, with the 2-GPU copies test)"
RUST_BACKTRACE=1 timeout 240 .device/gpu-decomposed-tests --test-threads=1 --include-ignored solves >$OUT/gpu-decomposed.txt 2>&1
grep -E "^test |test result|panicked|Error|error" $OUT/gpu-decomposed.txt | head -40
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' configs/32x32x32x64.toml > $b/fast.toml
for v in "copies:QCD_SOLVE_EXCHANGE=copies" "default:QCD_SOLVE_COMM_PRIORITY=1" "ch2:NCCL_MAX_NCHANNELS=2" "ch8:NCCL_MAX_NCHANNELS=8"; do
    n=${v%%:*}; e=${v#*:}
    echo "== scale $n ($e)"
    env $e RUST_BACKTRACE=1 RUST_LOG=warn timeout 200 $q scale $b/fast.toml --gpus 1,2 --device cuda --repeat 5 --out $b/scale-$n 2>&1 | grep -v "^wrote"
    cp $b/scale-$n/scale-ranks.csv $OUT/scale-$n.csv 2>/dev/null
done
date -u +%Y-%m-%dT%H:%M:%SZ
