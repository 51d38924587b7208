//! BiCGStab over a batch of columns through the backend's fused passes
//! (`FusedBiCgStab`, as `bicgstab::Fused` runs one column): each column's scalars where
//! the backend computes (its own state block), the element-wise passes per column, both
//! operator applications of an iteration one batched application over the live columns.
//! The host reads the columns' scalars after runs of iterations (the shortest run
//! `bicgstab::batch_size` gives a live column, at most `check_every`), restarts a broken
//! shadow residual as `Fused` does, and drops the columns that stopped. The passes are
//! gated on each column's device flag, so a column that reaches its tolerance inside a run
//! stops there; the batch's composition changes only at reads. On the GPU each iteration
//! is replayed as a graph, recorded afresh whenever the live columns change.

use super::common::{apply_live, check_live, collect, fields, Column, Ended};
use crate::linalg::engines::{BiScalars, FusedCr};
use crate::linalg::Operator;
use crate::solver::bicgstab::{batch_size, random_shadow, restart};
use crate::solver::monitor::Monitor;
use crate::Result;

static GRAPH_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(3 << 40);

/// One column: its fields (`bicgstab::FIELDS`, in its order), its device scalars, the scalars
/// the host last read, and the iteration of its last shadow restart.
struct Col<S: FusedCr> {
    x: S::Field,
    r: S::Field,
    r0: S::Field,
    p: S::Field,
    v: S::Field,
    t: S::Field,
    state: S::BiState,
    s: BiScalars,
    nr0: f64,
    restarted_at: Option<u64>,
    live: bool,
}

/// Solve op x_k = b_k for every k from x_k = 0 by the fused BiCGStab, each column stopped
/// by its own monitor (`graphs`: replay each iteration as a recorded graph).
pub(super) fn solve<S: FusedCr>(
    space: &mut S,
    op: Operator,
    bs: &[S::Field],
    monitors: &mut [Monitor],
    check_every: usize,
    graphs: bool,
) -> Result<Vec<Column<S::Field>>> {
    let mut cols = Vec::with_capacity(bs.len());
    for (b, m) in bs.iter().zip(monitors.iter()) {
        let layout = space.layout(b);
        let nr = space.norm2(b)?;
        let mut s = BiScalars {
            nr,
            eps: m.eps,
            iter: 0,
            max_iter: m.rules.max_iterations as u64,
            ..Default::default()
        };
        s.active = s.still_active();
        let state = space.bi_state(&s)?;
        let [x, r, r0, p, v, t] = fields(space, layout)?;
        let mut c = Col::<S> {
            x,
            r,
            r0,
            p,
            v,
            t,
            state,
            s,
            nr0: nr,
            restarted_at: None,
            live: true,
        };
        space.bi_start(&mut c.state, b, &mut c.x, &mut c.r, &mut c.r0, &mut c.p)?;
        cols.push(c);
    }
    let mut ended: Vec<Option<Ended>> = vec![None; cols.len()];
    let mut known = true;
    let mut applied = vec![0usize; cols.len()];
    let mut key: Option<(u64, Vec<bool>)> = None;
    let mut recorded_once = false;
    loop {
        if !known {
            for c in cols.iter_mut().filter(|c| c.live) {
                c.s = space.bi_get(&c.state)?;
            }
        }
        known = false;
        for c in cols.iter_mut().filter(|c| c.live && c.s.broken) {
            unbreak(space, c)?;
        }
        if !check_live(&mut cols, monitors, &mut ended, |c| {
            (c.s.iter as usize, c.s.nr, c.s.active, &mut c.live)
        }) {
            break;
        }
        let live: Vec<bool> = cols.iter().map(|c| c.live).collect();
        if key.as_ref().is_none_or(|(_, l)| *l != live) {
            space.forget_graphs();
            let k = GRAPH_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            key = Some((k, live.clone()));
        }
        let k = cols
            .iter()
            .filter(|c| c.live)
            .map(|c| batch_size(check_every, 0, c.nr0, &c.s, None))
            .min()
            .unwrap_or(1);
        let graph = key.as_ref().map_or(0, |(k, _)| *k);
        for _ in 0..k {
            let mut body = |sp: &mut S| iteration(sp, op, &mut cols);
            // The first iteration runs eagerly: the batched operator makes its
            // temporaries on first use, which a graph must not record.
            if graphs && recorded_once {
                space.repeat(graph, 1, &mut body)?;
            } else {
                body(space)?;
                recorded_once = true;
            }
        }
        for (a, _) in applied.iter_mut().zip(&live).filter(|(_, &l)| l) {
            *a += 2 * k;
        }
    }
    let mut out = Vec::with_capacity(cols.len());
    for (c, e) in cols.iter().zip(&ended) {
        let iter = e.map_or(0, |e| e.iter) as u64;
        out.push(space.bi_history_upto(&c.state, iter)?);
    }
    space.forget_graphs();
    let mut histories = out.into_iter();
    let mut counts = applied.into_iter();
    collect(
        cols.into_iter()
            .map(|c| {
                (
                    c.x,
                    histories.next().unwrap_or_default(),
                    counts.next().unwrap_or(0),
                )
            })
            .collect(),
        ended,
        |c| c,
    )
}

/// A broken column's shadow residual restarted (a second breakdown at the same iteration:
/// a random one), as `bicgstab::Fused` does; its scalars written back.
fn unbreak<S: FusedCr>(space: &mut S, c: &mut Col<S>) -> Result<()> {
    c.s.rho = if c.restarted_at == Some(c.s.iter) {
        tracing::debug!(iteration = c.s.iter, "BiCGStab: random shadow residual");
        c.restarted_at = None;
        random_shadow(space, &c.r, &mut c.r0, &mut c.p)?
    } else {
        c.restarted_at = Some(c.s.iter);
        restart(space, &c.r, &mut c.r0, &mut c.p)?
    };
    c.s.broken = false;
    c.s.active = c.s.still_active();
    space.bi_set(&mut c.state, &c.s)
}

/// One fused iteration of every live column (`bicgstab::iteration`'s order): v = A p
/// (the batch), the alpha and s passes, t = A s (the batch), the omega, update and p
/// passes.
fn iteration<S: FusedCr>(sp: &mut S, op: Operator, cols: &mut [Col<S>]) -> Result<()> {
    apply_live(sp, op, cols, |c| c.live, |c| (&mut c.v, &c.p))?;
    for c in cols.iter_mut().filter(|c| c.live) {
        sp.bi_alpha_s(&mut c.state, &c.r0, &c.v, &mut c.r)?;
    }
    apply_live(sp, op, cols, |c| c.live, |c| (&mut c.t, &c.r))?;
    for c in cols.iter_mut().filter(|c| c.live) {
        sp.bi_omega(&mut c.state, &c.t, &c.r)?;
        sp.bi_update(&mut c.state, &c.p, &c.t, &c.r0, &mut c.x, &mut c.r)?;
        sp.bi_p(&mut c.state, &c.r, &c.v, &mut c.p)?;
    }
    Ok(())
}
