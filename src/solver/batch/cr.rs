//! CR over a batch of columns: each column Algorithm 1 in the order of `cr::HostEngine`
//! (host scalars, a check every iteration), the batch's operator applications shared
//! (`WilsonKernels::apply_batch`). A column's fields, scalars and arithmetic are those of
//! its own solve, so in one precision its iterates are the same bits.

use super::common::{apply_live, check_live, collect, fields, Column, Ended};
use crate::field::C64;
use crate::linalg::engines::CrScalars;
use crate::linalg::{Operator, WilsonKernels};
use crate::solver::monitor::{record, Monitor};
use crate::Result;

/// One column's CR state.
struct Cr<F> {
    x: F,
    r: F,
    p: F,
    ap: F,
    ar: F,
    s: CrScalars,
    history: Vec<f64>,
    live: bool,
}

/// Solve op x_k = b_k for every k from x_k = 0 by CR, each column stopped by its own
/// monitor: the columns in the order of `bs`.
pub(super) fn solve<S: WilsonKernels>(
    space: &mut S,
    op: Operator,
    bs: &[S::Field],
    monitors: &mut [Monitor],
) -> Result<Vec<Column<S::Field>>> {
    let mut cols = Vec::with_capacity(bs.len());
    for (b, m) in bs.iter().zip(monitors.iter()) {
        let [x, r, p, ap, ar] = fields(space, space.layout(b))?;
        let mut c = Cr {
            x,
            r,
            p,
            ap,
            ar,
            s: CrScalars::default(),
            history: Vec::new(),
            live: true,
        };
        // load: r = b, x = 0; the start: p = r.
        space.copy(&mut c.r, b)?;
        space.set_zero(&mut c.x)?;
        let nr = space.norm2(&c.r)?;
        c.s = CrScalars {
            rar: C64::new(1.0, 0.0),
            nr,
            eps: m.eps,
            iter: 0,
            max_iter: m.rules.max_iterations as u64,
            active: true,
            ..Default::default()
        };
        record(&mut c.history, 0, nr)?;
        space.copy(&mut c.p, &c.r)?;
        cols.push(c);
    }
    // The start's Ap = A r, rar = (r|Ap), alpha = conj(rar) / (Ap|Ap).
    apply_live(space, op, &mut cols, |c| c.live, |c| (&mut c.ap, &c.r))?;
    for c in &mut cols {
        c.s.rar = space.dot(&c.r, &c.ap)?;
        c.s.apap = space.norm2(&c.ap)?;
        c.s.alpha = c.s.rar.conj() / c.s.apap;
        c.s.beta = C64::new(0.0, 0.0);
        c.s.active = c.s.still_active();
    }
    let mut ended: Vec<Option<Ended>> = vec![None; cols.len()];
    loop {
        if !check_live(&mut cols, monitors, &mut ended, |c| {
            (c.s.iter as usize, c.s.nr, c.s.active, &mut c.live)
        }) {
            break;
        }
        // xr: x += alpha p, r -= alpha Ap, nr = (r|r).
        for c in cols.iter_mut().filter(|c| c.live) {
            let alpha = c.s.alpha;
            space.axpy(alpha, &c.p, &mut c.x)?;
            space.axpy(-alpha, &c.ap, &mut c.r)?;
            c.s.nr = space.norm2(&c.r)?;
            c.s.iter += 1;
            record(&mut c.history, c.s.iter, c.s.nr)?;
        }
        // apply: Ar = A r (the batch), rar_new = (r|Ar), beta = rar_new / rar.
        apply_live(space, op, &mut cols, |c| c.live, |c| (&mut c.ar, &c.r))?;
        for c in cols.iter_mut().filter(|c| c.live) {
            let rar = space.dot(&c.r, &c.ar)?;
            c.s.beta = rar / c.s.rar;
            c.s.rar = rar;
            // p: p = r + beta p, Ap = Ar + beta Ap, alpha = conj(rar) / (Ap|Ap).
            let beta = c.s.beta;
            space.xpay(&c.r, beta, &mut c.p)?;
            space.xpay(&c.ar, beta, &mut c.ap)?;
            c.s.apap = space.norm2(&c.ap)?;
            c.s.alpha = c.s.rar.conj() / c.s.apap;
            c.s.active = c.s.still_active();
        }
    }
    collect(cols, ended, |c| {
        let n = c.history.len();
        (c.x, c.history, n)
    })
}
