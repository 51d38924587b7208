#!/usr/bin/env bash
# Session 21, run 159 (nvidia-h200-x4): where the 28 s of run 158's "construct the GPU
# backend (rank)" go at 96^3x192 on four GPUs (1,1,2,2): the same run with the info log
# (the link upload's pin/copy/wait/kernel times per rank) and without tuning ([backend] tune = false).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so
export LD_LIBRARY_PATH=/tmp/nccl-link${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
q=$PWD/.device/qcd-solve; b=/tmp/qcd-big; mkdir -p $b
date -u +%Y-%m-%dT%H:%M:%SZ
d=96x96x96x192
sed -e "s/^LX = .*/LX = 96/; s/^LY = .*/LY = 96/; s/^LZ = .*/LZ = 96/; s/^LT = .*/LT = 192/" -e '/^solution = /d' -e 's/^threads = 0/threads = 0\ntune = false/' \
    configs/32x32x32x64.toml >$b/$d.toml
fast="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"
RUST_LOG=qcd_solve=info timeout 400 $q $b/$d.toml $fast --grid 1,1,2,2 --output $b/big4 >$b/big4.txt 2>$b/big4.err
echo "rc=$?"
grep -E "^time|^result|^residual" $b/big4.txt
grep -vE "step: (right-hand|prepare|upload the|wait for|solve|download|true res)" $b/big4.err | sed -e 's/\x1b\[[0-9;]*m//g' | cut -c1-330 | tail -60
date -u +%Y-%m-%dT%H:%M:%SZ
