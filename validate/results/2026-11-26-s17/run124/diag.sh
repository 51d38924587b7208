#!/usr/bin/env bash
# Session 17, run 124: where the 2- and 4-GPU solve's extra time goes (issues 15, 16).
# Each rank's report now carries its fused-CR graph time (graph_seconds, the event-timed
# graph launches), so the solve splits into the iterations' graphs and the host-driven
# rest (start, checks, restarts). scale --gpus 1,2,4 (t split) with the new graphs column;
# the main job's weak points on 1, 2 and 4 GPUs with each rank's graph time and the graph
# recording times (RUST_LOG=debug); the 2-GPU point without NCCL's graph-mixing support;
# whether nsys/ncu are on the machine.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so && export LD_LIBRARY_PATH=/tmp/nccl-link:${LD_LIBRARY_PATH:-}
q=$PWD/.device/qcd-solve; b=/tmp/d; mkdir -p $b
export QCD_SOLVE_TUNE_CACHE=$b/tune.tsv
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
nvidia-smi topo -m | head -6
echo "nsys: $(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1 || echo none) ncu: $(command -v ncu || echo none)"
fast="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' configs/32x32x32x64.toml > $b/fast.toml
RUST_LOG=warn timeout 150 $q scale $b/fast.toml --gpus 1,2,4 --device cuda --repeat 3 --out $b/scale 2>&1 | grep -v "^wrote"
cp $b/scale/scale-ranks.csv $OUT/ 2>/dev/null
resize() { local l=(${2//x/ }); sed -e "s/^LX = .*/LX = ${l[0]}/; s/^LY = .*/LY = ${l[1]}/; s/^LZ = .*/LZ = ${l[2]}/; s/^LT = .*/LT = ${l[3]}/" "$1"; }
summ() { python3 -c "
import json,glob
r=json.load(open(glob.glob('$1/*.json')[0]))
it=r['iterations']; s=r['timings']['solve']
ks={k['name']:k for k in ((r.get('gpu') or {}).get('kernels') or [])}
g=ks.get('cr graph')
ranks=(r.get('parallel') or {}).get('ranks',[])
print(it, 'solve %.2f ms'%(1e3*s), '%.3f ms/it'%(1e3*s/it), 'res %.2e'%r['true_residual_of_d_cpu'],
  ('graphs %d %.2f ms'%(g['launches'],g['millis'])) if g else '',
  ' '.join('r%d: graphs %d %.2f ms wait %.2f exch %.2f'%(x['rank'],x['graph_launches'],1e3*x['graph_seconds'],1e3*x['wait'],1e3*x['exchange']) for x in ranks))
" 2>&1; }
for run in w1:32x32x32x64:1,1,1,1:0 w2:32x32x32x128:1,1,1,2:0,1 w4:32x32x32x256:1,1,1,4:0,1,2,3; do
    IFS=: read -r id d g dev <<<"$run"
    resize configs/32x32x32x64.toml $d > $b/$d.toml
    for k in 1 2; do
        CUDA_VISIBLE_DEVICES=$dev RUST_LOG=qcd_solve=debug timeout 60 $q $b/$d.toml $fast --grid $g --output $b/o-$id-$k >$b/$id-$k.txt 2>&1
        echo "$id.$k rc=$? $(summ $b/o-$id-$k)"
        grep -h "CUDA graph recorded" $b/$id-$k.txt | sed -e 's/.*record_ms/record_ms/' | sort | uniq -c | head -4
    done
    cp $b/o-$id-1/*.json $OUT/$id.json 2>/dev/null
done
echo "== w2 with NCCL_GRAPH_MIXING_SUPPORT=0"
CUDA_VISIBLE_DEVICES=0,1 NCCL_GRAPH_MIXING_SUPPORT=0 timeout 60 $q $b/32x32x32x128.toml $fast --grid 1,1,1,2 --output $b/o-w2nm >$b/w2nm.txt 2>&1
echo "w2nm rc=$? $(summ $b/o-w2nm)"
cp $b/w2-1.txt $OUT/w2-log.txt
date -u +%Y-%m-%dT%H:%M:%SZ
