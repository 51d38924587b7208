#!/usr/bin/env bash
# Runs ON the device machine (repository root; .device/ from
# TARGETS="gpu_multigrid" PYTHON=1 bash validate/device.sh), a table last:
#   1. the Python package on the GPU: pytest python/tests_gpu (device="cuda" solves held
#      to the Dirac operator applied in numpy and to the CPU's solve and pion);
#   2. the main job (16x16x16x32, kernel 3.0, even-odd single-double) with the memory
#      pool keeping everything (the default) and nothing (`--tuning pool_keep_mib=0`):
#      the same iterations and residual, the key in the report;
#   3. multigrid on the quenched beta 6.0 16^3x32 field of validate/multigrid.sh (clover
#      c_sw 1.77, kappa 0.1345, tolerance 1e-10, the [multigrid] defaults) with
#      smoother = "mr" and "gcr": outer iterations, set-up and solve seconds;
#   4. gpu-multigrid-tests (multigrid on the GPU against the CPU's).
# Outputs in /tmp/qcd-out, the log in $OUT/log.txt, the reports in $OUT/reports.tar.gz.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/step.sh" # $bin $q $res $big $out, step NAME COMMAND...


. "$(dirname "${BASH_SOURCE[0]}")/mg-config.sh" # mg_config SMOOTHER

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    echo "binary: $("$q" --version) $(cat "$bin/commit" 2>/dev/null)"
    # The tests read ../shared/lattices, staged in .device/lattices.
    [ -e ../shared/lattices/ATB_nersc.l8t4b3360 ] || { mkdir -p ../shared/lattices && cp "$bin"/lattices/* ../shared/lattices/; }
    step python-gpu env PYTHONPATH="$bin/py" timeout 150 python3 -m pytest -q -p no:cacheprovider python/tests_gpu
    for keep in all 0; do
        step "pool-keep-$keep" timeout 45 "$q" configs/16x16x16x32.toml --device cuda --kernel 3.0 \
            --preconditioning even-odd --precision single-double --tuning "pool_keep_mib=$keep" \
            --output "$res/pool-$keep"
    done
    for sm in ${SMOOTHERS-mr gcr}; do
        mg_config "$sm" >"$res/mg-$sm.toml"
        step "mg-$sm" timeout 100 "$q" "$res/mg-$sm.toml" --output "$res/mg-$sm"
    done
    if [ -z "${SKIP_TESTS:-}" ]; then
        step gpu-multigrid-tests timeout 120 "$bin/gpu-multigrid-tests" --test-threads=1
    fi
} 2>&1 | tee "$res/log.txt" "$out/log.txt"

tar -C "$res" -czf "$out/reports.tar.gz" $(cd "$res" && ls -d pool-* mg-* 2>/dev/null)
echo
echo "===== summary"
cat "$res/status.txt"
python3 - "$res" <<'PY'
import glob, json, sys
print(f"{'run':>14} {'conv':>5} {'iter':>5} {'setup s':>8} {'solve s':>8} {'true res':>9} {'pool_keep_mib':>13}")
for f in sorted(glob.glob(sys.argv[1] + "/*/*.json")):
    r = json.load(open(f))
    if "iterations" not in r:
        continue
    mg = r.get("multigrid") or {}
    keep = r["config"]["tuning"]["pool_keep_mib"]
    print(f"{f.split('/')[-2]:>14} {str(r['converged']):>5} {r['iterations']:>5} "
          f"{mg.get('setup_seconds', 0):8.3f} {r['timings']['solve']:8.3f} {r['true_residual']:9.2e} {keep!s:>13}")
PY
