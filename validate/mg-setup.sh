#!/usr/bin/env bash
# Runs ON the device machine (repository root; .device/qcd-solve and, as the baseline,
# .device/base/qcd-solve): multigrid's set-up by piece at 16^3x32 (validate/mg-config.sh's
# problem), each binary once per smoother of SMOOTHERS (default "mr") after a warm-up run
# that compiles the kernels; a table last (seconds of each set-up step, the solve, the
# outer iterations, the coarse solves' seconds and iterations). TESTS=1 first runs
# gpu-multigrid-tests, gpu-solvers-tests and gpu-clover-tests' operator test in every
# precision (staged with TARGETS="gpu_multigrid gpu_solvers gpu_clover"). MG_DIMS and
# MG_KAPPA set another problem (validate/mg-config.sh), MG_TIMEOUT each run's limit
# (default 100 s), MG_WARMUP=0 leaves the warm-up out (the baseline then runs first and
# pays the kernels' compile and the field's generation). MG_VARIANTS adds runs of the new
# binary alone, each NAME:KEY=VALUE,KEY=VALUE (keys of [multigrid], the first smoother;
# e.g. 'gcr:setup_solver="gcr" r0:refine=0').
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/step.sh" # $bin $q $res $big $out, step NAME COMMAND...
. "$(dirname "${BASH_SOURCE[0]}")/mg-config.sh" # mg_config SMOOTHER
smoothers=${SMOOTHERS:-mr}
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    echo "new: $(cat "$bin/commit" 2>/dev/null); base: $(cat "$bin/base/commit" 2>/dev/null)"
    if [ -n "${TESTS:-}" ]; then
        step gpu-multigrid-tests timeout 300 "$bin/gpu-multigrid-tests" --test-threads=1
        step gpu-solvers-tests timeout 300 "$bin/gpu-solvers-tests" --test-threads=1
        step gpu-clover-every-precision timeout 420 "$bin/gpu-clover-tests" --test-threads=1 every_precision
    fi
    for s in $smoothers; do
        mg_config "$s" >"$res/mg-$s.toml"
    done
    [ "${MG_WARMUP:-1}" = 0 ] || step warm-up timeout 100 "$bin/qcd-solve" "$res/mg-${smoothers%% *}.toml" --output "$res/warm" -q
    for s in $smoothers; do
        for which in base new; do
            b=$bin/qcd-solve
            [ "$which" = base ] && b=$bin/base/qcd-solve
            step "mg-$s-$which" timeout "${MG_TIMEOUT:-100}" "$b" "$res/mg-$s.toml" --output "$res/mg-$s-$which" -q
        done
    done
    for v in ${MG_VARIANTS:-}; do
        name=${v%%:*}
        IFS=, read -r -a kvs <<<"${v#*:}"
        mg_config "${smoothers%% *}" "${kvs[@]}" >"$res/mg-v-$name.toml"
        step "mg-v-$name" timeout "${MG_TIMEOUT:-100}" "$bin/qcd-solve" "$res/mg-v-$name.toml" --output "$res/mg-v-$name" -q
    done
} 2>&1 | tee "$res/log.txt" "$out/log.txt"
echo
echo "===== summary"
cat "$res/status.txt"
variants=""
for v in ${MG_VARIANTS:-}; do variants="$variants v-${v%%:*}"; done
python3 - "$res" "$smoothers" "$variants" <<'PY'
import json, sys
rows = {}
runs = [(f"{s}-{w}", f"mg-{s}-{w}/mg-{s}.json") for s in sys.argv[2].split() for w in ("base", "new")]
runs += [(v, f"mg-{v}/mg-{v}.json") for v in sys.argv[3].split()]
for which, path in runs:
    try:
        r = json.load(open(f"{sys.argv[1]}/{path}"))
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
    steps["coarse solves"] = sum(r["multigrid"]["coarse_solves"])
    steps["coarse iterations"] = sum(r["multigrid"]["coarse_iterations"])
    steps["coarse seconds"] = r["multigrid"]["coarse_seconds"][0]
    steps["cycle seconds"] = r["multigrid"].get("cycle_seconds", float("nan"))
    rows[which] = steps
keys = list(dict.fromkeys(k for v in rows.values() for k in v))
print(f"{'step':>40} " + " ".join(f"{w:>10}" for w in rows))
for k in keys:
    print(f"{k:>40} " + " ".join(f"{rows[w].get(k, float('nan')):10.4g}" for w in rows))
PY
