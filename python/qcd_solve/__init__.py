"""qcd_solve: Wilson-Dirac solves and propagators of lattice QCD with numpy arrays.

    links, meta = qcd_solve.read_gauge("conf.lime")
    x, report = qcd_solve.solve(links, "point:0,0,0,0:0:0", kappa=0.12)
    prop, report, corr = qcd_solve.propagator(links, (0, 0, 0, 0), kappa=0.12)

Arrays are complex128 in C order, site axes [t, z, y, x] (x fastest, as in the files):
links [LT, LZ, LY, LX, mu, c, c'] with mu = 0..3 for x, y, z, t; spinors
[LT, LZ, LY, LX, spin, colour]; the propagator [LT, LZ, LY, LX, s, c, s', c'] with
(s', c') the source's spin and colour. Gamma matrices: DeGrand-Rossi. The operator
D = A - kappa H (A = 1 for plain Wilson); solutions are x = D^-1 b. docs/python.md has the
conventions against PyQUDA's.

Options are the config file's keys (docs/config.md), checked the same way; errors are
`qcd_solve.Error` subclasses whose `exit_code` is the program's exit code.
"""

import json
import os

import numpy as np

from . import _native
from .errors import (
    CheckFailedError,
    ConfigError,
    CudaError,
    Error,
    FileError,
    FormatError,
    InternalError,
    NotConvergedError,
    OutOfMemoryError,
    from_native,
)

__all__ = [
    "read_gauge",
    "solve",
    "propagator",
    "parse_source",
    "Error",
    "ConfigError",
    "FileError",
    "FormatError",
    "CudaError",
    "OutOfMemoryError",
    "NotConvergedError",
    "CheckFailedError",
    "InternalError",
]

__version__ = _native.version()

# The layouts the functions return.
LINKS_LAYOUT = "links[t, z, y, x, mu, c, c'] = U_mu(x)_{c c'}, mu = 0, 1, 2, 3 for x, y, z, t"
SPINOR_LAYOUT = "psi[t, z, y, x, s, c], DeGrand-Rossi spin basis"
PROPAGATOR_LAYOUT = "S[t, z, y, x, s, c, s', c'] = (D^-1)(x, x0)_{s c, s' c'}"

# Keyword options and the config section each belongs to (docs/config.md).
_SECTION_OF = {
    "max_iterations": "solver",
    "restart": "solver",
    "operator": "solver",
    "preconditioning": "solver",
    "precision": "solver",
    "reliable_delta": "solver",
    "iteration": "solver",
    "check_every": "solver",
    "batch": "solver",
    "kernel": "backend",
    "multiple": "backend",
    "reconstruct": "backend",
    "threads": "backend",
    "tune": "backend",
    "gamma_basis": "dirac",
}
# Keyword options that are whole config sections (a dict each).
_SECTIONS = ("multigrid", "tuning", "parallel")
_BOUNDARIES = ("periodic", "antiperiodic")


def _native_call(fn, *args):
    """`fn(*args)` with the library's errors raised as qcd_solve exceptions."""
    try:
        return fn(*args)
    except _native.NativeError as e:
        raise from_native(e) from None


def _gauge_args(gauge):
    """(path, links) of a gauge argument: a path (str or os.PathLike) or links."""
    if isinstance(gauge, (str, os.PathLike)):
        return os.fspath(gauge), None
    links = np.asarray(gauge)
    if links.dtype != np.complex128:
        if not np.issubdtype(links.dtype, np.number):
            raise ConfigError(
                f"invalid value for `gauge`: expected a path or a complex array, got {type(gauge).__name__}"
            )
        links = links.astype(np.complex128)
    return None, np.ascontiguousarray(links)


def _int_list(text, n, what, spec):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) != n:
        raise ConfigError(
            f"invalid value for `source`: \"{spec}\": {what} must be {n} integers separated by commas"
        )
    return values


def _index(text, spec):
    if text == "all":
        return "all"
    try:
        return int(text)
    except ValueError:
        raise ConfigError(
            f"invalid value for `source`: \"{spec}\": a spin or colour is an integer or \"all\", got \"{text}\""
        ) from None


