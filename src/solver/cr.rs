//! Conjugate Residual exactly as the seed's Algorithm 1 (report 004, section I.2):
//!
//! ```text
//! r = b; p = r; x = 0; nr = (r|r); Ap = A p; rar = (r|Ap)
//! while nr > eps:
//!   rarold = rar; alpha = conj(rar) / (Ap|Ap)
//!   x = x + alpha p; r = r - alpha Ap; nr = (r|r)
//!   Ar = A r; rar = (r|Ar); beta = rar / rarold
//!   p = r + beta p; Ap = Ar + beta Ap
//! ```
//! with (u|v) = sum conj(u) v and eps = tol^2 (b|b). One operator application per
//! iteration. The relative residual sqrt(nr/(b|b)) of every iteration is recorded.

use crate::backend::{Backend, Operator};
use crate::field::C64;
use crate::Result;
use serde::Serialize;

#[derive(Clone, Debug)]
pub struct CrParams {
    /// Stop when ||r|| / ||b|| <= tol.
    pub tol: f64,
    pub max_iterations: usize,
    /// Declare stagnation when the residual has not reached a new minimum (by 1%) for
    /// this many iterations.
    pub stagnation_window: usize,
    /// Declare divergence when ||r|| / ||b|| exceeds this.
    pub divergence_limit: f64,
}

impl CrParams {
    pub fn new(tol: f64, max_iterations: usize) -> Self {
        CrParams {
            tol,
            max_iterations,
            stagnation_window: 200,
            divergence_limit: 1e8,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    Converged,
    MaxIterations,
    Stagnation,
    Divergence,
    NotANumber,
}

impl StopReason {
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::Converged => "converged",
            StopReason::MaxIterations => "reached the maximum number of iterations",
            StopReason::Stagnation => "stagnated (no progress in the stagnation window)",
            StopReason::Divergence => "diverged (residual grew past the divergence limit)",
            StopReason::NotANumber => "produced NaN or infinity",
        }
    }
}

pub struct SolveOutcome<F> {
    pub x: F,
    pub iterations: usize,
    pub reason: StopReason,
    /// ||r_k|| / ||b|| for k = 0 (= 1) .. iterations.
    pub history: Vec<f64>,
    /// Operator applications made (iterations + 1).
    pub operator_applications: usize,
}

/// Solve A x = b by CR. Never fails on non-convergence: the outcome says why it stopped.
pub fn conjugate_residual<B: Backend>(
    backend: &mut B,
    op: Operator,
    b: &B::Field,
    params: &CrParams,
) -> Result<SolveOutcome<B::Field>> {
    conjugate_residual_observed(backend, op, b, params, &mut |_, _| {})
}

/// As `conjugate_residual`, calling `observe(iteration, ||r||/||b||)` after every
/// iteration (progress display; it sees only the scalar the loop already has).
pub fn conjugate_residual_observed<B: Backend>(
    backend: &mut B,
    op: Operator,
    b: &B::Field,
    params: &CrParams,
    observe: &mut dyn FnMut(usize, f64),
) -> Result<SolveOutcome<B::Field>> {
    let mut x = backend.alloc()?;
    let mut r = backend.alloc()?;
    let mut p = backend.alloc()?;
    let mut ap = backend.alloc()?;
    let mut ar = backend.alloc()?;
    backend.copy(&mut r, b)?;
    backend.copy(&mut p, &r)?;
    let nb = backend.norm2(b)?;
    let eps = params.tol * params.tol * nb;
    let mut nr = nb;
    backend.apply(op, &mut ap, &p)?;
    let mut applications = 1;
    let mut rar = backend.dot(&r, &ap)?;

    let mut history = vec![(nr / nb).sqrt()];
    let mut best = f64::INFINITY;
    let mut best_at = 0;
    let mut iterations = 0;
    let reason = loop {
        if !nr.is_finite() {
            break StopReason::NotANumber;
        }
        if nr <= eps {
            break StopReason::Converged;
        }
        let rel = (nr / nb).sqrt();
        if rel > params.divergence_limit {
            break StopReason::Divergence;
        }
        if rel < 0.99 * best {
            best = rel;
            best_at = iterations;
        } else if iterations - best_at >= params.stagnation_window {
            break StopReason::Stagnation;
        }
        if iterations >= params.max_iterations {
            break StopReason::MaxIterations;
        }

        let rarold = rar;
        let apap = backend.norm2(&ap)?;
        let alpha = rar.conj() / apap;
        backend.axpy(alpha, &p, &mut x)?;
        backend.axpy(-alpha, &ap, &mut r)?;
        nr = backend.norm2(&r)?;
        backend.apply(op, &mut ar, &r)?;
        applications += 1;
        rar = backend.dot(&r, &ar)?;
        let beta: C64 = rar / rarold;
        backend.xpay(&r, beta, &mut p)?;
        backend.xpay(&ar, beta, &mut ap)?;
        iterations += 1;
        history.push((nr / nb).sqrt());
        observe(iterations, (nr / nb).sqrt());
        tracing::debug!(iteration = iterations, residual = (nr / nb).sqrt(), "CR");
    };
    Ok(SolveOutcome {
        x,
        iterations,
        reason,
        history,
        operator_applications: applications,
    })
}
