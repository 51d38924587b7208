//! What the batched methods share: a column's outcome (`Column`, `Ended`), the batched
//! application of the live columns (`apply_live`), a stopped column's reason.

use crate::linalg::{Layout, Operator, Space, WilsonKernels};
use crate::solver::monitor::{Monitor, Verdict};
use crate::solver::StopReason;
use crate::Result;

/// How a column's run ended: the verdict and the iterations it had made.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ended {
    pub(super) verdict: Verdict,
    pub(super) iter: usize,
}

/// One column's run: its solution, (r|r) per iteration, operator applications.
pub(super) struct Column<F> {
    pub(super) x: F,
    pub(super) history: Vec<f64>,
    pub(super) applications: usize,
    pub(super) ended: Ended,
}

/// out = op inp for the columns `pick` selects, in one batched application; `parts`
/// gives a column's output and input.
pub(super) fn apply_live<S: WilsonKernels, C>(
    space: &mut S,
    op: Operator,
    cols: &mut [C],
    pick: fn(&C) -> bool,
    parts: fn(&mut C) -> (&mut S::Field, &S::Field),
) -> Result<()> {
    let (mut outs, inps): (Vec<&mut S::Field>, Vec<&S::Field>) =
        cols.iter_mut().filter(|c| pick(c)).map(parts).unzip();
    if inps.is_empty() {
        return Ok(());
    }
    space.apply_batch(op, &mut outs, &inps)
}

/// A stopped column's reason (a batched run is never wrapped: no hand-off).
pub(super) fn reason(v: Verdict) -> StopReason {
    match v {
        Verdict::Stop(r) => r,
        _ => StopReason::Stagnation,
    }
}

/// Check each live column with its monitor; a column that stops leaves the batch
/// (`state`: its iterations, (r|r), whether its iteration would go on, and its live flag)
/// with its verdict in `ended`. Returns whether a column is still live.
pub(super) fn check_live<C>(
    cols: &mut [C],
    monitors: &mut [Monitor],
    ended: &mut [Option<Ended>],
    state: fn(&mut C) -> (usize, f64, bool, &mut bool),
) -> bool {
    let mut any = false;
    for ((c, m), e) in cols.iter_mut().zip(monitors).zip(ended) {
        let (iter, nr, running, live) = state(c);
        if !*live {
            continue;
        }
        match m.check(iter, nr, running) {
            Verdict::Continue => any = true,
            verdict => {
                *live = false;
                *e = Some(Ended { verdict, iter });
            }
        }
    }
    any
}

/// The columns' runs (`parts`: a column's solution, history and applications), each
/// stopped (its verdict in `ended`).
pub(super) fn collect<C, F>(
    cols: Vec<C>,
    ended: Vec<Option<Ended>>,
    parts: fn(C) -> (F, Vec<f64>, usize),
) -> Result<Vec<Column<F>>> {
    cols.into_iter()
        .zip(ended)
        .map(|(c, e)| {
            let ended =
                e.ok_or_else(|| crate::Error::internal("a batched column never stopped"))?;
            let (x, history, applications) = parts(c);
            Ok(Column {
                x,
                history,
                applications,
                ended,
            })
        })
        .collect()
}

/// N fresh fields of `layout` (a column's workspace).
pub(super) fn fields<S: Space, const N: usize>(
    space: &mut S,
    layout: Layout,
) -> Result<[S::Field; N]> {
    let v = (0..N)
        .map(|_| space.alloc_layout(layout))
        .collect::<Result<Vec<_>>>()?;
    v.try_into()
        .map_err(|_| crate::Error::internal("a batched column's workspace"))
}