def parse_source(spec):
    """The `[source]` table of a source spec string:

    - "point:x,y,z,t[:spin:colour]"       a delta at a site (spin, colour default 0)
    - "wall:t[:spin:colour]"              1 on every site of timeslice t
    - "gaussian:x,y,z,t:r0[:spin:colour]" exp(-r^2/r0^2) on the site's timeslice
    - "random:seed"                       complex Gaussian noise
    - "z2:seed[:timeslice]", "z4:seed[:timeslice]"  Z2 / Z4 noise (volume when no timeslice)
    - "plane-wave:nx,ny,nz,nt[:spin:colour]"  e^{ip.x} with integer mode numbers
    """
    if not isinstance(spec, str):
        raise ConfigError(f"invalid value for `source`: expected a string, got {type(spec).__name__}")
    kind, _, rest = spec.strip().partition(":")
    parts = rest.split(":") if rest else []
    kind = kind.lower()

    def spin_colour(tail):
        if len(tail) not in (0, 2):
            raise ConfigError(
                f"invalid value for `source`: \"{spec}\": give both spin and colour, or neither"
            )
        return {} if not tail else {"spin": _index(tail[0], spec), "colour": _index(tail[1], spec)}

    if kind == "point" and 1 <= len(parts) <= 3:
        return {"type": "point", "site": _int_list(parts[0], 4, "the site x,y,z,t", spec), **spin_colour(parts[1:])}
    if kind == "wall" and 1 <= len(parts) <= 3:
        return {"type": "wall", "t": _int_list(parts[0], 1, "t", spec)[0], **spin_colour(parts[1:])}
    if kind == "gaussian" and 2 <= len(parts) <= 4:
        try:
            r0 = float(parts[1])
        except ValueError:
            raise ConfigError(f"invalid value for `source`: \"{spec}\": r0 must be a number") from None
        return {"type": "gaussian", "site": _int_list(parts[0], 4, "the site x,y,z,t", spec), "r0": r0, **spin_colour(parts[2:])}
    if kind == "random" and len(parts) == 1:
        return {"type": "random", "seed": _int_list(parts[0], 1, "the seed", spec)[0]}
    if kind in ("z2", "z4") and 1 <= len(parts) <= 2:
        table = {"type": kind, "seed": _int_list(parts[0], 1, "the seed", spec)[0]}
        if len(parts) == 2:
            table["timeslice"] = _int_list(parts[1], 1, "the timeslice", spec)[0]
        return table
    if kind == "plane-wave" and 1 <= len(parts) <= 3:
        sc = spin_colour(parts[1:])
        return {"type": "plane-wave", "momentum": _int_list(parts[0], 4, "the momentum", spec), **sc}
    raise ConfigError(
        f"invalid value for `source`: \"{spec}\": expected point:x,y,z,t[:spin:colour], "
        "wall:t[:spin:colour], gaussian:x,y,z,t:r0[:spin:colour], random:seed, "
        "z2:seed[:timeslice], z4:seed[:timeslice] or plane-wave:nx,ny,nz,nt[:spin:colour]"
    )


def _boundary(boundary):
    if boundary is None:
        return None
    if isinstance(boundary, str) or len(boundary) != 4 or any(b not in _BOUNDARIES for b in boundary):
        raise ConfigError(
            f"invalid value for `boundary`: {boundary!r}: expected four of \"periodic\", "
            "\"antiperiodic\" for x, y, z, t"
        )
    return list(boundary)


def _options(kappa, csw, mu, method, tol, device, boundary, options):
    """The config sections of a call's keyword arguments."""
    table = {
        "dirac": {"kappa": kappa, "csw": csw, "mu": mu},
        "solver": {"method": method, "tolerance": tol},
        "backend": {"device": device},
    }
    b = _boundary(boundary)
    if b is not None:
        table["lattice"] = {"boundary": b}
    for key, value in options.items():
        if key in _SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"invalid value for `{key}`: expected a dict (the [{key}] table)")
            table[key] = value
        elif key in _SECTION_OF:
            table.setdefault(_SECTION_OF[key], {})[key] = value
        else:
            known = ", ".join(sorted(list(_SECTION_OF) + list(_SECTIONS)))
            raise ConfigError(f"invalid value for `{key}`: unknown option; known: {known}")
    return table


