"""The Python package on a GPU (device="cuda"): run on the device machine only
(validate/python-gpu.sh); without a GPU every test fails with CudaError (exit code 5),
never passes. The truth is the same as python/tests': the Dirac operator applied in numpy
(docs/conventions.md) and the CPU's own solve of the same problem."""

import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from test_qcd_solve import NERSC, WEAK, apply_clover_d, apply_d, relative  # noqa: E402

import qcd_solve  # noqa: E402

FAST = {"kernel": "3.0", "preconditioning": "even-odd"}


def test_wilson_solve_on_the_gpu_satisfies_the_numpy_dirac_equation():
    kappa = 0.12
    x, report = qcd_solve.solve(WEAK, "point:1,2,3,4:2:1", kappa=kappa, tol=1e-12, device="cuda")
    assert report["converged"] and report["device"]["kind"] == "cuda", report["device"]
    links, _ = qcd_solve.read_gauge(WEAK)
    b = np.zeros_like(x)
    b[4, 3, 2, 1, 2, 1] = 1.0
    assert relative(apply_d(links, x, kappa), b) <= 2e-12


def test_clover_single_double_on_the_gpu_matches_numpy_and_the_cpu():
    kappa, csw = 0.12, 1.0
    links, _ = qcd_solve.read_gauge(NERSC)
    rng = np.random.default_rng(11)
    shape = links.shape[:4] + (4, 3)
    b = rng.normal(size=shape) + 1j * rng.normal(size=shape)
    opts = dict(FAST, precision="single-double", method="bicgstab")
    x, report = qcd_solve.solve(links, b, kappa=kappa, csw=csw, tol=1e-10, device="cuda", **opts)
    assert report["converged"]
    # Single-double to 1e-10: the true residual of the double system (reliable updates).
    assert relative(apply_clover_d(links, x, kappa, csw), b) <= 2e-10
    y, _ = qcd_solve.solve(links, b, kappa=kappa, csw=csw, tol=1e-12, device="cpu")
    # Both solve the same system, to 1e-10 and 1e-12: the solutions differ by at most
    # about the looser tolerance times the condition number of D. The bound 1e-8 assumes
    # that number below 100 at kappa 0.12 on this field (our estimate, not computed here).
    assert relative(x, y) <= 1e-8


def test_propagator_on_the_gpu_gives_the_cpu_pion():
    kappa = 0.12
    kw = dict(kappa=kappa, tol=1e-12, method="bicgstab")
    _, _, gpu = qcd_solve.propagator(WEAK, (0, 0, 0, 2), device="cuda", kernel="3.0", **kw)
    _, _, cpu = qcd_solve.propagator(WEAK, (0, 0, 0, 2), device="cpu", **kw)
    # Each column to 1e-12 relative: the pion, a sum of |S|^2, moves by about twice the
    # columns' relative error times the condition number; the bound 1e-10 assumes that
    # number below 50 (our estimate for this heavy kappa, not computed here).
    assert np.allclose(gpu["pion"], cpu["pion"], rtol=1e-10, atol=0)
