//! The fast path's Conjugate Residual: the seed's Algorithm 1 (solver::cr) with each
//! iteration as three fused backend passes whose scalars never leave the device,
//!
//! ```text
//! xr:    x += alpha p; r -= alpha Ap; nr = (r|r)
//! apply: Ar = A r;  rar_new = (r|Ar) (in the operator's epilogue); beta = rar_new / rar
//! p:     p = r + beta p; Ap = Ar + beta Ap; apap = (Ap|Ap); alpha = conj(rar) / apap
//! ```
//!
//! so that the host reads the scalar block only every `check_every` iterations and a
//! batch of iterations can be replayed as one CUDA graph. The arithmetic is Algorithm 1's:
//! alpha and beta are the same quantities, computed at the end of the pass that produces
//! their inputs instead of at the start of the next. The device stops iterating by itself
//! (nr <= eps or max_iter), so a batch queued past convergence changes nothing.
//!
//! Mixed precision (`Precision::Single` inner fields): the iteration runs on single fields
//! (scalars and reductions in double); x is accumulated in double by reliable updates
//! (Sleijpen and van der Vorst; QUDA's scheme): whenever the iterated residual has
//! dropped by `delta` since the last update, or the iteration has stopped, x_d += x_s, the
//! true residual r = b - A x_d is recomputed in double, copied into the single r, and the
//! recurrence restarts from it (p = r, Ap = A r: one more single application). Keeping
//! the search direction, as CG's reliable updates do, was measured to stall this CR (the
//! seed's alpha = conj((r|Ar))/(Ap|Ap) presumes r, p and Ap of one recurrence; tests/fast.rs
//! has the case). The solve ends only when the double true residual is at or below tol.

use super::{SolveOutcome, StopReason};
use crate::backend::{Backend, CrScalars, Layout, Operator, Precision};
use crate::field::C64;
use crate::Result;

#[derive(Clone, Debug)]
pub struct FusedParams {
    /// Stop when ||r|| / ||b|| <= tol (the double true residual in mixed precision).
    pub tol: f64,
    pub max_iterations: usize,
    /// Read the scalars (one host transfer) every this many iterations.
    pub check_every: usize,
    /// Precision of the iteration's fields (`Single`: single-double with reliable updates).
    pub precision: Precision,
    /// Reliable update when the iterated residual norm has dropped by this factor.
    pub delta: f64,
    /// As in `CrParams`.
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

/// What the fused solve did beyond `SolveOutcome`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FusedStats {
    /// Host reads of the scalar block (convergence checks).
    pub checks: usize,
    /// Reliable updates (mixed precision): double-precision operator applications.
    pub reliable_updates: usize,
    /// Single-precision applications that restarted the recurrence after an update.
    pub restart_applications: usize,
    /// ||b - A x|| / ||b|| in double at each reliable update, with its iteration.
    pub true_residuals: Vec<(usize, f64)>,
}

