//! Ranks as threads of this process on the CPU, each with the decomposed CPU backend and
//! its own share of the thread pool. With the clover term or a twist the site term is
//! built once on the whole lattice (its construction reads the links around each site)
//! and each rank takes the restriction to its sites (`SiteTerms::restrict`).

use super::outcome::{finish_ranks, logged, RankOutcome, SplitSolve};
use super::shares::local_problem;
use crate::app::plan::SolvePlan;
use crate::app::solve::solve_on_rank;
use crate::backend::cpu_decomposed::DecomposedCpu;
use crate::backend::prelude::*;
use crate::clock::{timed, timed_seconds};
use crate::comms::{threads::run_ranks, Comms};
use crate::config::LoadedConfig;
use crate::dirac::clover::SiteTerms;
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
    let action = problem.action();
    let terms = action
        .has_site_term()
        .then(|| {
            timed("the site term on the whole lattice", || {
                SiteTerms::new(&problem.gauge, &action)
            })
        })
        .transpose()?;
    // Each rank its own pool, the threads shared out: a rank blocks in its exchanges, so
    // ranks sharing one pool could hold every worker while the rank they wait for has
    // none (a deadlock).
    let per_rank_threads = (rayon::current_num_threads() / parts.len()).max(1);
    let per_rank = run_ranks(parts.len(), |comms| {
        let rank = comms.rank();
        let pool = crate::app::problem::thread_pool(per_rank_threads as i64)?;
        logged(
            rank,
            cpu_rank(problem, parts, terms.as_ref(), &plan, &pool, comms),
        )
    })?;
    finish_ranks(parts, per_rank)
}

fn cpu_rank(
    problem: &Problem,
    parts: &[Partition],
    terms: Option<&SiteTerms>,
    plan: &SolvePlan,
    pool: &rayon::ThreadPool,
    comms: crate::comms::threads::ThreadComms,
) -> Result<RankOutcome> {
    {
        let rank = comms.rank();
        let p = &parts[rank];
        let (local, share) = timed_seconds("the rank's share of the problem", || {
            local_problem(problem, p)
        });
        let local = local?;
        pool.install(|| {
            let mut be = DecomposedCpu::new(p.clone(), local.gauge.clone(), local.kappa, comms)?;
            if let Some(terms) = terms {
                be = be.with_site_terms(terms.restrict(&problem.lattice, p)?)?;
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
