#!/usr/bin/env bash
# Session 19, run 144 (nvidia-h200-x4): NCCL's CTA policy (NCCL_CTA_POLICY 1: efficiency, 2: zero CTA) on the main
# job's weak points on four GPUs, t (1,1,1,4) and z-t (1,1,2,2), 32^3x64 per GPU, fast path,
# each: default, NCCL_CTA_POLICY=1, =2; twice each, alternating; then gpu-decomposed-tests
# --include-ignored (the copies across GPUs now assert every pair reaches the others).
# Prints iterations, solve ms, ms/iteration, rank 0's graphs and halo times.
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
x=(r.get('parallel') or {}).get('ranks',[{}])[0]
print(it, 'solve %.2f ms'%(1e3*s), '%.3f ms/it'%(1e3*s/it), 'graphs %.2f ms'%(1e3*x.get('graph_seconds',0)),
  'pack/exch/int/ext/wait %.2f/%.2f/%.2f/%.2f/%.2f ms'%tuple(1e3*x.get(k,0) for k in ['pack','exchange','interior','exterior','wait']))
" 2>&1; }
for k in 1 2; do
  for run in w4:32x32x32x256:1,1,1,4 w4zt:32x32x64x128:1,1,2,2; do
    IFS=: read -r id d g <<<"$run"
    resize configs/32x32x32x64.toml $d > $b/$d.toml
    for v in default cta1 cta2; do
        case $v in
          default) env=();;
          cta1) env=(NCCL_CTA_POLICY=1);;
          cta2) env=(NCCL_CTA_POLICY=2);;
        esac
        env "${env[@]}" timeout 60 $q -q $b/$d.toml $fast --grid $g --output $b/o-$id-$v-$k >$b/$id-$v-$k.txt 2>&1
        echo "$id $v #$k rc=$? $(summ $b/o-$id-$v-$k)"
    done
  done
done
date -u +%Y-%m-%dT%H:%M:%SZ
echo "== gpu-decomposed-tests --include-ignored"
timeout 200 .device/gpu-decomposed-tests --test-threads=1 --include-ignored 2>&1 | grep -E "^test |test result|panicked|FAILED" | tail -15
