//! The per-method table's rows: each Krylov method on kernel 3.0 with the config's
//! options, plain and even-odd with reduced precision.

use super::report::MethodRow;
use crate::app::run::{solve_on, Problem, SolvePlan};
use crate::app::tuning::median_spread;
use crate::backend::cuda::CudaBackend;
use crate::error::{Error, Result};
use crate::solver::{Method, StopReason};

/// The per-method table's option sets: plain, and even-odd with single-double and with
/// half-double.
pub fn method_options() -> [(
    &'static str,
    crate::config::Preconditioning,
    crate::backend::Precision,
); 3] {
    use crate::backend::Precision;
    use crate::config::Preconditioning;
    [
        ("plain", Preconditioning::None, Precision::Double),
        ("eo+single", Preconditioning::EvenOdd, Precision::Single),
        ("eo+half", Preconditioning::EvenOdd, Precision::Half),
    ]
}

/// The plan of `method` with the config's [solver] options (tolerance, restart, delta,
/// check_every; CR fused as `iteration = "auto"` makes it on 3.0), preconditioning and
/// precision as given; and the operator form it starts from (the config's, else the
/// method's default).
pub fn method_plan(
    c: &crate::config::Config,
    method: Method,
    pre: crate::config::Preconditioning,
    precision: crate::backend::Precision,
) -> (SolvePlan, crate::backend::Operator) {
    let mut c = c.clone();
    c.solver.method = method;
    c.solver.preconditioning = pre;
    c.solver.precision = crate::config::SolverPrecision::of_inner(precision);
    (SolvePlan::from_config(&c, true), c.solver.operator())
}

/// One method row: a warm-up solve, then `repeat` timed solves (median and spread of the
/// solve time); iterations and applications of the last one.
pub(super) fn run_method(
    p: &Problem,
    be: &mut CudaBackend,
    method: Method,
    options: &str,
    plan: &SolvePlan,
    repeat: usize,
) -> Result<MethodRow> {
    let _warm = solve_on(be, p, plan)?;
    let mut total = Vec::new();
    let mut last = None;
    for _ in 0..repeat {
        let r = solve_on(be, p, plan)?;
        total.push(r.timings.solve);
        last = Some(r);
    }
    let r = last.expect("repeat >= 1");
    let (tm, ts) = median_spread(total);
    let converged = r.reason == StopReason::Converged;
    let true_residual = crate::app::run::cpu_residual_of_d(p, &r.solution);
    let error = if !converged || true_residual.is_nan() || true_residual > 2.0 * plan.cr.tol {
        Some(format!(
            "solve {} with true residual of D x = b {:.2e}",
            r.reason.describe(),
            true_residual
        ))
    } else {
        None
    };
    Ok(MethodRow {
        method: method.name().into(),
        options: options.into(),
        solver: r.plan.clone(),
        operator: method.iterated_form(p.operator).to_string(),
        iterations: r.iterations,
        operator_applications: r.operator_applications,
        seconds_to_solution_median: tm,
        seconds_to_solution_spread: ts,
        true_residual,
        valid: error.is_none(),
        error,
    })
}

pub(super) fn failed_method_row(method: Method, options: &str, e: &Error) -> MethodRow {
    MethodRow {
        method: method.name().into(),
        options: options.into(),
        solver: String::new(),
        operator: String::new(),
        iterations: 0,
        operator_applications: 0,
        seconds_to_solution_median: f64::NAN,
        seconds_to_solution_spread: f64::NAN,
        true_residual: f64::NAN,
        valid: false,
        error: Some(e.to_string()),
    }
}
