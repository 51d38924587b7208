//! Ranks as threads of this process on the CPU, each with the decomposed CPU backend and
//! its own share of the thread pool. With the clover term or a twist each rank builds
//! its site term from its links and its neighbours' ring of links (`site`).

use super::outcome::{finish_ranks, logged, RankOutcome, SplitSolve};
use super::shares::local_problem;
use super::site::rank_site_terms;
use crate::app::plan::SolvePlan;
use crate::app::solve::solve_on_rank;
use crate::backend::cpu_decomposed::DecomposedCpu;
use crate::backend::prelude::*;
use crate::clock::{timed, timed_seconds};
use crate::comms::{threads::run_ranks, Comms};
use crate::config::LoadedConfig;
use crate::geometry::partition::Partition;
use crate::problem::Problem;
use crate::report::RankTimes;
use crate::Result;

/// Ranks as threads, each with the decomposed CPU backend.
pub(super) fn run_cpu(
    cfg: &LoadedConfig,
    problem: &Problem,
    parts: &[Partition],
) -> Result<SplitSolve> {
    let plan = SolvePlan::from_config(&cfg.config, false);
    // Each rank its own pool, the threads shared out: a rank blocks in its exchanges, so
    // ranks sharing one pool could hold every worker while the rank they wait for has
    // none (a deadlock).
    let per_rank_threads = (rayon::current_num_threads() / parts.len()).max(1);
    let per_rank = run_ranks(parts.len(), |comms| {
        let rank = comms.rank();
        let pool = crate::app::problem::thread_pool(per_rank_threads as i64)?;
        logged(rank, cpu_rank(problem, parts, &plan, &pool, comms))
    })?;
    finish_ranks(parts, per_rank)
}

fn cpu_rank(
    problem: &Problem,
    parts: &[Partition],
    plan: &SolvePlan,
    pool: &rayon::ThreadPool,
    mut comms: crate::comms::threads::ThreadComms,
) -> Result<RankOutcome> {
    {
        let rank = comms.rank();
        let p = &parts[rank];
        let (local, share) = timed_seconds("the rank's share of the problem", || {
            local_problem(problem, p)
        });
        let local = local?;
        pool.install(|| {
            let action = local.action();
            let terms = action
                .has_site_term()
                .then(|| {
                    timed("the rank's site term", || {
                        rank_site_terms(&local.gauge, p, &action, &mut comms)
                    })
                })
                .transpose()?;
            let mut be = DecomposedCpu::new(p.clone(), local.gauge.clone(), local.kappa, comms)?;
            if let Some(terms) = terms {
                be = be.with_site_terms(terms)?;
            }
            let r = solve_on_rank(&mut be, &local, plan, rank)?;
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
                graph_launches: 0,
                graph_seconds: 0.0,
            };
            let wall = crate::report::BackendWall {
                construct: share,
                ..Default::default()
            };
            Ok((r, times, be.describe(), be.comms().describe(), wall))
        })
    }
}
