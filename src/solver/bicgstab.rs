//! BiCGStab (van der Vorst 1992) for a general (non-Hermitian) A, e.g. D itself:
//!
//! ```text
//! r = b; r0 = b; p = r; rho = (r0|r)
//! loop: v = A p; alpha = rho / (r0|v); s = r - alpha v
//!       t = A s; omega = (t|s) / (t|t)
//!       x += alpha p + omega s; r = s - omega t
//!       rho' = (r0|r); beta = (rho'/rho)(alpha/omega); p = r + beta (p - omega v)
//! ```
//! When (r0|v) or (r0|r) vanishes (a breakdown; a point source on the Wilson operator
//! does it at the second iteration), the shadow residual restarts as r0 = p = r.
//! Two applications per iteration. `BiCgStab` uses only the vector space and the operator
//! (scalars on the host: five host reads per iteration); `Fused` runs the same iteration
//! through the backend's `FusedBiCgStab` passes, whose scalars stay where the backend
//! computes, read after batches of at most `check_every` iterations (the GPU replays each
//! iteration as a CUDA graph).

use super::monitor::{Iterate, Monitor, Run, Verdict};
use super::work::Workspace;
use crate::linalg::engines::{breakdown, BiScalars, FusedCr};
use crate::linalg::{LinearOperator, Operator, Space};
use crate::Result;

/// Restart the shadow residual and the direction from the current residual: r0 = p = r;
/// returns the new rho = (r0|r).
pub(super) fn restart<S: Space>(
    space: &mut S,
    r: &S::Field,
    r0: &mut S::Field,
    p: &mut S::Field,
) -> Result<crate::field::C64> {
    space.copy(r0, r)?;
    space.copy(p, r)?;
    space.dot(r0, r)
}

/// After r0 = r broke down too: a generic (seeded random) shadow residual r0, p = r;
/// returns the new rho = (r0|r).
pub(super) fn random_shadow<S: Space>(
    space: &mut S,
    r: &S::Field,
    r0: &mut S::Field,
    p: &mut S::Field,
) -> Result<crate::field::C64> {
    let full = space.download(r)?;
    let random = space.upload(&crate::field::SpinorField::random(
        full.volume(),
        17,
        3 << 40,
    ))?;
    space.convert(r0, &random)?;
    space.copy(p, r)?;
    space.dot(r0, r)
}

/// Fields of the workspace: x, r, r0, p, v, t.
pub const FIELDS: usize = 6;

pub struct BiCgStab<S: Space, A> {
    pub op: A,
    work: Workspace<S>,
}

impl<S: Space, A: LinearOperator<S>> BiCgStab<S, A> {
    pub fn new(op: A) -> Self {
        BiCgStab {
            op,
            work: Workspace::default(),
        }
    }
}

