//! Helpers of the clover and twisted-mass tests (tests/clover.rs, tests/twisted.rs): the
//! DeGrand-Rossi gamma matrices written out here from docs/conventions.md (not taken from
//! src/field/gamma.rs, so that the tests' spin algebra is a second construction), the
//! free-field momentum-space operator, inner products, and the library's operator and
//! solve paths as a user calls them.
#![allow(dead_code)]

use qcd_solve::app::run::{build_problem, solve_on, Problem, SolvePlan, SolveResult};
use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::prelude::*;
use qcd_solve::config::{LoadedConfig, Preconditioning, SolverPrecision};
use qcd_solve::dirac::Action;
use qcd_solve::field::su3::Su3;
use qcd_solve::field::{GaugeField, SpinorField, C64};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::linalg::Operator;
use qcd_solve::solver::Method;
use std::path::{Path, PathBuf};

pub type M4 = [[C64; 4]; 4];

/// The test lattice: 4^3 x 8, periodic in space, antiperiodic in time (the default).
pub const DIMS: [usize; 4] = [4, 4, 4, 8];

pub fn lattice(dims: [usize; 4]) -> Lattice {
    Lattice::new(dims, DEFAULT_BOUNDARY).unwrap()
}

/// A gauge file of ../shared/lattices (MANIFEST.md), used in place.
pub fn shared(name: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/lattices")).join(name)
}

/// PyQUDA's tests/weak_field.lime (4^3 x 8, 64-bit ILDG, plaquette 0.9948041323).
pub fn weak_field() -> GaugeField {
    let (g, _) = qcd_solve::io::read_gauge(
        &shared("pyquda_weak_field.lime"),
        None,
        None,
        DEFAULT_BOUNDARY,
    )
    .unwrap();
    assert_eq!(g.lattice.dims, DIMS);
    g
}

fn c(re: i32, im: i32) -> C64 {
    C64::new(re as f64, im as f64)
}

/// g1..g4 (x, y, z, t) in the DeGrand-Rossi basis, copied from docs/conventions.md.
pub fn gammas() -> [M4; 4] {
    let (o, i, mi, one, m1) = (c(0, 0), c(0, 1), c(0, -1), c(1, 0), c(-1, 0));
    [
        [[o, o, o, i], [o, o, i, o], [o, mi, o, o], [mi, o, o, o]],
        [[o, o, o, m1], [o, o, one, o], [o, one, o, o], [m1, o, o, o]],
        [[o, o, i, o], [o, o, o, mi], [mi, o, o, o], [o, i, o, o]],
        [
            [o, o, one, o],
            [o, o, o, one],
            [one, o, o, o],
            [o, one, o, o],
        ],
    ]
}

pub fn mul4(a: &M4, b: &M4) -> M4 {
    std::array::from_fn(|i| std::array::from_fn(|j| (0..4).map(|k| a[i][k] * b[k][j]).sum()))
}

/// g5 = g1 g2 g3 g4, computed from the written-out matrices.
pub fn gamma5() -> M4 {
    let g = gammas();
    mul4(&mul4(&g[0], &g[1]), &mul4(&g[2], &g[3]))
}

/// sigma_{mu nu} = (i/2) [g_mu, g_nu].
pub fn sigma(mu: usize, nu: usize) -> M4 {
    let g = gammas();
    let (ab, ba) = (mul4(&g[mu], &g[nu]), mul4(&g[nu], &g[mu]));
    std::array::from_fn(|i| std::array::from_fn(|j| C64::new(0.0, 0.5) * (ab[i][j] - ba[i][j])))
}

/// The free-field spin matrix of D on e^{ipx}: M(p) = a + i sum_mu b_mu g_mu + i t g5,
/// a = 1 - 2 kappa sum cos p_mu, b_mu = 2 kappa sin p_mu, t = 2 kappa mu
/// (docs/conventions.md, free field check, plus the twist).
pub fn free_m(p: [f64; 4], kappa: f64, mu: f64) -> M4 {
    let g = gammas();
    let g5 = gamma5();
    let a = 1.0 - 2.0 * kappa * p.iter().map(|x| x.cos()).sum::<f64>();
    std::array::from_fn(|i| {
        std::array::from_fn(|j| {
            let mut z = if i == j {
                C64::new(a, 0.0)
            } else {
                C64::new(0.0, 0.0)
            };
            for (m, gm) in g.iter().enumerate() {
                z += C64::new(0.0, 2.0 * kappa * p[m].sin()) * gm[i][j];
            }
            z + C64::new(0.0, 2.0 * kappa * mu) * g5[i][j]
        })
    })
}

