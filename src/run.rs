//! The main job: build the problem a config describes (lattice, gauge field, source), pick
//! the backend, run CR through the one generic solver, check the true residual, and write
//! the summary, the JSON report, the solution and (if asked) the gauge field.

use crate::backend::cpu::CpuBackend;
use crate::backend::{Backend, Operator};
use crate::config::{Device, GaugeConfig, LoadedConfig, SourceConfig};
use crate::dirac;
use crate::error::{Error, Result};
use crate::field::gauge::Plaquette;
use crate::field::{GaugeField, SpinorField, C64};
use crate::lattice::Lattice;
use crate::report::{self, SolveReport, Timings};
use crate::solver::{self, CrParams, StopReason};
use std::time::Instant;

/// Everything the solver needs, built from a config.
pub struct Problem {
    pub lattice: Lattice,
    pub gauge: GaugeField,
    pub gauge_description: String,
    pub plaquette: Plaquette,
    pub link_trace: f64,
    pub kappa: f64,
    pub operator: Operator,
    /// The right-hand side b of D x = b.
    pub source: SpinorField,
    pub source_description: String,
    pub setup_seconds: f64,
}

pub fn build_problem(cfg: &LoadedConfig) -> Result<Problem> {
    let t0 = Instant::now();
    let c = &cfg.config;
    let lattice = cfg.lattice()?;
    let (gauge, gauge_description) = match &c.gauge {
        GaugeConfig::Unit => (GaugeField::unit(&lattice), "unit (free field)".to_string()),
        GaugeConfig::Random { seed } => (
            GaugeField::random(&lattice, *seed),
            format!("random SU(3), seed {seed}"),
        ),
        GaugeConfig::Heatbath(params) => (
            crate::generate::cached_field(&lattice, params, c.backend.device)?,
            format!(
                "quenched heatbath, beta {}, {} + {} sweeps, seed {}",
                params.beta, params.therm, params.sweeps, params.seed
            ),
        ),
        GaugeConfig::File { path, format } => {
            let path = cfg.input_path(path);
            let fmt = crate::io::parse_format(format).map_err(|e| match e {
                Error::Format { message, .. } => Error::invalid("gauge.format", message),
                other => other,
            })?;
            let (g, _info) =
                crate::io::read_gauge(&path, fmt, Some(lattice.dims), lattice.boundary)?;
            (g, format!("file {}", path.display()))
        }
    };
    let plaquette = gauge.plaquette();
    let link_trace = gauge.link_trace();
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
    Ok(Problem {
        lattice,
        gauge,
        gauge_description,
        plaquette,
        link_trace,
        kappa: c.dirac.kappa,
        operator: c.solver.operator,
        source,
        source_description,
        setup_seconds: t0.elapsed().as_secs_f64(),
    })
}

/// What one solve on one backend produced.
pub struct SolveResult {
    pub solution: SpinorField,
    pub iterations: usize,
    pub reason: StopReason,
    pub history: Vec<f64>,
    pub operator_applications: usize,
    /// ||rhs - A x|| / ||rhs|| on the backend that solved.
    pub true_residual: f64,
    pub timings: Timings,
}

/// Solve A x = rhs on any backend; rhs = b for D and g5 b for g5 D (so x solves D x = b).
pub fn solve_on<B: Backend>(
    backend: &mut B,
    problem: &Problem,
    params: &CrParams,
) -> Result<SolveResult> {
    let rhs = if problem.operator.gamma5() {
        problem.source.gamma5()
    } else {
        problem.source.clone()
    };
    let t = Instant::now();
    let b = backend.upload(&rhs)?;
    let upload = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let progress = crate::progress::SolveProgress::new("CR", params.tol);
    let out =
        solver::conjugate_residual_observed(backend, problem.operator, &b, params, &mut |k, r| {
            progress.update(k, r)
        })?;
    progress.finish();
    // The loop ends on a reduction whose scalar the host has read, so every kernel of
    // the solve has finished here: the download below is timed on its own.
    let solve = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let solution = backend.download(&out.x)?;
    let download = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let true_residual = solver::true_residual(backend, problem.operator, &b, &out.x)?;
    let check = t.elapsed().as_secs_f64();
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
        .num_threads(threads.max(0) as usize)
        .build()
        .map_err(|e| Error::invalid("backend.threads", e.to_string()))
}

