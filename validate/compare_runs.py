#!/usr/bin/env python3
"""The comparisons of `MODE=regression bash validate/on-device.sh`: the current binary
(.device/qcd-solve, "new") against a baseline built from an older commit
(.device/base/qcd-solve, "base"), on the files that mode leaves in its results folder.

    compare_runs.py validate RES CFG...   validate rows, base against new, per config
    compare_runs.py floor RES DIMS...     floor rows: ratios to the floor, new/base
    compare_runs.py main RES LABEL...     main-job reports: iterations, true residual
    compare_runs.py summary RES           the short table: tests, validate, floor, main

Files read (RES = the results folder):
    validate-<cfg>-{base,new}.txt        `qcd-solve validate <cfg> --kernel all`
    floor-<dims>-{base,new}-<round>.txt  `qcd-solve floor --dims <dims>`, rounds interleaved
    main-<label>-{base,new}.json         the main job's JSON report
    status.txt, log.txt                  the steps' exit codes, the whole log

Validate rows (src/app/validate.rs, format_table) carry no timing: every column is a
check (multiple, operator difference, GPU/CPU iterations, history difference, true
residual, verdict) and must print the same in base and new. Floor rows
(src/app/floor.rs, table) are timings: reported, never judged.
"""
import glob
import json
import math
import os
import re
import sys

BINS = ("base", "new")


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


# ---- validate ----------------------------------------------------------------------
# "{variant:<22} {lattice:<12} {mult:>4} {op:>10.2e} {g/c:>9} {hist:>10.2e} {true:>10.2e} {result:>6}"
# The variant may hold a space ("3.0 bicgstab+eo+single") and run past 22 characters:
# the last seven fields are split from the right.
VALIDATE_ROW = re.compile(
    r"^(?P<variant>\S.*?)\s+(?P<lattice>\d+x\d+x\d+x\d+)\s+(?P<mult>\d+)\s+(?P<op>\S+)\s+"
    r"(?P<iters>\d+/\d+)\s+(?P<hist>\S+)\s+(?P<true>\S+)\s+(?P<result>pass|FAIL)\s*$"
)
# The errors listed after the table: "<variant> on <lattice>: <error>".
VALIDATE_ERROR = re.compile(r"^(?P<variant>\S.*?) on (?P<lattice>\d+x\d+x\d+x\d+): (?P<error>.*)$")


def validate_rows(text):
    """{variant: the row's check fields as a tuple}, [error lines]."""
    rows, errors = {}, []
    for line in (text or "").splitlines():
        m = VALIDATE_ROW.match(line.rstrip())
        if m:
            key = m["variant"].strip()
            while key in rows:  # a repeated label: keep both, in order
                key += "'"
            rows[key] = tuple(m[k] for k in ("lattice", "mult", "op", "iters", "hist", "true", "result"))
            continue
        e = VALIDATE_ERROR.match(line.rstrip())
        if e and not line.startswith(("validate ", "=====")):  # not the header, not the step line
            errors.append(line.rstrip())
    return rows, errors


def compare_validate(res, cfg):
    """(matched, total, lines): total = rows in either binary's output."""
    texts = {b: read(f"{res}/validate-{cfg}-{b}.txt") for b in BINS}
    lines = []
    if any(t is None for t in texts.values()):
        missing = [b for b in BINS if texts[b] is None]
        return 0, 0, [f"validate {cfg}: no output from {', '.join(missing)}"]
    (rb, eb), (rn, en) = validate_rows(texts["base"]), validate_rows(texts["new"])
    keys = list(rb) + [k for k in rn if k not in rb]
    matched = 0
    fmt = "{:<30} {:>4} {:>10} {:>9} {:>10} {:>10} {:>6}"
    for k in keys:
        a, b = rb.get(k), rn.get(k)
        if a is not None and a == b:
            matched += 1
            continue
        lines.append(f"  DIFFERS {k}:")
        for name, r in (("base", a), ("new", b)):
            lines.append("    " + (fmt.format(name, *r[1:]) if r else f"{name:<30} (no such row)"))
    for e in sorted(set(eb) ^ set(en)):
        lines.append(f"  error line only in {'base' if e in eb else 'new'}: {e}")
    if not keys:
        lines.append(f"  no validate rows parsed (see validate-{cfg}-*.txt)")
    head = f"validate {cfg}: {matched}/{len(keys)} rows identical in base and new (every column is a check)"
    return matched, len(keys), [head] + lines


