//! The main job as a decomposition of the lattice (`[parallel] grid`; none: one rank on
//! one device, `one`). A split lattice's problem is built
//! once (the read and verification of the gauge file happen once, as rank 0's), scattered
//! into one sub-lattice per rank, solved by every rank at once through the same solver
//! code as one GPU (communication only in the operator's apply and the reductions), and
//! the solution gathered for the outputs, which are written once.
//!
//! On the CPU the ranks are threads of this process (`comms::threads`), each driving the
//! decomposed CPU backend; they share the `[backend] threads` pool.
//!
//! With `[parallel] read = "slab"` the gauge file is instead read by every rank, each its
//! own part, verified by all of them together (`read_slabs`); rank 0 then gathers the
//! field, which it needs for the CPU check of the solution and the outputs.
//!
//! Files: `shares` (the partitions, rank 0's scatter and gather, the slab reads), `cpu`
//! and `gpu` (ranks as threads), `launched` (ranks as processes), `site` (a rank's clover
//! term from its links and its neighbours'), `outcome` (the ranks' results gathered);
//! here the entry points.

mod cpu;
mod gpu;
pub mod launched;
pub mod one;
pub mod outcome;
pub mod shares;
mod site;

use super::device::choose_device;
use super::problem::build_problem;
use super::solve::finish_run;
use crate::comms::{threads::run_ranks, Comms};
use crate::config::{Device, LoadedConfig, ReadMode};
use crate::geometry::partition::Partition;
use crate::problem::Problem;
use crate::report::SolveReport;
use crate::{Error, Result};
use cpu::run_cpu;
use gpu::{run_cuda, warm_up};
use outcome::{logged, SplitSolve};
use shares::{partitions, read_slabs};

pub fn run(cfg: &LoadedConfig) -> Result<SolveReport> {
    let c = &cfg.config;
    let grid = c.parallel.grid();
    let one_rank = !c.parallel.is_decomposed();
    // The kernels' compiles, in the background while the host builds the problem and the
    // ranks construct their backends (a rank that needs a program still compiling waits
    // for it: `compile::program_lock`; a failure here is the ranks' to report).
    let warm = if one_rank {
        one::warm_up(cfg)
    } else {
        warm_up(cfg, 0)
    };
    let problem = if !one_rank && c.parallel.read == ReadMode::Slab {
        // The ranks read their slabs at once; the solve's set-up below cuts the shares
        // again from the gathered field (one process holds it anyway).
        let parts = partitions(cfg.lattice()?.dims, grid)?;
        let mut got = run_ranks(parts.len(), |mut io| {
            let rank = io.rank();
            logged(rank, read_slabs(cfg, &mut io, &parts, rank))
        })?;
        got.swap_remove(0)
            .1
            .ok_or_else(|| Error::internal("rank 0 gathered no gauge field"))?
    } else {
        build_problem(cfg)?
    };
    let parts = partitions(problem.lattice.dims, grid)?;
    if let [_] = parts[..] {
        tracing::info!(
            lattice = %problem.lattice.dims_string(),
            gauge = %problem.gauge_description,
            plaquette = problem.plaquette.total,
            "problem ready"
        );
        let s = one::solve_one(cfg, &problem, warm)?;
        return finish_run(cfg, &problem, &s.result, &s.described, s.gpu, None, s.wall);
    }
    tracing::info!(
        lattice = %problem.lattice.dims_string(),
        grid = ?grid,
        ranks = parts.len(),
        "problem ready, split into sub-lattices"
    );
    let split = solve_split(cfg, &problem, &parts)?;
    if let Some(w) = warm {
        w.join().ok();
    }
    finish_run(
        cfg,
        &problem,
        &split.result,
        &split.described,
        None,
        Some(split.parallel),
        split.wall,
    )
}

/// Solve `problem` split as `parts` says, with ranks as threads of this process, on the
/// config's device (no outputs written).
pub fn solve_split(
    cfg: &LoadedConfig,
    problem: &Problem,
    parts: &[Partition],
) -> Result<SplitSolve> {
    match choose_device(cfg.config.backend.device)? {
        Device::Cuda => run_cuda(cfg, problem, parts),
        _ => run_cpu(cfg, problem, parts),
    }
}
