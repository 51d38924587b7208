#!/usr/bin/env bash
# Session 22, run 169 (nvidia-h200-x4): issue 16's four-GPU points with this session's
# defaults (the fused CR's sums over peer memory, the exterior kernels under PDL):
# `scale --gpus 1,2,4` along t and as z-t (charts and tables to $OUT), then the main job's
# weak points three times each (w1, w4 t, w4 z-t) for the medians; strong 64^3x128 on 2
# and 4.
set -uo pipefail
source validate/device-env.sh
stamp
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
nvidia-smi topo -m | head -6
echo "NCCL $(ls -l /tmp/nccl-link/libnccl.so | awk '{print $NF}')"
sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' \
    configs/32x32x32x64.toml >$b/fast32.toml
for sp in t zt; do
    echo "== scale $sp"
    timeout 250 $q scale $b/fast32.toml --gpus 1,2,4 --split $sp --device cuda --repeat 3 --out $OUT/scale-$sp 2>&1 |
        grep -E "^Scaling|^ *kind|^ *(strong|weak) "
    rm -f $OUT/scale-$sp/*.png
done
zt="w4zt 32x32x64x128 1,1,2,2 0,1,2,3"
t="w4t 32x32x32x256 1,1,1,4 0,1,2,3"
w1="w1 32x32x32x64 1,1,1,1 0"
for rep in 1 2 3; do
    one $w1 base$rep
    one $t base$rep
    one $zt base$rep
done
# Strong 64^3x128, 2 -> 4 GPUs (glibc's huge pages for the host's arrays, as the README says).
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1
one s2 64x64x64x128 1,1,1,2 0,1 base
one s4 64x64x64x128 1,1,2,2 0,1,2,3 base
grep -h "rror\|panick\|cannot reach" $b/log-* | sort | uniq -c | head
stamp
