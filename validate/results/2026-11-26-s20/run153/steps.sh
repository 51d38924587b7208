#!/usr/bin/env bash
# Session 20, run 153 (after run 152): run 125's step-by-step debug lines (each step of the CR run and the
# mixed solver, rank 0's lines) with this session's code (6ef0625's binaries), to see where the
# split solve's extra time outside its graphs goes now (run 138 had it before session 19's
# device-side sums). The main job's weak points on 1 and 4 GPUs, twice each, logs kept.
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
print(it, 'solve %.2f ms'%(1e3*s), '%.3f ms/it'%(1e3*s/it),
  ('graphs %d %.2f ms'%(g['launches'],g['millis'])) if g else '',
  ' '.join('r%d: graphs %.2f ms wait %.2f'%(x['rank'],1e3*x['graph_seconds'],1e3*x['wait']) for x in ranks))
" 2>&1; }
for run in w1:32x32x32x64:1,1,1,1:0 w4:32x32x32x256:1,1,1,4:0,1,2,3; do
    IFS=: read -r id d g dev <<<"$run"
    resize configs/32x32x32x64.toml $d > $b/$d.toml
    for k in 1 2; do
        CUDA_VISIBLE_DEVICES=$dev RUST_LOG=qcd_solve=debug timeout 60 $q $b/$d.toml $fast --grid $g --output $b/o-$id-$k >$b/$id-$k.txt 2>&1
        echo "$id.$k rc=$? $(summ $b/o-$id-$k)"
        grep -E "mixed:|cr:|solve:" $b/$id-$k.txt | grep -v "rank=[1-9]" | sed -e 's/^[^ ]* *DEBUG //; s/^rank{rank=0}: //' | awk '{k=$0; sub(/us=[0-9]+ ?/,"",k); match($0,/us=[0-9]+/); v=substr($0,RSTART+3,RLENGTH-3); n[k]++; t[k]+=v} END {for (k in n) printf "   %-70s n=%d total_us=%d\n", substr(k,1,70), n[k], t[k]}' | sort
        grep "graph recorded" $b/$id-$k.txt | sed -e 's/^[^ ]* *DEBUG //' | cut -c1-160
        cp $b/$id-$k.txt $OUT/ 2>/dev/null
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
