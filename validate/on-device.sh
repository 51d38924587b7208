#!/usr/bin/env bash
# Runs ON the device machine (repository root, binaries in .device/ from validate/device.sh):
# every GPU check and measurement of the project in one call, a short table last.
#   1. nvidia-smi; every GPU test target (tests/gpu*.rs)
#   2. NVRTC compile of every kernel there
#   3. validate every stencil version on 16x16x16x32, 6x6x6x10, 12x12x12x24
#   4. the main job on the GPU with every version (16x16x16x32, tol 1e-10)
#   5. ablate 16x16x16x32 and 32x32x32x64 (tuned), then a re-run that reuses the cache
#   6. the quenched generator on the GPU: beta 6.0 on 16^4 (validation against 0.5937) and
#      the sweep time on 16^3x32; CR iterations against kappa on a beta 6.0 field
#   7. the CPU bench and scaling on the host's cores
# Everything lands in /tmp/qcd-out, packed into $OUT/results.tar.gz (the tool returns at
# most 8 files), with the full log in $OUT/log.txt.
# MODE= picks what runs (default full: all of the above); an unknown MODE stops at once.
#   MODE=quick: only the GPU tests and a fresh 16x16x16x32 ablation (tuned) plus its reuse.
#   MODE=fast-path: the GPU tests and the fast path (kernel 3.0, even-odd, single-double,
#   12-real links): floors, validate, the options' ablation and the main job with each option.
#   MODE=split-one-gpu: the GPU tests (gpu-decomposed, gpu-nccl among them), floor, and the
#   main job split over sub-lattices of one GPU (t and xt grids) with CR and BiCGStab.
#   MODE=scale: the scaling model's inputs at 32^3x64 (floor, halo cost) and scale --gpus 1,2
#   on one GPU.
#   MODE=methods: the GPU tests, validate --kernel all, ablate (with the per-method table),
#   the refusal of a plan that cannot fit, and every method's time to solution with kernel
#   3.0 on the seed's problem and on the thermalised beta 6.0 16^3x32 field at kappa 0.155.
#   MODE=methods-on-d: BiCGStab and GCR on D itself, and the live tuner's cost against the
#   set-up at 32^3x64 and 48^3x96 with an empty tune cache.
#   MODE=tune-cache: the tune key carries the solve's layout: the options' ablation, then the
#   fast main job twice (the first sweeps, the second reads the cache).
#   MODE=options-48: every GPU test, floors with the r8 and half rows, the
#   3.0 ablation and validation (r8, half-double rows), the seed problem's best options, and
#   the 48^3x96 whole process with its time line (empty tune cache, then filled).
#   MODE=timelines: the host, and the time lines with their steps of the seed problem and
#   the 48^3x96 whole process (TIMELINES_ABLATE=1: the 3.0 ablation, floor and validation).
#   MODE=staging: the 48^3x96 whole process with each of the link upload workers' staging
#   shapes (STAGING_SHAPES, MiB:buffers[:threads], as `--tuning lane_mib=... lane_buffers=...`),
#   the seed problem (STAGING_ABLATE=1: ablation; =full: with floor and validation), and
#   the link uploads against the pinned bandwidth.
#   MODE=two-gpus (nvidia-h200-x2 or nvidia-h100-x2): equivalence 2 against 1 GPU, weak and
#   strong scaling, 64^3x128 on two, the launched mode, scale --gpus 1,2 (TESTS= to pick;
#   SCALING_ONLY=1: the scaling runs only).
#   MODE=many-gpus (nvidia-h200-x4 or -x8, every visible GPU): scale --gpus along t and along
#   z and t, the main job's weak and strong points, 96^3x192 on 8, N processes.
#   MODE=memory: the gpu-memory test target, then the main job
#   at 48^3x96 and 64^3x128 (random gauge field, kernel 3.0, even-odd, single-double,
#   12-real links; CR and BiCGStab), each with its device-memory estimate and books (the
#   summary's lines) and its time to solution, and the refusal of a plan that cannot fit.
#   MODE=regression: the check after a change that must not alter behaviour: the current
#   binary (.device/qcd-solve, "new") against a baseline (.device/base/qcd-solve, "base",
#   staged by `BASE=<built checkout> bash validate/device.sh`): every GPU test, validate
#   --kernel all on 16x16x16x32 and 6x6x6x10 with both (every row's checks identical),
#   floor on 16x16x16x32 and 32x32x32x64 with both, interleaved base, new, base, new
#   (FLOOR_ROUNDS pairs, default 2; ratios to the floor, new/base), and the main job
#   (3.0 fast path, 1.6.1, BiCGStab on 3.0) with both (iterations, true residual);
#   validate/compare_runs.py compares, a table last. Should the whole run pass a call's
#   600 s, split it: SKIP_TESTS=1 in one call, TESTS=... (some targets) in another.
# Any mode: TESTS="gpu-fast-tests gpu-tests" limits the GPU test targets to those named;
# SKIP_TESTS=1 skips them; TEST_ARGS="--include-ignored" also runs those needing two GPUs.
set -uo pipefail
mode=${MODE:-full}
case $mode in
full | quick | fast-path | split-one-gpu | scale | methods | methods-on-d | tune-cache | options-48 | \
    timelines | staging | two-gpus | many-gpus | memory | regression) ;;
*) echo "unknown MODE=$mode (see the header of validate/on-device.sh)" >&2; exit 2 ;;
esac
. "$(dirname "${BASH_SOURCE[0]}")/step.sh" # $bin $q $res $big $out, step NAME COMMAND...

