#!/usr/bin/env bash
# Session 20, run 149 (nvidia-h200-x4): the merged exterior (QCD_SOLVE_EXTERIOR=all) at the
# strong points, where run 147 saw 15.93 against 17.40 ms of graphs (one process each):
# `scale --gpus 1,4 --split zt` (strong 32^3x64 on 1,1,2,2, weak 32x32x64x128) twice each
# way, alternating, and the main job on 64^3x128 as 1,1,2,2 and 1,1,1,4 twice each way.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so
export LD_LIBRARY_PATH=/tmp/nccl-link${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export QCD_SOLVE_TUNE_CACHE=/tmp/tune.tsv
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
fast="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' \
    configs/32x32x32x64.toml >/tmp/fast32.toml
resize() { local l=(${2//x/ }); sed -e "s/^LX = .*/LX = ${l[0]}/; s/^LY = .*/LY = ${l[1]}/; s/^LZ = .*/LZ = ${l[2]}/; s/^LT = .*/LT = ${l[3]}/" "$1"; }
resize configs/32x32x32x64.toml 64x64x64x128 | sed -e '/^solution = /d' >/tmp/64.toml
for i in 1 2; do
    for ext in separate all; do
        echo "== scale zt, exterior $ext #$i"
        QCD_SOLVE_EXTERIOR=$ext timeout 120 $q scale /tmp/fast32.toml --gpus 1,4 --split zt --device cuda --repeat 3 --out /tmp/sc-$ext-$i 2>&1 |
            grep -E "^ *(strong|weak) "
    done
done
for g in 1,1,2,2 1,1,1,4; do
    for i in 1 2; do
        for ext in separate all; do
            echo "== 64^3x128 grid $g exterior $ext #$i"
            rm -rf /tmp/m64
            QCD_SOLVE_EXTERIOR=$ext timeout 120 $q -q /tmp/64.toml $fast --grid $g --output /tmp/m64 >/dev/null 2>&1
            python3 -c "
import json, glob
r = json.load(open(glob.glob('/tmp/m64/*.json')[0]))
g = [x['graph_seconds'] * 1e3 for x in r['parallel']['ranks']]
print(f\"iterations {r['iterations']} solve {r['timings']['solve']:.4f} s graphs per rank {min(g):.2f}-{max(g):.2f} ms true {r['true_residual_of_d_cpu']:.2e}\")
" | tee -a $OUT/main64.txt
        done
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
