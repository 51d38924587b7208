"""Tests of the Python package against numbers it does not compute itself: gauge file
headers, the Dirac operator applied here in numpy (docs/conventions.md's formula), and the
pion as sum |S|^2 (docs/conventions.md, "Dirac structures and correlators")."""

import pathlib
import re

import numpy as np
import pytest

import qcd_solve

# The shared conformance lattices, ../shared/lattices from the repository's root
# (MANIFEST.md there lists their origins and plaquettes).
LATTICES = pathlib.Path(__file__).resolve().parents[2] / ".." / "shared" / "lattices"
NERSC = LATTICES / "ATB_nersc.l8t4b3360"
WEAK = LATTICES / "pyquda_weak_field.lime"

# DeGrand-Rossi g1..g4 for x, y, z, t (docs/conventions.md, "Gamma matrices").
I = 1j
GAMMA = [
    np.array([[0, 0, 0, I], [0, 0, I, 0], [0, -I, 0, 0], [-I, 0, 0, 0]]),
    np.array([[0, 0, 0, -1], [0, 0, 1, 0], [0, 1, 0, 0], [-1, 0, 0, 0]]),
    np.array([[0, 0, I, 0], [0, 0, 0, -I], [-I, 0, 0, 0], [0, I, 0, 0]]),
    np.array([[0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0]]),
]
GAMMA5 = GAMMA[0] @ GAMMA[1] @ GAMMA[2] @ GAMMA[3]


def axis(mu):
    """The array axis of direction mu (0..3 = x, y, z, t) in [t, z, y, x, ...]."""
    return 3 - mu


def shift(field, mu, step):
    """field(x + step * mu-hat), periodic."""
    return np.roll(field, -step, axis=axis(mu))


def plaquette(links):
    """sum over sites and planes mu < nu of Re Tr U_p / (6 V 3), from the links alone."""
    volume = np.prod(links.shape[:4])
    total = 0.0
    for mu in range(4):
        for nu in range(mu + 1, 4):
            u_mu, u_nu = links[..., mu, :, :], links[..., nu, :, :]
            a = u_mu @ shift(u_nu, mu, 1)
            b = u_nu @ shift(u_mu, nu, 1)
            # Re Tr(a b^+) = Re sum_ij a_ij conj(b_ij).
            total += np.sum(a * b.conj()).real
    return total / (6 * volume * 3)


def apply_d(links, psi, kappa, mu_twist=0.0, antiperiodic_t=True):
    """D psi = A psi - kappa sum_mu [(1 - g_mu) U_mu(x) psi(x+mu)
    + (1 + g_mu) U_mu(x-mu)^+ psi(x-mu)], A = 1 + 2 i kappa mu g5, fermions antiperiodic
    in t (a hop across the lattice's edge in t picks up -1)."""
    lt = psi.shape[0]
    out = psi + 2j * kappa * mu_twist * np.einsum("st,...tc->...sc", GAMMA5, psi)
    for mu in range(4):
        u = links[..., mu, :, :]
        fwd = shift(psi, mu, 1)
        bwd_u = shift(u, mu, -1)
        bwd = shift(psi, mu, -1)
        if mu == 3 and antiperiodic_t:
            fwd = fwd.copy()
            bwd = bwd.copy()
            fwd[lt - 1] *= -1
            bwd[0] *= -1
        hop_f = np.einsum("...ab,...sb->...sa", u, fwd)
        hop_b = np.einsum("...ba,...sb->...sa", bwd_u.conj(), bwd)
        one = np.eye(4)
        out = out - kappa * (
            np.einsum("st,...tc->...sc", one - GAMMA[mu], hop_f)
            + np.einsum("st,...tc->...sc", one + GAMMA[mu], hop_b)
        )
    return out


def dagger(m):
    return np.swapaxes(m, -1, -2).conj()


def clover_field(links, mu, nu):
    """Fhat_{mu nu}(x) = (Q - Q^+) / 8, Q the four plaquettes of the mu-nu plane that
    start and end at x, each running the same way round as the first,
    U_mu(x) U_nu(x+mu) U_mu(x+nu)^+ U_nu(x)^+ (docs/conventions.md, "The clover term")."""
    u, v = links[..., mu, :, :], links[..., nu, :, :]

    def at(field, steps):
        for d, n in steps:
            field = shift(field, d, n)
        return field

    q = u @ at(v, [(mu, 1)]) @ dagger(at(u, [(nu, 1)])) @ dagger(v)
    q = q + v @ dagger(at(u, [(mu, -1), (nu, 1)])) @ dagger(at(v, [(mu, -1)])) @ at(u, [(mu, -1)])
    q = q + (
        dagger(at(u, [(mu, -1)]))
        @ dagger(at(v, [(mu, -1), (nu, -1)]))
        @ at(u, [(mu, -1), (nu, -1)])
        @ at(v, [(nu, -1)])
    )
    q = q + dagger(at(v, [(nu, -1)])) @ at(u, [(nu, -1)]) @ at(v, [(mu, 1), (nu, -1)]) @ dagger(u)
    return (q - dagger(q)) / 8


