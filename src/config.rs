//! The TOML run configuration (README, "Config reference"): schema, validation with the key
//! and line named in every error, and command-line overrides.
//!
//! Relative input paths (gauge and source files) resolve against the config file's folder;
//! output paths resolve against the current directory.

use crate::backend::cuda::{Reconstruct, StencilVersion};
use crate::error::{Error, Result};
use crate::field::gamma::GammaBasis;
use crate::geometry::lattice::{Boundary, Lattice, DEFAULT_BOUNDARY, NDIM};
use crate::linalg::Operator;
use crate::solver::Method;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The seed's problem, embedded so that `qcd-solve` runs with no file at all.
pub const DEFAULT_CONFIG: &str = include_str!("../configs/16x16x16x32.toml");
pub const DEFAULT_CONFIG_NAME: &str = "configs/16x16x16x32.toml (embedded)";

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub lattice: LatticeConfig,
    pub gauge: GaugeConfig,
    pub dirac: DiracConfig,
    #[serde(default)]
    pub source: SourceConfig,
    #[serde(default)]
    pub solver: SolverConfig,
    #[serde(default)]
    pub backend: BackendConfig,
    #[serde(default)]
    pub output: OutputConfig,
    #[serde(default)]
    pub parallel: ParallelConfig,
}

/// How the lattice is split over ranks: `grid = [gx, gy, gz, gt]` ranks per
/// direction, each holding a local sub-lattice. `gpus` (default: the grid's product)
/// must equal the product. On the CPU the ranks are threads of this process; under a
/// launcher (RANK, WORLD_SIZE) each process is one rank. `read` says who reads a gauge
/// file on a split lattice.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ParallelConfig {
    #[serde(default = "default_grid")]
    pub grid: [i64; NDIM],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<i64>,
    #[serde(default)]
    pub read: ReadMode,
}

/// Who reads the gauge file on a split lattice (`[parallel] read`, `--read`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ReadMode {
    /// Rank 0 reads and verifies the whole file and sends each rank its share.
    #[default]
    #[value(name = "rank0")]
    Rank0,
    /// Each rank reads and verifies its own slab (`io::read_gauge_slab`, the checks
    /// combined over the ranks); rank 0 gathers the field for the final CPU check and the
    /// outputs.
    #[value(name = "slab")]
    Slab,
}

fn default_grid() -> [i64; NDIM] {
    [1; NDIM]
}

impl Default for ParallelConfig {
    fn default() -> Self {
        ParallelConfig {
            grid: default_grid(),
            gpus: None,
            read: ReadMode::default(),
        }
    }
}

impl ParallelConfig {
    pub fn grid(&self) -> [usize; NDIM] {
        self.grid.map(|g| g.max(1) as usize)
    }

    /// Ranks in the grid.
    pub fn ranks(&self) -> usize {
        self.grid().iter().product()
    }

