//! Krylov solvers, each written once over the vector space and a linear operator
//! (`crate::linalg`): CR (the seed's Algorithm 1, on a host or a fused device engine),
//! BiCGStab, GCR(m) and CG on the normal equations. `monitor` holds the stop rules they
//! share; `mixed` (reliable-update mixed precision) and `eo` (even-odd preconditioning)
//! wrap any of them. `solve` puts a plan together.

pub mod batch;
pub mod bicgstab;
pub mod cgne;
pub mod cr;
pub mod eo;
pub mod gcr;
pub mod mg;
pub mod mixed;
pub mod monitor;
pub mod work;

pub use monitor::{Iterate, Monitor, StopReason, StopRules, Verdict};

/// Microseconds since `t`, for the solvers' debug timings of their steps.
pub(crate) fn micros_since(t: &std::time::Instant) -> u64 {
    t.elapsed().as_micros() as u64
}

use crate::field::C64;
use crate::linalg::engines::FusedCr;
use crate::linalg::{Form, LinearOperator, Operator, Precision, Space, WilsonKernels};
use crate::{Error, Result};
use serde::Serialize;

/// The seed's name for the stop rules.
pub type CrParams = StopRules;

/// What a solve did beyond its history.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SolveStats {
    /// Host reads of the scalars (convergence checks).
    pub checks: usize,
    /// Reliable updates (mixed precision): double-precision operator applications.
    pub reliable_updates: usize,
    /// Inner-precision applications that restarted the iteration after an update.
    pub restart_applications: usize,
    /// ||b - A x|| / ||b|| in double at each reliable update, with its iteration.
    pub true_residuals: Vec<(usize, f64)>,
}

/// The fused CR's statistics (the same record).
pub type FusedStats = SolveStats;

pub struct SolveOutcome<F> {
    pub x: F,
    pub iterations: usize,
    pub reason: StopReason,
    /// ||r_k|| / ||b|| for k = 0 (= 1) .. iterations.
    pub history: Vec<f64>,
    /// Applications of the Wilson stencil made.
    pub operator_applications: usize,
    pub stats: SolveStats,
}

/// The Krylov method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Conjugate Residual (the seed's Algorithm 1); Hermitian operators (g5 D).
    Cr,
    /// BiCGStab; any operator (D by default).
    Bicgstab,
    /// GCR(m), restarted every `restart` directions; any operator (D by default).
    Gcr,
    /// CG on the normal equations (CGNR form); runs on g5 D, i.e. D^dag D.
    Cgne,
    /// Flexible GCR(m) preconditioned by adaptive aggregation multigrid (`mg`); D.
    Mg,
}

impl Method {
    pub const ALL: [Method; 5] = [
        Method::Cr,
        Method::Bicgstab,
        Method::Gcr,
        Method::Cgne,
        Method::Mg,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Method::Cr => "cr",
            Method::Bicgstab => "bicgstab",
            Method::Gcr => "gcr",
            Method::Cgne => "cgne",
            Method::Mg => "mg",
        }
    }

    /// The name in logs and tables.
    pub fn label(self) -> &'static str {
        match self {
            Method::Cr => "CR",
            Method::Bicgstab => "BiCGStab",
            Method::Gcr => "GCR",
            Method::Cgne => "CGNE",
            Method::Mg => "MG",
        }
    }

    /// The operator form a config that names none solves with this method.
    pub fn default_operator(self) -> Operator {
        match self {
            Method::Cr | Method::Cgne => Operator::G5D,
            Method::Bicgstab | Method::Gcr | Method::Mg => Operator::D,
        }
    }

    /// Fields of the iterated layout its workspace holds (the solution among them): CR's
    /// x, r, p, Ap, Ar; BiCGStab's x, r, r0, p, v, t; GCR(m)'s x, r, m directions and their
    /// images; CGNE's x, r, z, p, w. The solvers take exactly these (`cr::FIELDS`, ...),
    /// and the device estimate counts them (`app::footprint`).
    pub fn fields(self, restart: usize) -> usize {
        match self {
            Method::Cr => cr::FIELDS,
            Method::Bicgstab => bicgstab::FIELDS,
            Method::Gcr => gcr::fields(restart.max(1)),
            Method::Cgne => cgne::FIELDS,
            // The outer GCR's and the fine cycle's four (single), with two for the
            // precision change.
            Method::Mg => gcr::fields(restart.max(1)) + 6,
        }
    }

    /// The form it iterates on for a requested form: CGNE needs the Hermitian one.
    pub fn iterated_form(self, requested: Operator) -> Operator {
        match self {
            Method::Cgne if !requested.gamma5() => requested.times_gamma5(),
            _ => requested,
        }
    }
}