/// Its inverse in closed form: {g_mu, g5} = 0 and g^2 = 1 give M^+ M = a^2 + |b|^2 + t^2,
/// so M^-1 = M^+ / (a^2 + |b|^2 + t^2).
pub fn free_m_inverse(p: [f64; 4], kappa: f64, mu: f64) -> M4 {
    let a = 1.0 - 2.0 * kappa * p.iter().map(|x| x.cos()).sum::<f64>();
    let b2: f64 = p.iter().map(|x| (2.0 * kappa * x.sin()).powi(2)).sum();
    let den = a * a + b2 + (2.0 * kappa * mu).powi(2);
    let m = free_m(p, kappa, mu);
    std::array::from_fn(|i| std::array::from_fn(|j| m[j][i].conj() / den))
}

/// (m (x) 1_colour) u for a site's 12 values.
pub fn spin_mul(m: &M4, u: &[C64; 12]) -> [C64; 12] {
    std::array::from_fn(|k| (0..4).map(|t| m[k / 3][t] * u[3 * t + k % 3]).sum())
}

/// (a | b) = sum conj(a) b.
pub fn dot(a: &SpinorField, b: &SpinorField) -> C64 {
    a.data.iter().zip(&b.data).map(|(x, y)| x.conj() * y).sum()
}

pub fn norm(a: &SpinorField) -> f64 {
    a.norm2().sqrt()
}

/// A random gauge transformation: one SU(3) matrix a site.
pub fn random_transform(volume: usize, seed: u64) -> Vec<Su3> {
    (0..volume)
        .map(|x| Su3::random(&mut qcd_solve::rng::Stream::new(seed, x as u64)))
        .collect()
}

/// op psi through the CPU backend built for `action` (CpuBackend::with_action), as a
/// solve applies it.
pub fn apply(gauge: &GaugeField, action: &Action, op: Operator, psi: &SpinorField) -> SpinorField {
    let mut be = CpuBackend::with_action(gauge, action).unwrap();
    apply_on(&mut be, op, psi)
}

pub fn apply_on(be: &mut CpuBackend, op: Operator, psi: &SpinorField) -> SpinorField {
    let x = be.upload(psi).unwrap();
    let mut y = be.alloc().unwrap();
    WilsonKernels::apply(be, op, &mut y, &x).unwrap();
    be.download(&y).unwrap()
}

fn config_text(kappa: f64, csw: f64, mu: f64, tol: f64) -> String {
    format!(
        "[lattice]\nLX = {}\nLY = {}\nLZ = {}\nLT = {}\n[gauge]\ntype = \"unit\"\n\
         [dirac]\nkappa = {kappa:?}\ncsw = {csw:?}\nmu = {mu:?}\n\
         [source]\ntype = \"random\"\nseed = 1\n\
         [solver]\ntolerance = {tol:?}\nmax_iterations = 4000\n[backend]\ndevice = \"cpu\"\n\
         [output]\n",
        DIMS[0], DIMS[1], DIMS[2], DIMS[3]
    )
}

/// The problem of D x = `source` on `gauge` (4^3 x 8) for `action`, as the program builds
/// it from a config (then the gauge field and source replaced).
pub fn problem(gauge: &GaugeField, action: &Action, source: SpinorField) -> Problem {
    let text = config_text(action.kappa, action.csw, action.mu, 1e-10);
    let cfg = LoadedConfig::from_str(&text, "test", PathBuf::from(".")).unwrap();
    let mut p = build_problem(&cfg).unwrap();
    assert_eq!(p.action(), *action);
    assert_eq!(gauge.lattice.dims, p.lattice.dims);
    p.gauge = gauge.clone();
    p.source = source;
    p
}

/// The plan the program makes from [solver] for this method, preconditioning, precision
/// and tolerance.
pub fn plan(method: Method, pre: Preconditioning, single: bool, tol: f64) -> SolvePlan {
    let text = config_text(0.1, 0.0, 0.0, tol);
    let mut cfg = LoadedConfig::from_str(&text, "test", PathBuf::from(".")).unwrap();
    cfg.config.solver.method = method;
    cfg.config.solver.preconditioning = pre;
    if single {
        cfg.config.solver.precision = SolverPrecision::SingleDouble;
    }
    SolvePlan::from_config(&cfg.config, false)
}

/// Solve D x = b with `method` (its default operator) on the CPU backend of the problem's
/// action, through the program's solve path (app::run::solve_on).
pub fn solve(
    problem: &mut Problem,
    method: Method,
    pre: Preconditioning,
    single: bool,
    tol: f64,
) -> SolveResult {
    problem.operator = method.default_operator();
    let mut be = CpuBackend::with_action(&problem.gauge, &problem.action()).unwrap();
    solve_on(&mut be, problem, &plan(method, pre, single, tol)).unwrap()
}
