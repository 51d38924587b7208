# Sourced by the run scripts (validate/results/*/runNNN/*.sh) on the device machine:
# NCCL's environment (NVLink multicast off, always), libnccl.so linked where cudarc
# looks, the staged binary, a scratch folder and the summary helpers. Before this file
# each script repeated these lines.
#   source validate/device-env.sh
export NCCL_NVLS_ENABLE=0
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so
export LD_LIBRARY_PATH=/tmp/nccl-link${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
q=$PWD/.device/qcd-solve
b=/tmp/d
mkdir -p "$b"
export QCD_SOLVE_TUNE_CACHE=$b/tune.tsv
# The fast path (issue 16's): even-odd single-double, 12-real links, kernel 3.0.
fast="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"

stamp() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# resize CONFIG LXxLYxLZxLT: the config with other extents, on stdout.
resize() {
    local l=(${2//x/ })
    sed -e "s/^LX = .*/LX = ${l[0]}/; s/^LY = .*/LY = ${l[1]}/; s/^LZ = .*/LZ = ${l[2]}/; s/^LT = .*/LT = ${l[3]}/" "$1"
}

# summ OUTDIR: iterations, solve, ms/iteration, rank 0's graphs, its eager halo books
# (exchange and wait per application) and the true residual from a report.
summ() {
    python3 -c "
import json,glob
r=json.load(open(glob.glob('$1/*.json')[0]))
it=r['iterations']; s=r['timings']['solve']
rk=(r.get('parallel') or {}).get('ranks') or []
g=rk[0]['graph_seconds'] if rk else sum(k['millis'] for k in ((r.get('gpu') or {}).get('kernels') or []) if k['name']=='cr graph')/1e3
h=''
if rk and rk[0].get('exchanges'):
    n=rk[0]['exchanges']; h=' eager/appl: exch %.1f us wait %.1f us (%d)'%(1e6*rk[0]['exchange']/n, 1e6*rk[0]['wait']/n, n)
print(it, 'solve %.2f ms'%(1e3*s), '%.4f ms/it'%(1e3*s/it), 'graphs %.4f ms/it'%(1e3*g/it), 'res %.2e'%r.get('true_residual', float('nan'))+h)
" 2>&1
}

# one ID DIMS GRID DEVICES LABEL [VAR=VALUE...]: the main job once, its summary line.
one() {
    local id=$1 d=$2 g=$3 dev=$4 label=$5
    shift 5
    [ -e "$b/$d.toml" ] || resize configs/32x32x32x64.toml "$d" >"$b/$d.toml"
    env CUDA_VISIBLE_DEVICES=$dev "$@" timeout 120 "$q" "$b/$d.toml" $fast --grid "$g" --output "$b/o-$id-$label" >"$b/log-$id-$label.txt" 2>&1
    printf '%-5s %-12s rc=%s %s\n' "$id" "$label" $? "$(summ "$b/o-$id-$label")"
}