impl std::str::FromStr for Method {
    type Err = Error;
    fn from_str(s: &str) -> Result<Method> {
        Method::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                Error::invalid(
                    "solver.method",
                    format!("unknown method {s:?}; expected cr, bicgstab, gcr, cgne or mg"),
                )
            })
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A whole solve: method, engine and wrappers.
#[derive(Clone, Debug)]
pub struct SolveSpec {
    pub method: Method,
    pub rules: StopRules,
    /// CR and BiCGStab: the backend's fused iteration (scalars on the device).
    pub fused: bool,
    /// Read the scalars every this many iterations (fused iterations).
    pub check_every: usize,
    /// Precision of the iteration's fields (Single: single-double with reliable updates).
    pub precision: Precision,
    pub delta: f64,
    pub even_odd: bool,
    /// GCR's restart length.
    pub restart: usize,
    /// The fused BiCGStab replays each iteration as a recorded graph (else its launches
    /// are queued one by one; `[tuning] bicgstab_graphs`).
    pub bicgstab_graphs: bool,
}

impl SolveSpec {
    pub fn new(method: Method, rules: StopRules) -> Self {
        SolveSpec {
            method,
            rules,
            fused: false,
            check_every: 1,
            precision: Precision::Double,
            delta: 0.1,
            even_odd: false,
            restart: 10,
            bicgstab_graphs: true,
        }
    }
}

/// Solve D x = source through the full-lattice form `form` (D or g5 D; `rhs` is the
/// source with g5 applied when the form has it) as `spec` says. Never fails on
/// non-convergence: the outcome says why it stopped. The history is that of the system
/// iterated (the Schur system for even-odd, which starts from `source`; `rhs` is not used
/// then).
pub fn solve<B: FusedCr>(
    space: &mut B,
    spec: &SolveSpec,
    form: Operator,
    rhs: &B::Field,
    source: Option<&B::Field>,
    observe: &mut dyn FnMut(usize, f64),
) -> Result<SolveOutcome<B::Field>> {
    let form = spec.method.iterated_form(form);
    if spec.even_odd {
        let source = source
            .ok_or_else(|| Error::internal("an even-odd solve needs the source of D x = b"))?;
        let (rhs_e, b_o) = eo::prepare(space, source, form.gamma5())?;
        return solve_even_odd(space, spec, form, rhs_e, b_o, observe);
    }
    solve_system(space, spec, form, rhs, observe)
}

/// An even-odd solve of D x = source (as `solve` with `spec.even_odd`) that takes the
/// source and frees it as soon as the even right-hand side is made, so that the full field
/// is not held through the iteration (the application's way).
pub fn solve_from_source<B: FusedCr>(
    space: &mut B,
    spec: &SolveSpec,
    form: Operator,
    source: B::Field,
    observe: &mut dyn FnMut(usize, f64),
) -> Result<SolveOutcome<B::Field>> {
    if !spec.even_odd {
        return Err(Error::internal(
            "solve_from_source is the even-odd solve; a full-lattice solve takes its rhs",
        ));
    }
    let form = spec.method.iterated_form(form);
    let t = std::time::Instant::now();
    let (rhs_e, b_o) = eo::prepare(space, &source, form.gamma5())?;
    drop(source);
    tracing::debug!(
        us = micros_since(&t),
        "solve: even-odd preparation (queued)"
    );
    solve_even_odd(space, spec, form, rhs_e, b_o, observe)
}