def _json(table):
    try:
        return json.dumps(table, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"invalid value for `options`: {e}") from None


def read_gauge(path, format="auto", *, reunitarise=False, accept_unchecked=False):
    """Read and verify a gauge file (NERSC, ILDG/SciDAC LIME, MILC, openQCD; `format`
    "auto" detects it from the first bytes).

    Returns (links, meta): links complex128 [LT, LZ, LY, LX, 4, 3, 3], element
    [t, z, y, x, mu, a, b] = U_mu(x)_{ab}, mu = 0, 1, 2, 3 for x, y, z, t (32-bit files
    reunitarised in double); meta a dict: "extents" {x, y, z, t}, "plaquette",
    "header_plaquette", "link_trace", "format", "precision_bits", "checksums",
    "checks" (every check made and its result), "layout" and the file's own entries.
    Every checksum and header value the file carries is verified; a file that disagrees
    raises FormatError (exit code 4), one that cannot be read FileError (3).
    """
    links, info = _native_call(
        _native.read_gauge, os.fspath(path), str(format), bool(reunitarise), bool(accept_unchecked)
    )
    meta = json.loads(info)
    dims = meta["dims"]
    meta["extents"] = {"x": dims[0], "y": dims[1], "z": dims[2], "t": dims[3]}
    meta["plaquette_spatial"] = meta["plaquette"]["spatial"]
    meta["plaquette_temporal"] = meta["plaquette"]["temporal"]
    meta["plaquette"] = meta["plaquette"]["total"]
    meta["layout"] = LINKS_LAYOUT
    return links, meta


def _source_args(source):
    """(source table or None, source array or None) of a solve's source argument."""
    if isinstance(source, str):
        table = parse_source(source)
    elif isinstance(source, dict):
        table = dict(source)
    else:
        array = np.ascontiguousarray(np.asarray(source, dtype=np.complex128))
        return None, array
    if "all" in (table.get("spin"), table.get("colour"), table.get("color")):
        raise ConfigError(
            "invalid value for `source`: spin or colour \"all\" asks for several right-hand "
            "sides: use qcd_solve.propagator"
        )
    return table, None


def solve(
    gauge,
    source="point:0,0,0,0:0:0",
    *,
    kappa,
    csw=0.0,
    mu=0.0,
    method="bicgstab",
    tol=1e-10,
    device="auto",
    boundary=None,
    format="auto",
    reunitarise=False,
    accept_unchecked=False,
    progress=False,
    check=True,
    **options,
):
    """Solve D x = b for one right-hand side.

    gauge: a gauge file's path, or links [LT, LZ, LY, LX, 4, 3, 3] (read_gauge's).
    source: a spec string (parse_source), a [source] table as a dict, or an array
        [LT, LZ, LY, LX, 4, 3].
    kappa, csw, mu: the operator D = A - kappa H, A = 1 + clover term + 2 i kappa mu g5.
    method: "cr", "bicgstab", "gcr", "cgne" or "mg"; tol: ||b - D x|| / ||b|| to reach.
    device: "auto" (a GPU when one is usable), "cpu" or "cuda".
    boundary: fermion boundary conditions for x, y, z, t (default periodic in space,
        antiperiodic in time).
    options: config keys of [solver] and [backend] (max_iterations, preconditioning,
        precision, kernel, threads, ...) or whole sections (multigrid={...}, tuning={...}).

    Returns (x, report): x complex128 [LT, LZ, LY, LX, 4, 3]; report the program's JSON
    report as a dict (iterations, residuals, timings, backend, ...). A solve that does not
    converge raises NotConvergedError (with .solution and .report) unless check=False.
    """
    gauge_path, links = _gauge_args(gauge)
    table_source, array_source = _source_args(source)
    table = _options(kappa, csw, mu, method, tol, device, boundary, options)
    if table_source is not None:
        table["source"] = table_source
    x, report, converged = _native_call(
        _native.solve,
        _json(table),
        gauge_path,
        links,
        array_source,
        str(format),
        bool(reunitarise),
        bool(accept_unchecked),
        bool(progress),
    )
    report = json.loads(report)
    report["layout"] = SPINOR_LAYOUT
    if check and not converged:
        raise NotConvergedError(
            f"solver did not converge: {report['solver']} stopped ({report['stop_reason']}) "
            f"after {report['iterations']} iterations, residual {report['iterated_residual']:.3e}, "
            f"tolerance {report['tolerance']:.1e}",
            solution=x,
            report=report,
        )
    return x, report


