//! Ranks as processes, one per GPU, started by a launcher: NCCL between them, rank 0
//! reading the problem and writing the outputs.

use super::gpu::{cuda_rank, warm_up, RankLinks};
use super::shares::{collect_solution, distribute, partitions, read_slabs};
use crate::app::device::choose_device;
use crate::app::footprint;
use crate::app::problem::build_problem;
use crate::app::solve::finish_run;
use crate::comms::Comms;
use crate::config::{Device, LoadedConfig, ReadMode};
use crate::report::{ParallelReport, RankTimes, SolveReport};
use crate::{Error, Result};

/// One process per GPU, started by a launcher (RANK, WORLD_SIZE, LOCAL_RANK,
/// QCD_SOLVE_MASTER): NCCL between the processes, its id shared through the rendezvous.
/// Rank 0 reads and verifies the problem once and sends every rank its sub-lattice; the
/// solution comes back to rank 0, which writes the outputs. The other ranks print nothing.
pub fn run_launched(
    cfg: &LoadedConfig,
    launch: &crate::comms::launch::Launch,
) -> Result<SolveReport> {
    use crate::backend::cuda;
    use crate::comms::nccl::{communicator::NcclComms, shared::SharedNccl};
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
    let (opts, plan) = crate::app::plan::split_gpu_plan(cfg)?;
    let opts = cuda::CudaOptions {
        device: launch.local_rank,
        ..opts
    };
    let lattice = cfg.lattice()?;
    let parts = partitions(lattice.dims, grid)?;
    let rank = launch.rank;
    let p = &parts[rank];
    {
        let dp = footprint::DevicePlan {
            site_term: c.dirac.action().has_site_term(),
            ..footprint::DevicePlan::of_rank(p, &opts, &plan)
        };
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
        crate::comms::nccl::library::nccl_version()?,
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
