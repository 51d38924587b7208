//! The command line's overrides of config keys (`Overrides`, the clap flags of the main
//! job and of the subcommands that read a config) and their application.

use super::*;
use crate::backend::cuda::{Reconstruct, StencilVersion};
use crate::error::{Error, Result};
use crate::geometry::lattice::NDIM;
use crate::solver::Method;
use std::path::PathBuf;

/// Command-line values that override the config (the main job's flags, and those of the
/// subcommands that read a config).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Overrides {
    /// auto, cpu or cuda (overrides [backend] device).
    #[arg(long)]
    pub device: Option<Device>,
    /// GPU stencil version, e.g. 1.3 or 3.0 (overrides [backend] kernel).
    #[arg(long)]
    pub kernel: Option<StencilVersion>,
    /// Workgroup multiple of versions 1.2+ (overrides [backend] multiple).
    #[arg(long, allow_negative_numbers = true)]
    pub multiple: Option<i64>,
    /// Reals per link the stencil reads: 18, or 12 (two-row compression) or 8 (the SU(3)
    /// 8-parameter form), kernel 3.0 only (overrides [backend] reconstruct).
    #[arg(long)]
    pub reconstruct: Option<Reconstruct>,
    /// CPU threads, 0 = all: the CPU solve, and the host's work of a GPU run (reading,
    /// the CPU check) (overrides [backend] threads).
    #[arg(long, allow_negative_numbers = true)]
    pub threads: Option<i64>,
    /// GPU: use `--multiple` and the default block as given, not the autotuner's (sets
    /// [backend] tune = false).
    #[arg(long = "no-tune")]
    pub no_tune: bool,
    /// A gauge file to solve on, format detected from its bytes; the lattice's extents
    /// come from its header (replaces [gauge]; a [lattice] that gives extents is checked
    /// against the file). Relative to the current directory.
    #[arg(long, value_name = "FILE")]
    pub gauge: Option<PathBuf>,
    /// The source (replaces [source]): point:X,Y,Z,T[:SPIN:COLOUR], wall:T[:SPIN:COLOUR],
    /// gaussian:X,Y,Z,T:R0[:SPIN:COLOUR], z2:SEED[:T], z4:SEED[:T], random:SEED,
    /// plane-wave:NX,NY,NZ,NT[:SPIN:COLOUR] or file:PATH; SPIN and COLOUR a number or
    /// `all`, default 0.
    #[arg(long, value_name = "SOURCE", value_parser = super::cli_values::parse_source)]
    pub source: Option<SourceConfig>,
    /// Fermion boundary conditions: periodic, antiperiodic (in time; periodic in space)
    /// or four values x,y,z,t such as p,p,p,a (overrides [lattice] boundary).
    #[arg(long, value_name = "BC", value_parser = super::cli_values::parse_boundary)]
    pub boundary: Option<[crate::geometry::lattice::Boundary; NDIM]>,
    /// Hopping parameter, > 0 (overrides [dirac] kappa).
    #[arg(long, allow_negative_numbers = true)]
    pub kappa: Option<f64>,
    /// Clover coefficient c_sw >= 0, 0 = none (overrides [dirac] csw).
    #[arg(long, allow_negative_numbers = true)]
    pub csw: Option<f64>,
    /// Twisted mass mu of D + 2 i kappa mu g5, 0 = none (overrides [dirac] mu).
    #[arg(long, allow_negative_numbers = true)]
    pub mu: Option<f64>,
    /// Relative residual tolerance (overrides [solver] tolerance).
    #[arg(long, allow_negative_numbers = true)]
    pub tol: Option<f64>,
    /// Maximum iterations of the solver (overrides [solver] max_iterations).
    #[arg(long = "max-iter", allow_negative_numbers = true)]
    pub max_iter: Option<i64>,
    /// none or even-odd (overrides [solver] preconditioning).
    #[arg(long, value_enum)]
    pub preconditioning: Option<Preconditioning>,
    /// double, single-double or half-double (overrides [solver] precision).
    #[arg(long, value_enum)]
    pub precision: Option<SolverPrecision>,
    /// seed, fused or auto (overrides [solver] iteration).
    #[arg(long, value_enum)]
    pub iteration: Option<Iteration>,
    /// Fused iteration: host residual check every N iterations (overrides [solver]
    /// check_every).
    #[arg(long = "check-every", allow_negative_numbers = true)]
    pub check_every: Option<i64>,
    /// Mixed precision: recompute the true residual in double when the iterated one has
    /// dropped by this factor, 0 < delta < 1 (overrides [solver] reliable_delta).
    #[arg(long = "reliable-delta", allow_negative_numbers = true)]
    pub reliable_delta: Option<f64>,
    /// Krylov method: cr, bicgstab, gcr, cgne or mg (overrides [solver] method).
    #[arg(long)]
    pub method: Option<Method>,
    /// GCR restart length (overrides [solver] restart).
    #[arg(long)]
    pub restart: Option<i64>,
    /// Folder for every output: the report, the solution, the gauge output and a
    /// propagator's files (each keeps its file name). Relative to the current directory.
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Accept gauge links off SU(3) beyond the file's precision and project them onto
    /// SU(3) (sets [gauge] reunitarise = true); without it such a file is refused (exit 4).
    #[arg(long)]
    pub reunitarise: bool,
    /// Read a LIME gauge file without its checksum record or with inconsistent record
    /// flags (sets [gauge] accept_unchecked = true); without it such a file is refused.
    #[arg(long)]
    pub accept_unchecked: bool,
    /// Ranks per direction gx,gy,gz,gt: the lattice split into sub-lattices (overrides
    /// [parallel] grid). On the CPU the ranks are threads of this process.
    #[arg(long, value_delimiter = ',', num_args = 1, value_parser = clap::value_parser!(i64))]
    pub grid: Option<Vec<i64>>,
    /// GPUs (ranks) to use; must equal the grid's product (overrides [parallel] gpus).
    #[arg(long, allow_negative_numbers = true)]
    pub gpus: Option<i64>,
    /// Who reads a gauge file on a split lattice: rank0 (reads and verifies it, sends the
    /// shares) or slab (each rank reads and verifies its own part) (overrides [parallel]
    /// read).
    #[arg(long, value_enum)]
    pub read: Option<ReadMode>,
    /// A [tuning] setting, KEY=VALUE (repeatable; docs/tuning.md lists the keys).
    #[arg(long = "tuning", value_name = "KEY=VALUE")]
    pub tuning: Vec<String>,
}

