//! How to solve, and the one place that checks it against what the backend can do: the
//! method and, for CR, the seed's loop or the fused iteration, with the wrappers (even-odd,
//! single-double). Every option runs on the CPU; on the GPU the seed versions 1.0-2.0
//! hold full double fields only (any method, plain), and kernel 3.0 has everything.

use crate::backend::cuda::{CudaOptions, StencilVersion};
use crate::backend::{Capabilities, Precision};
use crate::config::{Device, Iteration, LoadedConfig, Preconditioning, SolverPrecision};
use crate::solver::{CrParams, Method, SolveSpec};
use crate::{Error, Result};

/// How to solve: the method, and for CR the seed's loop or the fused iteration, with the
/// wrappers (even-odd, single-double).
#[derive(Clone, Debug)]
pub struct SolvePlan {
    pub method: Method,
    pub cr: CrParams,
    /// CR: the backend's fused iteration instead of the seed's Algorithm 1 loop; BiCGStab:
    /// the fused iteration (scalars on the device) instead of the host loop.
    pub fused: bool,
    pub preconditioning: Preconditioning,
    /// Precision of the iteration's fields (Single: single-double).
    pub precision: Precision,
    pub reliable_delta: f64,
    pub check_every: usize,
    /// GCR's restart length.
    pub restart: usize,
    /// The fused BiCGStab's recorded graphs (`[tuning] bicgstab_graphs`).
    pub bicgstab_graphs: bool,
    /// `method = "mg"`: the multigrid (`[multigrid]`, or its defaults).
    pub multigrid: Option<crate::solver::mg::MgParams>,
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
            bicgstab_graphs: true,
            multigrid: None,
        }
    }

    /// What the config's [solver] asks for; `fast_kernel`: the backend runs the fast path
    /// (kernel 3.0 on the GPU), which makes CR's `iteration = "auto"` fused.
    pub fn from_config(c: &crate::config::Config, fast_kernel: bool) -> Self {
        let s = &c.solver;
        let precision = s.precision.inner();
        let needs_fused =
            s.preconditioning != Preconditioning::None || precision != Precision::Double;
        // Half-double iterates through the generic solver (the fused CR's kernels work
        // element by element; a half field is rounded site by site).
        // BiCGStab's fused iteration is the GPU's (on the CPU the host loop is the same
        // arithmetic): "auto" picks it on the fast kernel only.
        let fused = precision != Precision::Half
            && match (s.method, s.iteration) {
                (Method::Cr | Method::Bicgstab, Iteration::Fused) => true,
                (Method::Cr, Iteration::Auto) => needs_fused || fast_kernel,
                (Method::Bicgstab, Iteration::Auto) => fast_kernel,
                _ => false,
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
            bicgstab_graphs: c.tuning.bicgstab_graphs,
            multigrid: (s.method == Method::Mg)
                .then(|| c.multigrid.clone().unwrap_or_default().params()),
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
            bicgstab_graphs: self.bicgstab_graphs,
            ..SolveSpec::new(self.method, self.cr.clone())
        }
    }

    /// "seed CR", "fused CR, even-odd, single-double (delta 0.1), check every 10",
    /// "BiCGStab, even-odd".
    pub fn describe(&self) -> String {
        let mut d = match self.method {
            Method::Cr if self.fused => String::from("fused CR"),
            Method::Cr => String::from("seed CR"),
            Method::Bicgstab if self.fused => String::from("fused BiCGStab"),
            Method::Bicgstab => String::from("BiCGStab"),
            Method::Gcr => format!("GCR({})", self.restart),
            Method::Cgne => String::from("CGNE"),
            Method::Mg => match &self.multigrid {
                Some(m) => format!(
                    "GCR({}) with {}-level multigrid ({} preconditioner)",
                    self.restart,
                    m.levels,
                    m.precision.name()
                ),
                None => format!("GCR({}) with multigrid", self.restart),
            },
        };
        if self.preconditioning == Preconditioning::EvenOdd {
            d.push_str(", even-odd");
        }
        if self.precision != Precision::Double {
            d.push_str(&format!(
                ", {}-double (delta {})",
                self.precision.name(),
                self.reliable_delta
            ));
        }
        if self.fused {
            d.push_str(&format!(", check every {}", self.check_every));
        }
        d
    }
}