resize() { # config, dims (e.g. 48x48x48x96): the config with those extents, on stdout
    local l=(${2//x/ })
    sed -e "s/^LX = .*/LX = ${l[0]}/; s/^LY = .*/LY = ${l[1]}/; s/^LZ = .*/LZ = ${l[2]}/; s/^LT = .*/LT = ${l[3]}/" "$1"
}

# The fast path's options on the GPU (the main job's even-odd single-double r12 CR on 3.0).
FAST_CUDA="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"

fast_config() { # writes $big/32x32x32x64-fast.toml: configs/32x32x32x64.toml on the fast path
    sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\npreconditioning = "even-odd"\nprecision = "single-double"/' \
        configs/32x32x32x64.toml >"$big/32x32x32x64-fast.toml"
}

launched() { # n ranks, config, args...: one process per GPU, started by hand as a launcher
    # would (RANK, WORLD_SIZE, LOCAL_RANK, QCD_SOLVE_MASTER), split along t; logs in
    # $res/launched-r.txt, outputs in $big/launched
    local n=$1 cfg=$2; shift 2
    for r in $(seq 0 $((n - 1))); do
        RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r QCD_SOLVE_MASTER=127.0.0.1:29517 \
            timeout 120 "$q" -q "$cfg" "$@" --grid 1,1,1,$n --output "$big/launched" \
            >"$res/launched-$r.txt" 2>&1 &
    done
    wait
}

seed_twice() { # grep pattern: the seed problem with its best options, twice (seed-1, seed-2)
    for i in 1 2; do
        RUST_LOG=info step "seed-$i" "$q" configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd \
            --precision single-double --reconstruct 12 --output "$big/seed-$i" >"$res/seed-$i.txt" 2>&1
        grep -E "$1" "$res/seed-$i.txt" | sed -e 's/^.*INFO //'
    done
}

big48() { # sets d and fast, writes the 48^3x96 config and empties its tune cache
    d=48x48x48x96; resize configs/32x32x32x64.toml "$d" >"$big/$d.toml"
    fast=$FAST_CUDA
    rm -f "$big/tune-$d.tsv"
}


# NCCL: never NVLink multicast on the shared hosts; cudarc looks for libnccl.so by that
# name, the image has libnccl.so.2: link it under the name cudarc knows.
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
[ -n "$nccl_lib" ] || nccl_lib=$(find / -name 'libnccl.so.2*' -not -path '/proc/*' 2>/dev/null | head -1)
if [ -n "$nccl_lib" ]; then
    mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so
    export LD_LIBRARY_PATH=/tmp/nccl-link${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

{
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "libnccl: ${nccl_lib:-not found}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
nproc
for t in "$bin"/gpu*-tests; do
    [ -n "${SKIP_TESTS:-}" ] && break  # SKIP_TESTS=1: the measurements only
    # MODE=memory: its own test target only (the big solves need the time).
    [ "$mode" = memory ] && [ "$(basename "$t")" != gpu-memory-tests ] && continue
    # TESTS="gpu-fast-tests gpu-tests": only those targets.
    [ -n "${TESTS:-}" ] && [[ " $TESTS " != *" $(basename "$t") "* ]] && continue
    # TEST_ARGS="--include-ignored": also the tests that need two GPUs.
    step "$(basename "$t")" timeout 400 "$t" --test-threads=1 --nocapture ${TEST_ARGS:-}
done
step kernels "$q" kernels --check --arch sm_90
if [ "$mode" = split-one-gpu ]; then
    # The split lattice on one GPU (sub-lattices, device copies), its cost, and the
    # undecomposed 3.0 unchanged (floor).
    step floor "$q" floor --dims 16,16,16,32 --repeat 200
    step floor-halo-32 "$q" floor --dims 32,32,32,64 --repeat 200 --halo
    fast="--preconditioning even-odd --precision single-double --reconstruct 12"
    for g in 1,1,1,1 1,1,1,2 2,1,1,2; do
        for m in cr bicgstab; do
            for o in "" "$fast"; do
                n=$m-${g//,/}$(echo "x$o" | tr -c 'a-z0-9\n' '_' | cut -c1-12)
                step "grid-$n" timeout 300 "$q" -q configs/16x16x16x32.toml --device cuda --kernel 3.0 --method $m --grid $g $o --output "$big/g-$n"
                cp "$big/g-$n/16x16x16x32.json" "$res/grid-$n.json"
            done
        done
    done
    python3 - "$res" <<'PY'
import json, sys, glob, os, re
print(f"{'run':34} {'iter':>5} {'solve s':>8} {'|b-Dx|/|b|':>10} {'max hist diff vs 1111':>22} stop")
runs = {os.path.basename(f)[5:-5]: json.load(open(f)) for f in sorted(glob.glob(sys.argv[1] + "/grid-*.json"))}
for n, r in runs.items():
    ref = runs.get(re.sub(r"-\d{4}", "-1111", n, count=1))
    d = max(abs(a - b) for a, b in zip(r["residual_history"], ref["residual_history"])) if ref else float("nan")
    print(f"{n:34} {r['iterations']:5} {r['timings']['solve']:8.4f} {r['true_residual_of_d_cpu']:10.2e} {d:22.2e} {r['stop_reason']}")
PY
elif [ "$mode" = two-gpus ]; then
    # Two GPUs of one host (nvidia-h200-x2 or nvidia-h100-x2). Topology and NCCL version; the
    # split solve on 2 GPUs against 1 (same iterations, histories) for CR and BiCGStab,
    # full and even-odd, double and single-double; weak scaling (32^3x64 per GPU), strong
    # scaling (48^3x96), 64^3x128 on 2 GPUs; one process per GPU with the rendezvous; and
    # `scale --gpus 1,2`. A table last.
    nvidia-smi topo -m
    ls -l "$nccl_lib" 2>/dev/null
    ver=16x16x16x32
    # SCALING_ONLY=1: the scaling runs only (the equivalence and scale --gpus skipped).
    for m in $([ -n "${SCALING_ONLY:-}" ] || echo cr bicgstab); do
        for o in "full-double:" "eo-double:--preconditioning even-odd" \
            "full-single:--precision single-double" \
            "eo-single-r12:--preconditioning even-odd --precision single-double --reconstruct 12"; do
            n=${o%%:*}; opts=${o#*:}
            for g in 1,1,1,1 1,1,1,2; do
                id=eq-$m-$n-${g//,/}
                NCCL_DEBUG=${NCCL_DEBUG:-WARN} step "$id" timeout 120 "$q" -q configs/$ver.toml --device cuda --kernel 3.0 --method $m \
                    --grid $g $opts --output "$big/$id"
                cp "$big/$id/$ver.json" "$res/$id.json"
            done
        done
    done
    fast=$FAST_CUDA
    # Weak: 32^3x64 on one GPU, 32^3x128 split in two along t. Strong: 48^3x96 on 1 and 2.
    resize configs/32x32x32x64.toml 32x32x32x128 >"$big/32x32x32x128.toml"
    resize configs/32x32x32x64.toml 48x48x48x96 >"$big/48x48x48x96.toml"
    resize configs/32x32x32x64.toml 64x64x64x128 >"$big/64x64x64x128.toml"
    cp configs/32x32x32x64.toml "$big/32x32x32x64.toml"
    for run in weak1:32x32x32x64:1,1,1,1 weak2:32x32x32x128:1,1,1,2 \
        strong1:48x48x48x96:1,1,1,1 strong2:48x48x48x96:1,1,1,2 big2:64x64x64x128:1,1,1,2; do
        IFS=: read -r id d g <<<"$run"
        step "$id" timeout 240 "$q" -q "$big/$d.toml" $fast --grid $g --output "$big/$id"
        # The report is named by the config's [output] (the resized configs keep 32x32x32x64).
        cp "$big/$id"/*.json "$res/$id.json"
        rm -rf "$big/$id"
    done
    # One process per GPU, against the one-process run of the same problem.
    launched 2 configs/$ver.toml $fast
    echo "launched ranks: $(cat "$res"/launched-*.txt | head -20)"
    cp "$big/launched/$ver.json" "$res/launched.json" 2>/dev/null
    fast_config
    [ -z "${SCALING_ONLY:-}" ] && step scale-x2 timeout 300 "$q" scale "$big/32x32x32x64-fast.toml" --gpus 1,2 --device cuda --repeat 5 --out "$res/scale-x2"
    python3 - "$res" <<'PY'
import json, sys, glob, os
res = sys.argv[1]
J = lambda n: json.load(open(f"{res}/{n}.json")) if os.path.exists(f"{res}/{n}.json") else None
print(f"{'2 GPUs against 1':34} {'iter 1':>6} {'iter 2':>6} {'max |hist diff|':>15} {'true res 2':>10}")
for f in sorted(glob.glob(res + "/eq-*-1111.json")):
    n = os.path.basename(f)[:-10]
    a, b = J(n + "-1111"), J(n + "-1112")
    if not (a and b): print(f"{n:34} missing"); continue
    d = max(abs(x - y) for x, y in zip(a["residual_history"], b["residual_history"]))
    print(f"{n:34} {a['iterations']:6} {b['iterations']:6} {d:15.2e} {b['true_residual_of_d_cpu']:10.2e}  {(b.get('parallel') or {}).get('comms','')}")
print(f"{'run':10} {'iter':>5} {'solve s':>8} {'ms/iter':>8} {'true res':>9}  halo per rank (pack, exchange, interior, exterior, wait s)")
for n in ["weak1", "weak2", "strong1", "strong2", "big2", "launched"]:
    r = J(n)
    if not r: print(f"{n:10} missing"); continue
    par = r.get("parallel") or {}
    ranks = "; ".join(f"r{x['rank']}: {x['pack']:.4f} {x['exchange']:.4f} {x['interior']:.4f} {x['exterior']:.4f} {x['wait']:.4f}" for x in par.get("ranks", []))
    print(f"{n:10} {r['iterations']:5} {r['timings']['solve']:8.4f} {1e3*r['timings']['solve']/max(1,r['iterations']):8.3f} {r['true_residual_of_d_cpu']:9.2e}  {ranks}")
w1, w2, s1, s2 = J("weak1"), J("weak2"), J("strong1"), J("strong2")
if w1 and w2:
    a, b = w1['timings']['solve']/w1['iterations'], w2['timings']['solve']/w2['iterations']
    print(f"weak: time per iteration 2 GPUs / 1 GPU = {b/a:.3f} (target <= 1.11; README model 98.4% efficiency = 1.016)")
if s1 and s2:
    print(f"strong 48^3x96: 1 GPU {s1['timings']['solve']:.4f} s, 2 GPUs {s2['timings']['solve']:.4f} s, speed-up {s1['timings']['solve']/s2['timings']['solve']:.2f} (target >= 1.6)")
PY
elif [ "$mode" = many-gpus ]; then
    # nvidia-h200-x4 or -x8 (N = the visible GPUs): topology; `scale --gpus 1,2,..,N` split
    # along t and along z and t; the main job's weak points (32^3x64 per GPU, grids 1,1,1,n
    # and the zt grid), strong 64^3x128 on 2..N, 96^3x192 on 8; one process per GPU on N
    # GPUs (the launcher's variables by hand).
    nvidia-smi topo -m
    n=$(nvidia-smi -L | wc -l)
    counts=1; k=2; while [ $k -le "$n" ]; do counts="$counts,$k"; k=$((k * 2)); done
    fast=$FAST_CUDA
    fast_config
    for sp in t zt; do
        step "scale-$sp" timeout 300 "$q" scale "$big/32x32x32x64-fast.toml" --gpus "$counts" --split $sp --device cuda \
            --repeat 3 --out "$res/scale-$sp"
    done
    runs="w1:32x32x32x64:1,1,1,1"
    for g in ${counts//,/ }; do
        [ "$g" = 1 ] && continue
        runs="$runs w$g:32x32x32x$((64 * g)):1,1,1,$g s$g:64x64x64x128:1,1,1,$g"
        [ "$g" = 4 ] && runs="$runs w4zt:32x32x64x128:1,1,2,2"
        [ "$g" = 8 ] && runs="$runs w8zt:32x32x64x256:1,1,2,4 big8:96x96x96x192:1,1,2,4"
    done
    for run in $runs; do
        IFS=: read -r id d g <<<"$run"
        resize configs/32x32x32x64.toml "$d" >"$big/$d.toml"
        step "$id" timeout 240 "$q" -q "$big/$d.toml" $fast --grid $g --output "$big/$id"
        cp "$big/$id"/*.json "$res/$id.json"
        rm -rf "$big/$id"
    done
    launched "$n" configs/16x16x16x32.toml $fast
    cp "$big/launched/16x16x16x32.json" "$res/launched.json" 2>/dev/null
    python3 - "$res" <<'PY'
import json, sys, glob, os
res = sys.argv[1]
print(f"{'run':8} {'grid':>8} {'iter':>5} {'solve s':>8} {'ms/iter':>8} {'true res':>9}  rank exchange/wait (s)")
for f in sorted(glob.glob(res + "/*.json")):
    r = json.load(open(f)); n = os.path.basename(f)[:-5]
    if "iterations" not in r: continue
    par = r.get("parallel") or {}
    ranks = " ".join(f"{x['rank']}:{x['exchange']:.4f}/{x['wait']:.4f}" for x in par.get("ranks", []))
    print(f"{n:8} {','.join(map(str, par.get('grid', [1, 1, 1, 1]))):>8} {r['iterations']:5} {r['timings']['solve']:8.4f} "
          f"{1e3 * r['timings']['solve'] / max(1, r['iterations']):8.3f} {r['true_residual_of_d_cpu']:9.2e}  {ranks}")
PY
elif [ "$mode" = scale ]; then
    # The scaling model's inputs at 32^3x64 (floor, halo cost) and scale --gpus on the one
    # GPU (both ranks share it: the mechanism, not a speed-up).
    step floor-32 "$q" floor --dims 32,32,32,64 --repeat 50
    d=32x32x32x64
    sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' -e 's/^\[solver\]/[solver]\nmethod = "bicgstab"\npreconditioning = "even-odd"\nprecision = "single-double"/' \
        configs/$d.toml >"$big/$d-fast.toml"
    step scale-32 "$q" scale "$big/$d-fast.toml" --gpus 1,2 --device cuda --out "$res/scale-$d"
    fast="--preconditioning even-odd --precision single-double --reconstruct 12"
    for g in 1,1,1,1 1,1,1,2; do
        step "split-$d-${g//,/}" "$q" -q configs/$d.toml --device cuda --kernel 3.0 --method bicgstab $fast --grid $g --output "$big/sp-${g//,/}"
        cp "$big/sp-${g//,/}/$d.json" "$res/split-$d-${g//,/}.json"
    done
elif [ "$mode" = options-48 ]; then
    step floor-16 timeout 120 "$q" floor -q --dims 16,16,16,32 --repeat 200
    step floor-32 timeout 150 "$q" floor -q --dims 32,32,32,64 --repeat 30
    step validate-3.0 timeout 120 "$q" validate configs/16x16x16x32.toml --kernel 3.0
    step ablate-3.0 timeout 150 "$q" -q ablate configs/16x16x16x32.toml --kernels 3.0 --repeat 5 --out "$res/ablation-3.0"
    for o in "--precision single-double --reconstruct 12" "--precision single-double --reconstruct 8" \
        "--precision half-double --reconstruct 12" "--precision half-double --reconstruct 8"; do
        n=$(echo "x$o" | tr -c 'a-z0-9\n' '_')
        for i in 1 2; do
            step "seed$n-$i" "$q" configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd $o --output "$big/seed$n-$i" |
                grep -E "^(time|solver|result|residual) "
        done
        cp "$big/seed$n-2/16x16x16x32.json" "$res/seed$n.json" 2>/dev/null
    done
    big48
    for run in empty filled; do
        QCD_SOLVE_TUNE_CACHE="$big/tune-$d.tsv" RUST_LOG=info step "whole-$d-$run" timeout 150 /usr/bin/time -f "process wall %e s" \
            "$q" "$big/$d.toml" $fast --output "$big/whole-$run" >"$res/whole-$d-$run.txt" 2>&1
        grep -E "^time|GPU set-up|tuned on|process wall|^result" "$res/whole-$d-$run.txt"
        cp "$big/whole-$run/$d.json" "$res/whole-$d-$run.json" 2>/dev/null
    done
elif [ "$mode" = timelines ]; then
    # The host (cores, memory, huge pages, disk), the seed problem's and the 48^3x96 whole
    # process's time lines with their timed steps (empty tune cache, then filled).
    # TIMELINES_ABLATE=1 adds the 3.0 ablation (pinned and host-copy bandwidths), the floor and the
    # 3.0 validation.
    nproc; free -g | head -2; lscpu | grep -E "Model name|^CPU\(s\)|Thread|Socket|NUMA node\(s\)"
    echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"; df -h /tmp | tail -1
    seed_twice "step:|^time|^result"
    big48
    for run in empty filled; do
        QCD_SOLVE_TUNE_CACHE="$big/tune-$d.tsv" RUST_LOG=info step "whole-$d-$run" timeout 150 \
            /usr/bin/time -f "process wall %e s" "$q" "$big/$d.toml" $fast --output "$big/whole-$run" >"$res/whole-$d-$run.txt" 2>&1
        grep -E "step:|^time|GPU set-up|tuned on|process wall|^result" "$res/whole-$d-$run.txt" | sed -e 's/^.*INFO //'
        cp "$big/whole-$run/$d.json" "$res/whole-$d-$run.json" 2>/dev/null
        rm -rf "$big/whole-$run"
    done
    if [ -n "${TIMELINES_ABLATE:-}" ]; then
        step ablate-3.0 timeout 200 "$q" -q ablate configs/16x16x16x32.toml --kernels 3.0 --repeat 5 --out "$res/ablation-3.0"
        step floor-16 timeout 120 "$q" floor -q --dims 16,16,16,32 --repeat 200
        step validate-3.0 timeout 150 "$q" validate configs/16x16x16x32.toml --kernel 3.0
    fi
elif [ "$mode" = staging ]; then
    # The 48^3x96 whole process with the staging buffers pinned ahead (pool) and each of the
    # link upload workers' staging shapes of STAGING_SHAPES (MiB:buffers[:threads]; the
    # first run with an empty tune cache), the seed problem twice, then (STAGING_ABLATE=1) the
    # 3.0 ablation (the pinned bandwidth of the ratio, the seed's median), floor and
    # validation. The ablation times the 48^3x96 link upload with each staging shape too
    # (--upload-dims). A table of the main job's link uploads against the pinned bandwidth
    # last.
    lscpu | grep -E "Model name|^CPU\(s\)|L3"
    seed_twice "links uploaded|^time |^result|^solver"
    big48
    for st in ${STAGING_SHAPES:-3:2 3:2}; do
        # MiB and buffers of each worker of the link upload (`[tuning] lane_mib`, `lane_buffers`).
        IFS=: read -r mib nbuf threads <<<"$st"
        n="whole-$d-workers-${mib}x$nbuf${threads:+-t$threads}"; [ -e "$res/$n.txt" ] && n="$n-again"
        QCD_SOLVE_TUNE_CACHE="$big/tune-$d.tsv" RUST_LOG=info \
            step "$n" timeout 150 /usr/bin/time -f "process wall %e s" "$q" "$big/$d.toml" $fast ${threads:+--threads $threads} \
            --tuning lane_mib=$mib --tuning lane_buffers=$nbuf --output "$big/whole" >"$res/$n.txt" 2>&1
        grep -E "links uploaded|^time |process wall|^result" "$res/$n.txt" | sed -e 's/^.*INFO //'
        cp "$big/whole/$d.json" "$res/$n.json" 2>/dev/null
        rm -rf "$big/whole"
    done
    if [ -n "${STAGING_ABLATE:-}" ]; then
        step ablate-3.0 timeout 200 "$q" -q ablate configs/16x16x16x32.toml --kernels 3.0 --repeat 5 \
            --upload-dims 48,48,48,96 --out "$res/ablation-3.0"
    fi
    if [ "${STAGING_ABLATE:-}" = full ]; then
        step floor-16 timeout 120 "$q" floor -q --dims 16,16,16,32 --repeat 200
        step validate-3.0 timeout 150 "$q" validate configs/16x16x16x32.toml --kernel 3.0
    fi
    python3 - "$res" <<'PY'
import glob, os, re, sys
res = sys.argv[1]
log = open(res + "/log.txt").read() if os.path.exists(res + "/log.txt") else ""
m = re.search(r"upload pinned ([0-9.]+) GB/s", log)
pinned = float(m.group(1)) if m else float("nan")
print(f"link upload against pinned {pinned} GB/s (ablate, this call)")
print(f"{'run':30} {'GB':>5} {'wall ms':>8} {'GB/s':>6} {'% pinned':>8} {'pin':>6} {'copy':>6} {'wait':>6} {'unpin':>6} {'kernel':>6} {'total s':>8}")
for f in sorted(glob.glob(res + "/whole-*.txt"), key=os.path.getmtime):
    t = open(f).read()
    u = re.search(r"links uploaded.*", t)
    if not u:
        print(f"{os.path.basename(f)[:-4]:30} no link upload line"); continue
    kv = dict(re.findall(r"(\w+)=([0-9.e+-]+)", u.group(0)))
    g = lambda k: float(kv.get(k, "nan"))
    tot = re.search(r"^time\s+total ([0-9.]+)", t, re.M)
    gbs = g("bytes") / g("wall_ms") / 1e6
    print(f"{os.path.basename(f)[:-4]:30} {g('bytes')/1e9:5.2f} {g('wall_ms'):8.1f} {gbs:6.1f} {100*gbs/pinned:8.1f} "
          f"{g('pin_ms'):6.1f} {g('copy_ms'):6.1f} {g('wait_ms'):6.1f} {g('unpin_ms'):6.1f} {g('kernel_ms'):6.1f} {tot.group(1) if tot else '?':>8}")
PY
elif [ "$mode" = memory ]; then
    # What 64^3x128 (33554432 sites) needs with every option (about 1345
    # B/site, 45 GB: one 80 GB H100), the estimate printed before the solve (RUST_LOG=info)
    # beside the books after it. Solutions and reports stay in $big; the JSON reports and
    # the summaries come back.
    fast="--preconditioning even-odd --precision single-double --reconstruct 12"
    for d in 48x48x48x96 64x64x64x128; do
        # No solution file (6.4 GB at 64^3x128: minutes of disk, nothing measured).
        resize configs/32x32x32x64.toml "$d" | sed -e '/^solution = /d' >"$big/$d.toml"
        for m in cr bicgstab; do
            RUST_LOG=info step "mem-$d-$m" timeout 580 "$q" "$big/$d.toml" --device cuda --kernel 3.0 --method $m $fast \
                --output "$big/mem-$d-$m" >"$res/mem-$d-$m.txt" 2>&1
            cat "$res/mem-$d-$m.txt" | grep -E "device memory|at the peak|^time|^result|^residual|needs"
            cp "$big/mem-$d-$m/"*.json "$res/mem-$d-$m.json" 2>/dev/null
        done
    done
    # Without the options the full double plan of 3.0 needs 1729 B/site: 64^3x128 still fits
    # an 80 GB H100 (58 GB); kernel 2.0's seed plan (2688 B/site, 90 GB) is refused (exit 6)
    # before any allocation, naming both numbers.
    step mem-refusal-2.0 timeout 120 "$q" "$big/64x64x64x128.toml" --device cuda --kernel 2.0 --output "$big/mem-refusal"
    python3 - "$res" <<'PY'
import json, sys, glob, os
print(f"{'run':32} {'iter':>5} {'solve s':>8} {'setup s':>8} {'est B/site':>10} {'held B/site':>11} {'held GB':>8} stop")
for f in sorted(glob.glob(sys.argv[1] + "/mem-*.json")):
    r = json.load(open(f)); m = (r.get("gpu") or {}).get("memory") or {}
    print(f"{os.path.basename(f)[:-5]:32} {r['iterations']:5} {r['timings']['solve']:8.3f} {r['timings']['setup']:8.2f} "
          f"{m.get('estimate_bytes_per_site', float('nan')):10.1f} {m.get('peak_bytes_per_site', float('nan')):11.1f} "
          f"{m.get('peak_bytes', 0) / 1e9:8.2f} {r['stop_reason']}")
PY
elif [ "$mode" = fast-path ]; then
    # The fast path: floors, validation of every option, options' time to solution.
    step floor "$q" floor --dims 16,16,16,32 --repeat 300
    step validate-fast-16 "$q" validate configs/16x16x16x32.toml --kernel 1.6.1,3.0
    step validate-fast-6 "$q" validate configs/6x6x6x10.toml --kernel 3.0
    step ablate-fast "$q" -q ablate configs/16x16x16x32.toml --kernels 1.5,1.6,1.6.1,2.0,3.0 --repeat 5 --out "$res/ablation-fast-16x16x16x32"
    for o in "" "--preconditioning even-odd" "--precision single-double" "--preconditioning even-odd --precision single-double --reconstruct 12"; do
        n=$(echo "x$o" | tr -c 'a-z0-9\n' '_')
        step "solve-3.0$n" "$q" -q configs/16x16x16x32.toml --device cuda --kernel 3.0 $o --output "$big/s$n"
        cp "$big/s$n/16x16x16x32.json" "$res/solve-3.0$n.json" 2>/dev/null
    done
    step floor-32 "$q" floor --dims 32,32,32,64 --repeat 50
elif [ "$mode" = methods ]; then
    step validate-all-16 "$q" validate configs/16x16x16x32.toml --kernel all
    step validate-6 "$q" validate configs/6x6x6x10.toml --kernel 3.0
    step ablate-16 "$q" -q ablate configs/16x16x16x32.toml --kernels 1.6.1,3.0 --repeat 5 --out "$res/ablation-16x16x16x32"
    step floor "$q" floor --dims 16,16,16,32 --repeat 200
    step floor-halo-32 "$q" floor --dims 32,32,32,64 --repeat 200 --halo
    # 64^3x128 with a seed kernel must be refused before any tuning (exit 6). By the exact
    # per-plan estimate 1.6.1's seed plan (2304 B/site, 77.3e9 bytes) fits an 80 GB H100;
    # 2.0's (2688 B/site, 90.2e9) does not.
    sed -e 's/^LX = .*/LX = 64/; s/^LY = .*/LY = 64/; s/^LZ = .*/LZ = 64/; s/^LT = .*/LT = 128/' \
        configs/32x32x32x64.toml >"$big/64x64x64x128.toml"
    step memory-refusal-64 timeout 90 "$q" "$big/64x64x64x128.toml" --device cuda --kernel 2.0 --output "$big/m64"
    fast="--preconditioning even-odd --precision single-double --reconstruct 12"
    (cd "$big" && for m in cr bicgstab gcr cgne; do
        for o in "" "$fast"; do
            n=$m$(echo "x$o" | tr -c 'a-z0-9\n' '_' | cut -c1-12)
            step "seed-$n" "$q" -q "$OLDPWD/configs/16x16x16x32.toml" --device cuda --kernel 3.0 --method $m $o --output "$big/seed-$n"
            cp "$big/seed-$n/16x16x16x32.json" "$res/seed-$n.json"
            step "b6-$n" "$q" -q "$OLDPWD/configs/heatbath-b6-16x16x16x32.toml" --device cuda --kernel 3.0 --kappa 0.155 --method $m $o --output "$big/b6-$n"
            cp "$big/b6-$n/heatbath-b6-16x16x16x32.json" "$res/b6-$n.json"
        done
    done)
    python3 - "$res" <<'PY'
import json, sys, glob, os, re
print(f"{'run':34} {'solver':52} {'iter':>6} {'apps':>6} {'solve s':>8} {'|b-Dx|/|b|':>10} stop")
for f in sorted(glob.glob(sys.argv[1] + "/seed-*.json") + glob.glob(sys.argv[1] + "/b6-*.json")):
    r = json.load(open(f))
    print(f"{os.path.basename(f)[:-5]:34} {r['solver'][:52]:52} {r['iterations']:6} {r['operator_applications']:6} {r['timings']['solve']:8.4f} {r['true_residual_of_d_cpu']:10.2e} {r['stop_reason']}")
PY
elif [ "$mode" = methods-on-d ]; then
    # BiCGStab and GCR on D itself (the shipped configs name g5D), and the live tuner's
    # cost against the set-up at 32^3x64 and 48^3x96 with an empty tune cache.
    fast="--preconditioning even-odd --precision single-double --reconstruct 12"
    for c in 16x16x16x32 heatbath-b6-16x16x16x32; do
        sed -e 's/^operator = .*//' "configs/$c.toml" >"$big/$c-d.toml"
        sed -i "s#^path = \"#path = \"$PWD/#" "$big/$c-d.toml"
    done
    (cd "$big" && for m in bicgstab gcr; do
        for o in "" "$fast"; do
            n=$m$(echo "x$o" | tr -c 'a-z0-9\n' '_' | cut -c1-12)
            step "seedD-$n" "$q" -q "$big/16x16x16x32-d.toml" --device cuda --kernel 3.0 --method $m $o --output "$big/seedD-$n"
            cp "$big/seedD-$n/16x16x16x32.json" "$res/seedD-$n.json"
            step "b6D-$n" "$q" -q "$big/heatbath-b6-16x16x16x32-d.toml" --device cuda --kernel 3.0 --kappa 0.155 --max-iter 8000 --method $m $o --output "$big/b6D-$n"
            cp "$big/b6D-$n/heatbath-b6-16x16x16x32.json" "$res/b6D-$n.json"
        done
    done)
    for d in 32x32x32x64 48x48x48x96; do
        resize configs/16x16x16x32.toml "$d" >"$big/$d.toml"
        rm -f "$res/tune-$d.tsv"
        QCD_SOLVE_TUNE_CACHE=$res/tune-$d.tsv RUST_LOG=info step "tune-$d" "$q" "$big/$d.toml" --device cuda --kernel 3.0 $fast --max-iter 30 --output "$big/t-$d"
        cp "$big/t-$d/$d.json" "$res/tune-$d.json"
    done
    python3 - "$res" <<'PY'
import json, sys, glob, os, re
for f in sorted(glob.glob(sys.argv[1] + "/seedD-*.json") + glob.glob(sys.argv[1] + "/b6D-*.json")):
    r = json.load(open(f))
    print(f"{os.path.basename(f)[:-5]:30} op {r['operator']:4} {r['solver'][:48]:48} {r['iterations']:6} {r['operator_applications']:6} {r['timings']['solve']:8.4f} {r['true_residual_of_d_cpu']:10.2e} {r['stop_reason']}")
for f in sorted(glob.glob(sys.argv[1] + "/tune-*.json")):
    r = json.load(open(f)); g = r["gpu"]
    setup = g["compile_ms"] + g["alloc_ms"] + g["upload_ms"] + g["layout_ms"]
    print(f"{os.path.basename(f)[:-5]:30} tune {g['tune_ms']:.1f} ms; set-up (compile+alloc+upload+layout) {setup:.1f} ms; ratio {g['tune_ms'] / setup:.2f}; upload {g['upload_ms']:.1f} ms")
PY
elif [ "$mode" = tune-cache ]; then
    # The tune key carries the solve's layout: the options' ablation and the fast main job
    # (first call sweeps on the even-odd single operator, second reads the cache).
    step ablate-16 "$q" -q ablate configs/16x16x16x32.toml --kernels 1.6.1,3.0 --repeat 5 --out "$res/ablation-16x16x16x32"
    for i in 1 2; do
        RUST_LOG=info step "fast-$i" "$q" configs/16x16x16x32.toml --device cuda --kernel 3.0 \
            --preconditioning even-odd --precision single-double --reconstruct 12 --output "$big/fast-$i"
    done
    cat "$res/tune.tsv"
elif [ "$mode" = quick ]; then
    step ablate-16 "$q" -q ablate configs/16x16x16x32.toml --repeat 5 --out "$res/ablation-16x16x16x32"
    step ablate-reuse "$q" -q ablate configs/16x16x16x32.toml --kernels 1.0,1.6.1 --repeat 1 --out "$res/ablation-reuse"
elif [ "$mode" = regression ]; then
    # The current binary ("new") against the baseline ("base") on the same machine in one
    # call: validate (every column a check: identical rows expected), floor (timings,
    # interleaved so that drift hits both), the main job (iterations, true residual).
    # Both share the tune cache: base tunes a key first and new reads it, so both launch
    # with the same geometry (the same sums) unless the change altered the key's form.
    # Each comparison is printed as soon as
    # its runs are done; validate/compare_runs.py prints the table in the summary too.
    qb="$bin/base/qcd-solve"
    if [ ! -x "$qb" ]; then
        echo "no baseline binary $qb: stage it with BASE=<built checkout> bash validate/device.sh"
        echo "regression-base rc=2 0 ms" >>"$res/status.txt"
    else
        echo "new:  $("$q" --version) $(cat "$bin/commit" 2>/dev/null)"
        echo "base: $("$qb" --version) $(cat "$bin/base/commit" 2>/dev/null)"
        cfgs="16x16x16x32 6x6x6x10"
        for c in $cfgs; do
            for b in base new; do
                exe=$q; [ $b = base ] && exe=$qb
                step "validate-$c-$b" timeout 200 "$exe" validate "configs/$c.toml" --kernel all >"$res/validate-$c-$b.txt" 2>&1
                tail -n +2 "$res/validate-$c-$b.txt"
            done
        done
        python3 validate/compare_runs.py validate "$res" $cfgs
        fdims=""
        for fd in 16x16x16x32:200 32x32x32x64:100; do
            d=${fd%%:*}; rep=${fd#*:}; fdims="$fdims $d"
            for i in $(seq 1 "${FLOOR_ROUNDS:-2}"); do
                for b in base new; do
                    exe=$q; [ $b = base ] && exe=$qb
                    step "floor-$d-$b-$i" timeout 180 "$exe" -q floor --dims "${d//x/,}" --repeat "$rep" >"$res/floor-$d-$b-$i.txt" 2>&1
                done
            done
        done
        python3 validate/compare_runs.py floor "$res" $fdims
        # The main job: label, then its options (the report lands in --output, named by the
        # config's [output] report: 16x16x16x32.json).
        mains=("fast-path-3.0:$FAST_CUDA" "cr-1.6.1:--device cuda --kernel 1.6.1"
            "bicgstab-3.0:--method bicgstab --kernel 3.0 --device cuda")
        for m in "${mains[@]}"; do
            label=${m%%:*}; opts=${m#*:}
            for b in base new; do
                exe=$q; [ $b = base ] && exe=$qb
                rm -rf "$big/main-$label-$b"
                step "main-$label-$b" timeout 150 "$exe" -q configs/16x16x16x32.toml $opts --output "$big/main-$label-$b"
                cp "$big/main-$label-$b/16x16x16x32.json" "$res/main-$label-$b.json" 2>/dev/null
            done
        done
        python3 validate/compare_runs.py main "$res" "${mains[@]%%:*}"
    fi
else
for c in 16x16x16x32 6x6x6x10 12x12x12x24; do
    step "validate-$c" "$q" validate "configs/$c.toml" --kernel all
done
for v in 1.0 1.1 1.2 1.3 1.4 1.5 1.6 1.6.1 2.0; do
    step "solve-$v" "$q" -q configs/16x16x16x32.toml --device cuda --kernel "$v" --output "$big/solve-$v"
    cp "$big/solve-$v/16x16x16x32.json" "$res/solve-$v.json" 2>/dev/null
done
step ablate-16 "$q" -q ablate configs/16x16x16x32.toml --repeat 5 --out "$res/ablation-16x16x16x32"
# The tuning sweep chose multiple 8 for every version at 32^3x64 too (validate/RESULTS.md):
# this ablation skips the sweep.
step ablate-32 "$q" -q ablate configs/32x32x32x64.toml --repeat 3 --no-tune --multiple 8 --out "$res/ablation-32x32x32x64"
step ablate-reuse "$q" -q ablate configs/16x16x16x32.toml --kernels 1.2,1.6.1 --repeat 1 --out "$res/ablation-reuse"
step generate-16x4 "$q" generate --beta 6.0 --dims 16,16,16,16 --therm 200 --sweeps 1000 --every 500 \
    --device cuda --out "$big/b6.0_16x16x16x16"
cp "$big"/b6.0_16x16x16x16.history.json "$big"/b6.0_16x16x16x16.plaquette.* "$res/" 2>/dev/null
step generate-16x3x32 "$q" generate --beta 6.0 --dims 16,16,16,32 --therm 20 --sweeps 200 --every 1000 \
    --device cuda --out "$big/b6.0_16x16x16x32"
(cd "$big" && for k in 0.120 0.130 0.140 0.145 0.150 0.153 0.155; do
    step "kappa-$k" "$q" -q "$OLDPWD/configs/heatbath-b6-16x16x16x32.toml" --device cuda --kappa "$k" --output "$big/kappa-$k"
    cp "$big/kappa-$k/heatbath-b6-16x16x16x32.json" "$res/kappa-$k.json"
done)
step bench-cpu "$q" bench --dims 16,16,16,32 --repeat 20
step bench-cpu-32 "$q" bench --dims 32,32,32,32 --repeat 10
step scale-cpu "$q" -q scale configs/16x16x16x32.toml --threads 1,2,4,8,16 --out "$res/scale"
fi
} 2>&1 | tee "$res/log.txt" "$out/log.txt"  # $out's copy grows as it runs: kept if the call times out

cp "$res/log.txt" "$out/log.txt"
tar -C /tmp -czf "$out/results.tar.gz" qcd-out
echo; echo "===== summary"
cat "$res/status.txt"
if [ "$mode" = regression ]; then
    python3 validate/compare_runs.py summary "$res" | tee -a "$out/log.txt"
    exit 0
fi
grep -E "^ablation on|^(1\.|2\.|3\.)[0-9.]* |^(dslash|schur|CR iteration|cr iteration)|^time to solution|^(seed|b6)-|^run  " "$res/log.txt" | tail -n 60
