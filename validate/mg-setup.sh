#!/usr/bin/env bash
# Runs ON the device machine (repository root; .device/qcd-solve and, as the baseline,
# .device/base/qcd-solve): multigrid's set-up by piece at 16^3x32 (validate/mg-config.sh's
# problem, smoother "mr"), each binary once after a warm-up run that compiles the kernels;
# a table last (seconds of each set-up step, the solve, the outer iterations).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/step.sh" # $bin $q $res $big $out, step NAME COMMAND...
. "$(dirname "${BASH_SOURCE[0]}")/mg-config.sh" # mg_config SMOOTHER
mg_config mr >"$res/mg.toml"
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    echo "new: $(cat "$bin/commit" 2>/dev/null); base: $(cat "$bin/base/commit" 2>/dev/null)"
    step warm-up timeout 100 "$bin/qcd-solve" "$res/mg.toml" --output "$res/warm" -q
    for which in base new; do
        q=$bin/qcd-solve
        [ "$which" = base ] && q=$bin/base/qcd-solve
        step "mg-$which" timeout 100 "$q" "$res/mg.toml" --output "$res/mg-$which" -q
    done
} 2>&1 | tee "$res/log.txt" "$out/log.txt"
echo
echo "===== summary"
cat "$res/status.txt"
python3 - "$res" <<'PY'
import json, sys
rows = {}
for which in ("base", "new"):
    try:
        r = json.load(open(f"{sys.argv[1]}/mg-{which}/mg.json"))
    except OSError as e:
        print(which, e)
        continue
    steps = {}
    for s in r["time"]["steps"]:
        if s["name"].startswith("multigrid set-up: "):
            k = s["name"][len("multigrid set-up: "):]
            steps[k] = steps.get(k, 0.0) + s["seconds"]
    steps["set-up in all"] = r["multigrid"]["setup_seconds"]
    steps["solve"] = r["multigrid"]["solve_seconds"]
    steps["outer iterations"] = r["iterations"]
    steps["true residual"] = r["true_residual"]
    rows[which] = steps
keys = list(dict.fromkeys(k for v in rows.values() for k in v))
print(f"{'step':>40} " + " ".join(f"{w:>10}" for w in rows))
for k in keys:
    print(f"{k:>40} " + " ".join(f"{rows[w].get(k, float('nan')):10.4g}" for w in rows))
PY