def apply_clover_d(links, psi, kappa, csw, mu_twist=0.0):
    """The Wilson D plus i kappa c_sw sum_{mu<nu} sigma_{mu nu} Fhat_{mu nu},
    sigma_{mu nu} = (i/2) [g_mu, g_nu] (docs/conventions.md)."""
    out = apply_d(links, psi, kappa, mu_twist)
    for mu in range(4):
        for nu in range(mu + 1, 4):
            sigma = 0.5j * (GAMMA[mu] @ GAMMA[nu] - GAMMA[nu] @ GAMMA[mu])
            f = clover_field(links, mu, nu)
            out = out + 1j * kappa * csw * np.einsum("st,...ab,...tb->...sa", sigma, f, psi)
    return out


def header_value(path, key):
    """A NERSC header's value as text."""
    head = path.read_bytes()[:4096].split(b"END_HEADER")[0].decode("ascii")
    return re.search(rf"^\s*{key}\s*=\s*(\S+)", head, re.M).group(1)


def test_read_gauge_plaquette_equals_the_header():
    links, meta = qcd_solve.read_gauge(NERSC)
    assert links.shape == (4, 8, 8, 8, 4, 3, 3) and links.dtype == np.complex128
    assert meta["extents"] == {"x": 8, "y": 8, "z": 8, "t": 4}
    text = header_value(NERSC, "PLAQUETTE")
    stated = float(text)
    # The header's precision: half a unit of its last digit (0.5038664469: 5e-11).
    decimals = len(text.split(".")[1])
    tol = 0.5 * 10.0 ** -decimals
    assert abs(meta["plaquette"] - stated) <= tol
    # The links themselves, in the documented layout, give the header's plaquette.
    assert abs(plaquette(links) - stated) <= tol
    assert any("CHECKSUM" in c["check"].upper() or "checksum" in c["result"] for c in meta["checks"])


def test_read_gauge_lime_plaquette_equals_the_manifest():
    links, meta = qcd_solve.read_gauge(WEAK)
    assert links.shape == (8, 4, 4, 4, 4, 3, 3)
    assert meta["format"] in ("ILDG", "SciDAC")
    # MANIFEST.md: 0.9948041323, rounded to 10 digits (5e-11).
    assert abs(plaquette(links) - 0.9948041323) <= 5e-11


