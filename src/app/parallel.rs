//! The main job on a split lattice (`[parallel] grid`): the problem is built
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

use super::device::choose_device;
use super::footprint;
use super::plan::SolvePlan;
use super::problem::build_problem;
use super::solve::{finish_run, solve_on_rank};
use crate::backend::cpu_decomposed::{self, DecomposedCpu};
use crate::backend::prelude::*;
use crate::clock::{timed, timed_seconds};
use crate::comms::{threads::run_ranks, Comms};
use crate::config::{Device, LoadedConfig, ReadMode};
use crate::field::SpinorField;
use crate::geometry::partition::Partition;
use crate::problem::{Problem, SolveResult};
use crate::report::{ParallelReport, RankTimes, SolveReport};
use crate::{Error, Result};

/// Every rank's partition of the global lattice, in rank order.
pub fn partitions(global: [usize; 4], grid: [usize; 4]) -> Result<Vec<Partition>> {
    let ranks: usize = grid.iter().product();
    (0..ranks)
        .map(|r| Partition::new(global, grid, r))
        .collect()
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
    let grid = c.parallel.grid();
    // The kernels' compiles, in the background while the host builds the problem and the
    // ranks construct their backends (a rank that needs a program still compiling waits
    // for it: `compile::program_lock`; a failure here is the ranks' to report).
    let warm = warm_up(cfg, 0);
    let problem = if c.parallel.read == ReadMode::Slab {
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

/// The GPU warm-up of a split run on GPU `device` (`cuda::warm_up_split`); None on the
/// CPU, for a seed kernel (refused later by name) or without a driver.
fn warm_up(cfg: &LoadedConfig, device: usize) -> Option<std::thread::JoinHandle<()>> {
    let c = &cfg.config;
    if c.backend.device == crate::config::Device::Cpu {
        return None;
    }
    let opts = super::plan::cuda_options(cfg).ok()?;
    if !opts.version.is_fast_path() {
        return None;
    }
    let plan = SolvePlan::from_config(c, true);
    crate::backend::cuda::warm_up_split(device, opts.reconstruct, plan.precision, plan.fused)
}

/// A split solve's outcome: the gathered solution and rank 0's counts, the backend's
/// description, and every rank's times.
pub struct SplitSolve {
    pub result: SolveResult,
    pub described: String,
    pub parallel: ParallelReport,
    /// The longest rank's set-up (`BackendWall`), for the time line.
    pub wall: crate::report::BackendWall,
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

/// How the ranks of one process reach each other on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wiring {
    /// Every rank on GPU 0, faces moved by device copies (`PeerCopies`): one GPU
    /// visible. NCCL refuses two ranks on one GPU.
    OneGpu,
    /// Rank r on GPU r, NCCL between them (faces and global sums).
    Nccl,
    /// Rank r on GPU r, faces and the fused CR's sums moved by the copy engines
    /// (`PeerCopies::world_across_gpus`), host global sums over threads.
    Copies,
}

/// The variable that picks how the ranks of one process on several GPUs reach each other:
/// `nccl` (the default) or `copies`.
pub const EXCHANGE_VAR: &str = "QCD_SOLVE_EXCHANGE";

/// The wiring of ranks as threads on several GPUs (`EXCHANGE_VAR`).
fn several_gpus_wiring() -> Result<Wiring> {
    exchange_wiring(std::env::var(EXCHANGE_VAR).ok().as_deref())
}

/// `EXCHANGE_VAR`'s value (None: unset) as a wiring; anything else than nccl, copies or
/// nothing is refused naming the variable (exit 2).
fn exchange_wiring(value: Option<&str>) -> Result<Wiring> {
    match value.map(str::trim) {
        None | Some("") | Some("nccl") => Ok(Wiring::Nccl),
        Some("copies") => Ok(Wiring::Copies),
        Some(other) => Err(Error::invalid(
            EXCHANGE_VAR,
            format!("must be \"nccl\" or \"copies\", got {other:?}"),
        )),
    }
}

/// Ranks as threads of this process, each with the decomposed 3.0 backend.
fn run_cuda(cfg: &LoadedConfig, problem: &Problem, parts: &[Partition]) -> Result<SplitSolve> {
    use crate::backend::cuda;
    let (opts, plan) = super::plan::split_gpu_plan(cfg)?;
    let ranks = parts.len();
    let gpus = cuda::device_count()?;
    let wiring = if gpus >= ranks {
        several_gpus_wiring()?
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
    // Ranks on NCCL whose fused CR sums go over peer memory (`cuda::peer_sums_requested`).
    let mut peer_sums = false;
    match wiring {
        Wiring::OneGpu => {
            tracing::warn!(
                "{ranks} ranks share GPU 0 (one GPU visible): faces move by device copies; a test of the decomposition, not a speed-up"
            );
            // Every rank's backend on GPU 0: their needs add.
            let estimates: Vec<_> = parts
                .iter()
                .map(|p| footprint::estimate(&footprint::DevicePlan::of_rank(p, &opts, &plan)))
                .collect();
            let dp = footprint::DevicePlan::of_rank(&parts[0], &opts, &plan);
            let what = footprint::run_name(&problem.lattice.dims_string(), &opts, &plan);
            tracing::info!(
                "device memory estimate per rank: {what}: {}",
                estimates[0].describe()
            );
            footprint::check_device(&what, &estimates, &dp, 0)?;
        }
        Wiring::Nccl | Wiring::Copies => {
            if wiring == Wiring::Nccl {
                crate::comms::nccl::require_nccl()?;
                if cuda::peer_sums_requested() {
                    match cuda::enable_peer_access(ranks)?.first() {
                        None => peer_sums = true,
                        Some((a, b)) => tracing::warn!(
                            "GPU {a} cannot reach GPU {b}'s memory: the fused CR's sums go through NCCL's all-gathers"
                        ),
                    }
                }
            } else {
                if let Some((a, b)) = cuda::enable_peer_access(ranks)?.first() {
                    return Err(Error::invalid(
                        EXCHANGE_VAR,
                        format!("copies need every GPU to reach the others' memory, but GPU {a} cannot reach GPU {b}'s (use nccl)"),
                    ));
                }
            }
            for (g, p) in parts.iter().enumerate() {
                let dp = footprint::DevicePlan::of_rank(p, &opts, &plan);
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
        Wiring::Copies => cuda::PeerCopies::world_across_gpus(ranks)
            .into_iter()
            .zip(crate::comms::threads::ThreadComms::world(ranks))
            .map(Some)
            .collect(),
        Wiring::Nccl => Vec::new(),
    });
    let id = match wiring {
        Wiring::Nccl => Some(crate::comms::nccl::new_unique_id()?),
        Wiring::OneGpu | Wiring::Copies => None,
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
                            let nccl = crate::comms::nccl::NcclComms::new(stream, rank, ranks, id)?;
                            if peer_sums {
                                crate::comms::nccl::SharedNccl::in_one_process(nccl).handles()
                            } else {
                                crate::comms::nccl::SharedNccl::new(nccl).handles()
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
                    Wiring::Nccl => format!("nccl {}", crate::comms::nccl::nccl_version()?),
                    Wiring::OneGpu => "device copies between sub-lattices of GPU 0 (PeerCopies), global sums over threads".to_string(),
                    Wiring::Copies => format!("device copies between {ranks} GPU(s) (copy engines, {EXCHANGE_VAR}=copies), global sums over threads"),
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

/// Ranks as threads, each with the decomposed CPU backend.
fn run_cpu(cfg: &LoadedConfig, problem: &Problem, parts: &[Partition]) -> Result<SplitSolve> {
    let plan = SolvePlan::from_config(&cfg.config, false);
    // Each rank its own pool, the threads shared out: a rank blocks in its exchanges, so
    // ranks sharing one pool could hold every worker while the rank they wait for has
    // none (a deadlock).
    let per_rank_threads = (rayon::current_num_threads() / parts.len()).max(1);
    let per_rank = run_ranks(parts.len(), |comms| {
        let rank = comms.rank();
        let pool = super::problem::thread_pool(per_rank_threads as i64)?;
        logged(rank, cpu_rank(problem, parts, &plan, &pool, comms))
    })?;
    finish_ranks(parts, per_rank)
}

/// A rank's error logged where it happens: the others then fail waiting for it, and
/// their errors would hide the cause.
fn logged<T>(rank: usize, r: Result<T>) -> Result<T> {
    if let Err(e) = &r {
        tracing::error!("rank {rank}: {e}");
    }
    r
}

/// A rank's solve, its times, its backend's and its wiring's descriptions, and the wall
/// time of its set-up (`BackendWall`: its share of the problem cut and its backend built,
/// and its tuning) for the time line.
type RankOutcome = (
    SolveResult,
    RankTimes,
    String,
    String,
    crate::report::BackendWall,
);

fn cpu_rank(
    problem: &Problem,
    parts: &[Partition],
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

/// Gather the ranks' solutions and write rank 0's report with every rank's times.
fn finish_ranks(parts: &[Partition], per_rank: Vec<RankOutcome>) -> Result<SplitSolve> {
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

/// One rank's decomposed GPU solve of its share `local` of the problem: the body shared
/// by ranks as threads (one process) and ranks as processes (a launcher).
fn cuda_rank(
    local: &Problem,
    p: &Partition,
    o: &crate::backend::cuda::CudaOptions,
    plan: &SolvePlan,
    links: RankLinks,
    tune: bool,
) -> Result<RankOutcome> {
    let RankLinks {
        comms,
        exchange,
        wiring,
    } = links;
    let rank = p.rank();
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
    // Launch geometry: collective tuning (every rank, rank 0's cache), before the halo
    // books start.
    let (tuned, tune_seconds) = if tune {
        let layout = super::tuning::plan_layout(plan);
        let (tuned, secs) = timed_seconds("tune (rank)", || {
            super::tuning::tune_backend(&mut be, local, layout)
        });
        (tuned?, secs)
    } else {
        ("config (--no-tune)".into(), 0.0)
    };
    let wall = crate::report::BackendWall {
        construct,
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
struct RankLinks {
    comms: Box<dyn Comms>,
    exchange: Box<dyn crate::comms::DeviceExchange>,
    wiring: String,
}

/// Links as reals: 18 per link (`Su3::push_reals`), 4 links per site.
fn links_to_reals(links: &[crate::field::su3::Su3]) -> Vec<f64> {
    let mut out = Vec::with_capacity(18 * links.len());
    for u in links {
        u.push_reals(&mut out);
    }
    out
}

fn reals_to_links(r: &[f64]) -> Vec<crate::field::su3::Su3> {
    r.chunks_exact(18)
        .map(crate::field::su3::Su3::from_reals)
        .collect()
}

fn spinor_to_reals(s: &SpinorField) -> Vec<f64> {
    s.data.iter().flat_map(|z| [z.re, z.im]).collect()
}

fn reals_to_spinor(r: &[f64]) -> SpinorField {
    SpinorField {
        data: r
            .chunks_exact(2)
            .map(|c| crate::field::C64::new(c[0], c[1]))
            .collect(),
    }
}

/// Message tags of the launched mode's set-up and gather.
/// Rank 0: every other rank's message `tag` of `reals_per_site` reals per local site, in
/// rank order (ranks 1, 2, ...).
fn receive_from_others(
    io: &mut dyn Comms,
    parts: &[Partition],
    tag: u32,
    reals_per_site: usize,
) -> Result<Vec<Vec<f64>>> {
    let mut received: Vec<Vec<f64>> = parts[1..]
        .iter()
        .map(|q| vec![0.0; q.local_dims().iter().product::<usize>() * reals_per_site])
        .collect();
    let mut recvs: Vec<crate::comms::Incoming> = received
        .iter_mut()
        .enumerate()
        .map(|(i, data)| crate::comms::Incoming {
            from: i + 1,
            tag,
            data,
        })
        .collect();
    io.exchange(&[], &mut recvs)?;
    drop(recvs);
    Ok(received)
}

const TAG_LINKS: u32 = 1 << 20;
const TAG_SOURCE: u32 = TAG_LINKS + 1;
const TAG_SOLUTION: u32 = TAG_LINKS + 2;

/// One process per GPU, started by a launcher (RANK, WORLD_SIZE, LOCAL_RANK,
/// QCD_SOLVE_MASTER): NCCL between the processes, its id shared through the rendezvous.
/// Rank 0 reads and verifies the problem once and sends every rank its sub-lattice; the
/// solution comes back to rank 0, which writes the outputs. The other ranks print nothing.
pub fn run_launched(
    cfg: &LoadedConfig,
    launch: &crate::comms::launch::Launch,
) -> Result<SolveReport> {
    use crate::backend::cuda;
    use crate::comms::nccl::{NcclComms, SharedNccl};
    let c = &cfg.config;
    let grid = c.parallel.grid();
    let ranks: usize = grid.iter().product();
    if ranks != launch.size {
        return Err(Error::invalid(
            "parallel.grid",
            format!(
                "grid {grid:?} has {ranks} ranks but the launcher ({}) started {} processes",
                launch.launcher, launch.size
            ),
        ));
    }
    if choose_device(c.backend.device)? != Device::Cuda {
        return Err(Error::invalid(
            "backend.device",
            "one process per rank needs a GPU per process (NCCL); on the CPU the ranks are threads of one process: run without the launcher",
        ));
    }
    let (opts, plan) = super::plan::split_gpu_plan(cfg)?;
    let opts = cuda::CudaOptions {
        device: launch.local_rank,
        ..opts
    };
    let lattice = cfg.lattice()?;
    let parts = partitions(lattice.dims, grid)?;
    let rank = launch.rank;
    let p = &parts[rank];
    {
        let dp = footprint::DevicePlan::of_rank(p, &opts, &plan);
        let e = footprint::estimate(&dp);
        let local = p.local_lattice(lattice.boundary)?;
        let what = footprint::run_name(&local.dims_string(), &opts, &plan);
        tracing::info!(
            "device memory estimate of rank {rank}: {what}: {}",
            e.describe()
        );
        footprint::check_device(&what, std::slice::from_ref(&e), &dp, opts.device)?;
    }
    // This process's compiles, while rank 0 builds the problem and the shares travel.
    let warm = warm_up(cfg, launch.local_rank);
    let stream = cuda::stream_on(opts.device)?;
    let nccl = SharedNccl::new(NcclComms::from_launch(stream, Some(launch))?);
    let mut io: Box<dyn Comms> = Box::new(nccl.clone());
    let (local, global) = if c.parallel.read == ReadMode::Slab {
        // Every rank its own part of the gauge file; rank 0 gathers the field.
        read_slabs(cfg, io.as_mut(), &parts, rank)?
    } else {
        // Rank 0: the problem, read and verified once, and every rank's share sent.
        let global = if rank == 0 {
            Some(build_problem(cfg)?)
        } else {
            None
        };
        (
            distribute(cfg, io.as_mut(), &parts, rank, global.as_ref())?,
            global,
        )
    };
    let wiring = format!(
        "nccl {} ({} processes, {})",
        crate::comms::nccl::nccl_version()?,
        launch.size,
        launch.launcher
    );
    let (comms, exchange) = nccl.handles();
    let (result, times, described, wiring, wall) = cuda_rank(
        &local,
        p,
        &opts,
        &plan,
        RankLinks {
            comms,
            exchange,
            wiring,
        },
        c.backend.tune,
    )?;
    if let Some(w) = warm {
        w.join().ok();
    }
    // Every rank's times to every rank (one all-gather), the solution to rank 0.
    let mine = [
        times.pack,
        times.exchange,
        times.interior,
        times.exterior,
        times.wait,
        times.bytes_exchanged as f64,
        times.exchanges as f64,
        times.graph_launches as f64,
        times.graph_seconds,
    ];
    let all = io.all_gather(&mine)?;
    let ranks_times: Vec<RankTimes> = all
        .chunks_exact(mine.len())
        .zip(&parts)
        .map(|(t, q)| RankTimes {
            rank: q.rank(),
            coords: q.coords,
            pack: t[0],
            exchange: t[1],
            interior: t[2],
            exterior: t[3],
            wait: t[4],
            bytes_exchanged: t[5] as u64,
            exchanges: t[6] as u64,
            reductions: 0,
            graph_launches: t[7] as u64,
            graph_seconds: t[8],
        })
        .collect();
    let gathered = collect_solution(io.as_mut(), &parts, rank, &result.solution)?;
    let (Some(problem), Some(solution)) = (global, gathered) else {
        return Ok(crate::report::build(
            cfg,
            &local,
            &result,
            &described,
            f64::NAN,
            None,
        ));
    };
    let mut result = result;
    result.solution = solution;
    let parallel = ParallelReport {
        grid,
        local: p.local_dims(),
        comms: wiring,
        ranks: ranks_times,
    };
    finish_run(
        cfg,
        &problem,
        &result,
        &described,
        None,
        Some(parallel),
        wall,
    )
}

/// Rank 0 (`global` = the problem) sends every other rank its share of the gauge field
/// and the source; every rank returns its share (`local_problem`).
pub fn distribute(
    cfg: &LoadedConfig,
    io: &mut dyn Comms,
    parts: &[Partition],
    rank: usize,
    global: Option<&Problem>,
) -> Result<Problem> {
    let c = &cfg.config;
    let p = &parts[rank];
    if let Some(problem) = global {
        let shares: Vec<(Vec<f64>, Vec<f64>)> = parts[1..]
            .iter()
            .map(|q| {
                Ok((
                    links_to_reals(&cpu_decomposed::scatter_gauge(&problem.gauge, q)?.links),
                    spinor_to_reals(&cpu_decomposed::scatter_spinor(&problem.source, q)?),
                ))
            })
            .collect::<Result<_>>()?;
        let sends: Vec<crate::comms::Outgoing> = shares
            .iter()
            .enumerate()
            .flat_map(|(i, (links, source))| {
                [
                    crate::comms::Outgoing {
                        to: i + 1,
                        tag: TAG_LINKS,
                        data: links,
                    },
                    crate::comms::Outgoing {
                        to: i + 1,
                        tag: TAG_SOURCE,
                        data: source,
                    },
                ]
            })
            .collect();
        io.exchange(&sends, &mut [])?;
        return local_problem(problem, p);
    }
    let l = p.local_lattice(c.lattice.boundary)?;
    let mut links = vec![0.0; l.volume() * 4 * 18];
    let mut source = vec![0.0; l.volume() * 24];
    io.exchange(
        &[],
        &mut [
            crate::comms::Incoming {
                from: 0,
                tag: TAG_LINKS,
                data: &mut links,
            },
            crate::comms::Incoming {
                from: 0,
                tag: TAG_SOURCE,
                data: &mut source,
            },
        ],
    )?;
    let gauge = crate::field::GaugeField {
        lattice: l.clone(),
        links: reals_to_links(&links),
    };
    Ok(Problem {
        plaquette: gauge.plaquette(),
        link_trace: gauge.link_trace(),
        lattice: l,
        gauge,
        gauge_description: format!("rank {rank}'s share, from rank 0"),
        gauge_reunitarised: None,
        kappa: c.dirac.kappa,
        operator: c.solver.operator(),
        source: reals_to_spinor(&source),
        source_description: format!("rank {rank}'s share, from rank 0"),
        setup_seconds: 0.0,
    })
}

/// `[parallel] read = "slab"`: every rank reads and verifies its own part of the gauge
/// file (`io::read_gauge_slab`, the checks combined over `io`: a bad file is refused on
/// every rank); rank 0 gathers the links, builds the whole problem (the config's source
/// around the gathered field) and sends every rank its share of the source. Returns the
/// rank's problem and, on rank 0, the whole one.
pub fn read_slabs(
    cfg: &LoadedConfig,
    io: &mut dyn Comms,
    parts: &[Partition],
    rank: usize,
) -> Result<(Problem, Option<Problem>)> {
    let t0 = std::time::Instant::now();
    let c = &cfg.config;
    let lattice = cfg.lattice()?;
    let p = &parts[rank];
    let (path, format, opts, unchecked) = super::problem::gauge_file(cfg)?;
    let (gauge, info) = crate::io::slab::read_gauge_slab_checked(
        &path,
        format,
        p,
        lattice.boundary,
        (opts, unchecked),
        io,
    )?;
    let description = format!("file {} (each rank read its slab)", path.display());
    let note = info
        .reunitarised
        .then(|| super::problem::reunitarisation_note(&info));
    if rank != 0 {
        // Two exchanges, each one-directional as in `distribute` and `collect_solution`
        // (rank 0 posts the matching receives, then the sends).
        let links = links_to_reals(&gauge.links);
        io.exchange(
            &[crate::comms::Outgoing {
                to: 0,
                tag: TAG_LINKS,
                data: &links,
            }],
            &mut [],
        )?;
        drop(links);
        let mut source = vec![0.0; gauge.lattice.volume() * 24];
        io.exchange(
            &[],
            &mut [crate::comms::Incoming {
                from: 0,
                tag: TAG_SOURCE,
                data: &mut source,
            }],
        )?;
        // A NaN first value (never in a source: files and generators give finite ones)
        // marks a failure of rank 0's, whose exit code follows.
        if source[0].is_nan() {
            return Err(Error::internal(format!(
                "rank 0 could not build the problem around the gathered gauge field (exit code {}); rank 0's error says why",
                source[1]
            )));
        }
        let local = Problem {
            lattice: gauge.lattice.clone(),
            gauge,
            gauge_description: description,
            gauge_reunitarised: note,
            plaquette: info.plaquette,
            link_trace: info.link_trace,
            kappa: c.dirac.kappa,
            operator: c.solver.operator(),
            source: reals_to_spinor(&source),
            source_description: format!("rank {rank}'s share, from rank 0"),
            setup_seconds: t0.elapsed().as_secs_f64(),
        };
        return Ok((local, None));
    }
    // Rank 0: every other rank's links in, the whole field and problem built, the shares
    // of the source out.
    let received = receive_from_others(io, parts, TAG_LINKS, 4 * 18)?;
    let mut shares = vec![gauge.links];
    shares.extend(received.iter().map(|r| reals_to_links(r)));
    let links = crate::geometry::partition::gather_sites(&shares, parts, 4)?;
    drop(shares);
    let whole = crate::field::GaugeField {
        lattice: lattice.clone(),
        links,
    };
    let built = super::problem::problem_with(cfg, lattice, whole, description, note, t0).and_then(
        |problem| {
            let sources: Vec<Vec<f64>> = parts[1..]
                .iter()
                .map(|q| {
                    Ok(spinor_to_reals(&cpu_decomposed::scatter_spinor(
                        &problem.source,
                        q,
                    )?))
                })
                .collect::<Result<_>>()?;
            Ok((problem, sources))
        },
    );
    let (problem, sources) = match built {
        Ok(b) => b,
        Err(e) => {
            // The other ranks wait for their source: tell them (see above) and fail.
            let failed: Vec<Vec<f64>> = parts[1..]
                .iter()
                .map(|q| {
                    let mut v = vec![0.0; q.local_dims().iter().product::<usize>() * 24];
                    v[0] = f64::NAN;
                    v[1] = e.exit_code() as f64;
                    v
                })
                .collect();
            let sends: Vec<crate::comms::Outgoing> = failed
                .iter()
                .enumerate()
                .map(|(i, data)| crate::comms::Outgoing {
                    to: i + 1,
                    tag: TAG_SOURCE,
                    data,
                })
                .collect();
            let _ = io.exchange(&sends, &mut []);
            return Err(e);
        }
    };
    let sends: Vec<crate::comms::Outgoing> = sources
        .iter()
        .enumerate()
        .map(|(i, data)| crate::comms::Outgoing {
            to: i + 1,
            tag: TAG_SOURCE,
            data,
        })
        .collect();
    io.exchange(&sends, &mut [])?;
    Ok((local_problem(&problem, p)?, Some(problem)))
}

/// Every rank's share of the solution to rank 0, which returns the whole field (the
/// others None).
pub fn collect_solution(
    io: &mut dyn Comms,
    parts: &[Partition],
    rank: usize,
    local: &SpinorField,
) -> Result<Option<SpinorField>> {
    if rank != 0 {
        let x = spinor_to_reals(local);
        io.exchange(
            &[crate::comms::Outgoing {
                to: 0,
                tag: TAG_SOLUTION,
                data: &x,
            }],
            &mut [],
        )?;
        return Ok(None);
    }
    let received = receive_from_others(io, parts, TAG_SOLUTION, 24)?;
    let mut solutions = vec![local.clone()];
    solutions.extend(received.iter().map(|r| reals_to_spinor(r)));
    Ok(Some(cpu_decomposed::gather_spinor(&solutions, parts)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comms::threads::run_ranks;

    #[test]
    fn the_exchange_variable_picks_nccl_or_the_copy_engines_and_names_itself() {
        assert_eq!(exchange_wiring(None).unwrap(), Wiring::Nccl);
        assert_eq!(exchange_wiring(Some("")).unwrap(), Wiring::Nccl);
        assert_eq!(exchange_wiring(Some(" nccl ")).unwrap(), Wiring::Nccl);
        assert_eq!(exchange_wiring(Some("copies")).unwrap(), Wiring::Copies);
        let e = exchange_wiring(Some("shm")).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let m = e.to_string();
        assert!(m.contains(EXCHANGE_VAR) && m.contains("\"shm\""), "{m}");
    }

    #[test]
    fn rank_0_sends_every_share_and_gets_the_whole_field_back() {
        // The launched mode's data movement over ranks as threads (the same `Comms`
        // calls NCCL makes between processes): every rank's share equals the one cut
        // from the whole problem directly, and the shares gathered back are the source.
        let text = "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 8\n\n[gauge]\ntype = \"random\"\nseed = 3\n\n[dirac]\nkappa = 0.12\n\n[source]\ntype = \"random\"\nseed = 4\n";
        let cfg = LoadedConfig::from_str(text, "test", ".".into()).unwrap();
        let problem = build_problem(&cfg).unwrap();
        let parts = partitions([4, 4, 4, 8], [2, 1, 1, 2]).unwrap();
        let got = run_ranks(4, |mut io| {
            let rank = io.rank();
            let global = (rank == 0).then(|| build_problem(&cfg)).transpose()?;
            let local = distribute(&cfg, &mut io, &parts, rank, global.as_ref())?;
            let whole = collect_solution(&mut io, &parts, rank, &local.source)?;
            Ok((local.gauge.links, local.source, whole))
        })
        .unwrap();
        for (rank, (links, source, whole)) in got.into_iter().enumerate() {
            let direct = local_problem(&problem, &parts[rank]).unwrap();
            assert!(links
                .iter()
                .zip(&direct.gauge.links)
                .all(|(a, b)| a.0 == b.0));
            assert_eq!(links.len(), direct.gauge.links.len());
            assert_eq!(source, direct.source);
            assert_eq!(whole.is_some(), rank == 0);
            if let Some(w) = whole {
                assert_eq!(w, problem.source);
            }
        }
    }

    fn atb_config(source: &str) -> LoadedConfig {
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/lattices/ATB_nersc.l8t4b3360"
        );
        let text = format!(
            "[lattice]\nLX = 8\nLY = 8\nLZ = 8\nLT = 4\n\n[gauge]\ntype = \"file\"\npath = \"{file}\"\n\n[dirac]\nkappa = 0.12\n\n[source]\n{source}\n\n[parallel]\ngrid = [2, 1, 1, 2]\nread = \"slab\"\n"
        );
        LoadedConfig::from_str(&text, "test", ".".into()).unwrap()
    }

    #[test]
    fn slab_reads_give_every_rank_the_share_rank_0_would_send() {
        // Expected: the rank-0 path (build_problem reads the whole file; local_problem
        // cuts each share). Each rank reading its own slab must give the same bits, and
        // rank 0 the same whole problem (gathered field, same source).
        let cfg = atb_config("type = \"random\"\nseed = 4");
        let problem = build_problem(&cfg).unwrap();
        let parts = partitions([8, 8, 8, 4], [2, 1, 1, 2]).unwrap();
        let got = run_ranks(4, |mut io| {
            let rank = io.rank();
            read_slabs(&cfg, &mut io, &parts, rank)
        })
        .unwrap();
        let same = |a: &[crate::field::su3::Su3], b: &[crate::field::su3::Su3]| {
            a.len() == b.len()
                && a.iter().zip(b).all(|(u, v)| {
                    u.0.iter()
                        .flatten()
                        .zip(v.0.iter().flatten())
                        .all(|(x, y)| {
                            x.re.to_bits() == y.re.to_bits() && x.im.to_bits() == y.im.to_bits()
                        })
                })
        };
        for (rank, (local, whole)) in got.into_iter().enumerate() {
            let direct = local_problem(&problem, &parts[rank]).unwrap();
            assert!(same(&local.gauge.links, &direct.gauge.links), "rank {rank}");
            assert_eq!(local.gauge.lattice, direct.gauge.lattice);
            assert_eq!(local.source, direct.source, "rank {rank}");
            assert_eq!(whole.is_some(), rank == 0);
            if let Some(w) = whole {
                assert!(same(&w.gauge.links, &problem.gauge.links));
                assert_eq!(w.source, problem.source);
                assert_eq!(w.plaquette, problem.plaquette);
            }
        }
    }

    #[test]
    fn a_failure_of_rank_0_after_the_read_reaches_every_rank_at_once() {
        // A source file that does not exist: rank 0 fails building the problem after
        // the slabs were read; the others learn it from their source share at once
        // (they would otherwise wait 120 s for it) and fail naming rank 0.
        let cfg = atb_config("type = \"file\"\npath = \"/no/such/source.npy\"");
        let parts = partitions([8, 8, 8, 4], [2, 1, 1, 2]).unwrap();
        let t = std::time::Instant::now();
        let errs = run_ranks(4, |mut io| {
            let rank = io.rank();
            Ok(read_slabs(&cfg, &mut io, &parts, rank).err())
        })
        .unwrap();
        assert!(t.elapsed().as_secs() < 30, "the ranks waited");
        assert_eq!(errs[0].as_ref().unwrap().exit_code(), 3);
        for e in &errs[1..] {
            let e = e.as_ref().unwrap().to_string();
            assert!(e.contains("rank 0 could not build the problem"), "{e}");
        }
    }
}
