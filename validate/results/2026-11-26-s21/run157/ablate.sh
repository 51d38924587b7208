#!/usr/bin/env bash
# Session 21, run 157 (nvidia-h200-x4): the split graphs' extra taken apart further by
# ablation (QCD_SOLVE_ABLATE_COMM, comma-separated): `exterior` (no exterior launch),
# `mask` (the interior without the split mask: the undecomposed kernel's work),
# `exchange` (faces unsent), and all three (left: packs, all-gathers, cr_global, the
# joins). The main job's weak points w4 t and w4 z-t, one process each; w1 around them.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so
export LD_LIBRARY_PATH=/tmp/nccl-link${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
q=$PWD/.device/qcd-solve; b=/tmp/d; mkdir -p $b
export QCD_SOLVE_TUNE_CACHE=$b/tune.tsv
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
fast="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"
resize() { local l=(${2//x/ }); sed -e "s/^LX = .*/LX = ${l[0]}/; s/^LY = .*/LY = ${l[1]}/; s/^LZ = .*/LZ = ${l[2]}/; s/^LT = .*/LT = ${l[3]}/" "$1"; }
summ() { python3 -c "
import json,glob
r=json.load(open(glob.glob('$1/*.json')[0]))
it=r['iterations']; s=r['timings']['solve']
rk=(r.get('parallel') or {}).get('ranks') or []
g=rk[0]['graph_seconds'] if rk else sum(k['millis'] for k in ((r.get('gpu') or {}).get('kernels') or []) if k['name']=='cr graph')/1e3
print(it, 'solve %.2f ms'%(1e3*s), '%.4f ms/it'%(1e3*s/it), 'graphs %.2f ms %.4f ms/it'%(1e3*g, 1e3*g/it), 'res %.2e'%r.get('true_residual', float('nan')))
" 2>&1; }
one() { # id dims grid devices label env...
    local id=$1 d=$2 g=$3 dev=$4 label=$5; shift 5
    env CUDA_VISIBLE_DEVICES=$dev "$@" timeout 90 $q $b/$d.toml $fast --grid $g --output $b/o-$id-$label >$b/log-$id-$label.txt 2>&1
    printf '%-5s %-10s rc=%s %s\n' $id $label $? "$(summ $b/o-$id-$label)"
}
for d in 32x32x32x64 32x32x32x256 32x32x64x128; do resize configs/32x32x32x64.toml $d > $b/$d.toml; done
one w1 32x32x32x64 1,1,1,1 0 warm
one w4t 32x32x32x256 1,1,1,4 0,1,2,3 warm
one w4zt 32x32x64x128 1,1,2,2 0,1,2,3 warm
one w1 32x32x32x64 1,1,1,1 0 base
for pt in "w4t 32x32x32x256 1,1,1,4" "w4zt 32x32x64x128 1,1,2,2"; do
    set -- $pt
    one $1 $2 $3 0,1,2,3 base
    one $1 $2 $3 0,1,2,3 exterior QCD_SOLVE_ABLATE_COMM=exterior
    one $1 $2 $3 0,1,2,3 mask QCD_SOLVE_ABLATE_COMM=mask
    one $1 $2 $3 0,1,2,3 ext+mask QCD_SOLVE_ABLATE_COMM=exterior,mask
    one $1 $2 $3 0,1,2,3 all3 QCD_SOLVE_ABLATE_COMM=exterior,mask,exchange
    one $1 $2 $3 0,1,2,3 base2
done
one w1 32x32x32x64 1,1,1,1 0 base2
grep -h "rror\|panick" $b/log-* | sort | uniq -c | head
date -u +%Y-%m-%dT%H:%M:%SZ