impl<S: Space, A: LinearOperator<S>> Iterate<S> for BiCgStab<S, A> {
    fn run(
        &mut self,
        space: &mut S,
        b: &S::Field,
        monitor: &mut Monitor,
        start_iter: usize,
        nr0: Option<f64>,
    ) -> Result<Run> {
        let layout = space.layout(b);
        let [x, r, r0, p, v, t] = self.work.fields(space, layout, FIELDS)? else {
            unreachable!("the workspace gives the fields asked for")
        };
        space.copy(r, b)?;
        space.copy(r0, b)?;
        space.copy(p, b)?;
        let mut rho = space.dot(r0, r)?;
        let mut nr = nr0.map_or_else(|| space.norm2(r), Ok)?;
        let mut history = vec![nr];
        let mut iter = start_iter;
        let mut applications = 0;
        let cost = self.op.stencil_applications();
        // Restarts of the shadow residual (see `breakdown`).
        let mut restarted = false;
        let verdict = loop {
            match monitor.check(iter, nr, true) {
                Verdict::Continue => {}
                v => break v,
            }
            self.op.apply(space, v, p)?;
            applications += cost;
            let r0v = space.dot(r0, v)?;
            if breakdown(r0v) {
                if restarted {
                    // r0 = r broke down too: a generic (seeded random) shadow residual.
                    tracing::debug!(iteration = iter, "BiCGStab: random shadow residual");
                    rho = random_shadow(space, r, r0, p)?;
                    restarted = false;
                    continue;
                }
                rho = restart(space, r, r0, p)?;
                restarted = true;
                continue;
            }
            let alpha = rho / r0v;
            // r becomes s = r - alpha v.
            space.axpy(-alpha, v, r)?;
            self.op.apply(space, t, r)?;
            applications += cost;
            let tt = space.norm2(t)?;
            let omega = if tt > 0.0 {
                space.dot(t, r)? / tt
            } else {
                // s = 0: the alpha step solved the system.
                crate::field::C64::new(0.0, 0.0)
            };
            space.axpy(alpha, p, x)?;
            space.axpy(omega, r, x)?;
            space.axpy(-omega, t, r)?;
            nr = space.norm2(r)?;
            iter += 1;
            history.push(nr);
            let rho_new = space.dot(r0, r)?;
            if omega == crate::field::C64::new(0.0, 0.0) || breakdown(rho_new) {
                rho = restart(space, r, r0, p)?;
                restarted = true;
                continue;
            }
            restarted = false;
            let beta = (rho_new / rho) * (alpha / omega);
            rho = rho_new;
            // p = r + beta (p - omega v)
            space.axpy(-omega, v, p)?;
            space.xpay(r, beta, p)?;
        };
        Ok(Run {
            iter,
            history,
            verdict,
            applications,
            checks: iter - start_iter + 1,
        })
    }

    fn solution(&self) -> Option<&S::Field> {
        self.work.solution()
    }
    fn take_solution(&mut self) -> Option<S::Field> {
        self.work.take_solution()
    }
    fn release(&mut self, _space: &mut S) {
        self.work.release();
    }
}

/// ln(nr) per iteration since the run's start (negative while it converges).
fn mean_rate(start_iter: u64, nr_start: f64, s: &BiScalars) -> f64 {
    (s.nr / nr_start).ln() / s.iter.saturating_sub(start_iter) as f64
}

/// Iterations to queue before the next read: as many as the run's mean convergence rate
/// so far (before its first iteration: `prior`, the last run's, else a single iteration)
/// says the residual needs to reach the device's eps, at least 1 and at most
/// `check_every` (`check_every` while the residual has not fallen). Queued iterations
/// past the stop are no-ops but for their two operator applications, so the batch is
/// sized to end near it; the arithmetic does not depend on it.
pub fn batch_size(
    check_every: usize,
    start_iter: u64,
    nr_start: f64,
    s: &BiScalars,
    prior: Option<f64>,
) -> usize {
    let done = s.iter.saturating_sub(start_iter);
    let rate = match (done, prior) {
        (0, None) => return 1,
        (0, Some(r)) => r,
        _ => mean_rate(start_iter, nr_start, s),
    };
    let needed = (s.eps / s.nr).ln() / rate;
    if rate.is_nan() || rate >= 0.0 || !needed.is_finite() {
        return check_every;
    }
    // (A whole number of iterations computed through logarithms may land a hair above it.)
    ((needed - 1e-9).ceil().max(1.0) as usize).min(check_every)
}

/// One fused iteration of the Wilson form `form` on the workspace's fields (x, r, r0,
/// p, v, t, `FIELDS`' order): v = A p, the alpha and s passes, t = A s, the omega, update
/// and p passes. `Fused` batches it; `floor` times it.
pub fn iteration<S: FusedCr>(
    sp: &mut S,
    form: Operator,
    state: &mut S::BiState,
    [x, r, r0, p, v, t]: [&mut S::Field; FIELDS],
) -> Result<()> {
    sp.apply(form, v, p)?;
    sp.bi_alpha_s(state, r0, v, r)?;
    sp.apply(form, t, r)?;
    sp.bi_omega(state, t, r)?;
    sp.bi_update(state, p, t, r0, x, r)?;
    sp.bi_p(state, r, v, p)
}

