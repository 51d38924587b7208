//! BiCGStab over a batch of columns: each column the recurrence of `bicgstab::BiCgStab`
//! (host scalars, its breakdown restarts), the batch's two operator applications an
//! iteration shared (`WilsonKernels::apply_batch`). A column's fields, scalars and
//! arithmetic are those of its own solve, so in one precision its iterates are the same
//! bits.

use super::common::{apply_live, check_live, collect, fields, Column, Ended};
use crate::field::C64;
use crate::linalg::engines::breakdown;
use crate::linalg::{Operator, WilsonKernels};
use crate::solver::bicgstab::{random_shadow, restart};
use crate::solver::monitor::Monitor;
use crate::Result;

/// One column's BiCGStab state. `step`: whether the column goes on to the second half of
/// this iteration (no breakdown restart in the first).
struct Bi<F> {
    x: F,
    r: F,
    r0: F,
    p: F,
    v: F,
    t: F,
    rho: C64,
    alpha: C64,
    nr: f64,
    iter: usize,
    restarted: bool,
    history: Vec<f64>,
    live: bool,
    step: bool,
    /// Operator applications made.
    applied: usize,
}

/// Solve op x_k = b_k for every k from x_k = 0 by BiCGStab, each column stopped by its
/// own monitor: the columns in the order of `bs`.
pub(super) fn solve<S: WilsonKernels>(
    space: &mut S,
    op: Operator,
    bs: &[S::Field],
    monitors: &mut [Monitor],
) -> Result<Vec<Column<S::Field>>> {
    let mut cols = Vec::with_capacity(bs.len());
    for b in bs {
        let [x, r, r0, p, v, t] = fields(space, space.layout(b))?;
        let mut c = Bi {
            x,
            r,
            r0,
            p,
            v,
            t,
            rho: C64::new(0.0, 0.0),
            alpha: C64::new(0.0, 0.0),
            nr: 0.0,
            iter: 0,
            restarted: false,
            history: Vec::new(),
            live: true,
            step: false,
            applied: 0,
        };
        space.set_zero(&mut c.x)?;
        space.copy(&mut c.r, b)?;
        space.copy(&mut c.r0, b)?;
        space.copy(&mut c.p, b)?;
        c.rho = space.dot(&c.r0, &c.r)?;
        c.nr = space.norm2(&c.r)?;
        c.history.push(c.nr);
        cols.push(c);
    }
    let mut ended: Vec<Option<Ended>> = vec![None; cols.len()];
    loop {
        if !check_live(&mut cols, monitors, &mut ended, |c| {
            (c.iter, c.nr, true, &mut c.live)
        }) {
            break;
        }
        // v = A p (the batch); alpha = rho / (r0|v), s = r - alpha v in r.
        apply_live(space, op, &mut cols, |c| c.live, |c| (&mut c.v, &c.p))?;
        for c in cols.iter_mut().filter(|c| c.live) {
            c.applied += 1;
            let r0v = space.dot(&c.r0, &c.v)?;
            c.step = !breakdown(r0v);
            if !c.step {
                if c.restarted {
                    tracing::debug!(iteration = c.iter, "BiCGStab: random shadow residual");
                    c.rho = random_shadow(space, &c.r, &mut c.r0, &mut c.p)?;
                    c.restarted = false;
                } else {
                    c.rho = restart(space, &c.r, &mut c.r0, &mut c.p)?;
                    c.restarted = true;
                }
                continue;
            }
            c.alpha = c.rho / r0v;
            space.axpy(-c.alpha, &c.v, &mut c.r)?;
        }
        // t = A s (the batch, the columns without a restart); omega = (t|s) / (t|t).
        apply_live(
            space,
            op,
            &mut cols,
            |c| c.live && c.step,
            |c| (&mut c.t, &c.r),
        )?;
        for c in cols.iter_mut().filter(|c| c.live && c.step) {
            c.applied += 1;
            let tt = space.norm2(&c.t)?;
            let omega = if tt > 0.0 {
                space.dot(&c.t, &c.r)? / tt
            } else {
                C64::new(0.0, 0.0)
            };
            let alpha = c.alpha;
            space.axpy(alpha, &c.p, &mut c.x)?;
            space.axpy(omega, &c.r, &mut c.x)?;
            space.axpy(-omega, &c.t, &mut c.r)?;
            c.nr = space.norm2(&c.r)?;
            c.iter += 1;
            c.history.push(c.nr);
            let rho_new = space.dot(&c.r0, &c.r)?;
            if omega == C64::new(0.0, 0.0) || breakdown(rho_new) {
                c.rho = restart(space, &c.r, &mut c.r0, &mut c.p)?;
                c.restarted = true;
                continue;
            }
            c.restarted = false;
            let beta = (rho_new / c.rho) * (alpha / omega);
            c.rho = rho_new;
            // p = r + beta (p - omega v)
            space.axpy(-omega, &c.v, &mut c.p)?;
            space.xpay(&c.r, beta, &mut c.p)?;
        }
    }
    collect(cols, ended, |c| (c.x, c.history, c.applied))
}