impl LoadedConfig {
    /// Apply command-line overrides and validate again.
    pub fn apply(&mut self, o: &Overrides) -> Result<()> {
        if let Some(g) = &o.gauge {
            self.use_gauge_file(g, o);
        }
        let mut flags: Vec<(&str, &str)> = Vec::new();
        let c = &mut self.config;
        if let Some(d) = o.device {
            c.backend.device = d;
            flags.push(("backend.device", "--device"));
        }
        if let Some(k) = o.kernel {
            c.backend.kernel = k;
            flags.push(("backend.kernel", "--kernel"));
        }
        if let Some(m) = o.multiple {
            c.backend.multiple = m;
            flags.push(("backend.multiple", "--multiple"));
        }
        if let Some(r) = o.reconstruct {
            c.backend.reconstruct = r;
            flags.push(("backend.reconstruct", "--reconstruct"));
        }
        if let Some(t) = o.threads {
            c.backend.threads = t;
            flags.push(("backend.threads", "--threads"));
        }
        if o.no_tune {
            c.backend.tune = false;
            flags.push(("backend.tune", "--no-tune"));
        }
        if let Some(b) = o.boundary {
            c.lattice.boundary = b;
            flags.push(("lattice.boundary", "--boundary"));
        }
        if let Some(s) = &o.source {
            c.source = s.clone();
            flags.push(("source.type", "--source"));
        }
        if let Some(k) = o.kappa {
            c.dirac.kappa = k;
            flags.push(("dirac.kappa", "--kappa"));
        }
        if let Some(v) = o.csw {
            c.dirac.csw = v;
            flags.push(("dirac.csw", "--csw"));
        }
        if let Some(v) = o.mu {
            c.dirac.mu = v;
            flags.push(("dirac.mu", "--mu"));
        }
        if let Some(t) = o.tol {
            c.solver.tolerance = t;
            flags.push(("solver.tolerance", "--tol"));
        }
        if let Some(m) = o.max_iter {
            c.solver.max_iterations = m;
            flags.push(("solver.max_iterations", "--max-iter"));
        }
        if let Some(p) = o.preconditioning {
            c.solver.preconditioning = p;
            flags.push(("solver.preconditioning", "--preconditioning"));
        }
        if let Some(p) = o.precision {
            c.solver.precision = p;
            flags.push(("solver.precision", "--precision"));
        }
        if let Some(i) = o.iteration {
            c.solver.iteration = i;
            flags.push(("solver.iteration", "--iteration"));
        }
        if let Some(d) = o.reliable_delta {
            c.solver.reliable_delta = d;
            flags.push(("solver.reliable_delta", "--reliable-delta"));
        }
        if let Some(k) = o.check_every {
            c.solver.check_every = k;
            flags.push(("solver.check_every", "--check-every"));
        }
        if let Some(m) = o.method {
            c.solver.method = m;
            flags.push(("solver.method", "--method"));
        }
        if let Some(m) = o.restart {
            c.solver.restart = m;
            flags.push(("solver.restart", "--restart"));
        }
        if let Some(g) = &o.grid {
            c.parallel.grid = <[i64; NDIM]>::try_from(g.as_slice()).map_err(|_| {
                Error::invalid(
                    "--grid",
                    format!("needs 4 entries gx,gy,gz,gt, got {}", g.len()),
                )
            })?;
            flags.push(("parallel.grid", "--grid"));
        }
        if let Some(n) = o.gpus {
            c.parallel.gpus = Some(n);
            flags.push(("parallel.gpus", "--gpus"));
        }
        if let Some(r) = o.read {
            c.parallel.read = r;
            flags.push(("parallel.read", "--read"));
        }
        for setting in &o.tuning {
            c.tuning = c.tuning.with_setting(setting)?;
        }
        if o.accept_unchecked {
            if let GaugeConfig::File {
                accept_unchecked, ..
            } = &mut c.gauge.field
            {
                *accept_unchecked = true;
            }
        }
        if o.reunitarise {
            match &mut c.gauge.field {
                GaugeConfig::File { reunitarise, .. } => *reunitarise = true,
                _ => tracing::warn!(
                    "--reunitarise applies to gauge files only; the [gauge] of {} is generated \
                     (SU(3) by construction), so it changes nothing",
                    self.source_name
                ),
            }
        }
        self.flags.extend(
            flags
                .into_iter()
                .map(|(k, f)| (k.to_string(), f.to_string())),
        );
        let c = &mut self.config;
        if let Some(dir) = &o.output {
            for p in [
                &mut c.output.report,
                &mut c.output.solution,
                &mut c.output.gauge,
            ]
            .into_iter()
            .flatten()
            {
                let name = p.file_name().map(PathBuf::from).unwrap_or_default();
                *p = dir.join(name);
            }
        }
        if o.gauge.is_some() {
            self.complete_lattice()?;
        }
        self.validate()?;
        for w in self.inapplicable_flags(o)? {
            tracing::warn!("{w}");
        }
        Ok(())
    }

    /// `--gauge FILE`: the file in place of `[gauge]`'s field (its fixing kept), read with
    /// `--reunitarise` and `--accept-unchecked` as given; the embedded default's lattice
    /// and output names give way to the file's.
    fn use_gauge_file(&mut self, file: &std::path::Path, o: &Overrides) {
        self.config.gauge.field = GaugeConfig::File {
            path: file.to_path_buf(),
            format: "auto".into(),
            reunitarise: o.reunitarise,
            accept_unchecked: o.accept_unchecked,
        };
        self.flags
            .push(("gauge.path".to_string(), "--gauge".to_string()));
        if self.embedded {
            self.given_dims = [None; NDIM];
            self.outputs_named_after(file);
        }
    }
}
