//! The main job: build the problem a config describes (lattice, gauge field, source), pick
//! the backend, run CR through the one generic solver, check the true residual, and write
//! the summary, the JSON report, the solution and (if asked) the gauge field.

use crate::backend::cpu::CpuBackend;
use crate::backend::prelude::*;
use crate::backend::{Layout, Operator, Precision};
use crate::config::{
    Device, GaugeConfig, Iteration, LoadedConfig, Preconditioning, SolverPrecision, SourceConfig,
};
use crate::dirac;
use crate::error::{Error, Result};
use crate::field::gauge::Plaquette;
use crate::field::{GaugeField, SpinorField, C64};
use crate::lattice::Lattice;
use crate::report::{self, SolveReport, Timings};
use crate::solver::{self, CrParams, Method, SolveSpec, SolveStats, StopReason};
use std::time::Instant;

/// Everything the solver needs, built from a config.
pub struct Problem {
    pub lattice: Lattice,
    pub gauge: GaugeField,
    pub gauge_description: String,
    /// Set when the links used are not the links the gauge file stores: what was done
    /// (32-bit links projected onto SU(3) in double; links off SU(3) projected on request).
    pub gauge_reunitarised: Option<String>,
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
    let mut gauge_reunitarised = None;
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
        GaugeConfig::File {
            path,
            format,
            reunitarise,
        } => {
            let path = cfg.input_path(path);
            let fmt = crate::io::parse_format(format).map_err(|e| match e {
                Error::Format { message, .. } => Error::invalid("gauge.format", message),
                other => other,
            })?;
            let (g, info) = crate::io::read_gauge_with(
                &path,
                fmt,
                Some(lattice.dims),
                lattice.boundary,
                crate::io::ReadOptions {
                    reunitarise: *reunitarise,
                },
            )?;
            if info.reunitarised {
                gauge_reunitarised = Some(reunitarisation_note(&info));
            }
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
fn reunitarisation_note(info: &crate::io::GaugeFileInfo) -> String {
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

/// How to solve: the method, and for CR the seed's loop or the fused iteration, with the
/// wrappers (even-odd, single-double).
#[derive(Clone, Debug)]
pub struct SolvePlan {
    pub method: Method,
    pub cr: CrParams,
    /// CR only: the backend's fused iteration instead of the seed's Algorithm 1 loop.
    pub fused: bool,
    pub preconditioning: Preconditioning,
    /// Precision of the iteration's fields (Single: single-double).
    pub precision: Precision,
    pub reliable_delta: f64,
    pub check_every: usize,
    /// GCR's restart length.
    pub restart: usize,
}

impl SolvePlan {
    /// The seed's CR on the full lattice in double.
    pub fn seed(cr: CrParams) -> Self {
        SolvePlan {
            method: Method::Cr,
            cr,
            fused: false,
            preconditioning: Preconditioning::None,
            precision: Precision::Double,
            reliable_delta: 0.1,
            check_every: 1,
            restart: 10,
        }
    }

    /// What the config's [solver] asks for; `fast_kernel`: the backend runs the fast path
    /// (kernel 3.0 on the GPU), which makes CR's `iteration = "auto"` fused.
    pub fn from_config(c: &crate::config::Config, fast_kernel: bool) -> Self {
        let s = &c.solver;
        let precision = match s.precision {
            SolverPrecision::Double => Precision::Double,
            SolverPrecision::SingleDouble => Precision::Single,
        };
        let needs_fused =
            s.preconditioning != Preconditioning::None || precision != Precision::Double;
        let fused = s.method == Method::Cr
            && match s.iteration {
                Iteration::Seed => false,
                Iteration::Fused => true,
                Iteration::Auto => needs_fused || fast_kernel,
            };
        SolvePlan {
            method: s.method,
            cr: CrParams::new(s.tolerance, s.max_iterations as usize),
            fused,
            preconditioning: s.preconditioning,
            precision,
            reliable_delta: s.reliable_delta,
            check_every: s.check_every as usize,
            restart: s.restart as usize,
        }
    }

    /// The solver's spec.
    pub fn spec(&self) -> SolveSpec {
        SolveSpec {
            fused: self.fused,
            check_every: if self.fused { self.check_every } else { 1 },
            precision: self.precision,
            delta: self.reliable_delta,
            even_odd: self.preconditioning == Preconditioning::EvenOdd,
            restart: self.restart,
            ..SolveSpec::new(self.method, self.cr.clone())
        }
    }

    /// "seed CR", "fused CR, even-odd, single-double (delta 0.1), check every 10",
    /// "BiCGStab, even-odd".
    pub fn describe(&self) -> String {
        let mut d = match self.method {
            Method::Cr if self.fused => String::from("fused CR"),
            Method::Cr => String::from("seed CR"),
            Method::Bicgstab => String::from("BiCGStab"),
            Method::Gcr => format!("GCR({})", self.restart),
            Method::Cgne => String::from("CGNE"),
        };
        if self.preconditioning == Preconditioning::EvenOdd {
            d.push_str(", even-odd");
        }
        if self.precision == Precision::Single {
            d.push_str(&format!(", single-double (delta {})", self.reliable_delta));
        }
        if self.fused {
            d.push_str(&format!(", check every {}", self.check_every));
        }
        d
    }
}

/// What one solve on one backend produced.
pub struct SolveResult {
    pub solution: SpinorField,
    pub iterations: usize,
    pub reason: StopReason,
    /// Relative residual of the system iterated (the Schur system for even-odd).
    pub history: Vec<f64>,
    pub operator_applications: usize,
    /// ||rhs - A x|| / ||rhs|| of the full system on the backend that solved.
    pub true_residual: f64,
    pub timings: Timings,
    /// The solve's counts (checks, reliable updates).
    pub fused: Option<SolveStats>,
    pub plan: String,
}

/// Solve D x = b (through A = D or g5 D, rhs = b or g5 b) on any backend as `plan` says.
pub fn solve_on<B: Backend>(
    backend: &mut B,
    problem: &Problem,
    plan: &SolvePlan,
) -> Result<SolveResult> {
    let op = plan.method.iterated_form(problem.operator);
    let rhs = if op.gamma5() {
        problem.source.gamma5()
    } else {
        problem.source.clone()
    };
    if plan.preconditioning == Preconditioning::EvenOdd {
        problem.lattice.require_even("even-odd preconditioning")?;
    }
    backend.prepare(plan.precision, plan.fused)?;
    let t = Instant::now();
    let b = backend.upload(&rhs)?;
    let source = if plan.preconditioning == Preconditioning::EvenOdd {
        backend.upload(&problem.source)?
    } else {
        backend.alloc_layout(Layout::FULL)?
    };
    let upload = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let progress = crate::progress::SolveProgress::new(plan.method.label(), plan.cr.tol);
    let mut observe = |k, r| progress.update(k, r);
    let spec = plan.spec();
    let out = solver::solve(backend, &spec, op, &b, &source, &mut observe)?;
    let x = out.x;
    progress.finish();
    // Every path ends on a host read of a scalar (or a reduction), after the last kernel
    // of the solve except the even-odd reconstruction, which the download below waits
    // for: the solve time is taken after a synchronising norm.
    let _ = backend.norm2(&x)?;
    let solve = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let solution = backend.download(&x)?;
    let download = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let true_residual = solver::true_residual(backend, op, &b, &x)?;
    let check = t.elapsed().as_secs_f64();
    let wrapped = plan.fused || plan.method != Method::Cr || spec.even_odd;
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
    crate::memory::check_run(cfg)?;
    crate::io::outputs::prepare(cfg)?;
    let pool = thread_pool(c.backend.threads)?;
    pool.install(|| {
        let problem = build_problem(cfg)?;
        tracing::info!(
            lattice = %problem.lattice.dims_string(),
            gauge = %problem.gauge_description,
            plaquette = problem.plaquette.total,
            "problem ready"
        );
        let (result, backend_description, gpu) = match choose_device(c.backend.device)? {
            Device::Cuda => {
                let opts = cuda_options(cfg)?;
                crate::memory::check_device(&problem.lattice, &opts)?;
                // Launch geometry from the autotuner (tune cache, or a sweep stored there),
                // unless the config fixes it with `tune = false`.
                let opts = if c.backend.tune {
                    let (o, how) = crate::ablate::tuned_options(&problem, &opts)?;
                    tracing::info!(block = o.coarse_block, multiple = o.multiple, "launch geometry: {how}");
                    o
                } else {
                    opts
                };
                let params = SolvePlan::from_config(c, opts.version.is_fast_path());
                check_plan_on_gpu(&params, opts.version)?;
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
                if c.backend.device != Device::Cpu {
                    crate::memory::check_cpu_backend(&problem.lattice)?;
                }
                let params = SolvePlan::from_config(c, false);
                let mut be = CpuBackend::new(&problem.gauge, problem.kappa);
                let d = be.describe();
                (solve_on(&mut be, &problem, &params)?, d, None)
            }
        };
        let d_residual = cpu_residual_of_d(&problem, &result.solution);
        let rep = report::build(cfg, &problem, &result, &backend_description, d_residual, gpu);
        if !crate::progress::is_quiet() {
            println!("{}", report::summary(&rep));
        }
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

/// The fast path's options need kernel 3.0 on the GPU: refuse them early, by key.
pub fn check_plan_on_gpu(plan: &SolvePlan, version: crate::cuda::StencilVersion) -> Result<()> {
    if version.is_fast_path() {
        return Ok(());
    }
    let key = if plan.preconditioning != Preconditioning::None {
        "solver.preconditioning"
    } else if plan.precision != Precision::Double {
        "solver.precision"
    } else if plan.fused {
        "solver.iteration"
    } else {
        return Ok(());
    };
    Err(Error::invalid(
        key,
        format!(
            "{} runs on the GPU with backend.kernel = \"3.0\" only (kernel {version} is a seed version)",
            plan.describe()
        ),
    ))
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
    crate::io::outputs::write_run(cfg, problem, result, rep)
}
