#!/usr/bin/env bash
# Session 17, run 127: the solve's fixed costs on split lattices (run 126: the final norm
# 3 ms on 1 GPU, 4-5 on 2, 10-14 on 4; the first CR workspace 4 ms on 4 ranks), read as
# the memory pool releasing what it keeps above its threshold at each synchronisation.
# The main job's weak points on 1, 2, 4 GPUs with QCD_SOLVE_POOL_KEEP_MIB=0 (release
# everything), unset (the default: the solve's working set, at least 1 GiB) and 16384;
# then NCCL_GRAPH_MIXING_SUPPORT=0 on 2 and 4 GPUs (graph time per launch).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so && export LD_LIBRARY_PATH=/tmp/nccl-link:${LD_LIBRARY_PATH:-}
q=$PWD/.device/qcd-solve; b=/tmp/d; mkdir -p $b
export QCD_SOLVE_TUNE_CACHE=$b/tune.tsv
date -u +%Y-%m-%dT%H:%M:%SZ
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
  'graphs %d, %.1f us a launch'%(gl[0][0], 1e6*gl[0][1]/max(gl[0][0],1)))
" 2>&1; }
steps() { grep -E "the final norm|fields, conversion|workspace, load" $1 | grep -v "rank=[1-9]" | sed -e 's/^[^ ]* *DEBUG //; s/rank{rank=0}: //; s/(waits for the reconstruction) //; s/workspace, load and start (queued)/first start/' | awk '!seen[$0 ~ /start/ ? "s" : $0]++' | tr '\n' ';'; echo; }
for run in w1:32x32x32x64:1,1,1,1:0 w2:32x32x32x128:1,1,1,2:0,1 w4:32x32x32x256:1,1,1,4:0,1,2,3; do
    IFS=: read -r id d g dev <<<"$run"
    resize configs/32x32x32x64.toml $d > $b/$d.toml
    for keep in 0 default 16384; do
        e="QCD_SOLVE_POOL_KEEP_MIB=$keep"; [ $keep = default ] && e="X=1"
        env $e CUDA_VISIBLE_DEVICES=$dev RUST_LOG=qcd_solve=debug timeout 60 $q $b/$d.toml $fast --grid $g --output $b/o-$id-$keep >$b/$id-$keep.txt 2>&1
        echo "$id keep=$keep rc=$? $(summ $b/o-$id-$keep)"
        echo "   $(steps $b/$id-$keep.txt)"
    done
    [ $id = w1 ] && continue
    NCCL_GRAPH_MIXING_SUPPORT=0 CUDA_VISIBLE_DEVICES=$dev timeout 60 $q $b/$d.toml $fast --grid $g --output $b/o-$id-nm >$b/$id-nm.txt 2>&1
    echo "$id nomix rc=$? $(summ $b/o-$id-nm)"
done
cp $b/w4-default.txt $b/w4-16384.txt $OUT/ 2>/dev/null
date -u +%Y-%m-%dT%H:%M:%SZ