/// The whole main job. Returns the report; a solve that stopped without converging
/// returns `Error::NotConverged` after the report has been written.
pub fn run(cfg: &LoadedConfig) -> Result<SolveReport> {
    let c = &cfg.config;
    let pool = thread_pool(c.backend.threads)?;
    pool.install(|| {
        let problem = build_problem(cfg)?;
        tracing::info!(
            lattice = %problem.lattice.dims_string(),
            gauge = %problem.gauge_description,
            plaquette = problem.plaquette.total,
            "problem ready"
        );
        let params = CrParams::new(c.solver.tolerance, c.solver.max_iterations as usize);
        let (result, backend_description, gpu) = match choose_device(c.backend.device)? {
            Device::Cuda => {
                let opts = cuda_options(cfg)?;
                let mut be = crate::cuda::CudaBackend::new(&problem.gauge, problem.kappa, &opts)?;
                let d = format!(
                    "cuda {} (stencil {}, multiple {})",
                    be.device_name(),
                    opts.version,
                    be.multiple()
                );
                let r = solve_on(&mut be, &problem, &params)?;
                let gpu = report::gpu_metrics(&mut be, problem.lattice.volume())?;
                (r, d, Some(gpu))
            }
            _ => {
                let mut be = CpuBackend::new(&problem.gauge, problem.kappa);
                let d = be.describe();
                (solve_on(&mut be, &problem, &params)?, d, None)
            }
        };
        let d_residual = cpu_residual_of_d(&problem, &result.solution);
        let rep = report::build(cfg, &problem, &result, &backend_description, d_residual, gpu);
        println!("{}", report::summary(&rep));
        write_outputs(cfg, &problem, &result, &rep)?;
        if result.reason != StopReason::Converged {
            return Err(Error::NotConverged(format!(
                "CR {} after {} iterations (residual {:.3e}, tolerance {:.1e}); the report was written",
                result.reason.describe(),
                result.iterations,
                result.history.last().copied().unwrap_or(f64::NAN),
                c.solver.tolerance
            )));
        }
        Ok(rep)
    })
}

/// The CUDA options a config asks for.
pub fn cuda_options(cfg: &LoadedConfig) -> Result<crate::cuda::CudaOptions> {
    let b = &cfg.config.backend;
    let version: crate::cuda::StencilVersion = b
        .kernel
        .parse()
        .map_err(|e: Error| Error::invalid("backend.kernel", e.to_string()))?;
    Ok(crate::cuda::CudaOptions {
        version,
        multiple: b.multiple as usize,
        reconstruct_12: b.reconstruct == 12,
        ..Default::default()
    })
}

/// Resolve `auto` (a GPU when one is usable, else the CPU with the reason logged) and
/// check that an explicit `cuda` can run.
pub fn choose_device(requested: Device) -> Result<Device> {
    match requested {
        Device::Cpu => Ok(Device::Cpu),
        Device::Cuda => {
            let info = crate::cuda::device_info()?;
            tracing::info!(gpu = %info.name, "device = cuda");
            Ok(Device::Cuda)
        }
        Device::Auto => match crate::cuda::device_info() {
            Ok(info) => {
                tracing::info!(gpu = %info.name, "device = auto: using the GPU");
                Ok(Device::Cuda)
            }
            Err(e) => {
                tracing::info!("device = auto: no usable GPU ({e}); running on the CPU");
                Ok(Device::Cpu)
            }
        },
    }
}

fn write_outputs(
    cfg: &LoadedConfig,
    problem: &Problem,
    result: &SolveResult,
    rep: &SolveReport,
) -> Result<()> {
    let o = &cfg.config.output;
    if let Some(p) = &o.report {
        let json = serde_json::to_vec_pretty(rep).expect("report serialises");
        crate::io::write_atomic(p, &json)?;
        tracing::info!(path = %p.display(), "report written");
    }
    if let Some(p) = &o.solution {
        crate::io::npy::write_spinor_npy(p, &problem.lattice, &result.solution)?;
        tracing::info!(path = %p.display(), "solution written");
    }
    if let Some(p) = &o.gauge {
        crate::io::nersc::write_nersc(
            p,
            &problem.gauge,
            crate::io::nersc::NerscWrite {
                two_row: false,
                double: true,
                big_endian: true,
            },
        )?;
        tracing::info!(path = %p.display(), "gauge field written (NERSC 3x3 IEEE64BIG)");
    }
    Ok(())
}
