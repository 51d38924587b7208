#!/usr/bin/env bash
# Session 20, run 152 (nvidia-h200-x4): `scale --gpus 1,2,4` along t and along z and t with
# each series against the undecomposed one-GPU solve (this session's change), and the
# main job's undecomposed one-GPU point and t and z-t points beside it.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so
export LD_LIBRARY_PATH=/tmp/nccl-link${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export QCD_SOLVE_TUNE_CACHE=/tmp/tune.tsv
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name --format=csv,noheader
nvidia-smi topo -m | head -6
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' \
    configs/32x32x32x64.toml >/tmp/fast32.toml
for sp in t zt; do
    echo "== scale $sp"
    timeout 250 $q scale /tmp/fast32.toml --gpus 1,2,4 --split $sp --device cuda --repeat 3 --out $OUT/scale-$sp 2>&1 |
        grep -E "^Scaling|^ *kind|^ *(strong|weak) "
    rm -f $OUT/scale-$sp/*.png
done
date -u +%Y-%m-%dT%H:%M:%SZ
