//! Mixed precision by reliable updates (Sleijpen and van der Vorst; QUDA's scheme), as a
//! wrapper around any solver: the inner solver iterates on single-precision fields
//! (scalars and reductions in double) from the current residual; whenever its iterated
//! residual has dropped by `delta` since the last update, or it stopped by itself, it
//! hands back, and here x_d += x_s, the true residual r = b - A x_d is recomputed in
//! double and the inner solver restarts from it. (Keeping CR's search direction across an
//! update, as CG's reliable updates do, was measured to stall it: tests/fast.rs.) The
//! solve ends only when the double true residual is at or below tol.

use super::monitor::{Iterate, Monitor, StopReason, Verdict};
use super::{SolveOutcome, SolveStats};
use crate::linalg::{LinearOperator, Precision, Space};
use crate::{Error, Result};

/// Fields the wrapper holds beside the inner solver's: x_d and the residual scratch in the
/// outer (double) layout, ...
pub const OUTER_FIELDS: usize = 2;
/// ... and the inner solver's right-hand side in the inner layout.
pub const INNER_FIELDS: usize = 1;

/// Solve A x = b (b double) with `inner` running in `precision`; `op` is the double
/// operator of the true residual.
pub fn solve<S: Space, A: LinearOperator<S>, I: Iterate<S>>(
    space: &mut S,
    op: &mut A,
    inner: &mut I,
    b: &S::Field,
    precision: Precision,
    delta: f64,
    monitor: &mut Monitor,
) -> Result<SolveOutcome<S::Field>> {
    let clock = std::time::Instant::now();
    let outer = space.layout(b);
    let inner_layout = outer.with_precision(precision);
    let mut stats = SolveStats::default();
    let mut xd = space.alloc_layout(outer)?;
    let mut scratch = space.alloc_layout(outer)?;
    let mut rs = space.alloc_layout(inner_layout)?;
    space.convert(&mut rs, b)?;
    let nr_start = space.norm2(&rs)?;
    monitor.handoff_below = Some(delta * delta * nr_start);

    let mut history: Vec<f64> = Vec::new();
    let mut iter = 0;
    let mut nr0 = Some(nr_start);
    let mut applications = 0;
    // Restarts after a stalled inner run (see below) and the last true (r|r).
    let mut stalled_before = false;
    let mut last_true = nr_start;
    // The reliable updates' record: the same fields (xs, xd, scratch) for this solve.
    let record_key = crate::linalg::next_record_key();
    tracing::debug!(
        us = super::micros_since(&clock),
        "mixed: fields, conversion and norm"
    );
    let reason = loop {
        let t = std::time::Instant::now();
        let run = inner.run(space, &rs, monitor, iter, nr0)?;
        tracing::debug!(
            us = super::micros_since(&t),
            iterations = run.iter - iter,
            "mixed: inner run"
        );
        let t = std::time::Instant::now();
        history.pop();
        history.extend_from_slice(&run.history);
        iter = run.iter;
        applications += run.applications;
        stats.checks += run.checks;
        if stats.reliable_updates > 0 {
            stats.restart_applications += 1;
        }
        // A stalled inner run is restarted once from the true residual (a fresh Krylov
        // space): in half precision the inner CR can stall by itself, far above the
        // format's resolution (validate/RESULTS.md). The solve stops as stagnated
        // only when the restart's true residual did not improve on the last one by 1%.
        let stalled = run.verdict == Verdict::Stop(StopReason::Stagnation);
        match run.verdict {
            _ if stalled && !stalled_before => {}
            Verdict::Stop(reason) => break reason,
            Verdict::Handoff => {}
            Verdict::Continue => return Err(Error::internal("a solver run ended on Continue")),
        }
        // The reliable update: fold x_s into x_d, recompute r in double. From the second
        // on, its queued part goes through `queue_recorded` (where the backend records:
        // one CUDA graph); the first runs as it comes, so that whatever the double
        // operator makes on first use is made outside a record.
        let xs = inner
            .solution()
            .ok_or_else(|| Error::internal("reliable update without an inner solution"))?;
        let mut update = |sp: &mut S| -> Result<()> {
            sp.add_converted(xs, &mut xd, &mut scratch)?;
            op.apply(sp, &mut scratch, &xd)
        };
        if stats.reliable_updates == 0 {
            update(space)?;
        } else {
            space.queue_recorded(record_key, &mut update)?;
        }
        applications += op.stencil_applications();
        tracing::debug!(
            us = super::micros_since(&t),
            "mixed: x_d += x_s, A x_d (queued)"
        );
        let nr_true = space.residual_converted(b, &mut scratch, &mut rs)?;
        if let Some(last) = history.last_mut() {
            *last = nr_true;
        }
        stats.reliable_updates += 1;
        tracing::debug!(us = super::micros_since(&t), "mixed: reliable update");
        stats
            .true_residuals
            .push((iter, (nr_true / monitor.nb).sqrt()));
        monitor.handoff_below = Some(delta * delta * nr_true);
        if stalled {
            if nr_true > 0.99 * 0.99 * last_true {
                break StopReason::Stagnation;
            }
            monitor.restart_window(iter, nr_true);
        }
        stalled_before = stalled;
        last_true = nr_true;
        if let Some(reason) = monitor.judge(iter, nr_true, true) {
            break reason;
        }
        nr0 = Some(nr_true);
    };
    inner.release(space);
    space.forget_records();
    monitor.handoff_below = None;
    Ok(SolveOutcome {
        x: xd,
        iterations: iter,
        reason,
        history: monitor.relative(&history),
        operator_applications: applications,
        stats,
    })
}