    pub fn is_decomposed(&self) -> bool {
        self.ranks() > 1
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LatticeConfig {
    #[serde(rename = "LX")]
    pub lx: i64,
    #[serde(rename = "LY")]
    pub ly: i64,
    #[serde(rename = "LZ")]
    pub lz: i64,
    #[serde(rename = "LT")]
    pub lt: i64,
    /// Fermion boundary conditions for x, y, z, t.
    #[serde(default = "default_boundary")]
    pub boundary: [Boundary; NDIM],
}

fn default_boundary() -> [Boundary; NDIM] {
    DEFAULT_BOUNDARY
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum GaugeConfig {
    /// U = 1 everywhere (free field).
    Unit,
    /// Random SU(3) links from a seed (a "hot" field).
    Random { seed: u64 },
    /// A gauge file; `format` is "auto" (default), "nersc", "ildg", "scidac" or "milc".
    /// `reunitarise = true` projects links that are off SU(3) beyond the file's precision
    /// onto SU(3) (with a warning) instead of refusing the file (exit 4).
    File {
        path: PathBuf,
        #[serde(default = "default_format")]
        format: String,
        #[serde(default)]
        reunitarise: bool,
        /// Read a LIME file that lacks its scidac-checksum record or whose record flags
        /// are inconsistent (refused otherwise, exit 4; docs/reliability.md).
        #[serde(default)]
        accept_unchecked: bool,
    },
    /// A thermalised quenched field (beta, therm, sweeps, overrelax, seed, hot_start),
    /// generated on first use and cached in lattices/ under a name made from them.
    Heatbath(crate::gauge_gen::HeatbathParams),
}

fn default_format() -> String {
    "auto".into()
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DiracConfig {
    pub kappa: f64,
    #[serde(default)]
    pub gamma_basis: GammaBasis,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SourceConfig {
    /// A delta at one site (x, y, z, t), spin and colour.
    Point {
        #[serde(default)]
        site: [i64; NDIM],
        #[serde(default)]
        spin: i64,
        #[serde(default)]
        colour: i64,
    },
    /// Complex Gaussian noise from a seed.
    Random { seed: u64 },
    /// e^{ip.x} on spin `spin`, colour `colour`, with integer mode numbers `momentum`.
    PlaneWave {
        momentum: [i64; NDIM],
        #[serde(default)]
        spin: i64,
        #[serde(default)]
        colour: i64,
    },
    /// A `.npy` file (`<c16`, shape [LT, LZ, LY, LX, 4, 3]).
    File { path: PathBuf },
}

impl Default for SourceConfig {
    fn default() -> Self {
        SourceConfig::Point {
            site: [0; NDIM],
            spin: 0,
            colour: 0,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SolverConfig {
    /// Stop when ||r|| / ||b|| <= tolerance.
    #[serde(default = "default_tol")]
    pub tolerance: f64,
    #[serde(default = "default_max_iter")]
    pub max_iterations: i64,
    /// "cr" (the seed's Conjugate Residual, the default), "bicgstab", "gcr" (GCR(m),
    /// m = `restart`) or "cgne" (CG on the normal equations D^dag D x = D^dag b).
    #[serde(default = "default_method")]
    pub method: Method,
    /// GCR: directions kept before a restart (1..=64).
    #[serde(default = "default_restart")]
    pub restart: i64,
    /// "g5D" or "D" (the seed's choice). Default: g5D for cr and cgne, D for bicgstab and
    /// gcr. The seed's CR recurrence assumes a Hermitian operator: on the non-Hermitian D
    /// it stagnates (README, "Solver"); CGNE always iterates on g5 D (D^dag D = (g5 D)^2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<Operator>,
    /// "none" or "even-odd" (CR on the Schur complement M_ee, odd sites reconstructed).
    #[serde(default)]
    pub preconditioning: Preconditioning,
    /// "double", "single-double" (single-precision iteration, reliable updates in
    /// double, final true residual in double) or "half-double" (the iteration on 16-bit
    /// fixed-point spinors with a per-site norm, single-precision links on the GPU; the
    /// same reliable updates; the generic iteration, not the fused CR).
    #[serde(default)]
    pub precision: SolverPrecision,
    /// Mixed precision: recompute the true residual in double when the iterated residual
    /// has dropped by this factor since the last time (0 < delta < 1).
    #[serde(default = "default_delta")]
    pub reliable_delta: f64,
    /// "seed" (Algorithm 1 as the seed ran it: one host read per reduction), "fused"
    /// (three fused passes, scalars on the device, graphs) or "auto" (fused with kernel 3.0,
    /// even-odd or single-double; seed otherwise). BiCGStab too: "fused" keeps its scalars
    /// on the device ("auto": with kernel 3.0 on one GPU), "seed" is the host loop.
    #[serde(default)]
    pub iteration: Iteration,
    /// Fused iteration: read the residual on the host every this many iterations.
    #[serde(default = "default_check_every")]
    pub check_every: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Default, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Preconditioning {
    #[default]
    None,
    EvenOdd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Default, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum SolverPrecision {
    #[default]
    Double,
    SingleDouble,
    HalfDouble,
}

impl SolverPrecision {
    /// The precision of the inner iteration's fields.
    pub fn inner(self) -> crate::linalg::Precision {
        use crate::linalg::Precision;
        match self {
            SolverPrecision::Double => Precision::Double,
            SolverPrecision::SingleDouble => Precision::Single,
            SolverPrecision::HalfDouble => Precision::Half,
        }
    }

    /// The config value of an inner precision.
    pub fn of_inner(p: crate::linalg::Precision) -> SolverPrecision {
        use crate::linalg::Precision;
        match p {
            Precision::Double => SolverPrecision::Double,
            Precision::Single => SolverPrecision::SingleDouble,
            Precision::Half => SolverPrecision::HalfDouble,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Default, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Iteration {
    #[default]
    Auto,
    Seed,
    Fused,
}

fn default_delta() -> f64 {
    0.1
}
fn default_check_every() -> i64 {
    10
}

fn default_tol() -> f64 {
    1e-10
}
fn default_max_iter() -> i64 {
    2000
}
fn default_method() -> Method {
    Method::Cr
}
fn default_restart() -> i64 {
    10
}

impl SolverConfig {
    /// The operator form the solve starts from: the config's, else the method's default.
    pub fn operator(&self) -> Operator {
        self.operator.unwrap_or(self.method.default_operator())
    }
}

impl Default for SolverConfig {
    fn default() -> Self {
        SolverConfig {
            tolerance: default_tol(),
            max_iterations: default_max_iter(),
            method: default_method(),
            restart: default_restart(),
            operator: None,
            preconditioning: Preconditioning::None,
            precision: SolverPrecision::Double,
            reliable_delta: default_delta(),
            iteration: Iteration::Auto,
            check_every: default_check_every(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Device {
    /// CUDA when a GPU is usable, otherwise the CPU (the reason is logged).
    #[default]
    Auto,
    Cpu,
    Cuda,
}

impl std::str::FromStr for Device {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(Device::Auto),
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda),
            _ => Err(format!("unknown device `{s}` (expected auto, cpu or cuda)")),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BackendConfig {
    #[serde(default)]
    pub device: Device,
    /// GPU stencil version: "1.0" .. "2.0" (stencil-versions.md), or our "3.0".
    #[serde(default = "default_kernel")]
    pub kernel: StencilVersion,
    /// Workgroup multiple of versions 1.2 and later (12 * multiple threads per block).
    #[serde(default = "default_multiple")]
    pub multiple: i64,
    /// Reals stored per gauge link the stencil reads: 18 (full 3x3), 12 (two rows, the
    /// third rebuilt as conj(row0 x row1) in registers) or 8 (U01, U02, U10 and the phases
    /// of U00 and U20, the rest rebuilt from unitarity and det = 1); 12 and 8: version 3.0
    /// only, SU(3) fields.
    #[serde(default)]
    pub reconstruct: Reconstruct,
    /// CPU threads; 0 = all cores.
    #[serde(default)]
    pub threads: i64,
    /// GPU: take the stencil's launch geometry (block, multiple) from the autotuner's
    /// cache, sweeping and storing it on first use; false: `multiple` and the default
    /// block as given.
    #[serde(default = "default_tune")]
    pub tune: bool,
}

fn default_tune() -> bool {
    true
}

fn default_kernel() -> StencilVersion {
    StencilVersion::V1_6_1
}
fn default_multiple() -> i64 {
    16
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
            device: Device::Auto,
            kernel: default_kernel(),
            multiple: default_multiple(),
            reconstruct: Reconstruct::R18,
            threads: 0,
            tune: default_tune(),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    /// JSON report path; none = no report.
    #[serde(default)]
    pub report: Option<PathBuf>,
    /// Solution `.npy` path; none = not written.
    #[serde(default)]
    pub solution: Option<PathBuf>,
    /// Write the gauge field used as NERSC (3x3, IEEE64BIG) here.
    #[serde(default)]
    pub gauge: Option<PathBuf>,
}

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
    /// CPU threads, 0 = all (overrides [backend] threads).
    #[arg(long, allow_negative_numbers = true)]
    pub threads: Option<i64>,
    /// Hopping parameter, > 0 (overrides [dirac] kappa).
    #[arg(long, allow_negative_numbers = true)]
    pub kappa: Option<f64>,
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
    /// Krylov method: cr, bicgstab, gcr or cgne (overrides [solver] method).
    #[arg(long)]
    pub method: Option<Method>,
    /// GCR restart length (overrides [solver] restart).
    #[arg(long)]
    pub restart: Option<i64>,
    /// Folder for the report and the solution (keeps their file names).
    #[arg(long)]
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
}

/// A parsed and validated configuration, with the text it came from (for line numbers)
/// and the folder relative input paths resolve against.
#[derive(Clone, Debug)]
pub struct LoadedConfig {
    pub config: Config,
    pub source_name: String,
    /// The config file read (`None` for the embedded default): an input no output may name.
    pub config_file: Option<PathBuf>,
    pub base_dir: PathBuf,
    text: String,
    /// Keys set from the command line ("dirac.kappa", "--kappa"): errors about them name
    /// the flag, not the config's line.
    flags: Vec<(String, String)>,
}

impl LoadedConfig {
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = crate::io::read_config_text(path)?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut loaded = Self::from_str(&text, &path.display().to_string(), base)?;
        loaded.config_file = Some(path.to_path_buf());
        crate::io::checks::record("config", path, crate::io::config_checks(text.len()));
        Ok(loaded)
    }

    pub fn embedded_default() -> Self {
        Self::from_str(
            DEFAULT_CONFIG,
            DEFAULT_CONFIG_NAME,
            PathBuf::from("configs"),
        )
        .expect("the embedded default config is valid")
    }

    pub fn from_str(text: &str, name: &str, base_dir: PathBuf) -> Result<Self> {
        let config: Config = toml::from_str(text).map_err(|e| Error::Config {
            path: name.into(),
            message: crate::io::bounded_message(e.to_string().trim_end()),
        })?;
        let loaded = LoadedConfig {
            config,
            source_name: name.into(),
            config_file: None,
            base_dir,
            text: text.into(),
            flags: Vec::new(),
        };
        loaded.validate()?;
        Ok(loaded)
    }

    /// Apply command-line overrides and validate again.
    pub fn apply(&mut self, o: &Overrides) -> Result<()> {
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
        if let Some(k) = o.kappa {
            c.dirac.kappa = k;
            flags.push(("dirac.kappa", "--kappa"));
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
        if o.accept_unchecked {
            if let GaugeConfig::File {
                accept_unchecked, ..
            } = &mut c.gauge
            {
                *accept_unchecked = true;
            }
        }
        if o.reunitarise {
            match &mut c.gauge {
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
            for p in [&mut c.output.report, &mut c.output.solution]
                .into_iter()
                .flatten()
            {
                let name = p.file_name().map(PathBuf::from).unwrap_or_default();
                *p = dir.join(name);
            }
        }
        self.validate()
    }

    /// The line of `key` in `[section]` of the config text, for error messages.
    fn line_of(&self, section: &str, key: &str) -> Option<usize> {
        let mut current = String::new();
        for (n, line) in self.text.lines().enumerate() {
            let t = line.trim();
            if let Some(rest) = t.strip_prefix('[') {
                current = rest.trim_end_matches(']').trim().to_string();
            } else if current == section {
                if let Some((k, _)) = t.split_once('=') {
                    if k.trim() == key {
                        return Some(n + 1);
                    }
                }
            }
        }
        None
    }

    /// The error of a bad value: the flag that set it, or the config's line.
    pub fn bad(&self, section: &str, key: &str, message: String) -> Error {
        let full = format!("{section}.{key}");
        if let Some((_, flag)) = self.flags.iter().rev().find(|(k, _)| *k == full) {
            return Error::InvalidValue {
                key: flag.clone(),
                message: format!("{message} (command line; the flag overrides {full})"),
            };
        }
        let at = match self.line_of(section, key) {
            Some(n) => format!("{}, line {n}", self.source_name),
            None => format!("{} (or the command line)", self.source_name),
        };
        Error::InvalidValue {
            key: format!("{section}.{key}"),
            message: format!("{message} ({at})"),
        }
    }

    fn validate(&self) -> Result<()> {
        let c = &self.config;
        for (key, v) in [
            ("LX", c.lattice.lx),
            ("LY", c.lattice.ly),
            ("LZ", c.lattice.lz),
            ("LT", c.lattice.lt),
        ] {
            if v < 1 {
                return Err(self.bad("lattice", key, format!("must be at least 1, got {v}")));
            }
        }
        let k = c.dirac.kappa;
        if !(k.is_finite() && k > 0.0) {
            return Err(self.bad("dirac", "kappa", format!("must be positive, got {k}")));
        }
        let tol = c.solver.tolerance;
        let floor = crate::solver::monitor::MIN_TOLERANCE;
        if !(tol.is_finite() && tol >= floor && tol < 1.0) {
            return Err(self.bad(
                "solver",
                "tolerance",
                format!(
                    "must be in (0, 1) and at least {floor:e} (double rounding sets the \
                     floor, docs/reliability.md), got {tol:e}"
                ),
            ));
        }
        let max_iter = crate::solver::monitor::MAX_ITERATIONS;
        if !(1..=max_iter).contains(&c.solver.max_iterations) {
            return Err(self.bad(
                "solver",
                "max_iterations",
                format!(
                    "must be at least 1 and at most {max_iter} (docs/reliability.md), got {}",
                    c.solver.max_iterations
                ),
            ));
        }
        let d = c.solver.reliable_delta;
        if !(d.is_finite() && d > 0.0 && d < 1.0) {
            return Err(self.bad(
                "solver",
                "reliable_delta",
                format!("must be in (0, 1), got {d}"),
            ));
        }
        if c.solver.check_every < 1 {
            return Err(self.bad(
                "solver",
                "check_every",
                format!("must be at least 1, got {}", c.solver.check_every),
            ));
        }
        if !(1..=64).contains(&c.solver.restart) {
            return Err(self.bad(
                "solver",
                "restart",
                format!("must be in 1..=64, got {}", c.solver.restart),
            ));
        }
        let has_fused = matches!(c.solver.method, Method::Cr | Method::Bicgstab);
        if !has_fused && c.solver.iteration == Iteration::Fused {
            return Err(self.bad(
                "solver",
                "iteration",
                format!(
                    "the fused iterations are CR's and BiCGStab's; method = \"{}\" runs with iteration = \"auto\"",
                    c.solver.method
                ),
            ));
        }
        let half = c.solver.precision == SolverPrecision::HalfDouble;
        if half && c.solver.iteration == Iteration::Fused {
            return Err(self.bad(
                "solver",
                "iteration",
                "half-double runs on the generic iteration (the fused CR has no half-precision \
                 kernels); set iteration = \"auto\" or \"seed\""
                    .to_string(),
            ));
        }
        let fast = c.solver.preconditioning != Preconditioning::None
            || c.solver.precision != SolverPrecision::Double;
        if fast && !half && c.solver.method == Method::Cr && c.solver.iteration == Iteration::Seed {
            return Err(self.bad(
                "solver",
                "iteration",
                "even-odd preconditioning and single-double run on the fused iteration; \
                 set iteration = \"fused\" or \"auto\""
                    .to_string(),
            ));
        }
        if c.solver.preconditioning == Preconditioning::EvenOdd {
            for (key, v) in [
                ("LX", c.lattice.lx),
                ("LY", c.lattice.ly),
                ("LZ", c.lattice.lz),
                ("LT", c.lattice.lt),
            ] {
                if v % 2 != 0 {
                    return Err(self.bad(
                        "lattice",
                        key,
                        format!(
                            "even-odd preconditioning needs every extent even, got {key} = {v}"
                        ),
                    ));
                }
            }
        }
        if !(1..=1024).contains(&c.backend.multiple) {
            return Err(self.bad(
                "backend",
                "multiple",
                format!("must be in 1..=1024, got {}", c.backend.multiple),
            ));
        }
        if let Err(e) = crate::threads::check(c.backend.threads, "backend.threads") {
            let msg = match e {
                Error::InvalidValue { message, .. } => message,
                other => other.to_string(),
            };
            return Err(self.bad("backend", "threads", msg));
        }
        self.check_parallel()?;
        let dims = self.dims();
        match &c.source {
            SourceConfig::Point { site, spin, colour } => {
                for mu in 0..NDIM {
                    if site[mu] < 0 || site[mu] as usize >= dims[mu] {
                        return Err(self.bad(
                            "source",
                            "site",
                            format!("{site:?} lies outside the {dims:?} lattice"),
                        ));
                    }
                }
                self.check_spin_colour(*spin, *colour)?;
            }
            SourceConfig::PlaneWave { spin, colour, .. } => {
                self.check_spin_colour(*spin, *colour)?
            }
            _ => {}
        }
        Ok(())
    }

    /// The grid: positive entries, dividing the lattice into sub-lattices with even
    /// local extents in every split direction, and as many ranks as `gpus` says.
    fn check_parallel(&self) -> Result<()> {
        let p = &self.config.parallel;
        if let Some(g) = p.grid.iter().find(|&&g| g < 1) {
            return Err(self.bad(
                "parallel",
                "grid",
                format!("every entry must be at least 1, got {g} in {:?}", p.grid),
            ));
        }
        if let Some(n) = p.gpus {
            if n != p.ranks() as i64 {
                return Err(self.bad(
                    "parallel",
                    "gpus",
                    format!(
                        "must equal the number of ranks of grid {:?} ({}), got {n}",
                        p.grid,
                        p.ranks()
                    ),
                ));
            }
        }
        if p.read == ReadMode::Slab && !matches!(self.config.gauge, GaugeConfig::File { .. }) {
            return Err(self.bad(
                "parallel",
                "read",
                "\"slab\" has each rank read its part of a gauge file, but [gauge] is not a \
                 file (type = \"file\")"
                    .into(),
            ));
        }
        if let Err(e) = crate::geometry::partition::Partition::new(self.dims(), p.grid(), 0) {
            let msg = match e {
                Error::InvalidValue { message, .. } => message,
                other => other.to_string(),
            };
            return Err(self.bad("parallel", "grid", msg));
        }
        Ok(())
    }

    fn check_spin_colour(&self, spin: i64, colour: i64) -> Result<()> {
        if !(0..4).contains(&spin) {
            return Err(self.bad("source", "spin", format!("must be 0..3, got {spin}")));
        }
        if !(0..3).contains(&colour) {
            return Err(self.bad("source", "colour", format!("must be 0..2, got {colour}")));
        }
        Ok(())
    }

    pub fn dims(&self) -> [usize; NDIM] {
        let l = &self.config.lattice;
        [l.lx as usize, l.ly as usize, l.lz as usize, l.lt as usize]
    }

    pub fn lattice(&self) -> Result<Lattice> {
        Lattice::new(self.dims(), self.config.lattice.boundary)
    }

    /// An input path from the config, resolved against the config's folder.
    pub fn input_path(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }
}
