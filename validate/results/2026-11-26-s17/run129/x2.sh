#!/usr/bin/env bash
# Session 17, run 129 (nvidia-h200-x2): issue 15's suite with the session's final code
# (pool keeps everything, ranks start together, pack on the communication stream, CR start
# as a graph, NCCL_GRAPH_MIXING_SUPPORT=0 by default): gpu_fused, then MODE=x2 of
# validate/on-device.sh (2 against 1 GPU in eight cases, weak, strong, 64^3x128, one
# process per GPU, scale --gpus 1,2 --repeat 5), then scale once more with NCCL's graph
# mixing support back on (the A/B of the new default).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
MODE=x2 TESTS=gpu-fused-tests bash validate/on-device.sh 2>&1 | grep -v "^test \|PTX\|^GPU:\|^wrote\|^$" | tail -45
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so && export LD_LIBRARY_PATH=/tmp/nccl-link:${LD_LIBRARY_PATH:-}
b=/tmp/qcd-big
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' configs/32x32x32x64.toml > $b/fast-mix.toml
echo "== scale with NCCL_GRAPH_MIXING_SUPPORT=1"
NCCL_GRAPH_MIXING_SUPPORT=1 timeout 100 .device/qcd-solve scale $b/fast-mix.toml --gpus 1,2 --device cuda --repeat 5 --out $b/scale-mix 2>&1 | grep -E "weak|strong"
ls $OUT | head -60
date -u +%Y-%m-%dT%H:%M:%SZ
