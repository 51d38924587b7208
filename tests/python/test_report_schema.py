#!/usr/bin/env python3
"""Validates real reports of the binary against docs/report.schema.json with the
`jsonschema` package (draft 2020-12): the main job's report and the propagator's, of a
8^3 x 4 CPU solve on the NERSC file of ../shared/lattices. Also checks, with hashlib and
os.stat (apart from the program's code), that each report's input gauge file has the
file's size and SHA-256, and that the schema itself is a valid draft 2020-12 schema.

Usage: test_report_schema.py [QCD_SOLVE_BINARY]
(default: $QCD_SOLVE_BIN, else target/release/qcd-solve). Needs jsonschema (.ci/run
installs it into .pydeps). Exits non-zero on any failure.
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GAUGE = os.path.normpath(os.path.join(ROOT, "..", "shared", "lattices", "ATB_nersc.l8t4b3360"))
SCHEMA = os.path.join(ROOT, "docs", "report.schema.json")


def config(folder):
    return f"""[lattice]
LX = 8
LY = 8
LZ = 8
LT = 4

[gauge]
type = "file"
path = {json.dumps(GAUGE)}

[dirac]
kappa = 0.1

[backend]
device = "cpu"

[output]
report = {json.dumps(os.path.join(folder, "r.json"))}
solution = {json.dumps(os.path.join(folder, "x.npy"))}
"""


def run(args):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{args} exited {p.returncode}: {p.stderr}")


def check_input(report):
    """The report's gauge file against the file itself."""
    g = report["gauge_file"]
    with open(GAUGE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    assert g["sha256"] == digest, (g["sha256"], digest)
    assert g["bytes"] == os.stat(GAUGE).st_size, g["bytes"]
    assert os.path.samefile(g["path"], GAUGE), g["path"]


def main():
    bin_path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "QCD_SOLVE_BIN", os.path.join(ROOT, "target", "release", "qcd-solve"))
    with open(SCHEMA) as f:
        schema = json.load(f)
    validator = jsonschema.Draft202012Validator(schema)
    passed, failed = 0, 0

    def check(name, f):
        nonlocal passed, failed
        try:
            f()
            print(f"ok      {name}")
            passed += 1
        except Exception as e:  # report every check, then fail
            print(f"FAILED  {name}: {type(e).__name__}: {e}")
            failed += 1

    check("the schema is a valid draft 2020-12 schema",
          lambda: jsonschema.Draft202012Validator.check_schema(schema))
    with tempfile.TemporaryDirectory() as folder:
        cfg = os.path.join(folder, "run.toml")
        with open(cfg, "w") as f:
            f.write(config(folder))
        run([bin_path, "--quiet", cfg])
        run([bin_path, "--quiet", "propagator", cfg, "--out", folder])
        reports = {}
        for kind, name in [("solve", "r.json"), ("propagator", "run.propagator.json")]:
            with open(os.path.join(folder, name)) as f:
                reports[kind] = json.load(f)
        for kind, report in reports.items():
            check(f"{kind} report validates", lambda r=report: validator.validate(r))
            check(f"{kind} report's kind", lambda r=report, k=kind: r["kind"] == k or 1 / 0)
            check(f"{kind} report's gauge file size and SHA-256", lambda r=report: check_input(r))
        # A report with a key the schema does not know fails (the schema is closed).
        bad = dict(reports["solve"], surprise=1)
        check("an unknown key is refused",
              lambda: (not validator.is_valid(bad)) or 1 / 0)
    print(f"report schema: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