/// The Schur system of the iterated form `form` on the prepared even right-hand side,
/// then the odd sites; rhs_e is freed before the reconstruction.
fn solve_even_odd<B: FusedCr>(
    space: &mut B,
    spec: &SolveSpec,
    form: Operator,
    rhs_e: B::Field,
    b_o: B::Field,
    observe: &mut dyn FnMut(usize, f64),
) -> Result<SolveOutcome<B::Field>> {
    let t = std::time::Instant::now();
    let mut out = solve_system(space, spec, form.schur(), &rhs_e, observe)?;
    drop(rhs_e);
    tracing::debug!(us = micros_since(&t), "solve: the Schur system");
    let t = std::time::Instant::now();
    out.x = eo::reconstruct(space, &out.x, &b_o)?;
    tracing::debug!(us = micros_since(&t), "solve: reconstruction (queued)");
    Ok(out)
}

/// A x = b for the Wilson form `system` (full or Schur), by the spec's method and engine.
fn solve_system<B: FusedCr>(
    space: &mut B,
    spec: &SolveSpec,
    system: Operator,
    b: &B::Field,
    observe: &mut dyn FnMut(usize, f64),
) -> Result<SolveOutcome<B::Field>> {
    let nb = space.norm2(b)?;
    let mut monitor = Monitor::new(spec.rules.clone(), nb, observe);
    let op = Form(system);
    match spec.method {
        Method::Cr if spec.fused => {
            let engine = cr::DeviceEngine::new(&op)?;
            let mut inner = cr::Cr::new(engine, spec.check_every);
            finish(space, spec, op, &mut inner, b, &mut monitor)
        }
        Method::Cr => {
            let mut inner = cr::Cr::new(cr::HostEngine::new(op), spec.check_every);
            finish(space, spec, op, &mut inner, b, &mut monitor)
        }
        Method::Bicgstab if spec.fused => {
            let mut inner = bicgstab::Fused::new(&op, spec.check_every, spec.bicgstab_graphs)?;
            finish(space, spec, op, &mut inner, b, &mut monitor)
        }
        Method::Bicgstab => {
            let mut inner = bicgstab::BiCgStab::new(op);
            finish(space, spec, op, &mut inner, b, &mut monitor)
        }
        Method::Gcr => {
            let mut inner = gcr::Gcr::new(op, spec.restart);
            finish(space, spec, op, &mut inner, b, &mut monitor)
        }
        Method::Cgne => {
            let mut inner = cgne::Cgne::new(op)?;
            finish(space, spec, op, &mut inner, b, &mut monitor)
        }
        Method::Mg => Err(Error::internal(
            "a multigrid solve needs the operator's matrices: solver::mg::solve",
        )),
    }
}

/// Run `inner` on A x = b, through the mixed-precision wrapper when the spec asks.
fn finish<S: Space, A: LinearOperator<S>, I: Iterate<S>>(
    space: &mut S,
    spec: &SolveSpec,
    mut op: A,
    inner: &mut I,
    b: &S::Field,
    monitor: &mut Monitor,
) -> Result<SolveOutcome<S::Field>> {
    if spec.precision != space.layout(b).precision {
        return mixed::solve(
            space,
            &mut op,
            inner,
            b,
            spec.precision,
            spec.delta,
            monitor,
        );
    }
    run_plain(space, inner, b, monitor)
}

