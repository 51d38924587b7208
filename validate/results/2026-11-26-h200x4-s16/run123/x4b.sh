#!/usr/bin/env bash
# Session 16, run 123 (nvidia-h200-x4): run 122's four-rank t split lost milliseconds in
# its exchanges (rank 0 waited 36.5 ms a solve): NCCL connects each direction of a pair at
# its first message, and the set-up's ghost links go forward only. Now every rank
# exchanges its faces once both ways at construction (Halo::warm_up). gpu_decomposed's
# solves (one GPU and two by copies), then `scale --gpus 1,2,4 --repeat 3` and the main
# job's weak 4-GPU runs (1,1,1,4 and 1,1,2,2) as in run 122.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so && export LD_LIBRARY_PATH=/tmp/nccl-link:${LD_LIBRARY_PATH:-}
q=$PWD/.device/qcd-solve; b=/tmp/x4; mkdir -p $b
export QCD_SOLVE_TUNE_CACHE=$b/tune.tsv
date -u +%Y-%m-%dT%H:%M:%SZ
CUDA_VISIBLE_DEVICES=0,1 timeout 60 .device/gpu-decomposed-tests --test-threads=1 --include-ignored solves >$b/dec.txt 2>&1
echo "gpu-decomposed rc=$?"; grep -E "^test |test result" $b/dec.txt
fast="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' configs/32x32x32x64.toml > $b/fast.toml
RUST_LOG=warn timeout 120 $q scale $b/fast.toml --gpus 1,2,4 --device cuda --repeat 3 --out $b/scale 2>&1 | grep -v "^wrote"
cp $b/scale/scale-ranks.csv $b/scale/scale-weak.png $OUT/ 2>/dev/null
resize() { local l=(${2//x/ }); sed -e "s/^LX = .*/LX = ${l[0]}/; s/^LY = .*/LY = ${l[1]}/; s/^LZ = .*/LZ = ${l[2]}/; s/^LT = .*/LT = ${l[3]}/" "$1"; }
for run in w1:32x32x32x64:1,1,1,1 w4:32x32x32x256:1,1,1,4 w4xy:32x32x64x128:1,1,2,2; do
    IFS=: read -r id d g <<<"$run"
    resize configs/32x32x32x64.toml $d > $b/$d.toml
    timeout 60 $q -q $b/$d.toml $fast --grid $g --output $b/o-$id >$b/$id.txt 2>&1
    echo "$id rc=$? $(python3 -c "import json,glob;r=json.load(open(glob.glob('$b/o-$id/*.json')[0]));print(r['iterations'], round(r['timings']['solve'],4), round(1e3*r['timings']['solve']/r['iterations'],3), '%.2e'%r['true_residual_of_d_cpu'], [(x['rank'], round(x['exchange'],4), round(x['wait'],4)) for x in (r.get('parallel') or {}).get('ranks',[])])" 2>&1)"
done
date -u +%Y-%m-%dT%H:%M:%SZ
