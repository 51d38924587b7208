#!/usr/bin/env bash
# Runs ON the device machine (repository root, binaries in .device/ from validate/device.sh
# with TARGETS="gpu_batch gpu_clover gpu_gauge_fix"): the propagator pipeline and the
# batched operator on the GPU, a table last.
#   1. nvidia-smi; gpu-batch-tests (the batched operator against one application a column,
#      on the GPU and against the CPU); gpu-clover-tests' propagator test (GPU against CPU);
#      gpu-gauge-fix-tests (Landau and Coulomb gauge fixing, GPU against CPU)
#   2. floor --batch-only on 16x16x16x32 and 32x32x32x64 (FLOORS; FLOOR_ARGS adds options,
#      e.g. "--wilson --repeat 100"): the batched dslash and Schur operator over
#      1, 4 and 12 right-hand sides against one application at a time
#   3. the batched solves (BATCH_DIMS, default 32x32x32x64): the 12 columns of a point
#      source with the clover term (the field of 4.), BiCGStab even-odd single-double,
#      with [solver] batch = 1 (iteration "auto": the fused BiCGStab), batch = 1 with
#      iteration "seed" (the host loop the batch runs per column) and batch = 12
#      (BATCH_FORMS: "BATCH ITERATION" each)
#   4. the propagator of a quenched beta 6.0 field (generated on the GPU on first use) with
#      the clover term (c_sw 1.77, kappa 0.133), fast options, a Wuppertal-smeared point
#      source over APE links, all 16 x 16 mesons and the proton at two momenta, point and
#      smeared sinks, at 16x16x16x32 and 32x32x32x64: wall time, solve time, the pion
# Outputs in /tmp/qcd-out, packed into $OUT/results.tar.gz, the log in $OUT/log.txt.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/step.sh" # $bin $q $res $big $out, step NAME COMMAND...


batch_config() { # dims batch iteration: the batched-solve comparison's config on stdout
    prop_config "$1" | sed -e '/^\[source.smearing/,/^$/d' -e '/^\[measure\]/,$d' \
        -e "s/^max_iterations = 5000/max_iterations = 5000\nbatch = $2\niteration = \"$3\"/"
}

prop_config() { # dims (e.g. 16x16x16x32): the propagator config on stdout
    local l=(${1//x/ })
    cat <<TOML
[lattice]
LX = ${l[0]}
LY = ${l[1]}
LZ = ${l[2]}
LT = ${l[3]}

$(heatbath_gauge)

[dirac]
kappa = 0.133
csw = 1.77

[source]
type = "point"
spin = "all"
colour = "all"

[source.smearing]
type = "wuppertal"
alpha = 0.25
iterations = 20

[source.smearing.links]
type = "ape"
alpha = 0.5
iterations = 5

[solver]
method = "bicgstab"
tolerance = 1e-10
max_iterations = 5000
preconditioning = "even-odd"
precision = "single-double"

[backend]
kernel = "3.0"
reconstruct = 12

[measure]
baryons = true
momenta = [[0, 0, 0], [1, 0, 0]]
sinks = ["point", "smeared"]
TOML
}

{
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
echo "binary: $("$q" --version) $(cat "$bin/commit" 2>/dev/null)"
if [ -z "${SKIP_TESTS:-}" ]; then
    step gpu-batch-tests timeout 300 "$bin/gpu-batch-tests" --test-threads=1 --nocapture
    step gpu-clover-propagator timeout 300 "$bin/gpu-clover-tests" --test-threads=1 --nocapture propagator
    step gpu-gauge-fix-tests timeout 300 "$bin/gpu-gauge-fix-tests" --test-threads=1 --nocapture
fi
for dims in ${FLOORS-16,16,16,32 32,32,32,64}; do
    step "floor-batch-$dims" timeout 400 "$q" floor --dims "$dims" --batch-only ${FLOOR_ARGS:-} \
        >"$res/floor-batch-$dims.txt" 2>&1
    cat "$res/floor-batch-$dims.txt"
done
for dims in ${BATCH_DIMS-32x32x32x64}; do
    for form in ${BATCH_FORMS-"12 auto" "1 auto" "1 seed"}; do
        read -r b it <<<"$form"
        name=batch-$dims-$b-$it
        batch_config "$dims" "$b" "$it" >"$big/$name.toml"
        step "$name" timeout 500 "$q" propagator "$big/$name.toml" --device cuda --out "$big/$name" \
            >"$res/$name.txt" 2>&1
        head -3 "$res/$name.txt"
        cp "$big/$name/$name.propagator.json" "$res/prop-$name.propagator.json" 2>/dev/null
    done
done
for dims in ${PROP_DIMS-16x16x16x32 32x32x32x64}; do
    prop_config "$dims" >"$big/prop-$dims.toml"
    t0=$(date +%s%N)
    step "propagator-$dims" timeout 500 "$q" propagator "$big/prop-$dims.toml" --device cuda \
        --out "$big/prop-$dims" >"$res/propagator-$dims.txt" 2>&1
    t1=$(date +%s%N)
    echo "propagator $dims: wall $(( (t1 - t0) / 1000000 )) ms (the heatbath field generated first)"
    head -16 "$res/propagator-$dims.txt"
    cp "$big/prop-$dims/prop-$dims.propagator.json" "$res/" 2>/dev/null
    cp "$big/prop-$dims/prop-$dims.pion-meff.png" "$res/" 2>/dev/null
done
} 2>&1 | tee "$res/log.txt" "$out/log.txt"

cp "$res"/*.png "$out/" 2>/dev/null
tar -C /tmp -czf "$out/results.tar.gz" qcd-out
echo; echo "===== summary"
cat "$res/status.txt"
python3 - "$res" <<'PY'
import glob, json, re, sys
# The floor rows at 12 right-hand sides: time per right-hand side over one apply.
for f in sorted(glob.glob(sys.argv[1] + "/floor-batch-*.txt")):
    for line in open(f):
        if re.search(r"batch 12 ", line):
            print(f.split("/")[-1][12:-4], " ".join(line.split()))
for f in sorted(glob.glob(sys.argv[1] + "/prop-*.propagator.json")):
    r = json.load(open(f))
    cols = r["columns"]
    solve = sum(c["solve_seconds"] for c in cols)
    its = [c["iterations"] for c in cols]
    fix = r.get("gauge_fixing")
    print(f"{f.split('/')[-1]}: {len(cols)} columns, batch {r.get('batch')}, iterations {min(its)}-{max(its)}, "
          f"solves {solve:.3f} s, worst true residual {max(c['true_residual'] for c in cols):.2e}, "
          f"{r['correlators']} correlators, pion meff(4) {r['pion_effective_mass'][4]['cosh']}, "
          f"pion[4] {r['pion'][4]:.12e}")
PY