def _correlators(rows, pion):
    """The correlators' rows as {sink: {"mesons": {(G_src, G_snk, p): values},
    "nucleon": {p: values}}}, plus "pion" (Re C_{G5 G5}(t), p = 0, point sink)."""
    out = {}
    for sink, kind, src, snk, momentum, values in rows:
        per_sink = out.setdefault(sink, {"mesons": {}, "nucleon": {}})
        if kind == "meson":
            per_sink["mesons"][(src, snk, tuple(momentum))] = values
        else:
            per_sink["nucleon"][tuple(momentum)] = values
    out["pion"] = np.asarray(pion, dtype=np.float64)
    return out


def propagator(
    gauge,
    source_site=(0, 0, 0, 0),
    *,
    kappa,
    csw=0.0,
    mu=0.0,
    source=None,
    measure=None,
    method="bicgstab",
    tol=1e-10,
    device="auto",
    boundary=None,
    format="auto",
    reunitarise=False,
    accept_unchecked=False,
    progress=False,
    **options,
):
    """The propagator S = D^-1 of a point source at source_site = (x, y, z, t): its 12
    spin-colour columns solved on one backend, and their correlators.

    source: None (a point at source_site), or a "wall:t" / "gaussian:x,y,z,t:r0" spec
        string or a [source] table (a dict; its spin and colour are set to "all").
    measure: the [measure] table (dict) of the contractions; None: its defaults.
    The other arguments are solve's.

    Returns (prop, report, correlators): prop complex128 [LT, LZ, LY, LX, 4, 3, 4, 3],
    element [t, z, y, x, s, c, s', c'] = S(x, x0)_{s c, s' c'}; report a dict (each
    column's iterations and true residual, the pion and its effective mass);
    correlators {sink: {"mesons": {(source_gamma, sink_gamma, (px, py, pz)): C(t)},
    "nucleon": {(px, py, pz): C(t)}}, "pion": Re C_{G5,G5}(t)}, t counted from the source's
    timeslice (complex128 arrays of LT values). A column that does not converge raises
    NotConvergedError (exit code 7).
    """
    gauge_path, links = _gauge_args(gauge)
    if source is None:
        table_source = {"type": "point", "site": [int(v) for v in source_site]}
    elif isinstance(source, str):
        table_source = parse_source(source)
    elif isinstance(source, dict):
        table_source = dict(source)
    else:
        raise ConfigError("invalid value for `source`: expected None, a spec string or a dict")
    table_source.pop("color", None)
    table_source["spin"] = "all"
    table_source["colour"] = "all"
    table = _options(kappa, csw, mu, method, tol, device, boundary, options)
    table["source"] = table_source
    if measure is not None:
        if not isinstance(measure, dict):
            raise ConfigError("invalid value for `measure`: expected a dict (the [measure] table)")
        table["measure"] = measure
    prop, report, rows = _native_call(
        _native.propagator,
        _json(table),
        gauge_path,
        links,
        str(format),
        bool(reunitarise),
        bool(accept_unchecked),
        bool(progress),
    )
    report = json.loads(report)
    return prop, report, _correlators(rows, report.get("pion", []))