# ---- floor -------------------------------------------------------------------------
# "{what:<40} {B/site:>8.0} {us:>10.2} {floor us:>10.2} {ratio:>7.3} {target}{ (note)}"
FLOOR_ROW = re.compile(
    r"^(?P<what>[a-z]\S*(?: \S+)*?)\s+(?P<bytes>\d+)\s+(?P<us>\d+\.\d+)\s+(?P<floor>\d+\.\d+)\s+"
    r"(?P<ratio>\d+\.\d+)(?:\s|$)"
)
TRIAD = re.compile(r"triad B = (\d+) GB/s")


def floor_runs(res, dims, b):
    """[(triad, {row: (us, ratio)})] of each round of binary b, in round order."""
    out = []
    files = glob.glob(f"{res}/floor-{dims}-{b}-*.txt")
    for f in sorted(files, key=lambda p: int(re.search(r"-(\d+)\.txt$", p)[1])):
        text = read(f) or ""
        t = TRIAD.search(text)
        rows = {}
        for line in text.splitlines():
            m = FLOOR_ROW.match(line)
            if m:
                rows[m["what"]] = (float(m["us"]), float(m["ratio"]))
        out.append((float(t[1]) if t else math.nan, rows))
    return out


def mean(xs):
    xs = [x for x in xs if not math.isnan(x)]
    return sum(xs) / len(xs) if xs else math.nan


def compare_floor(res, dims):
    """(rows [(what, base ratio, new ratio, new/base)], lines). Each binary's ratio is the
    mean over its rounds (base, new, base, new: drift hits both alike)."""
    runs = {b: floor_runs(res, dims, b) for b in BINS}
    lines = [
        f"floor {dims}: rounds base {len(runs['base'])}, new {len(runs['new'])}; triad GB/s base "
        + ", ".join(f"{t:.0f}" for t, _ in runs["base"])
        + "; new "
        + ", ".join(f"{t:.0f}" for t, _ in runs["new"])
    ]
    names = []
    for b in BINS:
        for _, rows in runs[b]:
            names += [n for n in rows if n not in names]
    if not names:
        return [], lines + ["  no floor rows parsed (see floor-%s-*.txt)" % dims]
    lines.append(
        f"  {'row':44} {'base ratio':>10} {'new ratio':>10} {'new/base':>8} {'base us':>9} {'new us':>9}  (ratios to the floor, mean of the rounds)"
    )
    out = []
    for n in names:
        r = {b: mean([rows[n][1] for _, rows in runs[b] if n in rows]) for b in BINS}
        us = {b: mean([rows[n][0] for _, rows in runs[b] if n in rows]) for b in BINS}
        q = r["new"] / r["base"] if r["base"] > 0 else math.nan
        out.append((n, r["base"], r["new"], q))
        spread = ""
        for b in BINS:
            vals = [rows[n][1] for _, rows in runs[b] if n in rows]
            if len(vals) > 1:
                spread += f" {b} {min(vals):.3f}-{max(vals):.3f}"
        lines.append(
            f"  {n:44} {r['base']:10.3f} {r['new']:10.3f} {q:8.3f} {us['base']:9.2f} {us['new']:9.2f} {spread}"
        )
    return out, lines


# ---- main job ----------------------------------------------------------------------
def load_json(path):
    t = read(path)
    if t is None:
        return None
    try:
        return json.loads(t)
    except ValueError:
        return None


def compare_main(res, label):
    """(row dict, lines): iterations and the true residual of D x = b (CPU) of base and new."""
    r = {b: load_json(f"{res}/main-{label}-{b}.json") for b in BINS}
    row = {"label": label}
    for b in BINS:
        j = r[b] or {}
        row[b] = (j.get("iterations"), j.get("true_residual_of_d_cpu"), j.get("stop_reason"),
                  (j.get("timings") or {}).get("solve"), j.get("solver"))
    if not (r["base"] and r["new"]):
        missing = [b for b in BINS if not r[b]]
        row["same"] = None
        return row, [f"main {label}: no report from {', '.join(missing)}"]
    (ib, tb, sb, _, _), (i_n, tn, sn, _, _) = row["base"], row["new"]
    row["same"] = ib == i_n and tb == tn and sb == sn
    hb, hn = r["base"].get("residual_history") or [], r["new"].get("residual_history") or []
    hd = max((abs(x - y) / max(abs(y), 1e-300) for x, y in zip(hb, hn)), default=math.nan)
    lines = [f"main {label}: " + ("same" if row["same"] else "DIFFERS")]
    for b in BINS:
        i, t, s, solve, solver = row[b]
        lines.append(f"  {b:4} iterations {i}, true residual {t!r}, {s}, solve {solve} s; {solver}")
    lines.append(
        f"  residual histories: {len(hb)} and {len(hn)} entries, largest relative difference {hd:.3e}"
        + (" (identical)" if hb == hn else "")
    )
    return row, lines