static SOLVE_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Solve A x = b by the fused CR. b is a double field of the operator's domain (full for
/// D and g5D, even for the Schur forms). Never fails on non-convergence.
pub fn fused_cr<B: Backend>(
    be: &mut B,
    op: Operator,
    b: &B::Field,
    params: &FusedParams,
    observe: &mut dyn FnMut(usize, f64),
) -> Result<(SolveOutcome<B::Field>, FusedStats)> {
    let outer = be.layout(b);
    let inner = Layout::new(outer.subset, params.precision);
    let mixed = inner != outer;
    let mut stats = FusedStats::default();

    let nb = be.norm2(b)?;
    let eps = params.tol * params.tol * nb;
    let mut r = be.alloc_layout(inner)?;
    if mixed {
        be.convert(&mut r, b)?;
    } else {
        be.copy(&mut r, b)?;
    }
    let mut x = be.alloc_layout(inner)?;
    let mut p = be.alloc_layout(inner)?;
    be.copy(&mut p, &r)?;
    let mut ap = be.alloc_layout(inner)?;
    let mut ar = be.alloc_layout(inner)?;
    // Double-precision solution and scratch (mixed only).
    let mut xd = if mixed {
        Some(be.alloc_layout(outer)?)
    } else {
        None
    };
    let mut scratch = if mixed {
        Some(be.alloc_layout(outer)?)
    } else {
        None
    };
    let zero = if mixed {
        Some(be.alloc_layout(inner)?)
    } else {
        None
    };

    // Ap = A p and rar = (r|Ap) through the fused apply (its beta is not used).
    let mut s = CrScalars {
        rar: C64::new(1.0, 0.0),
        eps,
        max_iter: params.max_iterations as u64,
        active: true,
        ..Default::default()
    };
    let mut state = be.cr_state(&s)?;
    be.cr_apply_dot(op, &mut state, &r, &mut ap)?;
    s = be.cr_get(&state)?;
    s.nr = if mixed { be.norm2(&r)? } else { nb };
    s.apap = be.norm2(&ap)?;
    s.alpha = s.rar.conj() / s.apap;
    s.beta = C64::new(0.0, 0.0);
    s.active = s.still_active();
    be.cr_set(&mut state, &s)?;

    let key = SOLVE_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut best = f64::INFINITY;
    let mut best_at = 0usize;
    // Reliable updates: the iterated nr at the last one.
    let mut nr_ref = s.nr;
    let mut verified = !mixed;
    let reason = loop {
        s = be.cr_get(&state)?;
        stats.checks += 1;
        let iter = s.iter as usize;

        if mixed && s.nr.is_finite() && (s.nr <= params.delta * params.delta * nr_ref || !s.active)
        {
            // Reliable update: fold x_s into x_d, recompute r in double.
            let (xd, sc, z) = (
                xd.as_mut().unwrap(),
                scratch.as_mut().unwrap(),
                zero.as_ref().unwrap(),
            );
            be.convert(sc, &x)?;
            be.axpy(C64::new(1.0, 0.0), sc, xd)?;
            be.copy(&mut x, z)?;
            be.apply(op, sc, xd)?;
            be.xpay(b, C64::new(-1.0, 0.0), sc)?;
            let nr_true = be.norm2(sc)?;
            be.convert(&mut r, sc)?;
            s.nr = nr_true;
            if s.still_active() {
                // Restart the recurrence from the new residual: p = r, Ap = A r. (Keeping
                // p, Ap and rar, as CG's reliable updates do, stalls CR: the seed's
                // alpha = conj(rar)/apap assumes the r, p, Ap of one recurrence.)
                be.copy(&mut p, &r)?;
                s.rar = C64::new(1.0, 0.0);
                s.active = true;
                be.cr_set(&mut state, &s)?;
                be.cr_apply_dot(op, &mut state, &r, &mut ap)?;
                stats.restart_applications += 1;
                s.rar = be.cr_get(&state)?.rar;
                s.apap = be.norm2(&ap)?;
                s.alpha = s.rar.conj() / s.apap;
            }
            s.active = s.still_active();
            be.cr_set(&mut state, &s)?;
            nr_ref = nr_true;
            stats.reliable_updates += 1;
            stats.true_residuals.push((iter, (nr_true / nb).sqrt()));
            verified = true;
        } else if mixed {
            verified = false;
        }

        if !s.nr.is_finite() {
            break StopReason::NotANumber;
        }
        if s.nr <= eps && verified {
            break StopReason::Converged;
        }
        let rel = (s.nr / nb).sqrt();
        if rel > params.divergence_limit {
            break StopReason::Divergence;
        }
        if rel < 0.99 * best {
            best = rel;
            best_at = iter;
        } else if iter - best_at >= params.stagnation_window {
            break StopReason::Stagnation;
        }
        if iter >= params.max_iterations {
            break StopReason::MaxIterations;
        }
        if iter > 0 {
            observe(iter, rel);
        }

        // Always the same batch (one recorded graph per solve): the device itself stops at
        // max_iterations, so a batch that would pass it does nothing extra.
        let k = params.check_every.max(1);
        be.repeat(key, k, &mut |be: &mut B| {
            be.cr_update_xr(&mut state, &p, &ap, &mut x, &mut r)?;
            be.cr_apply_dot(op, &mut state, &r, &mut ar)?;
            be.cr_update_p(&mut state, &r, &ar, &mut p, &mut ap)
        })?;
    };
    be.forget_graphs();
    let history: Vec<f64> = be
        .cr_history(&state)?
        .into_iter()
        .map(|nr| (nr / nb).sqrt())
        .collect();
    let iterations = history.len() - 1;
    let x = match xd {
        Some(xd) => xd,
        None => x,
    };
    Ok((
        SolveOutcome {
            x,
            iterations,
            reason,
            history,
            operator_applications: iterations
                + 1
                + stats.reliable_updates
                + stats.restart_applications,
        },
        stats,
    ))
}
