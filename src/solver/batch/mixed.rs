//! Mixed precision for a batch: defect correction. Each round solves the live columns'
//! residual systems in the low precision (one batched run from zero, each column to a
//! relative `delta`, or tighter where the target needs less than a `delta` step), adds
//! each correction to x_k in full precision, and makes the true residuals b_k - A x_k in
//! full precision with one batched application. A column is done when its true residual
//! meets the tolerance, or when a rule stops it: the iteration budget, a round that does
//! not lower its residual (stagnation), a non-number or divergence in a round.

use super::common::{reason, Column};
use super::methods::{run, stencil_cost};
use crate::field::C64;
use crate::linalg::engines::FusedCr;
use crate::linalg::Operator;
use crate::solver::{SolveOutcome, SolveSpec, SolveStats, StopReason, StopRules};
use crate::Result;

/// One column's outer state.
struct Outer<F> {
    x: F,
    r: F,
    nb: f64,
    nr: f64,
    iterations: usize,
    applications: usize,
    history: Vec<f64>,
    stats: SolveStats,
    stop: Option<StopReason>,
}

/// The batch of systems `op` x_k = b_k (full-precision b_k) by defect correction in
/// `spec.precision`.
pub(super) fn defect_correction<S: FusedCr>(
    space: &mut S,
    spec: &SolveSpec,
    op: Operator,
    bs: &[S::Field],
) -> Result<Vec<SolveOutcome<S::Field>>> {
    let rules = &spec.rules;
    let mut cols = Vec::with_capacity(bs.len());
    for b in bs {
        let layout = space.layout(b);
        let mut x = space.alloc_layout(layout)?;
        space.set_zero(&mut x)?;
        let mut r = space.alloc_layout(layout)?;
        space.copy(&mut r, b)?;
        let nb = space.norm2(b)?;
        cols.push(Outer {
            x,
            r,
            nb,
            nr: nb,
            iterations: 0,
            applications: 0,
            history: vec![1.0],
            stats: SolveStats::default(),
            stop: (nb == 0.0).then_some(StopReason::Converged),
        });
    }
    let cost = stencil_cost::<S>(op);
    loop {
        for c in cols.iter_mut().filter(|c| c.stop.is_none()) {
            c.stop = verdict(c, rules);
        }
        let live: Vec<usize> = (0..cols.len())
            .filter(|&k| cols[k].stop.is_none())
            .collect();
        if live.is_empty() {
            break;
        }
        let corrections = round(space, spec, op, &cols, &live)?;
        // x_k += e_k (full precision), then r_k = b_k - A x_k.
        // One scratch field for the round (every column has the layout of b).
        let mut scratch = space.alloc_layout(space.layout(&bs[live[0]]))?;
        for (&k, e) in live.iter().zip(&corrections) {
            let c = &mut cols[k];
            space.add_converted(&e.x, &mut c.x, &mut scratch)?;
            c.iterations += e.ended.iter;
            c.applications += e.applications * cost;
            // The round's residuals relative to its start, scaled to the column's b.
            let rel_before = (c.nr / c.nb).sqrt();
            if let Some((&start, rest)) = e.history.split_first() {
                c.history
                    .extend(rest.iter().map(|v| rel_before * (v / start).sqrt()));
            }
            if let Some(r) = inner_failure(reason(e.ended.verdict)) {
                c.stop = Some(r);
            }
        }
        drop(corrections);
        true_residuals(space, op, bs, &mut cols, &live)?;
        for &k in &live {
            let c = &mut cols[k];
            c.applications += cost;
            c.stats.reliable_updates += 1;
            c.stats
                .true_residuals
                .push((c.iterations, (c.nr / c.nb).sqrt()));
        }
    }
    Ok(cols
        .into_iter()
        .map(|c| SolveOutcome {
            reason: c.stop.unwrap_or(StopReason::Stagnation),
            iterations: c.iterations,
            history: c.history,
            operator_applications: c.applications,
            stats: SolveStats {
                checks: c.stats.reliable_updates + 1,
                ..c.stats
            },
            x: c.x,
        })
        .collect())
}

/// Whether a column stops before the next round: converged (true residual), out of
/// iterations, a round that did not lower its residual.
fn verdict<F>(c: &Outer<F>, rules: &StopRules) -> Option<StopReason> {
    let rel = (c.nr / c.nb).sqrt();
    if !rel.is_finite() {
        return Some(StopReason::NotANumber);
    }
    if rel <= rules.tol {
        return Some(StopReason::Converged);
    }
    if c.iterations >= rules.max_iterations {
        return Some(StopReason::MaxIterations);
    }
    let last = c.stats.true_residuals.len();
    if last >= 2 && c.stats.true_residuals[last - 1].1 >= 0.99 * c.stats.true_residuals[last - 2].1
    {
        return Some(StopReason::Stagnation);
    }
    None
}

/// A round's stop that ends the column (not a reason to try another round).
fn inner_failure(r: StopReason) -> Option<StopReason> {
    match r {
        StopReason::NotANumber | StopReason::Divergence => Some(r),
        _ => None,
    }
}

/// One low-precision batched run on the live columns' residuals: their corrections.
fn round<S: FusedCr>(
    space: &mut S,
    spec: &SolveSpec,
    op: Operator,
    cols: &[Outer<S::Field>],
    live: &[usize],
) -> Result<Vec<Column<S::Field>>> {
    let mut lows = Vec::with_capacity(live.len());
    let mut rules = Vec::with_capacity(live.len());
    let mut nbs = Vec::with_capacity(live.len());
    for &k in live {
        let c = &cols[k];
        let layout = space.layout(&c.r).with_precision(spec.precision);
        let mut low = space.alloc_layout(layout)?;
        space.convert(&mut low, &c.r)?;
        nbs.push(space.norm2(&low)?);
        lows.push(low);
        // What the target still needs of this round, at least a `delta` step.
        let need = 0.5 * spec.rules.tol * (c.nb / c.nr).sqrt();
        rules.push(StopRules {
            tol: spec.delta.min(1.0).max(need),
            max_iterations: spec
                .rules
                .max_iterations
                .saturating_sub(c.iterations)
                .max(1),
            ..spec.rules.clone()
        });
    }
    run(space, spec, op, &lows, &rules, &nbs)
}

/// r_k = b_k - A x_k and (r_k|r_k) for the live columns, A x_k as one batched application.
fn true_residuals<S: FusedCr>(
    space: &mut S,
    op: Operator,
    bs: &[S::Field],
    cols: &mut [Outer<S::Field>],
    live: &[usize],
) -> Result<()> {
    let (mut outs, inps): (Vec<&mut S::Field>, Vec<&S::Field>) = cols
        .iter_mut()
        .enumerate()
        .filter(|(k, _)| live.contains(k))
        .map(|(_, c)| (&mut c.r, &c.x))
        .unzip();
    space.apply_batch(op, &mut outs, &inps)?;
    for &k in live {
        let c = &mut cols[k];
        space.xpay(&bs[k], C64::new(-1.0, 0.0), &mut c.r)?;
        c.nr = space.norm2(&c.r)?;
    }
    Ok(())
}
