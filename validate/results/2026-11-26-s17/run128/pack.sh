#!/usr/bin/env bash
# Session 17, run 128: the pool keeping everything (the new default), the faces packed on
# the communication stream (QCD_SOLVE_PACK_ON=main is the old placement) and the CR start
# as a graph replayed at the restarts. gpu_decomposed's solves and gpu_fused, then the
# main job's weak points (1, 2, 4 GPUs), new placement and old, alternating, twice; then
# scale --gpus 1,2,4 (t split) and 4 with --split zt.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so && export LD_LIBRARY_PATH=/tmp/nccl-link:${LD_LIBRARY_PATH:-}
q=$PWD/.device/qcd-solve; b=/tmp/d; mkdir -p $b
export QCD_SOLVE_TUNE_CACHE=$b/tune.tsv
date -u +%Y-%m-%dT%H:%M:%SZ
CUDA_VISIBLE_DEVICES=0,1 timeout 90 .device/gpu-decomposed-tests --test-threads=1 --include-ignored >$b/dec.txt 2>&1
echo "gpu-decomposed rc=$?"; grep -E "test result|FAILED|panicked" $b/dec.txt | head -5
CUDA_VISIBLE_DEVICES=0 timeout 90 .device/gpu-fused-tests --test-threads=1 >$b/fused.txt 2>&1
echo "gpu-fused rc=$?"; grep -E "test result|FAILED|panicked" $b/fused.txt | head -5
fast="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"
resize() { local l=(${2//x/ }); sed -e "s/^LX = .*/LX = ${l[0]}/; s/^LY = .*/LY = ${l[1]}/; s/^LZ = .*/LZ = ${l[2]}/; s/^LT = .*/LT = ${l[3]}/" "$1"; }
summ() { python3 -c "
import json,glob
r=json.load(open(glob.glob('$1/*.json')[0]))
it=r['iterations']; s=r['timings']['solve']
ks={k['name']:k for k in ((r.get('gpu') or {}).get('kernels') or [])}
g=ks.get('cr graph')
ranks=(r.get('parallel') or {}).get('ranks',[])
gl=[(g['launches'],g['millis']/1e3)] if g else [(x['graph_launches'],x['graph_seconds']) for x in ranks[:1]]
print(it, 'solve %.2f ms'%(1e3*s), '%.3f ms/it'%(1e3*s/it), 'res %.2e'%r['true_residual_of_d_cpu'],
  'graphs %d, %.2f ms'%(gl[0][0], 1e3*gl[0][1]))
" 2>&1; }
for k in 1 2; do
for run in w1:32x32x32x64:1,1,1,1:0 w2:32x32x32x128:1,1,1,2:0,1 w4:32x32x32x256:1,1,1,4:0,1,2,3; do
    IFS=: read -r id d g dev <<<"$run"
    resize configs/32x32x32x64.toml $d > $b/$d.toml
    for pk in comm main; do
        [ $id = w1 ] && [ $pk = main ] && continue
        QCD_SOLVE_PACK_ON=$pk CUDA_VISIBLE_DEVICES=$dev timeout 60 $q $b/$d.toml $fast --grid $g --output $b/o-$id-$pk-$k >$b/$id-$pk-$k.txt 2>&1
        echo "$id pack=$pk #$k rc=$? $(summ $b/o-$id-$pk-$k)"
    done
done
done
cp $b/o-w2-comm-1/*.json $OUT/w2.json; cp $b/o-w4-comm-1/*.json $OUT/w4.json; cp $b/o-w1-comm-1/*.json $OUT/w1.json
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' configs/32x32x32x64.toml > $b/fast.toml
RUST_LOG=warn timeout 150 $q scale $b/fast.toml --gpus 1,2,4 --device cuda --repeat 3 --out $b/scale 2>&1 | grep -v "^wrote"
cp $b/scale/scale-ranks.csv $b/scale/scale-weak.png $b/scale/scale-strong.png $OUT/ 2>/dev/null
RUST_LOG=warn timeout 100 $q scale $b/fast.toml --gpus 1,4 --split zt --device cuda --repeat 3 --out $b/scalezt 2>&1 | grep -v "^wrote"
cp $b/scalezt/scale-ranks.csv $OUT/scale-zt.csv 2>/dev/null
date -u +%Y-%m-%dT%H:%M:%SZ
