#!/usr/bin/env bash
# Runs ON the device machine (repository root, binaries in .device/ from validate/device.sh
# with TARGETS="gpu_multigrid"): multigrid on the GPU, a table last.
#   1. nvidia-smi; gpu-multigrid-tests (multigrid with the fine level on the GPU against the
#      CPU's)
#   2. kappa-scan on a quenched beta 6.0 field (SCAN_DIMS, default 16x16x16x32, generated
#      on the GPU on first use) with the clover term (c_sw 1.77) at the kappas of KAPPAS:
#      CR and BiCGStab with their fast options (kernel 3.0, even-odd, single-double, the
#      fused engines) against multigrid (its defaults: 2 levels, 4^4 blocks, 24 vectors,
#      a single-precision preconditioner), tolerance 1e-10
# Outputs in /tmp/qcd-out, packed into $OUT/results.tar.gz with the charts beside it, the
# log in $OUT/log.txt.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/step.sh" # $bin $q $res $big $out, step NAME COMMAND...


scan_config() { # dims (e.g. 16x16x16x32): the scan's config on stdout
    local l=(${1//x/ })
    cat <<TOML
[lattice]
LX = ${l[0]}
LY = ${l[1]}
LZ = ${l[2]}
LT = ${l[3]}

$(heatbath_gauge)

[dirac]
kappa = 0.13
csw = 1.77

[source]
type = "point"

[solver]
method = "bicgstab"
tolerance = 1e-10
max_iterations = 50000
preconditioning = "even-odd"
precision = "single-double"

[backend]
device = "cuda"
kernel = "3.0"
TOML
}

{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    echo "binary: $("$q" --version) $(cat "$bin/commit" 2>/dev/null)"
    if [ -z "${SKIP_TESTS:-}" ]; then
        step gpu-multigrid-tests timeout 400 "$bin/gpu-multigrid-tests" --test-threads=1 --nocapture
    fi
    for dims in ${SCAN_DIMS-16x16x16x32}; do
        scan_config "$dims" >"$big/scan-$dims.toml"
        step "kappa-scan-$dims" timeout ${SCAN_TIMEOUT-480} "$q" kappa-scan "$big/scan-$dims.toml" \
            --kappas "${KAPPAS-0.125,0.13,0.133,0.1345}" --methods "${METHODS-cr,bicgstab,mg}" \
            --out "$res/scan-$dims" >"$res/scan-$dims.txt" 2>&1
        cat "$res/scan-$dims.txt"
        cp "$res/scan-$dims"/*.png "$out/" 2>/dev/null
    done
} 2>&1 | tee "$res/log.txt" "$out/log.txt"

tar -C /tmp -czf "$out/results.tar.gz" qcd-out
echo
echo "===== summary"
cat "$res/status.txt"
python3 - "$res" <<'PY'
import csv, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/scan-*/kappa-scan.csv")):
    print(f)
    print(f"{'method':>9} {'kappa':>7} {'conv':>5} {'iter':>6} {'setup s':>8} {'solve s':>8} {'true res':>9}")
    for r in csv.DictReader(open(f)):
        print(f"{r['method']:>9} {r['kappa']:>7} {r['converged']:>5} {r['iterations']:>6} "
              f"{float(r['setup_seconds']):8.3f} {float(r['solve_seconds']):8.3f} {float(r['true_residual']):9.2e}")
PY