impl SolvePlan {
    /// Refuse, by config key, an option the backend cannot run (before it is built).
    pub fn check(&self, caps: Capabilities) -> Result<()> {
        if let Some(m) = &self.multigrid {
            if let Some((_, missing)) = caps.missing(false, m.precision, false) {
                return Err(Error::invalid(
                    "multigrid.precision",
                    format!(
                        "a {} multigrid preconditioner needs {missing}, which {} does not have \
                         (on the GPU: backend.kernel = \"3.0\")",
                        m.precision.name(),
                        caps.name
                    ),
                ));
            }
            let setup = m.coarse_precision();
            if m.setup_solver == crate::solver::mg::SetupSolver::Bicgstab {
                if let Some((_, missing)) = caps.missing(true, setup, true) {
                    return Err(Error::invalid(
                        "multigrid.setup_solver",
                        format!(
                            "the batched even-odd BiCGStab set-up in {} needs {missing}, which \
                             {} does not have (on the GPU: backend.kernel = \"3.0\"; or \
                             setup_solver = \"gcr\")",
                            setup.name(),
                            caps.name
                        ),
                    ));
                }
            }
        }
        let Some((key, missing)) = caps.missing(
            self.preconditioning != Preconditioning::None,
            self.precision,
            self.fused,
        ) else {
            return Ok(());
        };
        Err(Error::invalid(
            format!("solver.{key}"),
            format!(
                "{} needs {missing}, which {} does not have (on the GPU: backend.kernel = \"3.0\")",
                self.describe(),
                caps.name
            ),
        ))
    }
}

/// The CUDA options a config asks for (the plan's check has passed: the kernel, link form
/// and multiple go together).
pub fn cuda_options(cfg: &LoadedConfig) -> CudaOptions {
    let b = &cfg.config.backend;
    CudaOptions {
        version: b.kernel,
        multiple: b.multiple as usize,
        reconstruct: b.reconstruct,
        tuning: cfg.config.tuning,
        ..Default::default()
    }
}

/// The one check of a loaded config against what the backends can run, after the command
/// line's overrides and before any work: the kernel's link forms and launch multiple, the
/// fast path's options on an explicit GPU, what a split lattice runs on the GPU, and what
/// one GPU holds. Every command that reads a config runs it (`cli::load_config`); each
/// error names the key (and its line, or the flag that set it).
pub fn check(cfg: &LoadedConfig) -> Result<()> {
    check_action(cfg, cfg.config.backend.device == Device::Cuda)?;
    check_kernel(cfg)?;
    check_split(cfg, cfg.config.backend.device == Device::Cuda)?;
    check_device_lattice(cfg)
}

