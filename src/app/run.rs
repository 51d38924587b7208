//! The main job: build the problem a config describes, pick the backend (a split lattice
//! or a launched rank goes to `parallel`), solve through `solve`, and report.

use super::device::choose_device;
pub use super::plan::{cuda_options, SolvePlan};
pub use super::problem::{build_problem, thread_pool};
use super::solve::{backend_options, finish_run};
pub use super::solve::{cpu_residual_of_d, solve_on, solve_on_rank};
use crate::backend::cpu::CpuBackend;
use crate::backend::prelude::*;
use crate::config::{Device, LoadedConfig};
use crate::error::Result;
pub use crate::problem::{Problem, SolveResult};
use crate::report::timeline::timed;
use crate::report::{self, SolveReport};
use std::time::Instant;

/// The whole main job. Returns the report; a solve that stopped without converging
/// returns `Error::NotConverged` after the report has been written.
pub fn run(cfg: &LoadedConfig) -> Result<SolveReport> {
    let c = &cfg.config;
    let launch = crate::comms::launch::Launch::from_env()?.filter(|l| l.size > 1);
    // Under a launcher only rank 0 holds the whole problem and writes the outputs; the
    // others hold their share (checked on the GPU by the launched mode).
    // The outputs' locks are held until this returns, after the last rename.
    let mut _outputs = None;
    if launch.as_ref().is_none_or(|l| l.rank == 0) {
        timed("host memory check", || crate::app::memory::check_run(cfg))?;
        _outputs = Some(timed("output folders", || {
            crate::app::outputs::prepare(cfg)
        })?);
    }
    let pool = thread_pool(c.backend.threads)?;
    if let Some(launch) = launch {
        return pool.install(|| crate::app::parallel::launched::run_launched(cfg, &launch));
    }
    if c.parallel.is_decomposed() {
        return pool.install(|| crate::app::parallel::run(cfg));
    }
    pool.install(|| {
        // The GPU's context and the kernels' compilation, in the background while the host
        // builds the problem (joined before the backend is built).
        let mut warm = match c.backend.device {
            Device::Cpu => None,
            _ => {
                let opts = cuda_options(cfg);
                let plan = SolvePlan::from_config(c, opts.version.is_fast_path());
                let volume = cfg.dims().iter().product();
                crate::backend::cuda::warm_up(&opts, plan.precision, plan.fused, volume)
            }
        };
        let problem = build_problem(cfg)?;
        tracing::info!(
            lattice = %problem.lattice.dims_string(),
            gauge = %problem.gauge_description,
            plaquette = problem.plaquette.total,
            "problem ready"
        );
        let mut wall = report::BackendWall::default();
        let device = timed("choose the device", || choose_device(c.backend.device))?;
        let (result, backend_description, gpu) = match device {
            Device::Cuda => {
                crate::app::plan::check_action(cfg, true)?;
                let opts = cuda_options(cfg);
                // The plan's device memory, estimated before anything is allocated:
                // printed, then checked against the GPU's free memory (exit 6).
                let params = SolvePlan::from_config(c, opts.version.is_fast_path());
                let device_plan = crate::app::footprint::DevicePlan::of_run(
                    problem.lattice.volume(),
                    &opts,
                    &params,
                    c.backend.tune,
                );
                let estimate = crate::app::footprint::estimate(&device_plan);
                let what = crate::app::footprint::run_name(
                    &problem.lattice.dims_string(),
                    &opts,
                    &params,
                );
                tracing::info!("device memory estimate: {what}: {}", estimate.describe());
                timed("device memory check", || {
                    crate::app::footprint::check_device(
                        &what,
                        std::slice::from_ref(&estimate),
                        &device_plan,
                        opts.device,
                    )
                })?;
                let opts = backend_options(cfg, opts, &params)?;
                let t = Instant::now();
                if let Some(w) = warm.take() {
                    timed("wait for the GPU warm-up", || w.join()).ok();
                }
                let mut be = timed("construct the GPU backend", || {
                    crate::backend::cuda::CudaBackend::new(&problem.gauge, problem.kappa, &opts)
                })?;
                wall.construct = t.elapsed().as_secs_f64();
                let st = be.setup_times();
                wall.links = Some((st.links_bytes, 1e-3 * st.links_upload_ms));
                let t = Instant::now();
                // Launch geometry from the autotuner, on this backend (tune cache, or a
                // sweep timed here and stored there), unless the config fixes it with
                // `tune = false`.
                if c.backend.tune {
                    let layout = crate::app::tuning::plan_layout(&params);
                    let how = timed("tune", || {
                        crate::app::tuning::tune_backend(&mut be, &problem, layout)
                    })?;
                    let g = be.geometry();
                    tracing::info!(
                        block = g.coarse_block,
                        multiple = g.multiple,
                        link_hint = g.link_hint,
                        tune_ms = be.setup_times().tune_ms,
                        "launch geometry: {how}"
                    );
                }
                wall.tune = t.elapsed().as_secs_f64();
                let d = format!(
                    "cuda {} (stencil {}, multiple {})",
                    be.device_name(),
                    opts.version,
                    be.multiple()
                );
                let r = solve_on(&mut be, &problem, &params)?;
                be.log_timeline("one GPU");
                let mut gpu = timed("GPU metrics (triad)", || {
                    report::gpu_metrics(&mut be, problem.lattice.volume())
                })?;
                let books = be.memory_books();
                tracing::info!(
                    "device memory held at the peak: {} bytes = {:.1} B/site ({}); estimate {} bytes",
                    books.peak_bytes,
                    books.peak_bytes as f64 / problem.lattice.volume() as f64,
                    crate::backend::ledger::describe_lines(&books.at_peak),
                    estimate.peak_bytes()
                );
                gpu.memory = Some(crate::app::footprint::memory_report(&estimate, &books));
                (r, d, Some(gpu))
            }
            _ => {
                if c.backend.device != Device::Cpu {
                    crate::app::memory::check_cpu_backend(&problem.lattice)?;
                }
                let params = SolvePlan::from_config(c, false);
                let t = Instant::now();
                let mut be = CpuBackend::with_action(&problem.gauge, &problem.action())?;
                wall.construct = t.elapsed().as_secs_f64();
                let d = be.describe();
                (solve_on(&mut be, &problem, &params)?, d, None)
            }
        };
        finish_run(cfg, &problem, &result, &backend_description, gpu, None, wall)
    })
}