static GRAPH_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 40);

/// BiCGStab through the backend's fused passes (`FusedBiCgStab`): the iteration of
/// `BiCgStab` with its scalars where the backend computes. The host reads them after
/// batches of at most `check_every` iterations (`batch_size`); the device iteration stops
/// by itself at the tolerance, or under a wrapper at its hand-off threshold, so a batch
/// queued past the stop only repeats the two operator applications. A breakdown stops it
/// too, and the host restarts the shadow residual as `BiCgStab` does.
pub struct Fused<S: FusedCr> {
    form: Operator,
    /// Stencil applications per operator application (for the counts).
    cost: usize,
    pub check_every: usize,
    state: Option<S::BiState>,
    work: Workspace<S>,
    /// The workspace's layout (graphs name its fields).
    layout: Option<crate::linalg::Layout>,
    key: u64,
    /// The last run's mean convergence rate (`batch_size`'s prior).
    rate: Option<f64>,
    /// Replay each iteration as a recorded graph (`FusedCr::repeat`); false: the launches
    /// are queued one by one.
    graphs: bool,
}

impl<S: FusedCr> Fused<S> {
    /// The fused passes apply one Wilson form; `graphs`: replay recorded graphs.
    pub fn new<A: LinearOperator<S>>(op: &A, check_every: usize, graphs: bool) -> Result<Self> {
        let form = op.wilson_form().ok_or_else(|| {
            crate::Error::internal(format!(
                "the fused BiCGStab applies Wilson forms only, not {}",
                op.name()
            ))
        })?;
        Ok(Fused {
            form,
            cost: op.stencil_applications(),
            check_every: check_every.max(1),
            state: None,
            work: Workspace::default(),
            layout: None,
            key: GRAPH_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            rate: None,
            graphs,
        })
    }
}

