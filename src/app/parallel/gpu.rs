//! Ranks on GPUs: the kernels' warm-up, ranks as threads of this process (over NCCL, or
//! all on GPU 0 with device copies) and one rank's decomposed GPU solve.

use super::outcome::{finish_ranks, logged, RankOutcome, SplitSolve};
use super::shares::local_problem;
use crate::app::footprint;
use crate::app::plan::SolvePlan;
use crate::app::solve::solve_on_rank;
use crate::clock::timed_seconds;
use crate::comms::nccl::communicator::NcclComms;
use crate::comms::nccl::library::{nccl_version, new_unique_id, require_nccl};
use crate::comms::nccl::shared::SharedNccl;
use crate::comms::Comms;
use crate::config::LoadedConfig;
use crate::geometry::partition::Partition;
use crate::problem::Problem;
use crate::report::RankTimes;
use crate::{Error, Result};

/// The GPU warm-up of a split run on GPU `device` (`cuda::warm_up_split`, the CLOVER
/// builds with the clover term or a twist); None on the CPU, for a seed kernel (refused
/// later by name) or without a driver.
pub(super) fn warm_up(cfg: &LoadedConfig, device: usize) -> Option<std::thread::JoinHandle<()>> {
    let c = &cfg.config;
    if c.backend.device == crate::config::Device::Cpu {
        return None;
    }
    let opts = crate::app::plan::cuda_options(cfg);
    if !opts.version.is_fast_path() {
        return None;
    }
    let plan = SolvePlan::from_config(c, true);
    crate::backend::cuda::warm_up_split(
        device,
        opts.reconstruct,
        plan.precision,
        plan.fused,
        c.dirac.action().has_site_term(),
    )
}

/// How the ranks of one process reach each other on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wiring {
    /// Every rank on GPU 0, faces moved by device copies (`PeerCopies`): one GPU
    /// visible. NCCL refuses two ranks on one GPU.
    OneGpu,
    /// Rank r on GPU r, NCCL between them (faces and global sums).
    Nccl,
}

/// Ranks as threads of this process, each with the decomposed 3.0 backend.
pub(super) fn run_cuda(
    cfg: &LoadedConfig,
    problem: &Problem,
    parts: &[Partition],
) -> Result<SplitSolve> {
    use crate::backend::cuda;
    let (opts, plan) = crate::app::plan::split_gpu_plan(cfg)?;
    let ranks = parts.len();
    let gpus = cuda::device_count()?;
    let wiring = if gpus >= ranks {
        Wiring::Nccl
    } else if gpus == 1 {
        Wiring::OneGpu
    } else {
        return Err(Error::invalid(
            "parallel.grid",
            format!(
                "grid {:?} has {ranks} ranks but {gpus} GPUs are visible: use at most {gpus} ranks, or CUDA_VISIBLE_DEVICES=0 to put every rank on one GPU",
                parts[0].grid
            ),
        ));
    };
    let local_lattice = parts[0].local_lattice(problem.lattice.boundary)?;
    // A rank's device memory plan (the site term's arrays resident with csw or mu).
    let site_term = problem.action().has_site_term();
    let rank_plan = |p: &Partition| footprint::DevicePlan {
        site_term,
        ..footprint::DevicePlan::of_rank(p, &opts, &plan)
    };
    // Ranks on NCCL whose fused CR sums go over peer memory (`[tuning] peer_sums`).
    let mut peer_sums = false;
    match wiring {
        Wiring::OneGpu => {
            tracing::warn!(
                "{ranks} ranks share GPU 0 (one GPU visible): faces move by device copies; a test of the decomposition, not a speed-up"
            );
            // Every rank's backend on GPU 0: their needs add.
            let estimates: Vec<_> = parts
                .iter()
                .map(|p| footprint::estimate(&rank_plan(p)))
                .collect();
            let dp = rank_plan(&parts[0]);
            let what = footprint::run_name(&problem.lattice.dims_string(), &opts, &plan);
            tracing::info!(
                "device memory estimate per rank: {what}: {}",
                estimates[0].describe()
            );
            footprint::check_device(&what, &estimates, &dp, 0)?;
        }
        Wiring::Nccl => {
            require_nccl()?;
            if cfg.config.tuning.peer_sums {
                match cuda::enable_peer_access(ranks)?.first() {
                    None => peer_sums = true,
                    Some((a, b)) => tracing::warn!(
                        "GPU {a} cannot reach GPU {b}'s memory: the fused CR's sums go through NCCL's all-gathers"
                    ),
                }
            }
            for (g, p) in parts.iter().enumerate() {
                let dp = rank_plan(p);
                let e = footprint::estimate(&dp);
                let what = footprint::run_name(&local_lattice.dims_string(), &opts, &plan);
                if g == 0 {
                    tracing::info!("device memory estimate per rank: {what}: {}", e.describe());
                }
                footprint::check_device(&what, std::slice::from_ref(&e), &dp, g)?;
            }
        }
    }
    // Built here, handed to the ranks: the one-GPU wiring's exchange and host comms.
    let one_gpu = std::sync::Mutex::new(match wiring {
        Wiring::OneGpu => cuda::PeerCopies::world(ranks)
            .into_iter()
            .zip(crate::comms::threads::ThreadComms::world(ranks))
            .map(Some)
            .collect(),
        Wiring::Nccl => Vec::new(),
    });
    let id = match wiring {
        Wiring::Nccl => Some(new_unique_id()?),
        Wiring::OneGpu => None,
    };
    let per_rank = crate::comms::threads::on_threads(ranks, |rank| {
        logged(
            rank,
            (|| {
                let p = &parts[rank];
                let o = cuda::CudaOptions {
                    device: if wiring == Wiring::OneGpu { 0 } else { rank },
                    ..opts.clone()
                };
                let (comms, exchange): (Box<dyn Comms>, Box<dyn crate::comms::DeviceExchange>) =
                    match &id {
                        Some(id) => {
                            let stream = cuda::stream_on(o.device)?;
                            let nccl = NcclComms::new(stream, rank, ranks, id)?;
                            if peer_sums {
                                SharedNccl::in_one_process(nccl).handles()
                            } else {
                                SharedNccl::new(nccl).handles()
                            }
                        }
                        None => {
                            let (exchange, comms) = one_gpu
                                .lock()
                                .map_err(|_| Error::internal("rank wiring lock poisoned"))?[rank]
                                .take()
                                .ok_or_else(|| {
                                    Error::internal("a rank's wiring was taken twice")
                                })?;
                            (Box::new(comms), Box::new(exchange))
                        }
                    };
                let (local, share) = timed_seconds("the rank's share of the problem", || {
                    local_problem(problem, p)
                });
                let local = local?;
                let wiring_name = match wiring {
                    Wiring::Nccl => format!("nccl {}", nccl_version()?),
                    Wiring::OneGpu => "device copies between sub-lattices of GPU 0 (PeerCopies), global sums over threads".to_string(),
                };
                let links = RankLinks {
                    comms,
                    exchange,
                    wiring: wiring_name,
                };
                let mut out = cuda_rank(&local, p, &o, &plan, links, cfg.config.backend.tune)?;
                out.4.construct += share;
                Ok(out)
            })(),
        )
    })?;
    finish_ranks(parts, per_rank)
}

