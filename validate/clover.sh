#!/usr/bin/env bash
# Runs ON the device machine (repository root, binaries in .device/ from validate/device.sh):
# the clover term and twisted mass on the GPU (kernel 3.0's CLOVER builds), a table last.
#   1. nvidia-smi; the GPU test targets (default: gpu-clover, gpu-fast, gpu-half,
#      gpu-solvers; TESTS= to pick, SKIP_TESTS=1 to skip)
#   2. floor on 16x16x16x32 and 32x32x32x64: the Wilson rows, then the clover and
#      twisted-clover rows (their floors with the clover arrays' reads)
#   3. the main job on quenched beta 6.0 fields (generated on the GPU on first use) at
#      16x16x16x32 and 32x32x32x64: Wilson (kappa 0.153) and Wilson-clover (c_sw 1.77,
#      kappa 0.133) with the fused CR and the fused BiCGStab on the fast path (even-odd,
#      single-double, 12-real links), twisted clover (mu 0.01) with BiCGStab, and at
#      16x16x16x32 the twisted-clover CGNE, the clover CR in double and half-double, and the
#      clover CR on the CPU (its iterations and true residual beside the GPU's), and the
#      clover CR and BiCGStab split along t and along x and t (ranks as threads; on one GPU,
#      sub-lattices exchanging faces by device copies)
#   4. validate (kernel 3.0 against the CPU) with the clover term on 6x6x6x10 and
#      16x16x16x32 and with the twisted clover on 6x6x6x10 (VALIDATE=0 skips it)
#   5. ablate (kernel 3.0's options and methods) with the clover term on 16x16x16x32
#      (ABLATE=0 skips it)
#   6. TWO=1 (on nvidia-h100-x2 or nvidia-h200-x2): the 16x16x16x32 clover CR and BiCGStab
#      and the twisted-clover BiCGStab on one GPU and split over two (NCCL; t, and z for the
#      twisted one), the twisted clover with one process per GPU, and scale --gpus 1,2
#      with the clover term.
#   7. PROP=1: the propagator of the 16x16x16x32 clover problem in one process against 12
#      main jobs of its columns (wall time of each). With SKIP_TESTS=1 FLOORS=" " MAIN_DIMS=" " VALIDATE=0 only this runs.
# Outputs in /tmp/qcd-out, packed into $OUT/results.tar.gz, the log in $OUT/log.txt.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/step.sh" # $bin $q $res $big $out, step NAME COMMAND...


