#!/usr/bin/env bash
# Session 21, run 161 (nvidia-h200-x4): a cold start of a split run with and without the
# one-compile-per-program lock (compile.rs `program_lock`; .device/qcd-solve-nolock is the
# same tree without it): 32^3x256 as 1,1,1,4, every process with an empty PTX cache
# (QCD_SOLVE_PTX_CACHE) and an empty driver JIT cache (CUDA_CACHE_PATH), alternating; then
# 96^3x192 as 1,1,2,2 with glibc's default malloc, warm caches (run 160 had it with
# GLIBC_TUNABLES=glibc.malloc.hugetlb=1). No tuning, no solution file.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so
export LD_LIBRARY_PATH=/tmp/nccl-link${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
q=$PWD/.device/qcd-solve; b=/tmp/qcd-big; mkdir -p $b
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
echo "THP enabled: $(cat /sys/kernel/mm/transparent_hugepage/enabled) defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag)"
ldd --version | head -1
fast="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"
cfg() { local l=(${1//x/ }); sed -e "s/^LX = .*/LX = ${l[0]}/; s/^LY = .*/LY = ${l[1]}/; s/^LZ = .*/LZ = ${l[2]}/; s/^LT = .*/LT = ${l[3]}/" \
    -e '/^solution = /d' -e 's/^threads = 0/threads = 0\ntune = false/' configs/32x32x32x64.toml >$b/$1.toml; }
steps() { python3 - "$1" <<'PY'
import json, glob, sys, collections
r = json.load(open(glob.glob(sys.argv[1] + "/*.json")[0]))
t = r["time"]
print("  ", r["iterations"], "it, true", r["true_residual_of_d_cpu"], {k: round(v, 2) for k, v in t.items() if isinstance(v, float)})
agg = collections.OrderedDict()
for s in t.get("steps", []):
    a = agg.setdefault(s["name"], [0, 0.0, s["start"]])
    a[0] += 1; a[1] = max(a[1], s["seconds"])
for k, (n, m, st) in agg.items():
    if m >= 0.2:
        print(f"    {st:8.2f} s  {k:44s} x{n}  longest {m:.3f} s")
PY
}
one() { # label binary dims grid env...
    local label=$1 bin=$2 d=$3 g=$4; shift 4
    cfg $d
    env "$@" /usr/bin/time -f "%e s wall, %M kB peak" timeout 300 $bin -q $b/$d.toml $fast --grid $g --output $b/$label >$b/$label.txt 2>$b/$label.err
    echo "$label rc=$? $(tail -1 $b/$label.err)"
    steps $b/$label
    rm -rf $b/$label
}
cold() { local k=$1 bin=$2; rm -rf $b/ptx-$k $b/jit-$k; mkdir -p $b/ptx-$k $b/jit-$k
    one cold-$k $bin 32x32x32x256 1,1,1,4 QCD_SOLVE_PTX_CACHE=$b/ptx-$k CUDA_CACHE_PATH=$b/jit-$k; }
cold lock1 $q
cold nolock1 $PWD/.device/qcd-solve-nolock
cold lock2 $q
cold nolock2 $PWD/.device/qcd-solve-nolock
one warm-lock $q 32x32x32x256 1,1,1,4
one big-default $q 96x96x96x192 1,1,2,2
date -u +%Y-%m-%dT%H:%M:%SZ