impl<S: FusedCr> Iterate<S> for Fused<S> {
    fn run(
        &mut self,
        space: &mut S,
        b: &S::Field,
        monitor: &mut Monitor,
        start_iter: usize,
        nr0: Option<f64>,
    ) -> Result<Run> {
        let clock = std::time::Instant::now();
        let layout = space.layout(b);
        if self.layout.is_some_and(|l| l != layout) {
            // New fields: the graphs recorded on the old ones must not be replayed.
            space.forget_graphs();
        }
        self.layout = Some(layout);
        let [x, r, r0, p, v, t] = self.work.fields(space, layout, FIELDS)? else {
            unreachable!("the workspace gives the fields asked for")
        };
        let nr = nr0.map_or_else(|| space.norm2(b), Ok)?;
        let mut s = BiScalars {
            nr,
            // Under a wrapper only the hand-off counts (the iterated residual is not
            // trusted for convergence: `Monitor::check`), as in `BiCgStab`.
            eps: monitor.handoff_below.unwrap_or(monitor.eps),
            iter: start_iter as u64,
            max_iter: monitor.rules.max_iterations as u64,
            ..Default::default()
        };
        s.active = s.still_active();
        let state = match &mut self.state {
            Some(st) => {
                space.bi_set(st, &s)?;
                st
            }
            None => self.state.insert(space.bi_state(&s)?),
        };
        space.bi_start(state, b, x, r, r0, p)?;
        tracing::debug!(
            us = super::micros_since(&clock),
            "fused BiCGStab: fields, state and start (queued)"
        );
        let (form, key, cost) = (self.form, self.key, self.cost);
        let mut known = Some(s);
        let mut checks = 0;
        let mut applications = 0;
        // The iteration of the last restart of the shadow residual (a second breakdown
        // there, with no iteration between, takes a random one, as in `BiCgStab`).
        let mut restarted_at: Option<u64> = None;
        let (verdict, last) = loop {
            let mut s = match known.take() {
                Some(s) => s,
                None => {
                    checks += 1;
                    space.bi_get(state)?
                }
            };
            if s.broken {
                s.rho = if restarted_at == Some(s.iter) {
                    tracing::debug!(iteration = s.iter, "BiCGStab: random shadow residual");
                    restarted_at = None;
                    random_shadow(space, r, r0, p)?
                } else {
                    restarted_at = Some(s.iter);
                    restart(space, r, r0, p)?
                };
                s.broken = false;
                s.active = s.still_active();
                space.bi_set(state, &s)?;
            }
            match monitor.check(s.iter as usize, s.nr, s.active) {
                Verdict::Continue => {}
                v => break (v, s),
            }
            let mut body = |sp: &mut S| {
                iteration(
                    sp,
                    form,
                    state,
                    [&mut *x, &mut *r, &mut *r0, &mut *p, &mut *v, &mut *t],
                )
            };
            let k = batch_size(self.check_every, start_iter as u64, nr, &s, self.rate);
            let queued = std::time::Instant::now();
            for _ in 0..k {
                if self.graphs {
                    space.repeat(key, 1, &mut body)?;
                } else {
                    body(space)?;
                }
            }
            applications += 2 * cost * k;
            tracing::debug!(
                us = super::micros_since(&queued),
                iterations = k,
                "fused BiCGStab: batch queued"
            );
        };
        let last_iter = last.iter;
        if last_iter > start_iter as u64 {
            let r = mean_rate(start_iter as u64, nr, &last);
            self.rate = (r.is_finite() && r < 0.0).then_some(r);
        }
        let history = space.bi_history_upto(state, last_iter)?;
        let history = history
            .get(start_iter..)
            .map(<[f64]>::to_vec)
            .ok_or_else(|| {
                crate::Error::internal("fused BiCGStab history shorter than its start")
            })?;
        Ok(Run {
            iter: last_iter as usize,
            history,
            verdict,
            applications,
            checks,
        })
    }

    fn solution(&self) -> Option<&S::Field> {
        self.work.solution()
    }
    fn take_solution(&mut self) -> Option<S::Field> {
        self.work.take_solution()
    }
    fn release(&mut self, space: &mut S) {
        space.forget_graphs();
        self.state = None;
        self.layout = None;
        self.work.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(iter: u64, nr: f64, eps: f64) -> BiScalars {
        BiScalars {
            iter,
            nr,
            eps,
            ..Default::default()
        }
    }

    #[test]
    fn batches_end_where_the_mean_rate_reaches_eps() {
        // Nothing done yet: one iteration, to learn the rate.
        assert_eq!(batch_size(10, 5, 1.0, &at(5, 1.0, 1e-6), None), 1);
        // ... or the last run's rate: ln(nr) falls by ln 10 per iteration, six to 1e-6.
        let r = -(10f64).ln();
        assert_eq!(batch_size(10, 5, 1.0, &at(5, 1.0, 1e-6), Some(r)), 6);
        // 1 -> 1e-2 in two iterations (a factor 10 each): 1e-2 -> 1e-6 takes four more.
        assert_eq!(batch_size(10, 5, 1.0, &at(7, 1e-2, 1e-6), None), 4);
        // ... capped by check_every.
        assert_eq!(batch_size(3, 5, 1.0, &at(7, 1e-2, 1e-6), None), 3);
        // Just above eps: one more.
        assert_eq!(batch_size(10, 0, 1.0, &at(2, 1.0001e-6, 1e-6), None), 1);
        // A residual that has not fallen: the full interval.
        assert_eq!(batch_size(10, 0, 1.0, &at(3, 2.0, 1e-6), None), 10);
        assert_eq!(batch_size(10, 0, 1.0, &at(3, 1.0, 1e-6), None), 10);
    }
}