/// What runs the clover term and the twisted mass: the CPU's operators, full and even-odd,
/// every precision, on one device or on a split lattice (the decomposed CPU backend), and
/// kernel 3.0 (`Capabilities::site_term`) on one GPU or on a split lattice (ranks as
/// threads or started by a launcher: each rank builds its term from its links and its
/// neighbours' ring of links); a seed kernel is refused by the key of the term. A twisted g5 D is not Hermitian, so CR, which needs it
/// to be, is refused (CGNE takes the adjoint from the backend). `on_gpu`: the run is known to go
/// to a GPU (an explicit device, or "auto" once it found one).
pub fn check_action(cfg: &LoadedConfig, on_gpu: bool) -> Result<()> {
    let c = &cfg.config;
    let action = c.dirac.action();
    let key = if action.csw != 0.0 { "csw" } else { "mu" };
    if action.mu != 0.0 && c.solver.method == Method::Cr {
        return Err(cfg.bad(
            "solver",
            "method",
            format!(
                "CR needs a Hermitian g5 D, and with the twisted mass (dirac.mu = {}) g5 D is \
                 not Hermitian: use method = \"bicgstab\", \"gcr\" or \"cgne\"",
                action.mu
            ),
        ));
    }
    if !action.has_site_term() || !on_gpu {
        return Ok(());
    }
    let v = c.backend.kernel;
    let caps = Capabilities::of_stencil(v);
    if caps.site_term {
        return Ok(());
    }
    let why = if v.is_fast_path() {
        format!("{} has no clover term or twisted mass", caps.name)
    } else {
        format!("the seed stencil version {v} is Wilson-only")
    };
    Err(cfg.bad(
        "dirac",
        key,
        format!(
            "{} runs on the CPU (backend.device = \"cpu\") or kernel 3.0 (backend.kernel = \
             \"3.0\"): {why}",
            action.describe()
        ),
    ))
}

/// The stencil versions a study of the GPU against the CPU (`validate`, `ablate`) runs for
/// the config's action: `versions` as given for Wilson; with the clover term or a twist,
/// kernel 3.0 alone (`--kernel all` means it; a seed version named is refused by the
/// term's key, the seed kernels being Wilson-only). `twist_ok`: whether the study runs
/// with a twist (its CR rows need a Hermitian g5 D; refused by `dirac.mu` otherwise).
pub fn study_versions(
    cfg: &LoadedConfig,
    command: &str,
    kernel: &str,
    versions: Vec<StencilVersion>,
    twist_ok: bool,
) -> Result<Vec<StencilVersion>> {
    let action = cfg.config.dirac.action();
    if !action.has_site_term() {
        return Ok(versions);
    }
    if action.mu != 0.0 && !twist_ok {
        return Err(cfg.bad(
            "dirac",
            "mu",
            format!(
                "`{command}` times CR, which needs a Hermitian g5 D, and with the twisted \
                 mass ({}) g5 D is not Hermitian: `validate` checks the twisted operator",
                action.describe()
            ),
        ));
    }
    if kernel.trim() == "all" {
        return Ok(vec![StencilVersion::V3_0]);
    }
    if let Some(v) = versions.iter().find(|v| !v.is_fast_path()) {
        let key = if action.csw != 0.0 { "csw" } else { "mu" };
        return Err(cfg.bad(
            "dirac",
            key,
            format!(
                "`{command} --kernel {v}`: the seed stencil version {v} is Wilson-only; {} \
                 runs on kernel 3.0",
                action.describe()
            ),
        ));
    }
    Ok(versions)
}

/// The kernel's link forms and multiple; on an explicit GPU, the plan's options against
/// the kernel's capabilities (with device = "auto" the run may fall back to the CPU, which
/// has them all; `SolvePlan::check` checks again once the device is chosen).
fn check_kernel(cfg: &LoadedConfig) -> Result<()> {
    let c = &cfg.config;
    if c.backend.device == Device::Cpu {
        // The CPU runs none of the GPU kernels: their keys change nothing there (a flag
        // that set one was warned about by `LoadedConfig::inapplicable_flags`).
        return Ok(());
    }
    let v = c.backend.kernel;
    if !v.supports_reconstruct(c.backend.reconstruct) {
        return Err(cfg.bad(
            "backend",
            "reconstruct",
            format!(
                "must be 18, or 12 or 8 with kernel 3.0; got {} with kernel {v}",
                c.backend.reconstruct
            ),
        ));
    }
    if let Err(e) = v.check_multiple(c.backend.multiple as usize) {
        return Err(cfg.bad("backend", "multiple", e.value_message()));
    }
    if c.backend.device == Device::Cuda {
        let missing = Capabilities::of_stencil(v).missing(
            c.solver.preconditioning != Preconditioning::None,
            c.solver.precision.inner(),
            c.solver.iteration == Iteration::Fused,
        );
        if let Some((key, _)) = missing {
            return Err(cfg.bad(
                "solver",
                key,
                format!(
                    "runs on the GPU with backend.kernel = \"3.0\" only, not the seed version {v}"
                ),
            ));
        }
        if c.solver.method == Method::Mg {
            let plan = SolvePlan::from_config(c, true);
            if let Err(e) = plan.check(Capabilities::of_stencil(v)) {
                return Err(match e {
                    Error::InvalidValue { key, message } if key.starts_with("multigrid.") => {
                        cfg.bad("multigrid", &key["multigrid.".len()..], message)
                    }
                    other => other,
                });
            }
        }
    }
    Ok(())
}

