#!/usr/bin/env bash
# Session 16, runs 118-119 (nvidia-h200-x2): issue 15's weak scaling after the change to two
# all-gathers an iteration and the high-priority communication stream. First the 2-GPU
# correctness checks (gpu_decomposed with the copy-engine exchange across both GPUs,
# gpu_nccl with two processes), then `scale --gpus 1,2 --repeat 5` (32^3x64 fast path:
# even-odd single-double r12 CR) with each exchange variant: NCCL with the communication
# stream at the default priority (QCD_SOLVE_COMM_PRIORITY=0), NCCL at the highest (the
# default), copy engines (QCD_SOLVE_EXCHANGE=copies).
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
echo "== gpu_nccl (with two processes)"
timeout 150 .device/gpu-nccl-tests --test-threads=1 --include-ignored >$OUT/gpu-nccl.txt 2>&1
grep -E "^test |test result|panicked" $OUT/gpu-nccl.txt | head -30
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' configs/32x32x32x64.toml > $b/fast.toml
for v in "prio0:QCD_SOLVE_COMM_PRIORITY=0" "default:QCD_SOLVE_COMM_PRIORITY=1" "copies:QCD_SOLVE_EXCHANGE=copies"; do
    n=${v%%:*}; e=${v#*:}
    echo "== scale $n ($e)"
    env $e RUST_BACKTRACE=1 RUST_LOG=warn timeout 200 $q scale $b/fast.toml --gpus 1,2 --device cuda --repeat 5 --out $b/scale-$n 2>&1 | grep -v "^wrote"
    cp $b/scale-$n/scale-ranks.csv $OUT/scale-$n.csv 2>/dev/null
done
date -u +%Y-%m-%dT%H:%M:%SZ
