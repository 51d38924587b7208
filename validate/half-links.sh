#!/usr/bin/env bash
# Runs ON the device machine (repository root; .device/ from
# TARGETS="gpu_half gpu_memory gpu_clover" BASE=... bash validate/device.sh, the baseline
# binary in .device/base): the half build's 16-bit links against the former float links,
# in one hold, a table last:
#   1. gpu-half-tests (half operators within two steps of the site norm of the CPU's, the
#      half BLAS, half-double solves to the double tolerance), gpu-memory-tests (the
#      footprint against the ledger), gpu-clover-tests' operator test in every precision;
#   2. floor --dims 32,32,32,64 --wilson with each binary (the half rows against the
#      single ones: dslash and Schur operator, 18, 12 and 8 reals);
#   3. the main job on 32x32x32x64 (configs/32x32x32x64.toml), kernel 3.0, even-odd,
#      BiCGStab and CR, r12, half-double and single-double, with each binary: iterations,
#      solve seconds, true residual.
# Outputs in /tmp/qcd-out, the log in $OUT/log.txt, the reports in $OUT/reports.tar.gz.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/step.sh" # $bin $q $res $big $out, step NAME COMMAND...
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    echo "new: $(cat "$bin/commit" 2>/dev/null); base: $(cat "$bin/base/commit" 2>/dev/null)"
    if [ -z "${SKIP_TESTS:-}" ]; then
        step gpu-half-tests timeout 200 "$bin/gpu-half-tests" --test-threads=1
        step gpu-memory-tests timeout 200 "$bin/gpu-memory-tests" --test-threads=1
        step gpu-clover-half timeout 200 "$bin/gpu-clover-tests" --test-threads=1 every_precision
    fi
    for which in base new; do
        b=$q
        [ "$which" = base ] && b=$bin/base/qcd-solve
        step "floor-$which" timeout 240 "$b" floor --dims 32,32,32,64 --wilson --repeat ${REPEAT:-100} \
            >"$res/floor-$which.txt" 2>&1
        grep -E "^(dslash full|schur even-odd) (single|half)" "$res/floor-$which.txt"
    done
    for which in base new; do
        b=$q
        [ "$which" = base ] && b=$bin/base/qcd-solve
        for m in bicgstab cr; do
            for p in single-double half-double; do
                name=main-$which-$m-$p
                step "$name" timeout 120 "$b" configs/32x32x32x64.toml --device cuda --kernel 3.0 --reconstruct 12 \
                    --preconditioning even-odd --method "$m" --precision "$p" --output "$res/$name" -q
            done
        done
    done
} 2>&1 | tee "$res/log.txt" "$out/log.txt"
tar -C "$res" -czf "$out/reports.tar.gz" $(cd "$res" && ls -d main-* floor-*.txt 2>/dev/null)
echo; echo "===== summary"
cat "$res/status.txt"
python3 - "$res" <<'PY'
import glob, json, re, sys
res = sys.argv[1]
rows = {}
for which in ("base", "new"):
    try:
        for line in open(f"{res}/floor-{which}.txt"):
            m = re.match(r"((?:dslash full|schur even-odd) (?:single|half) r\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", line)
            if m:
                rows.setdefault(m.group(1), {})[which] = (float(m.group(2)), float(m.group(3)), float(m.group(5)))
    except OSError as e:
        print(which, e)
print("floor, 32x32x32x64: row | base B/site, us, ratio to floor | new B/site, us, ratio | new us / base us")
for k, v in rows.items():
    if "base" in v and "new" in v:
        (bb, bu, br), (nb, nu, nr) = v["base"], v["new"]
        print(f"{k} | {bb:.0f} {bu:.2f} {br:.3f} | {nb:.0f} {nu:.2f} {nr:.3f} | {nu / bu:.3f}")
print("main job, 32x32x32x64, even-odd r12: iterations, solve s, true residual")
for f in sorted(glob.glob(f"{res}/main-*/*.json")):
    r = json.load(open(f))
    print(f.split("/")[-2], r["iterations"], f"{r['time']['solve']:.4f}", f"{r['true_residual']:.3e}", r["converged"])
PY