/// What a split lattice runs on the GPU: kernel 3.0, single or double fields (the halo
/// kernels have no half build; the CPU's decomposed backend rounds half fields like the
/// single-GPU one), and the host-driven BiCGStab (the fused one's sums do not cross ranks).
/// `on_gpu`: the device is known to be a GPU (an explicit one, or "auto" once it found
/// one); with "auto" before that, the seed kernels may still fall back to the CPU.
fn check_split(cfg: &LoadedConfig, on_gpu: bool) -> Result<()> {
    let c = &cfg.config;
    if !c.parallel.is_decomposed() || c.backend.device == Device::Cpu {
        return Ok(());
    }
    if on_gpu && !c.backend.kernel.is_fast_path() {
        return Err(cfg.bad(
            "parallel",
            "grid",
            format!(
                "a split lattice runs on the GPU with backend.kernel = \"3.0\" only; the seed version {} is single-GPU",
                c.backend.kernel
            ),
        ));
    }
    if c.solver.precision == SolverPrecision::HalfDouble {
        return Err(cfg.bad(
            "solver",
            "precision",
            "half-double on a split lattice runs on the CPU only (device = \"cpu\"): the GPU halo kernels have no half-precision build; use single-double"
                .to_string(),
        ));
    }
    Ok(())
}

/// What one GPU holds (its kernels' 32-bit indices): the whole lattice, or each rank's
/// part of a split one; checked after the command line's overrides, since a file's
/// lattice may be too large for one GPU but not for the grid or device the command line
/// gives. The CPU holds any lattice `Lattice::new` takes.
fn check_device_lattice(cfg: &LoadedConfig) -> Result<()> {
    if cfg.config.backend.device == Device::Cpu {
        return Ok(());
    }
    let p = &cfg.config.parallel;
    let (dims, grid) = (cfg.dims(), p.grid());
    let local = std::array::from_fn(|mu| dims[mu] / grid[mu]);
    let whole = !p.is_decomposed();
    crate::geometry::lattice::check_device_volume(local, "", whole).map_err(|e| {
        if whole {
            cfg.bad("lattice", "LT", e.value_message())
        } else {
            cfg.bad("parallel", "grid", e.value_message())
        }
    })
}

/// The CUDA options and the solve plan of a split lattice on GPUs: kernel 3.0 (the fused
/// iterations' sums over ranks stay on the device), and BiCGStab's host loop where "auto"
/// would pick the fused one (`iteration = "fused"` asks for the fused BiCGStab). The clover term and the twisted mass
/// are refused here too (`check_action`; reached with "auto", which found a GPU, or by a
/// launched rank).
pub fn split_gpu_plan(cfg: &LoadedConfig) -> Result<(CudaOptions, SolvePlan)> {
    check_action(cfg, true)?;
    check_split(cfg, true)?;
    let opts = cuda_options(cfg);
    let mut plan = SolvePlan::from_config(&cfg.config, true);
    if plan.method == Method::Bicgstab && cfg.config.solver.iteration == Iteration::Auto {
        plan.fused = false;
    }
    plan.check(Capabilities::of_stencil(opts.version))?;
    Ok((opts, plan))
}
