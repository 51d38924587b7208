#!/usr/bin/env python3
"""Runs two qcd-solve binaries (e.g. the commit before a refactor and after) on the CPU
with the same configs and options and compares their reports: iterations, stop reason and
the residual history entry by entry (max relative difference; 0 means the same bits).
Usage: validate/same-histories.py OLD_BIN NEW_BIN"""
import json, subprocess, sys, tempfile, os
old, new = sys.argv[1], sys.argv[2]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
cases = [
    ("configs/16x16x16x32.toml", []),
    ("configs/8x8x8x8.toml", []),
    ("configs/8x8x8x8.toml", ["--iteration", "fused"]),
    ("configs/8x8x8x8.toml", ["--iteration", "fused", "--check-every", "7"]),
    ("configs/8x8x8x8.toml", ["--preconditioning", "even-odd"]),
    ("configs/8x8x8x8.toml", ["--precision", "single-double"]),
    ("configs/8x8x8x8.toml", ["--preconditioning", "even-odd", "--precision", "single-double"]),
    ("configs/6x6x6x10.toml", ["--preconditioning", "even-odd", "--precision", "single-double", "--check-every", "3"]),
]
worst = 0.0
for cfg, opts in cases:
    reps = []
    for b in (old, new):
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([b, "-q", os.path.join(root, cfg), "--device", "cpu", "--output", d] + opts,
                           check=True, capture_output=True)
            name = os.path.basename(cfg).replace(".toml", ".json")
            reps.append(json.load(open(os.path.join(d, name))))
    a, b = reps
    ha, hb = a["residual_history"], b["residual_history"]
    same_len = len(ha) == len(hb)
    diff = max((abs(x - y) / max(abs(x), 1e-300) for x, y in zip(ha, hb)), default=0.0)
    worst = max(worst, diff if same_len else float("inf"))
    print(f"{cfg:28} {' '.join(opts):58} iterations {a['iterations']:4} vs {b['iterations']:4}  "
          f"stop {a['stop_reason']} vs {b['stop_reason']}  history max rel diff {diff:.2e}"
          f"{'' if same_len else '  LENGTHS DIFFER'}  true residual of D {a['true_residual_of_d_cpu']:.3e} vs {b['true_residual_of_d_cpu']:.3e}")
print(f"worst relative difference over all histories: {worst:.2e}")
sys.exit(0 if worst <= 1e-13 else 1)