/// One rank's decomposed GPU solve of its share `local` of the problem: the body shared
/// by ranks as threads (one process) and ranks as processes (a launcher).
pub(super) fn cuda_rank(
    local: &Problem,
    p: &Partition,
    o: &crate::backend::cuda::CudaOptions,
    plan: &SolvePlan,
    links: RankLinks,
    tune: bool,
) -> Result<RankOutcome> {
    let RankLinks {
        mut comms,
        exchange,
        wiring,
    } = links;
    let rank = p.rank();
    // The clover term and twist (none for Wilson): from the rank's links and its
    // neighbours' ring of links, before the backend takes the communicator.
    let action = local.action();
    let (terms, site_seconds) = timed_seconds("the rank's site term", || {
        action
            .has_site_term()
            .then(|| super::site::rank_site_terms(&local.gauge, p, &action, comms.as_mut()))
            .transpose()
    });
    let terms = terms?;
    let (be, construct) = timed_seconds("construct the GPU backend (rank)", || {
        crate::backend::cuda::CudaBackend::new_decomposed(
            &local.gauge,
            local.kappa,
            o,
            p.clone(),
            exchange,
            comms,
        )
    });
    let mut be = be?;
    if let Some(terms) = &terms {
        be.set_site_terms(&local.gauge.lattice, terms)?;
    }
    drop(terms);
    // Launch geometry: collective tuning (every rank, rank 0's cache), before the halo
    // books start.
    let (tuned, tune_seconds) = if tune {
        let layout = crate::app::tuning::plan_layout(plan);
        let (tuned, secs) = timed_seconds("tune (rank)", || {
            crate::app::tuning::tune_backend(&mut be, local, layout)
        });
        (tuned?, secs)
    } else {
        ("config (--no-tune)".into(), 0.0)
    };
    let wall = crate::report::BackendWall {
        construct: construct + site_seconds,
        tune: tune_seconds,
        links: None,
    };
    tracing::info!(rank, "launch geometry: {tuned}");
    be.reset_halo_timings()?;
    be.set_halo_timing(true);
    // The rank's log lines carry its number (`rank{rank=N}:`).
    let r = tracing::debug_span!("rank", rank)
        .in_scope(|| solve_on_rank(&mut be, local, plan, rank))?;
    be.log_timeline(&format!("rank {rank}"));
    let t = be.halo_timings()?.unwrap_or_default();
    let graphs = be
        .kernel_stats()
        .into_iter()
        .find(|k| k.name == crate::backend::cuda::GRAPH_STAT);
    let times = RankTimes {
        rank,
        coords: p.coords,
        pack: t.pack_ms / 1e3,
        exchange: t.exchange_ms / 1e3,
        interior: t.interior_ms / 1e3,
        exterior: t.exterior_ms / 1e3,
        wait: t.wait_ms / 1e3,
        bytes_exchanged: t.bytes_exchanged,
        exchanges: t.applications,
        reductions: 0,
        graph_launches: graphs.as_ref().map_or(0, |g| g.launches),
        graph_seconds: graphs.as_ref().map_or(0.0, |g| g.millis / 1e3),
    };
    let described = format!(
        "cuda {} (stencil {}, rank {rank} of {}, GPU {})",
        be.device_name(),
        o.version,
        p.ranks(),
        o.device
    );
    Ok((r, times, described, wiring, wall))
}

/// A rank's connections: the host communicator (global sums, set-up messages), the
/// device exchange (faces, the fused CR's all-gathers) and their description.
pub(super) struct RankLinks {
    pub(super) comms: Box<dyn Comms>,
    pub(super) exchange: Box<dyn crate::comms::DeviceExchange>,
    pub(super) wiring: String,
}
