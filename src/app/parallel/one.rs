//! The main job on one device: the decomposition of grid [1, 1, 1, 1], whose one rank
//! runs the undecomposed backend (one GPU, or the CPU) with nothing to exchange. It holds
//! what the split backends do not (the seed versions 1.0-2.0, the fused BiCGStab, half
//! fields on the GPU) and skips their halo bookkeeping. Its report has the GPU's metrics
//! and no per-rank part.

use crate::app::device::choose_device;
use crate::app::plan::{cuda_options, SolvePlan};
use crate::app::solve::{backend_options, solve_source_kept};
use crate::backend::cpu::CpuBackend;
use crate::backend::prelude::*;
use crate::config::{Device, LoadedConfig};
use crate::problem::{Problem, SolveResult};
use crate::report::timeline::timed;
use crate::report::{self, BackendWall, GpuMetrics};
use crate::solver::mg::WilsonHierarchy;
use crate::Result;
use std::thread::JoinHandle;
use std::time::Instant;

/// The one rank's solve: the result, the backend's description, the GPU's metrics, and
/// the wall time of the backend's set-up.
pub(super) struct OneSolve {
    pub result: SolveResult,
    pub described: String,
    pub gpu: Option<GpuMetrics>,
    pub wall: BackendWall,
}

/// The GPU's context and the kernels' compilation, started in the background while the
/// host builds the problem (joined before the backend is built); None on the CPU.
pub fn warm_up(cfg: &LoadedConfig) -> Option<JoinHandle<()>> {
    let c = &cfg.config;
    match c.backend.device {
        Device::Cpu => None,
        _ => {
            let opts = cuda_options(cfg);
            let plan = SolvePlan::from_config(c, opts.version.is_fast_path());
            let volume = cfg.dims().iter().product();
            let site_term = c.dirac.action().has_site_term();
            // Multigrid iterates in double with its preconditioner in its own precision:
            // the programs of that precision include the double ones.
            let precision = plan
                .multigrid
                .as_ref()
                .map_or(plan.precision, |m| m.precision);
            crate::backend::cuda::warm_up(&opts, precision, plan.fused, site_term, volume)
        }
    }
}

/// Solve `problem` on the config's device (`warm`: `warm_up`'s thread, if any).
pub(super) fn solve_one(
    cfg: &LoadedConfig,
    problem: &Problem,
    warm: Option<JoinHandle<()>>,
) -> Result<OneSolve> {
    let mut one = open(cfg, problem, warm)?;
    let result = one.solve(problem, &problem.source)?;
    let (described, gpu, wall) = one.close(problem)?;
    Ok(OneSolve {
        result,
        described,
        gpu,
        wall,
    })
}

/// The backend of one device, built once (GPU: constructed, the site term uploaded,
/// tuned) for any number of solves on one problem, with the multigrid of
/// `method = "mg"` once its first solve has built it.
enum OneBackend<'g> {
    Cuda(
        Box<crate::backend::cuda::CudaBackend>,
        Option<WilsonHierarchy<crate::backend::cuda::CudaBackend>>,
    ),
    Cpu(Box<CpuBackend<'g>>, Option<WilsonHierarchy<CpuBackend<'g>>>),
}

/// `OneBackend` with what the report says of it.
pub struct OneDevice<'g> {
    backend: OneBackend<'g>,
    params: SolvePlan,
    described: String,
    wall: BackendWall,
    estimate: Option<crate::app::footprint::DeviceEstimate>,
}

impl OneDevice<'_> {
    /// Solve `problem`'s system with the right-hand side `source`.
    pub fn solve(
        &mut self,
        problem: &Problem,
        source: &crate::field::SpinorField,
    ) -> Result<SolveResult> {
        match &mut self.backend {
            OneBackend::Cuda(be, mg) => {
                solve_source_kept(be.as_mut(), problem, source, &self.params, mg)
            }
            OneBackend::Cpu(be, mg) => {
                solve_source_kept(be.as_mut(), problem, source, &self.params, mg)
            }
        }
    }

    /// Solve `problem`'s system for every source of `sources` as one batch
    /// (`app::solve_batch`).
    pub fn solve_batch(
        &mut self,
        problem: &Problem,
        sources: &[crate::field::SpinorField],
    ) -> Result<Vec<SolveResult>> {
        use crate::app::solve_batch::solve_sources_on;
        match &mut self.backend {
            OneBackend::Cuda(be, _) => {
                solve_sources_on(be.as_mut(), problem, sources, &self.params)
            }
            OneBackend::Cpu(be, _) => solve_sources_on(be.as_mut(), problem, sources, &self.params),
        }
    }

    /// What the backend is (the report's `backend`).
    pub fn described(&self) -> &str {
        &self.described
    }

    /// The backend's description, the GPU's metrics (the triad and the memory books, on
    /// the GPU) and its set-up's wall time.
    pub fn close(self, problem: &Problem) -> Result<(String, Option<GpuMetrics>, BackendWall)> {
        let OneBackend::Cuda(mut be, _) = self.backend else {
            return Ok((self.described, None, self.wall));
        };
        be.log_timeline("one GPU");
        let mut gpu = timed("GPU metrics (triad)", || {
            report::gpu_metrics(be.as_mut(), problem.lattice.volume())
        })?;
        let books = be.memory_books();
        if let Some(estimate) = &self.estimate {
            tracing::info!(
                "device memory held at the peak: {} bytes = {:.1} B/site ({}); estimate {} bytes",
                books.peak_bytes,
                books.peak_bytes as f64 / problem.lattice.volume() as f64,
                crate::backend::ledger::describe_lines(&books.at_peak),
                estimate.peak_bytes()
            );
            gpu.memory = Some(crate::app::footprint::memory_report(estimate, &books));
        }
        Ok((self.described, Some(gpu), self.wall))
    }
}

/// Build the backend of `problem` on the config's device (`warm`: `warm_up`'s thread, if
/// any): on the GPU after the memory estimate is checked, with the site term uploaded and
/// the launch geometry tuned.
pub fn open<'g>(
    cfg: &LoadedConfig,
    problem: &'g Problem,
    mut warm: Option<JoinHandle<()>>,
) -> Result<OneDevice<'g>> {
    let c = &cfg.config;
    let mut wall = report::BackendWall::default();
    let device = timed("choose the device", || choose_device(c.backend.device))?;
    match device {
        Device::Cuda => {
            crate::app::plan::check_action(cfg, true)?;
            let opts = cuda_options(cfg);
            // The plan's device memory, estimated before anything is allocated:
            // printed, then checked against the GPU's free memory (exit 6).
            let params = SolvePlan::from_config(c, opts.version.is_fast_path());
            let device_plan = crate::app::footprint::DevicePlan {
                site_term: problem.action().has_site_term(),
                ..crate::app::footprint::DevicePlan::of_run(
                    problem.lattice.volume(),
                    &opts,
                    &params,
                    c.backend.tune,
                )
            };
            let estimate = crate::app::footprint::estimate(&device_plan);
            let what =
                crate::app::footprint::run_name(&problem.lattice.dims_string(), &opts, &params);
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
            // The clover term and twist (none for Wilson), before tuning: the tuner then
            // times the kernels the solve launches.
            timed("upload the site term", || {
                be.set_action(&problem.gauge, &problem.action())
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
                    crate::app::tuning::tune_backend(&mut be, problem, layout)
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
            let described = format!(
                "cuda {} (stencil {}, multiple {})",
                be.device_name(),
                opts.version,
                be.multiple()
            );
            Ok(OneDevice {
                backend: OneBackend::Cuda(Box::new(be), None),
                params,
                described,
                wall,
                estimate: Some(estimate),
            })
        }
        _ => {
            if c.backend.device != Device::Cpu {
                crate::app::memory::check_cpu_backend(&problem.lattice)?;
            }
            let params = SolvePlan::from_config(c, false);
            let t = Instant::now();
            let be = CpuBackend::with_action(&problem.gauge, &problem.action())?;
            wall.construct = t.elapsed().as_secs_f64();
            let described = be.describe();
            Ok(OneDevice {
                backend: OneBackend::Cpu(Box::new(be), None),
                params,
                described,
                wall,
                estimate: None,
            })
        }
    }
}
