#!/usr/bin/env bash
# Session 21, run 160 (nvidia-h200-x4): the split run's set-up, step by step (the
# construction's parts are timed steps now), and whether huge pages for the host's large
# arrays shorten it: the host's THP settings; 64^3x128 as 1,1,2,2 with glibc's default
# malloc and with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (malloc's large blocks advised
# MADV_HUGEPAGE), twice each, then 96^3x192 with the tunable. No tuning (tune = false), no
# solution file.
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
one() { # label dims grid env...
    local label=$1 d=$2 g=$3; shift 3
    cfg $d
    env "$@" /usr/bin/time -f "%e s wall, %M kB peak" timeout 300 $q -q $b/$d.toml $fast --grid $g --output $b/$label >$b/$label.txt 2>$b/$label.err
    echo "$label rc=$? $(tail -1 $b/$label.err)"
    steps $b/$label
    rm -rf $b/$label
}
one s64-default 64x64x64x128 1,1,2,2
one s64-hugetlb 64x64x64x128 1,1,2,2 GLIBC_TUNABLES=glibc.malloc.hugetlb=1
one s64-default2 64x64x64x128 1,1,2,2
one s64-hugetlb2 64x64x64x128 1,1,2,2 GLIBC_TUNABLES=glibc.malloc.hugetlb=1
one big-hugetlb 96x96x96x192 1,1,2,2 GLIBC_TUNABLES=glibc.malloc.hugetlb=1
date -u +%Y-%m-%dT%H:%M:%SZ
