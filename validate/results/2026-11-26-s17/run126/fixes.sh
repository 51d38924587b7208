#!/usr/bin/env bash
# Session 17, run 126: (1) two fixes from run 125 — the ranks start the solve's clock
# together (a barrier after the uploads) and the memory pool keeps the solve's working
# set (reserve raises its release threshold: no new mappings between phases); gpu_memory
# and gpu_decomposed's solves, then the main job's weak points on 1, 2 and 4 GPUs twice
# each. (2) QCD_SOLVE_ABLATE_COMM on the 2- and 4-GPU points (answers wrong, 100
# iterations at most): the graphs' time per launch with the faces unsent, the all-gathers
# as local copies, and both.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so && export LD_LIBRARY_PATH=/tmp/nccl-link:${LD_LIBRARY_PATH:-}
q=$PWD/.device/qcd-solve; b=/tmp/d; mkdir -p $b
export QCD_SOLVE_TUNE_CACHE=$b/tune.tsv
date -u +%Y-%m-%dT%H:%M:%SZ
CUDA_VISIBLE_DEVICES=0 timeout 120 .device/gpu-memory-tests --test-threads=1 >$b/mem.txt 2>&1
echo "gpu-memory rc=$?"; grep -E "^test |test result" $b/mem.txt
CUDA_VISIBLE_DEVICES=0,1 timeout 90 .device/gpu-decomposed-tests --test-threads=1 --include-ignored solves >$b/dec.txt 2>&1
echo "gpu-decomposed rc=$?"; grep -E "^test |test result" $b/dec.txt
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
  'graphs %d, %.1f us a launch'%(gl[0][0], 1e6*gl[0][1]/max(gl[0][0],1)),
  ' '.join('r%d wait %.2f'%(x['rank'],1e3*x['wait']) for x in ranks))
" 2>&1; }
for run in w1:32x32x32x64:1,1,1,1:0 w2:32x32x32x128:1,1,1,2:0,1 w4:32x32x32x256:1,1,1,4:0,1,2,3; do
    IFS=: read -r id d g dev <<<"$run"
    resize configs/32x32x32x64.toml $d > $b/$d.toml
    sed -e 's/^max_iterations = .*/max_iterations = 100/' $b/$d.toml > $b/$d-100.toml
    for k in 1 2; do
        CUDA_VISIBLE_DEVICES=$dev RUST_LOG=qcd_solve=debug timeout 60 $q $b/$d.toml $fast --grid $g --output $b/o-$id-$k >$b/$id-$k.txt 2>&1
        echo "$id.$k rc=$? $(summ $b/o-$id-$k)"
        grep -E "the final norm|fields, conversion|Schur system" $b/$id-$k.txt | grep -v "rank=[1-9]" | sed -e 's/^[^ ]* *DEBUG //' | tr '\n' ';'; echo
    done
    cp $b/$id-1.txt $OUT/ 2>/dev/null
    [ $id = w1 ] && continue
    for a in exchange gather both; do
        CUDA_VISIBLE_DEVICES=$dev QCD_SOLVE_ABLATE_COMM=$a timeout 60 $q $b/$d-100.toml $fast --grid $g --output $b/o-$id-$a >$b/$id-$a.txt 2>&1
        echo "$id ablate $a rc=$? $(summ $b/o-$id-$a)"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