resize() { # config, dims (e.g. 32x32x32x64): the config with those extents and its report name
    local l=(${2//x/ })
    sed -e "s/^LX = .*/LX = ${l[0]}/; s/^LY = .*/LY = ${l[1]}/; s/^LZ = .*/LZ = ${l[2]}/; s/^LT = .*/LT = ${l[3]}/" \
        -e "s|^report = .*|report = \"main.json\"|" "$1"
}

FAST="--kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"
CLOVER="--csw 1.77 --kappa 0.133"

main() { # label, config, options...: the main job, its report as $res/main-<label>.json
    local label=$1 cfg=$2; shift 2
    step "main-$label" timeout 300 "$q" -q "$cfg" "$@" --output "$big/$label" >"$res/main-$label.txt" 2>&1
    cp "$big/$label/main.json" "$res/main-$label.json" 2>/dev/null
    tail -n 4 "$res/main-$label.txt"
}

{
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
echo "binary: $("$q" --version) $(cat "$bin/commit" 2>/dev/null)"
if [ -z "${SKIP_TESTS:-}" ]; then
    for t in ${TESTS:-gpu-clover-tests gpu-fast-tests gpu-half-tests gpu-solvers-tests}; do
        # gpu-clover-tests prints its measured differences (--nocapture).
        extra=""; [ "$t" = gpu-clover-tests ] && extra=--nocapture
        step "$t" timeout 400 "$bin/$t" --test-threads=1 $extra >"$res/$t.txt" 2>&1
        grep -E "^test result|FAILED|panicked" "$res/$t.txt" | head -8
    done
fi
for fd in ${FLOORS:-16x16x16x32:200 32x32x32x64:100}; do
    d=${fd%%:*}; rep=${fd#*:}
    step "floor-$d" timeout 300 "$q" -q floor --dims "${d//x/,}" --repeat "$rep" >"$res/floor-$d.txt" 2>&1
    cat "$res/floor-$d.txt"
done
for d in ${MAIN_DIMS:-16x16x16x32 32x32x32x64}; do
    resize configs/heatbath-b6-16x16x16x32.toml "$d" >"$big/b6-$d.toml"
    cfg=$big/b6-$d.toml
    main "$d-wilson-cr" "$cfg" --device cuda $FAST
    main "$d-clover-cr" "$cfg" --device cuda $FAST $CLOVER
    main "$d-wilson-bicgstab" "$cfg" --device cuda $FAST --method bicgstab
    main "$d-clover-bicgstab" "$cfg" --device cuda $FAST $CLOVER --method bicgstab
    main "$d-twisted-bicgstab" "$cfg" --device cuda $FAST $CLOVER --mu 0.01 --method bicgstab
    if [ "$d" = 16x16x16x32 ]; then
        main "$d-twisted-cgne" "$cfg" --device cuda $FAST $CLOVER --mu 0.01 --method cgne
        main "$d-clover-cr-double" "$cfg" --device cuda --kernel 3.0 --preconditioning even-odd $CLOVER
        main "$d-clover-cr-half" "$cfg" --device cuda --kernel 3.0 --preconditioning even-odd \
            --precision half-double $CLOVER
        main "$d-clover-cr-cpu" "$cfg" --device cpu --preconditioning even-odd --precision single-double $CLOVER
        main "$d-clover-cr-split-t" "$cfg" --device cuda $FAST $CLOVER --grid 1,1,1,2
        # Four ranks on GPU 0 (a machine of two GPUs would refuse four NCCL ranks).
        CUDA_VISIBLE_DEVICES=0 main "$d-clover-bicgstab-split-xt" "$cfg" --device cuda $FAST $CLOVER \
            --method bicgstab --grid 2,1,1,2
    fi
done
if [ "${VALIDATE:-1}" = 1 ]; then
    for v in ${VALIDATE_CASES:-6x6x6x10:1.77:0 16x16x16x32:1.77:0 6x6x6x10:1.77:0.05}; do
        IFS=: read -r d csw mu <<<"$v"
        # With a twist the config's method must not be CR (the plan refuses it at load).
        method=cr; [ "$mu" != 0 ] && method=bicgstab
        sed -e "s/^kappa = \(.*\)/kappa = \1\ncsw = $csw\nmu = $mu/" -e "s/^\[solver\]/[solver]\nmethod = \"$method\"/" \
            "configs/$d.toml" >"$big/validate-$d-$mu.toml"
        step "validate-$d-clover-$mu" timeout 300 "$q" validate "$big/validate-$d-$mu.toml" --kernel all \
            >"$res/validate-$d-clover-$mu.txt" 2>&1
        cat "$res/validate-$d-clover-$mu.txt"
    done
fi
if [ "${ABLATE:-1}" = 1 ]; then
    sed -e "s/^kappa = \(.*\)/kappa = \1\ncsw = 1.77/" configs/16x16x16x32.toml >"$big/ablate-clover.toml"
    step ablate-clover timeout 400 "$q" -q ablate "$big/ablate-clover.toml" --repeat 1 --out "$res/ablation-clover"
fi
if [ -n "${TWO:-}" ]; then
    export NCCL_NVLS_ENABLE=0
    resize configs/heatbath-b6-16x16x16x32.toml 16x16x16x32 >"$big/b6-16x16x16x32.toml"
    cfg=$big/b6-16x16x16x32.toml
    main "two-clover-cr-one" "$cfg" --device cuda $FAST $CLOVER
    main "two-clover-cr-split-t" "$cfg" --device cuda $FAST $CLOVER --grid 1,1,1,2
    main "two-clover-bicgstab-one" "$cfg" --device cuda $FAST $CLOVER --method bicgstab
    main "two-clover-bicgstab-split-t" "$cfg" --device cuda $FAST $CLOVER --method bicgstab --grid 1,1,1,2
    main "two-twisted-bicgstab-one" "$cfg" --device cuda $FAST $CLOVER --mu 0.01 --method bicgstab
    main "two-twisted-bicgstab-split-z" "$cfg" --device cuda $FAST $CLOVER --mu 0.01 --method bicgstab --grid 1,1,2,1
    # One process per GPU, started by hand as a launcher would: each rank builds its
    # term from its links and its neighbour's ring.
    for r in 0 1; do
        RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r QCD_SOLVE_MASTER=127.0.0.1:29518 \
            timeout 300 "$q" -q "$cfg" --device cuda $FAST $CLOVER --mu 0.01 --method bicgstab \
            --grid 1,1,1,2 --output "$big/launched" >"$res/launched-$r.txt" 2>&1 &
    done
    wait
    echo "launched rank 0: $(tail -n 3 "$res/launched-0.txt")"
    cp "$big/launched/main.json" "$res/main-two-twisted-bicgstab-launched-t.json" 2>/dev/null
    # scale over one and two GPUs with the clover term (the fast options in the config).
    sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' \
        -e 's/^tolerance = .*/&\npreconditioning = "even-odd"\nprecision = "single-double"/' \
        -e 's/^kappa = .*/kappa = 0.133\ncsw = 1.77/' "$cfg" >"$big/b6-clover.toml"
    step "scale-clover" timeout 300 "$q" -q scale "$big/b6-clover.toml" --gpus 1,2 --device cuda \
        --out "$big/scale-clover"
    cp "$big/scale-clover/scale-ranks.csv" "$res/scale-clover.csv" 2>/dev/null
    cat "$res/scale-clover.csv"
    grep -h "decomposition\|comms" "$res"/main-two-*.txt | sort | uniq -c | head -5
fi
if [ -n "${PROP:-}" ]; then
    # The propagator of the 16x16x16x32 beta 6.0 field with the clover term (fast options in
    # the config, point source at the origin) in one process, against the 12 main jobs of
    # its columns, one process each (the way it was done before the command).
    resize configs/heatbath-b6-16x16x16x32.toml 16x16x16x32 >"$big/b6-16x16x16x32.toml"
    sed -e 's/^kernel = .*/kernel = "3.0"\nreconstruct = 12/' \
        -e 's/^tolerance = .*/&\npreconditioning = "even-odd"\nprecision = "single-double"\nmethod = "bicgstab"/' \
        -e 's/^kappa = .*/kappa = 0.133\ncsw = 1.77/' "$big/b6-16x16x16x32.toml" >"$big/prop.toml"
    "$q" -q "$big/prop.toml" --device cuda --output "$big/prop-warm" >/dev/null 2>&1  # the field and the tune cache
    t0=$(date +%s%N)
    step propagator timeout 300 "$q" -q propagator "$big/prop.toml" --device cuda --out "$big/prop" \
        >"$res/propagator.txt" 2>&1
    t1=$(date +%s%N)
    for s in 0 1 2 3; do for c in 0 1 2; do
        sed -e "s/^site = .*/&\nspin = $s\ncolour = $c/" "$big/prop.toml" >"$big/prop-$s$c.toml"
        "$q" -q "$big/prop-$s$c.toml" --device cuda --output "$big/prop-$s$c" >/dev/null 2>&1 || echo "column $s $c failed"
    done; done
    t2=$(date +%s%N)
    cp "$big/prop/prop.propagator.json" "$big/prop/prop.correlators.csv" "$res/" 2>/dev/null
    echo "propagator: one process $(( (t1 - t0) / 1000000 )) ms, 12 processes $(( (t2 - t1) / 1000000 )) ms"
    head -3 "$res/propagator.txt"
fi
} 2>&1 | tee "$res/log.txt" "$out/log.txt"

tar -C /tmp -czf "$out/results.tar.gz" qcd-out
echo; echo "===== summary"
cat "$res/status.txt"
python3 - "$res" <<'EOF'
import glob, json, os, re, sys
res = sys.argv[1]
print("\nfloor rows with the clover term (ratio to the DRAM floor, bound):")
for f in sorted(glob.glob(f"{res}/floor-*.txt")):
    d = os.path.basename(f)[6:-4]
    for line in open(f):
        if "clover" in line:
            print(f"  {d:12} {line.rstrip()}")
print("\nmain job (iterations, true residual of D x = b on the CPU, solve s, s per iteration):")
rows = {}
for f in sorted(glob.glob(f"{res}/main-*.json")):
    label = os.path.basename(f)[5:-5]
    try:
        j = json.load(open(f))
    except ValueError:
        continue
    it, tr = j.get("iterations"), j.get("true_residual_of_d_cpu")
    solve = (j.get("timings") or {}).get("solve")
    per = solve / it if solve and it else float("nan")
    rows[label] = per
    grid = (j.get("parallel") or {}).get("grid")
    print(f"  {label:32} {it!s:>6} {tr!s:>24} {solve!s:>22} {1e3 * per:9.4f} ms/it  {j.get('stop_reason')} {grid or ''}")
print("\nGPU against the CPU backend (gpu-clover-tests: largest relative difference by precision):")
worst = {}
try:
    for line in open(f"{res}/gpu-clover-tests.txt"):
        m = re.match(r".* (Double|Single|Half) (\S+) adjoint \w+: ([\d.e+-]+)$", line.strip())
        if m:
            worst[m[1]] = max(worst.get(m[1], 0.0), float(m[3]))
except OSError:
    pass
for k, v in worst.items():
    print(f"  {k:8} {v:.2e}")
print("\nclover / Wilson time per iteration (same field, same options):")
for label, per in rows.items():
    if "-clover-" in label and not label.endswith(("-cpu", "-double", "-half", "-t", "-xt")):
        w = rows.get(label.replace("-clover-", "-wilson-"))
        if w:
            print(f"  {label:32} {per / w:.3f}")
EOF
