#!/usr/bin/env bash
# Session 21, run 154 (nvidia-h200-x4): where the split solve's time inside its graphs goes.
# If Nsight Systems is on the host: the main job's weak points w1 (32^3x64, one GPU), w4 t
# (1,1,1,4) and w4 z-t (1,1,2,2), each profiled with graph nodes traced; a per-kernel table
# of GPU 0 (count, total, mean) and GPU 0's idle time inside the solve. Otherwise the same
# points with QCD_SOLVE_SKIP_EXCHANGE=1 (the faces not sent) beside the real ones.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so
export LD_LIBRARY_PATH=/tmp/nccl-link${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
q=$PWD/.device/qcd-solve; b=/tmp/d; mkdir -p $b
export QCD_SOLVE_TUNE_CACHE=$b/tune.tsv
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
nsys=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys /usr/local/cuda*/nsight-systems*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${nsys:-none}"
fast="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"
resize() { local l=(${2//x/ }); sed -e "s/^LX = .*/LX = ${l[0]}/; s/^LY = .*/LY = ${l[1]}/; s/^LZ = .*/LZ = ${l[2]}/; s/^LT = .*/LT = ${l[3]}/" "$1"; }
summ() { python3 -c "
import json,glob
r=json.load(open(glob.glob('$1/*.json')[0]))
it=r['iterations']; s=r['timings']['solve']
ks={k['name']:k for k in ((r.get('gpu') or {}).get('kernels') or [])}
g=ks.get('cr graph')
print(it, 'solve %.2f ms'%(1e3*s), '%.3f ms/it'%(1e3*s/it), ('graphs %d %.2f ms'%(g['launches'],g['millis'])) if g else '')
" 2>&1; }
runs="w1:32x32x32x64:1,1,1,1:0 w4t:32x32x32x256:1,1,1,4:0,1,2,3 w4zt:32x32x64x128:1,1,2,2:0,1,2,3"
# A first pass tunes (shared cache) and warms; then the measured ones.
for run in $runs; do
    IFS=: read -r id d g dev <<<"$run"
    resize configs/32x32x32x64.toml $d > $b/$d.toml
    CUDA_VISIBLE_DEVICES=$dev timeout 90 $q $b/$d.toml $fast --grid $g --output $b/warm-$id >/dev/null 2>&1
    echo "warm $id rc=$? $(summ $b/warm-$id)"
done
if [ -n "$nsys" ]; then
    for run in $runs; do
        IFS=: read -r id d g dev <<<"$run"
        CUDA_VISIBLE_DEVICES=$dev timeout 150 $nsys profile -q --trace=cuda --cuda-graph-trace=node -o $b/p-$id -f true \
            $q $b/$d.toml $fast --grid $g --output $b/o-$id >$b/nsys-$id.txt 2>&1
        echo "nsys $id rc=$? $(summ $b/o-$id)"
        timeout 120 $nsys stats -q --report cuda_gpu_trace --format csv -o $b/t-$id $b/p-$id.nsys-rep >/dev/null 2>&1
        f=$(ls $b/t-$id*.csv 2>/dev/null | head -1)
        [ -n "$f" ] && python3 validate/results/2026-11-26-s21/run154/trace.py "$f" $id | tee $OUT/trace-$id.txt
        [ -z "$f" ] && tail -5 $b/nsys-$id.txt
    done
fi
for k in 1; do
    for run in $runs; do
        IFS=: read -r id d g dev <<<"$run"
        CUDA_VISIBLE_DEVICES=$dev timeout 90 $q $b/$d.toml $fast --grid $g --output $b/o-$id-$k >/dev/null 2>&1
        echo "$id.$k rc=$? $(summ $b/o-$id-$k)"
        [ $id = w1 ] && continue
        CUDA_VISIBLE_DEVICES=$dev QCD_SOLVE_SKIP_EXCHANGE=1 timeout 90 $q $b/$d.toml $fast --grid $g --output $b/s-$id-$k >/dev/null 2>&1
        echo "$id.$k skip-exchange rc=$? $(summ $b/s-$id-$k)"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