def relative(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def test_solve_satisfies_the_dirac_equation_applied_in_numpy():
    kappa = 0.12
    x, report = qcd_solve.solve(WEAK, "point:1,2,3,4:2:1", kappa=kappa, tol=1e-12, device="cpu")
    assert x.shape == (8, 4, 4, 4, 4, 3)
    assert report["converged"]
    links, _ = qcd_solve.read_gauge(WEAK)
    b = np.zeros_like(x)
    b[4, 3, 2, 1, 2, 1] = 1.0
    # Tolerance 1e-12 on ||b - D x|| / ||b||; the numpy D adds rounding of about 1e-15.
    assert relative(apply_d(links, x, kappa), b) <= 2e-12


def test_twisted_mass_solve_and_links_as_an_array():
    kappa, mu = 0.12, 0.05
    links, _ = qcd_solve.read_gauge(WEAK)
    rng = np.random.default_rng(7)
    b = rng.normal(size=(8, 4, 4, 4, 4, 3)) + 1j * rng.normal(size=(8, 4, 4, 4, 4, 3))
    x, report = qcd_solve.solve(links, b, kappa=kappa, mu=mu, tol=1e-12, device="cpu")
    assert relative(apply_d(links, x, kappa, mu_twist=mu), b) <= 2e-12
    # Periodic in t: the numpy D without the sign at the edge.
    x, _ = qcd_solve.solve(
        links, b, kappa=kappa, tol=1e-12, device="cpu", boundary=["periodic"] * 4
    )
    assert relative(apply_d(links, x, kappa, antiperiodic_t=False), b) <= 2e-12


def test_bad_path_raises_file_error_with_the_exit_code():
    with pytest.raises(qcd_solve.FileError) as e:
        qcd_solve.read_gauge(LATTICES / "no-such-file")
    assert e.value.exit_code == 3 and isinstance(e.value, qcd_solve.Error)
    with pytest.raises(qcd_solve.FileError):
        qcd_solve.solve(LATTICES / "no-such-file", kappa=0.12)


def test_bad_values_and_content_raise_their_exit_codes(tmp_path):
    with pytest.raises(qcd_solve.ConfigError) as e:
        qcd_solve.solve(WEAK, kappa=-0.1, device="cpu")
    assert e.value.exit_code == 2 and "kappa" in str(e.value)
    with pytest.raises(qcd_solve.ConfigError):
        qcd_solve.solve(WEAK, "point:9,0,0,0", kappa=0.12, device="cpu")
    with pytest.raises(qcd_solve.ConfigError):
        qcd_solve.solve(WEAK, kappa=0.12, device="cpu", no_such_option=1)
    # A NERSC file cut short: its content disagrees with its header.
    cut = tmp_path / "cut.nersc"
    cut.write_bytes(NERSC.read_bytes()[:-1000])
    with pytest.raises(qcd_solve.FormatError) as e:
        qcd_solve.read_gauge(cut)
    assert e.value.exit_code == 4
    # Links off SU(3).
    links, _ = qcd_solve.read_gauge(WEAK)
    links[0, 0, 0, 0, 0] *= 1.01
    with pytest.raises(qcd_solve.ConfigError):
        qcd_solve.solve(links, kappa=0.12, device="cpu")


def test_not_converged_carries_the_solution():
    with pytest.raises(qcd_solve.NotConvergedError) as e:
        qcd_solve.solve(WEAK, kappa=0.12, device="cpu", tol=1e-14, max_iterations=3)
    assert e.value.exit_code == 7
    assert e.value.solution.shape == (8, 4, 4, 4, 4, 3)
    assert e.value.report["iterations"] == 3


def test_propagator_columns_and_pion():
    kappa = 0.12
    prop, report, corr = qcd_solve.propagator(
        WEAK,
        (0, 0, 0, 2),
        kappa=kappa,
        tol=1e-12,
        device="cpu",
        measure={"baryons": True, "momenta": [[0, 0, 0], [1, 0, 0]]},
    )
    assert prop.shape == (8, 4, 4, 4, 4, 3, 4, 3)
    assert len(report["columns"]) == 12
    links, _ = qcd_solve.read_gauge(WEAK)
    # Each column solves D S_{., s'c'} = delta(x, x0) delta_{s s'} delta_{c c'}.
    for s, c in [(0, 0), (3, 2)]:
        b = np.zeros(prop.shape[:6], dtype=complex)
        b[2, 0, 0, 0, s, c] = 1.0
        assert relative(apply_d(links, prop[..., s, c], kappa), b) <= 2e-12
    # The pion is sum |S|^2 over each timeslice, t from the source's (docs/conventions.md).
    sums = np.sum(np.abs(prop) ** 2, axis=(1, 2, 3, 4, 5, 6, 7))
    expected = np.roll(sums, -2)
    assert np.allclose(corr["pion"], expected, rtol=1e-12, atol=0)
    g5 = corr["point"]["mesons"][("G5", "G5", (0, 0, 0))]
    assert np.allclose(g5.real, expected, rtol=1e-12, atol=0)
    assert corr["point"]["nucleon"][(0, 0, 0)].shape == (8,)
    assert ("G5", "G5", (1, 0, 0)) in corr["point"]["mesons"]


def test_clover_solve_satisfies_the_clover_dirac_equation_applied_in_numpy():
    # The NERSC file is rough (plaquette 0.50), so the clover term is far from small: a
    # wrong sign, factor or leaf would leave a residual of order kappa c_sw |F|, not 1e-12.
    kappa, csw = 0.12, 1.0
    links, _ = qcd_solve.read_gauge(NERSC)
    rng = np.random.default_rng(11)
    shape = links.shape[:4] + (4, 3)
    b = rng.normal(size=shape) + 1j * rng.normal(size=shape)
    x, report = qcd_solve.solve(NERSC, b, kappa=kappa, csw=csw, tol=1e-12, device="cpu")
    assert report["converged"]
    assert relative(apply_clover_d(links, x, kappa, csw), b) <= 2e-12
    # The clover term is there: the Wilson D alone misses b by far more than the tolerance.
    assert relative(apply_d(links, x, kappa), b) > 1e-3
    # With a twist as well (BiCGStab: g5 D is not Hermitian with a twist).
    x, _ = qcd_solve.solve(
        links, b, kappa=kappa, csw=csw, mu=0.05, tol=1e-12, device="cpu", method="bicgstab"
    )
    assert relative(apply_clover_d(links, x, kappa, csw, mu_twist=0.05), b) <= 2e-12
