#!/usr/bin/env bash
# Session 16, run 120 (nvidia-h200-x2): NCCL's own settings against the weak-scaling gap
# (issue 15), the code of run 119: `scale --gpus 1,2 --repeat 5` (32^3x64 fast path) with
# NCCL as it comes, at most 8 channels (run 119: 85%), no support for mixing graph and
# non-graph operations (NCCL_GRAPH_MIXING_SUPPORT=0: no extra events around each captured
# operation), the faces in NCCL's low-latency protocol (NCCL_P2P_LL_THRESHOLD=1 MiB), and
# the last two with 8 channels.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so && export LD_LIBRARY_PATH=/tmp/nccl-link:${LD_LIBRARY_PATH:-}
q=$PWD/.device/qcd-solve; b=/tmp/x2d; mkdir -p $b
export QCD_SOLVE_TUNE_CACHE=$b/tune.tsv
date -u +%Y-%m-%dT%H:%M:%SZ
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' configs/32x32x32x64.toml > $b/fast.toml
for v in "default:NCCL_DEBUG=WARN" "ch8:NCCL_MAX_NCHANNELS=8" "nomix:NCCL_GRAPH_MIXING_SUPPORT=0" \
    "ll:NCCL_P2P_LL_THRESHOLD=1048576" "nomix-ch8:NCCL_GRAPH_MIXING_SUPPORT=0 NCCL_MAX_NCHANNELS=8" \
    "ll-ch8:NCCL_P2P_LL_THRESHOLD=1048576 NCCL_MAX_NCHANNELS=8"; do
    n=${v%%:*}; e=${v#*:}
    echo "== scale $n ($e)"
    env $e RUST_LOG=warn timeout 120 $q scale $b/fast.toml --gpus 1,2 --device cuda --repeat 5 --out $b/scale-$n 2>&1 | grep -E "weak|strong"
done
date -u +%Y-%m-%dT%H:%M:%SZ
