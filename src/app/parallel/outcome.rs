//! What the ranks of a split solve return: each rank's outcome, its errors logged where
//! they happen, and the gathered solution with every rank's times.

use crate::backend::cpu_decomposed;
use crate::clock::timed;
use crate::field::SpinorField;
use crate::geometry::partition::Partition;
use crate::problem::SolveResult;
use crate::report::{ParallelReport, RankTimes};
use crate::Result;

/// A split solve's outcome: the gathered solution and rank 0's counts, the backend's
/// description, and every rank's times.
pub struct SplitSolve {
    pub result: SolveResult,
    pub described: String,
    pub parallel: ParallelReport,
    /// The longest rank's set-up (`BackendWall`), for the time line.
    pub wall: crate::report::BackendWall,
}

/// A rank's error logged where it happens: the others then fail waiting for it, and
/// their errors would hide the cause.
pub(super) fn logged<T>(rank: usize, r: Result<T>) -> Result<T> {
    if let Err(e) = &r {
        tracing::error!("rank {rank}: {e}");
    }
    r
}

/// A rank's solve, its times, its backend's and its wiring's descriptions, and the wall
/// time of its set-up (`BackendWall`: its share of the problem cut and its backend built,
/// and its tuning) for the time line.
pub(super) type RankOutcome = (
    SolveResult,
    RankTimes,
    String,
    String,
    crate::report::BackendWall,
);

/// Gather the ranks' solutions and write rank 0's report with every rank's times.
pub(super) fn finish_ranks(parts: &[Partition], per_rank: Vec<RankOutcome>) -> Result<SplitSolve> {
    let mut per_rank = per_rank;
    let solutions: Vec<SpinorField> = per_rank
        .iter_mut()
        .map(|(r, ..)| std::mem::replace(&mut r.solution, SpinorField::zeros(0)))
        .collect();
    let ranks = per_rank.iter().map(|(_, t, ..)| t.clone()).collect();
    // The ranks set up at once: the time line takes the longest.
    let wall = per_rank
        .iter()
        .fold(crate::report::BackendWall::default(), |w, o| {
            crate::report::BackendWall {
                construct: w.construct.max(o.4.construct),
                tune: w.tune.max(o.4.tune),
                links: None,
            }
        });
    let (mut result, _, described, comms, _) = per_rank.remove(0);
    result.solution = timed("gather the ranks' solutions", || {
        cpu_decomposed::gather_spinor(&solutions, parts)
    })?;
    let parallel = ParallelReport {
        grid: parts[0].grid,
        local: parts[0].local_dims(),
        comms,
        ranks,
    };
    Ok(SplitSolve {
        result,
        described,
        parallel,
        wall,
    })
}