/// One run to the end, in the right-hand side's precision.
pub fn run_plain<S: Space, I: Iterate<S>>(
    space: &mut S,
    inner: &mut I,
    b: &S::Field,
    monitor: &mut Monitor,
) -> Result<SolveOutcome<S::Field>> {
    let run = inner.run(space, b, monitor, 0, None)?;
    let reason = match run.verdict {
        Verdict::Stop(r) => r,
        v => return Err(Error::internal(format!("a plain solve ended on {v:?}"))),
    };
    let x = inner
        .take_solution()
        .ok_or_else(|| Error::internal("a solve left no solution"))?;
    inner.release(space);
    Ok(SolveOutcome {
        x,
        iterations: run.iter,
        reason,
        history: monitor.relative(&run.history),
        operator_applications: run.applications,
        stats: SolveStats {
            checks: run.checks,
            ..Default::default()
        },
    })
}

/// Solve A x = b by the seed's CR (host scalars, a check every iteration).
pub fn conjugate_residual<S: WilsonKernels>(
    space: &mut S,
    op: Operator,
    b: &S::Field,
    params: &StopRules,
) -> Result<SolveOutcome<S::Field>> {
    conjugate_residual_observed(space, op, b, params, &mut |_, _| {})
}

/// As `conjugate_residual`, calling `observe(iteration, ||r||/||b||)` at every check.
pub fn conjugate_residual_observed<S: WilsonKernels>(
    space: &mut S,
    op: Operator,
    b: &S::Field,
    params: &StopRules,
    observe: &mut dyn FnMut(usize, f64),
) -> Result<SolveOutcome<S::Field>> {
    let nb = space.norm2(b)?;
    let mut monitor = Monitor::new(params.clone(), nb, observe);
    let mut inner = cr::Cr::new(cr::HostEngine::new(Form(op)), 1);
    run_plain(space, &mut inner, b, &mut monitor)
}

/// The fused CR's parameters (tests and `floor` drive it directly).
#[derive(Clone, Debug)]
pub struct FusedParams {
    pub tol: f64,
    pub max_iterations: usize,
    pub check_every: usize,
    pub precision: Precision,
    pub delta: f64,
    pub stagnation_window: usize,
    pub divergence_limit: f64,
}

impl FusedParams {
    pub fn new(tol: f64, max_iterations: usize) -> Self {
        FusedParams {
            tol,
            max_iterations,
            check_every: 1,
            precision: Precision::Double,
            delta: 0.1,
            stagnation_window: 200,
            divergence_limit: 1e8,
        }
    }
}

/// Solve A x = b (b a double field of the operator's domain) by the fused CR, through
/// the mixed wrapper when `params.precision` is single.
pub fn fused_cr<B: FusedCr>(
    space: &mut B,
    op: Operator,
    b: &B::Field,
    params: &FusedParams,
    observe: &mut dyn FnMut(usize, f64),
) -> Result<(SolveOutcome<B::Field>, SolveStats)> {
    let rules = StopRules {
        tol: params.tol,
        max_iterations: params.max_iterations,
        stagnation_window: params.stagnation_window,
        divergence_limit: params.divergence_limit,
    };
    let spec = SolveSpec {
        fused: true,
        check_every: params.check_every,
        precision: params.precision,
        delta: params.delta,
        ..SolveSpec::new(Method::Cr, rules)
    };
    let nb = space.norm2(b)?;
    let mut monitor = Monitor::new(spec.rules.clone(), nb, observe);
    let form = Form(op);
    let mut inner = cr::Cr::new(cr::DeviceEngine::new(&form)?, spec.check_every);
    let out = finish(space, &spec, form, &mut inner, b, &mut monitor)?;
    let stats = out.stats.clone();
    Ok((out, stats))
}

/// ||b - A x|| / ||b|| computed from scratch (not the iterated residual).
pub fn true_residual<S: WilsonKernels>(
    space: &mut S,
    op: Operator,
    b: &S::Field,
    x: &S::Field,
) -> Result<f64> {
    let mut ax = space.alloc_layout(space.layout(b))?;
    space.apply(op, &mut ax, x)?;
    // ax = b - ax
    space.xpay(b, C64::new(-1.0, 0.0), &mut ax)?;
    let nr = space.norm2(&ax)?;
    let nb = space.norm2(b)?;
    Ok((nr / nb).sqrt())
}