# ---- summary -----------------------------------------------------------------------
def tests_of(res):
    """[(test binary, rc, 'N passed, M failed, K ignored')] from status.txt and log.txt."""
    status = read(f"{res}/status.txt") or ""
    log = read(f"{res}/log.txt") or ""
    out = []
    for m in re.finditer(r"^(gpu[\w-]*-tests) rc=(\d+)", status, re.M):
        name, rc = m[1], int(m[2])
        sec = re.search(r"^===== " + re.escape(name) + r":.*?(?=^===== |\Z)", log, re.M | re.S)
        counts = re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", sec[0] if sec else "")
        p, f, i = (sum(int(c[k]) for c in counts) for k in range(3))
        out.append((name, rc, f"{p} passed, {f} failed, {i} ignored" if counts else "no test result line"))
    return out


def summary(res, cfgs, dims_list, labels):
    print("regression: new = .device/qcd-solve, base = .device/base/qcd-solve")
    for name, rc, counts in tests_of(res):
        print(f"  test {name:28} {'pass' if rc == 0 else f'FAIL (rc {rc})':14} {counts}")
    for cfg in cfgs:
        m, t, _ = compare_validate(res, cfg)
        verdicts = {b: [r[-1] for r in validate_rows(read(f"{res}/validate-{cfg}-{b}.txt"))[0].values()] for b in BINS}
        passes = ", ".join(f"{b} {v.count('pass')}/{len(v)} pass" for b, v in verdicts.items())
        print(f"  validate {cfg:20} {m}/{t} rows identical ({passes})" + ("" if m == t and t else "  <-- DIFFERS"))
    for dims in dims_list:
        rows, _ = compare_floor(res, dims)
        for n, b, nw, q in rows:
            print(f"  floor {dims:14} {n:44} base {b:6.3f} new {nw:6.3f} new/base {q:6.3f}")
    for label in labels:
        row, _ = compare_main(res, label)
        fmt = lambda v: f"{v[0]} it, true res {v[1]!r}" if v[0] is not None else "missing"
        verdict = {True: "same", False: "DIFFERS", None: "missing"}[row["same"]]
        print(f"  main {label:24} base {fmt(row['base']):36} new {fmt(row['new']):36} {verdict}")


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    what, res, rest = argv[1], argv[2], argv[3:]
    if what == "validate":
        for cfg in rest:
            print("\n".join(compare_validate(res, cfg)[2]))
    elif what == "floor":
        for dims in rest:
            print("\n".join(compare_floor(res, dims)[1]))
    elif what == "main":
        for label in rest:
            print("\n".join(compare_main(res, label)[1]))
    elif what == "summary":
        # The configs, floor dims and main-job labels: whatever the mode left in RES.
        cfgs = sorted({re.sub(r"-(base|new)\.txt$", "", os.path.basename(f))[len("validate-"):]
                       for f in glob.glob(f"{res}/validate-*-base.txt") + glob.glob(f"{res}/validate-*-new.txt")})
        dims_list = sorted({re.sub(r"-(base|new)-\d+\.txt$", "", os.path.basename(f))[len("floor-"):]
                            for f in glob.glob(f"{res}/floor-*-*-*.txt")
                            if re.search(r"-(base|new)-\d+\.txt$", f)}, key=lambda d: [int(x) for x in d.split("x")])
        labels = list(dict.fromkeys(re.sub(r"-(base|new)\.json$", "", os.path.basename(f))[len("main-"):]
                                    for f in sorted(glob.glob(f"{res}/main-*.json"), key=os.path.getmtime)))
        summary(res, cfgs, dims_list, labels)
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
