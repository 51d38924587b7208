//! The main job on a split lattice (`[parallel] grid`, issue 11): the problem is built
//! once (the read and verification of the gauge file happen once, as rank 0's), scattered
//! into one sub-lattice per rank, solved by every rank at once through the same solver
//! code as one GPU (communication only in the operator's apply and the reductions), and
//! the solution gathered for the outputs, which are written once.
//!
//! On the CPU the ranks are threads of this process (`comms::threads`), each driving the
//! decomposed CPU backend; they share the `[backend] threads` pool.

use super::device::choose_device;
use super::run::{build_problem, finish_run, solve_on_rank, SolvePlan};
use crate::backend::cpu_decomposed::{self, DecomposedCpu};
use crate::backend::prelude::*;
use crate::comms::{threads::run_ranks, Comms};
use crate::config::{Device, LoadedConfig};
use crate::field::SpinorField;
use crate::geometry::partition::Partition;
use crate::problem::{Problem, SolveResult};
use crate::report::{ParallelReport, RankTimes, SolveReport};
use crate::{Error, Result};

/// Every rank's partition of the global lattice, in rank order.
pub fn partitions(global: [usize; 4], grid: [usize; 4]) -> Result<Vec<Partition>> {
    let ranks: usize = grid.iter().product();
    (0..ranks).map(|r| Partition::new(global, grid, r)).collect()
}

/// The rank's share of the problem: its sub-lattice of the gauge field and the source.
pub fn local_problem(problem: &Problem, p: &Partition) -> Result<Problem> {
    Ok(Problem {
        lattice: p.local_lattice(problem.lattice.boundary)?,
        gauge: cpu_decomposed::scatter_gauge(&problem.gauge, p)?,
        source: cpu_decomposed::scatter_spinor(&problem.source, p)?,
        gauge_description: problem.gauge_description.clone(),
        gauge_reunitarised: problem.gauge_reunitarised.clone(),
        plaquette: problem.plaquette,
        link_trace: problem.link_trace,
        kappa: problem.kappa,
        operator: problem.operator,
        source_description: problem.source_description.clone(),
        setup_seconds: problem.setup_seconds,
    })
}

pub fn run(cfg: &LoadedConfig) -> Result<SolveReport> {
    let c = &cfg.config;
    let problem = build_problem(cfg)?;
    let grid = c.parallel.grid();
    let parts = partitions(problem.lattice.dims, grid)?;
    tracing::info!(
        lattice = %problem.lattice.dims_string(),
        grid = ?grid,
        ranks = parts.len(),
        "problem ready, split into sub-lattices"
    );
    match choose_device(c.backend.device)? {
        Device::Cuda => Err(Error::invalid(
            "parallel.grid",
            "a split lattice on the GPU is not wired into the main job yet; run it on the CPU with --device cpu",
        )),
        _ => run_cpu(cfg, &problem, &parts),
    }
}

/// Ranks as threads, each with the decomposed CPU backend.
fn run_cpu(cfg: &LoadedConfig, problem: &Problem, parts: &[Partition]) -> Result<SolveReport> {
    let plan = SolvePlan::from_config(&cfg.config, false);
    let outer = rayon::current_num_threads();
    let pool = super::run::thread_pool(outer as i64)?;
    let per_rank = run_ranks(parts.len(), |comms| {
        let rank = comms.rank();
        let p = &parts[rank];
        let local = local_problem(problem, p)?;
        pool.install(|| {
            let mut be = DecomposedCpu::new(p.clone(), local.gauge.clone(), local.kappa, comms)?;
            let r = solve_on_rank(&mut be, &local, &plan, rank)?;
            let halo = be.halo_stats();
            let stats = be.comms().stats();
            let times = RankTimes {
                rank,
                coords: p.coords,
                pack: halo.pack_seconds,
                exchange: halo.exchange_seconds,
                interior: halo.interior_seconds,
                exterior: halo.exterior_seconds,
                wait: stats.seconds - halo.exchange_seconds,
                bytes_exchanged: stats.bytes_sent,
                exchanges: stats.exchanges,
                reductions: stats.gathers,
            };
            Ok((r, times, be.describe(), be.comms().describe()))
        })
    })?;
    let mut per_rank = per_rank;
    let solutions: Vec<SpinorField> = per_rank
        .iter_mut()
        .map(|(r, ..)| std::mem::replace(&mut r.solution, SpinorField::zeros(0)))
        .collect();
    let ranks = per_rank.iter().map(|(_, t, ..)| t.clone()).collect();
    let (mut result, _, described, comms): (SolveResult, _, String, String) = per_rank.remove(0);
    result.solution = cpu_decomposed::gather_spinor(&solutions, parts)?;
    let parallel = ParallelReport {
        grid: parts[0].grid,
        local: parts[0].local_dims(),
        comms,
        ranks,
    };
    finish_run(cfg, problem, &result, &described, None, Some(parallel))
}
