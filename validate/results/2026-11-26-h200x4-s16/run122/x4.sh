#!/usr/bin/env bash
# Session 16, run 122 (nvidia-h200-x4 if it comes; four GPUs of one host): the code of
# commit dc9be72 ((r|Ar) in the interior's epilogue and the exterior kernels). First its
# GPU tests with two GPUs (gpu_decomposed and gpu_nccl with --include-ignored, gpu_fused),
# then issue 16's points on 1, 2 and 4 GPUs and issue 15's two-GPU ones: `scale --gpus
# 1,2,4 --repeat 3` (32^3x64 fast path: weak 32^3x64 per GPU, strong 32^3x64), the main
# job weak (32^3x64 per GPU: t split on 2 and 4, and 1,1,2,2 on 4), strong 64^3x128 on 2
# and 4 GPUs, and one process per GPU on 4 GPUs (the launcher's variables by hand).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so && export LD_LIBRARY_PATH=/tmp/nccl-link:${LD_LIBRARY_PATH:-}
q=$PWD/.device/qcd-solve; b=/tmp/x4; mkdir -p $b
export QCD_SOLVE_TUNE_CACHE=$b/tune.tsv
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
nvidia-smi topo -m
ls -l "$nccl_lib"
echo "== tests (two GPUs)"
for t in "gpu-decomposed-tests solves" "gpu-nccl-tests" "gpu-fused-tests"; do
    set -- $t
    CUDA_VISIBLE_DEVICES=0,1 timeout 120 .device/$1 --test-threads=1 --include-ignored ${2:-} >$b/$1.txt 2>&1
    echo "$1 rc=$?"; grep -E "^test |test result|panicked" $b/$1.txt | head -20
    cp $b/$1.txt $OUT/
done
fast="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' configs/32x32x32x64.toml > $b/fast.toml
echo "== scale --gpus 1,2,4"
RUST_LOG=warn timeout 150 $q scale $b/fast.toml --gpus 1,2,4 --device cuda --repeat 3 --out $b/scale 2>&1 | grep -v "^wrote"
cp $b/scale/scale-ranks.csv $OUT/ 2>/dev/null; cp $b/scale/scale-weak.png $b/scale/scale-strong.png $OUT/ 2>/dev/null
resize() { local l=(${2//x/ }); sed -e "s/^LX = .*/LX = ${l[0]}/; s/^LY = .*/LY = ${l[1]}/; s/^LZ = .*/LZ = ${l[2]}/; s/^LT = .*/LT = ${l[3]}/" "$1"; }
echo "== main job"
for run in w1:32x32x32x64:1,1,1,1 w2:32x32x32x128:1,1,1,2 w4:32x32x32x256:1,1,1,4 w4xy:32x32x64x128:1,1,2,2 \
    s2:64x64x64x128:1,1,1,2 s4:64x64x64x128:1,1,1,4; do
    IFS=: read -r id d g <<<"$run"
    resize configs/32x32x32x64.toml $d > $b/$d.toml
    timeout 100 $q -q $b/$d.toml $fast --grid $g --output $b/o-$id >$b/$id.txt 2>&1
    echo "$id rc=$? $(python3 -c "import json,glob;r=json.load(open(glob.glob('$b/o-$id/*.json')[0]));print(r['iterations'], round(r['timings']['solve'],4), round(1e3*r['timings']['solve']/r['iterations'],3), '%.2e'%r['true_residual_of_d_cpu'], [(x['rank'], round(x['exchange'],4), round(x['wait'],4)) for x in (r.get('parallel') or {}).get('ranks',[])])" 2>&1)"
    cp $b/o-$id/*.json $OUT/$id.json 2>/dev/null; rm -rf $b/o-$id
done
echo "== one process per GPU, 4 GPUs"
for r in 0 1 2 3; do
    RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r QCD_SOLVE_MASTER=127.0.0.1:29517 timeout 90 $q -q configs/16x16x16x32.toml $fast \
        --grid 1,1,1,4 --output $b/launched >$b/launched-$r.txt 2>&1 &
done
wait
head -5 $b/launched-*.txt
python3 -c "import json;r=json.load(open('$b/launched/16x16x16x32.json'));print('launched', r['iterations'], '%.2e'%r['true_residual_of_d_cpu'], r['parallel']['comms'])" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ
