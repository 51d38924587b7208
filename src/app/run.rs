//! The main job: build the problem a config describes (lattice, gauge field, source), pick
//! the backend, run CR through the one generic solver, check the true residual, and write
//! the summary, the JSON report, the solution and (if asked) the gauge field.

use super::device::choose_device;
pub use super::plan::SolvePlan;
use crate::backend::cpu::CpuBackend;
use crate::backend::prelude::*;
use crate::backend::{Capabilities, Operator};
use crate::config::{Device, GaugeConfig, LoadedConfig, Preconditioning, SourceConfig};
use crate::dirac;
use crate::error::{Error, Result};
use crate::field::{GaugeField, SpinorField, C64};
pub use crate::problem::{Problem, SolveResult};
use crate::report::timeline::timed;
use crate::report::{self, SolveReport, Timings};
use crate::solver::{self, Method, StopReason};
use std::time::Instant;

pub fn build_problem(cfg: &LoadedConfig) -> Result<Problem> {
    let t0 = Instant::now();
    let c = &cfg.config;
    let lattice = cfg.lattice()?;
    let mut gauge_reunitarised = None;
    let t_gauge = crate::report::timeline::process_seconds();
    let (gauge, gauge_description) = match &c.gauge {
        GaugeConfig::Unit => (GaugeField::unit(&lattice), "unit (free field)".to_string()),
        GaugeConfig::Random { seed } => (
            GaugeField::random(&lattice, *seed),
            format!("random SU(3), seed {seed}"),
        ),
        GaugeConfig::Heatbath(params) => (
            crate::app::generate::cached_field(&lattice, params, c.backend.device)?,
            format!(
                "quenched heatbath, beta {}, {} + {} sweeps, seed {}",
                params.beta, params.therm, params.sweeps, params.seed
            ),
        ),
        GaugeConfig::File { .. } => {
            let (path, fmt, opts) = gauge_file(cfg)?;
            let (g, info) =
                crate::io::read_gauge_with(&path, fmt, Some(lattice.dims), lattice.boundary, opts)?;
            if info.reunitarised {
                gauge_reunitarised = Some(reunitarisation_note(&info));
            }
            (g, format!("file {}", path.display()))
        }
    };
    crate::report::timeline::record(
        "gauge field (read or generated)",
        t_gauge,
        t0.elapsed().as_secs_f64(),
    );
    tracing::info!("gauge field ready: {gauge_description}");
    problem_with(
        cfg,
        lattice,
        gauge,
        gauge_description,
        gauge_reunitarised,
        t0,
    )
}

/// The gauge file a config names (resolved against the config's folder), its format
/// (`None`: detect) and the read options; an error when `[gauge]` is not a file.
pub(crate) fn gauge_file(
    cfg: &LoadedConfig,
) -> Result<(
    std::path::PathBuf,
    Option<crate::io::GaugeFormat>,
    crate::io::ReadOptions,
)> {
    let GaugeConfig::File {
        path,
        format,
        reunitarise,
    } = &cfg.config.gauge
    else {
        return Err(Error::invalid("gauge", "the gauge field is not a file"));
    };
    let fmt = crate::io::parse_format(format).map_err(|e| match e {
        Error::Format { message, .. } => Error::invalid("gauge.format", message),
        other => other,
    })?;
    Ok((
        cfg.input_path(path),
        fmt,
        crate::io::ReadOptions {
            reunitarise: *reunitarise,
        },
    ))
}

/// The problem around a gauge field at hand (read, generated, or gathered from the
/// ranks' slabs): its plaquette and link trace, the config's source and kappa.
pub(crate) fn problem_with(
    cfg: &LoadedConfig,
    lattice: crate::geometry::lattice::Lattice,
    gauge: GaugeField,
    gauge_description: String,
    gauge_reunitarised: Option<String>,
    t0: Instant,
) -> Result<Problem> {
    let c = &cfg.config;
    let (plaquette, link_trace) =
        crate::report::timeline::timed("plaquette and link trace", || {
            (gauge.plaquette(), gauge.link_trace())
        });
    let t_source = crate::report::timeline::process_seconds();
    let t = Instant::now();
    let (source, source_description) = match &c.source {
        SourceConfig::Point { site, spin, colour } => {
            let s = site.map(|v| v as usize);
            (
                SpinorField::point(&lattice, s, *spin as usize, *colour as usize),
                format!("point at {s:?}, spin {spin}, colour {colour}"),
            )
        }
        SourceConfig::Random { seed } => (
            SpinorField::random(lattice.volume(), *seed, 1 << 40),
            format!("random Gaussian, seed {seed}"),
        ),
        SourceConfig::PlaneWave {
            momentum,
            spin,
            colour,
        } => {
            let mut u = [C64::new(0.0, 0.0); 12];
            u[*spin as usize * 3 + *colour as usize] = C64::new(1.0, 0.0);
            (
                SpinorField::plane_wave(&lattice, *momentum, &u),
                format!("plane wave n = {momentum:?}, spin {spin}, colour {colour}"),
            )
        }
        SourceConfig::File { path } => {
            let path = cfg.input_path(path);
            (
                crate::io::npy::read_spinor_npy(&path, &lattice)?,
                format!("file {}", path.display()),
            )
        }
    };
    if source.norm2() == 0.0 {
        return Err(Error::invalid("source", "the source is zero everywhere"));
    }
    crate::report::timeline::record("source", t_source, t.elapsed().as_secs_f64());
    Ok(Problem {
        lattice,
        gauge,
        gauge_description,
        gauge_reunitarised,
        plaquette,
        link_trace,
        kappa: c.dirac.kappa,
        operator: c.solver.operator(),
        source,
        source_description,
        setup_seconds: t0.elapsed().as_secs_f64(),
    })
}

/// What the report says when a gauge file's links were reunitarised.
pub(crate) fn reunitarisation_note(info: &crate::io::GaugeFileInfo) -> String {
    let after = info.unitarity_reunitarised.unwrap_or(f64::NAN);
    if info.links_forced_onto_su3 > 0 {
        format!(
            "{} links off SU(3) beyond {:.0e} (worst {:.3e}) projected onto SU(3) as asked \
             (reunitarise); every link reunitarised in double, now SU(3) to {after:.1e}",
            info.links_forced_onto_su3, info.unitarity_tolerance, info.unitarity_as_stored
        )
    } else {
        format!(
            "{}-bit links reunitarised in double (SU(3) to {:.1e} as stored, {after:.1e} after)",
            info.precision_bits, info.unitarity_as_stored
        )
    }
}

/// Solve D x = b (through A = D or g5 D, rhs = b or g5 b) on any backend as `plan` says.
pub fn solve_on<B: Backend>(
    backend: &mut B,
    problem: &Problem,
    plan: &SolvePlan,
) -> Result<SolveResult> {
    solve_on_rank(backend, problem, plan, 0)
}

/// `solve_on` for one rank of a split lattice: `problem` holds the rank's sub-lattice
/// and every rank calls this at once (the reductions are collective); only rank 0 shows
/// progress.
pub fn solve_on_rank<B: Backend>(
    backend: &mut B,
    problem: &Problem,
    plan: &SolvePlan,
    rank: usize,
) -> Result<SolveResult> {
    let op = plan.method.iterated_form(problem.operator);
    let rhs = timed("right-hand side (host)", || {
        if op.gamma5() {
            problem.source.gamma5()
        } else {
            problem.source.clone()
        }
    });
    if plan.preconditioning == Preconditioning::EvenOdd {
        problem.lattice.require_even("even-odd preconditioning")?;
    }
    let spec = plan.spec();
    timed("prepare the backend", || {
        backend.prepare(crate::app::tuning::plan_layout(plan), plan.fused)?;
        // The solve's own fields, ahead (the stencil options do not enter them).
        let fields = crate::app::footprint::DevicePlan::of_run(
            problem.lattice.volume(),
            &crate::backend::cuda::CudaOptions::default(),
            plan,
            false,
        );
        backend.reserve(crate::app::footprint::solve_working_bytes(&fields))
    })?;
    // Even-odd: the source goes in alone and is freed once the even right-hand side is
    // made; the form's right-hand side b, which only the final check needs, is uploaded
    // after the solve's fields are gone (app::footprint counts it so).
    let t = Instant::now();
    let (b, source) = timed("upload the source", || -> Result<_> {
        Ok(if spec.even_odd {
            (None, Some(backend.upload(&problem.source)?))
        } else {
            (Some(backend.upload(&rhs)?), None)
        })
    })?;
    let mut upload = t.elapsed().as_secs_f64();
    // Split lattice: the ranks start the solve's clock together (their uploads end at
    // different times; the first global sum would otherwise hold the difference inside
    // rank 0's solve time: on 4 GPUs in run 125 the ranks' solves started up to 18 ms
    // apart, and 14 ms of rank 0's 71.8 ms Schur system were in no timed step). Nothing
    // on one rank.
    timed("wait for every rank", || backend.barrier())?;
    let t_solve = crate::report::timeline::process_seconds();
    let t = Instant::now();
    let progress = if rank == 0 {
        crate::report::progress::SolveProgress::new(plan.method.label(), plan.cr.tol)?
    } else {
        crate::report::progress::SolveProgress::silent()
    };
    let mut observe = |k, r| progress.update(k, r);
    let out = match (&b, source) {
        (_, Some(source)) => solver::solve_from_source(backend, &spec, op, source, &mut observe)?,
        (Some(b), None) => solver::solve(backend, &spec, op, b, None, &mut observe)?,
        (None, None) => return Err(Error::internal("a solve without a right-hand side")),
    };
    let x = out.x;
    progress.finish();
    // Every path ends on a host read of a scalar (or a reduction), after the last kernel
    // of the solve except the even-odd reconstruction, which the download below waits
    // for: the solve time is taken after a synchronising norm.
    let t_norm = Instant::now();
    let _ = backend.norm2(&x)?;
    tracing::debug!(
        us = crate::solver::micros_since(&t_norm),
        "solve: the final norm (waits for the reconstruction)"
    );
    let solve = t.elapsed().as_secs_f64();
    crate::report::timeline::record("solve", t_solve, solve);
    let b = match b {
        Some(b) => b,
        None => {
            let t = Instant::now();
            let b = timed("upload the right-hand side", || backend.upload(&rhs))?;
            upload += t.elapsed().as_secs_f64();
            b
        }
    };
    let t = Instant::now();
    let solution = timed("download the solution", || backend.download(&x))?;
    let download = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let true_residual = timed("true residual (backend)", || {
        solver::true_residual(backend, op, &b, &x)
    })?;
    let check = t.elapsed().as_secs_f64();
    // The statistics of the wrappers (and of the fused CR): reliable updates of a mixed
    // solve too when it runs CR's plain loop (half-double).
    let wrapped = plan.fused
        || plan.method != Method::Cr
        || spec.even_odd
        || plan.precision != crate::backend::Precision::Double;
    Ok(SolveResult {
        solution,
        iterations: out.iterations,
        reason: out.reason,
        history: out.history,
        operator_applications: out.operator_applications,
        true_residual,
        timings: Timings {
            setup: problem.setup_seconds,
            upload,
            solve,
            download,
            true_residual: check,
        },
        fused: wrapped.then_some(out.stats),
        plan: plan.describe(),
    })
}

/// ||b - D x|| / ||b|| recomputed on the CPU with the fast operator: the residual of the
/// original system, whichever operator and backend solved.
pub fn cpu_residual_of_d(problem: &Problem, x: &SpinorField) -> f64 {
    let mut dx = SpinorField::zeros(problem.lattice.volume());
    dirac::apply(Operator::D, &problem.gauge, problem.kappa, x, &mut dx);
    dx.rel_diff(&problem.source)
}

/// Build a rayon pool of `threads` (0 = all cores).
pub fn thread_pool(threads: i64) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(crate::threads::check(threads, "threads")?)
        .build()
        .map_err(|e| Error::invalid("backend.threads", e.to_string()))
}

/// The whole main job. Returns the report; a solve that stopped without converging
/// returns `Error::NotConverged` after the report has been written.
pub fn run(cfg: &LoadedConfig) -> Result<SolveReport> {
    let c = &cfg.config;
    let launch = crate::comms::launch::Launch::from_env()?.filter(|l| l.size > 1);
    // Under a launcher only rank 0 holds the whole problem and writes the outputs; the
    // others hold their share (checked on the GPU by the launched mode).
    if launch.as_ref().is_none_or(|l| l.rank == 0) {
        timed("host memory check", || crate::memory::check_run(cfg))?;
        timed("output folders", || crate::app::outputs::prepare(cfg))?;
    }
    let pool = thread_pool(c.backend.threads)?;
    if let Some(launch) = launch {
        return pool.install(|| crate::app::parallel::run_launched(cfg, &launch));
    }
    if c.parallel.is_decomposed() {
        return pool.install(|| crate::app::parallel::run(cfg));
    }
    pool.install(|| {
        // The GPU's context and the kernels' compilation, in the background while the host
        // builds the problem (joined before the backend is built).
        let mut warm = match c.backend.device {
            Device::Cpu => None,
            _ => cuda_options(cfg).ok().and_then(|opts| {
                let plan = SolvePlan::from_config(c, opts.version.is_fast_path());
                let volume = cfg.dims().iter().product();
                crate::backend::cuda::warm_up(&opts, plan.precision, plan.fused, volume)
            }),
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
                let opts = cuda_options(cfg)?;
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
                    crate::memory::check_cpu_backend(&problem.lattice)?;
                }
                let params = SolvePlan::from_config(c, false);
                let t = Instant::now();
                let mut be = CpuBackend::new(&problem.gauge, problem.kappa);
                wall.construct = t.elapsed().as_secs_f64();
                let d = be.describe();
                (solve_on(&mut be, &problem, &params)?, d, None)
            }
        };
        finish_run(cfg, &problem, &result, &backend_description, gpu, None, wall)
    })
}

/// Everything after the solve: the CPU check of D x = b, the report (with the split
/// lattice's part, if any), the summary, the outputs, and the exit for a solve that did
/// not converge.
pub(crate) fn finish_run(
    cfg: &LoadedConfig,
    problem: &Problem,
    result: &SolveResult,
    backend_description: &str,
    gpu: Option<crate::report::GpuMetrics>,
    parallel: Option<crate::report::ParallelReport>,
    wall: report::BackendWall,
) -> Result<SolveReport> {
    let c = &cfg.config;
    let t = Instant::now();
    let d_residual = timed("CPU check of D x = b", || {
        cpu_residual_of_d(problem, &result.solution)
    });
    let cpu_check = t.elapsed().as_secs_f64();
    let mut rep = timed("build the report", || {
        report::build(cfg, problem, result, backend_description, d_residual, gpu)
    });
    rep.parallel = parallel;
    let r = &result.timings;
    rep.time = report::TimeLine {
        read_generate: r.setup,
        upload: wall.construct + r.upload + r.download,
        tune: wall.tune,
        solve: r.solve,
        verify: r.true_residual + cpu_check,
        links_upload_bytes: wall.links.map(|(b, _)| b),
        links_upload_gbytes_per_second: wall
            .links
            .filter(|&(_, s)| s > 0.0)
            .map(|(b, s)| b as f64 / s / 1e9),
        ..Default::default()
    };
    // The outputs fill in the write time and close the line before the report is
    // serialised; the summary follows (also when a write failed, with the line so far).
    let written = write_outputs(cfg, problem, result, &mut rep);
    if written.is_err() {
        rep.time.finish(report::timeline::process_seconds());
    }
    if !crate::report::progress::is_quiet() {
        println!("{}", report::summary(&rep));
    }
    written?;
    if result.reason != StopReason::Converged {
        return Err(Error::NotConverged(format!(
            "{} {} after {} iterations (residual {:.3e}, tolerance {:.1e}); the report was written",
            result.plan,
            result.reason.describe(),
            result.iterations,
            result.history.last().copied().unwrap_or(f64::NAN),
            c.solver.tolerance
        )));
    }
    Ok(rep)
}

/// The options a GPU backend for `plan` is built with: `opts`, or where the config tunes,
/// the tuner's start (`tuning::start_options`), checked against what the plan needs.
pub(crate) fn backend_options(
    cfg: &LoadedConfig,
    opts: crate::backend::cuda::CudaOptions,
    plan: &SolvePlan,
) -> Result<crate::backend::cuda::CudaOptions> {
    let opts = if cfg.config.backend.tune {
        crate::app::tuning::start_options(opts.version, &opts, crate::app::tuning::TuneMode::Tune)
    } else {
        opts
    };
    plan.check(Capabilities::of_stencil(opts.version))?;
    Ok(opts)
}

/// The CUDA options a config asks for.
pub fn cuda_options(cfg: &LoadedConfig) -> Result<crate::backend::cuda::CudaOptions> {
    let b = &cfg.config.backend;
    let version: crate::backend::cuda::StencilVersion = b
        .kernel
        .parse()
        .map_err(|e: Error| Error::invalid("backend.kernel", e.to_string()))?;
    Ok(crate::backend::cuda::CudaOptions {
        version,
        multiple: b.multiple as usize,
        reconstruct: crate::backend::cuda::Reconstruct::from_reals(b.reconstruct).ok_or_else(
            || {
                Error::invalid(
                    "backend.reconstruct",
                    format!("must be 18, 12 or 8; got {}", b.reconstruct),
                )
            },
        )?,
        tuning: cfg.config.tuning,
        ..Default::default()
    })
}

fn write_outputs(
    cfg: &LoadedConfig,
    problem: &Problem,
    result: &SolveResult,
    rep: &mut SolveReport,
) -> Result<()> {
    crate::app::outputs::write_run(cfg, problem, result, rep)
}
