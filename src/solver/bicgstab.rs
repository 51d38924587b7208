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
//! Two applications per iteration. Only the vector space and the operator are used.

use super::monitor::{Iterate, Monitor, Run, Verdict};
use super::work::Workspace;
use crate::linalg::{LinearOperator, Space};
use crate::Result;

/// Whether the recurrence would divide by (u|w) = 0 (or a non-number). On the Wilson
/// operator this happens exactly for a point source with the shadow residual r0 = b: a
/// hop forth and back along one direction is (1 - g)(1 + g) = 0, so (b|r_1) vanishes at
/// the second iteration. (A relative threshold also caught near-zeros on g5 D that the
/// recurrence goes through: measured, so only exact zeros restart.)
fn breakdown(uw: crate::field::C64) -> bool {
    !(uw.norm() > 0.0 && uw.norm().is_finite())
}

/// Restart the shadow residual and the direction from the current residual: r0 = p = r;
/// returns the new rho = (r0|r).
fn restart<S: Space>(
    space: &mut S,
    r: &S::Field,
    r0: &mut S::Field,
    p: &mut S::Field,
) -> Result<crate::field::C64> {
    space.copy(r0, r)?;
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
                    let full = space.download(r)?;
                    let random = space.upload(&crate::field::SpinorField::random(
                        full.volume(),
                        17,
                        3 << 40,
                    ))?;
                    space.convert(r0, &random)?;
                    space.copy(p, r)?;
                    rho = space.dot(r0, r)?;
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
