//! The TOML run configuration (README, "Config reference"): schema, validation with the key
//! and line named in every error, and command-line overrides.
//!
//! One rule for relative paths (docs/config.md, "Paths"): a path written in a config file
//! (gauge and source files, outputs) is relative to the config file's folder; a path given
//! on the command line (`--gauge`, `--source file:`, `--output`) and every path of the
//! embedded default config are relative to the current directory. Paths are resolved
//! once, when the config is loaded (`resolve`).

use crate::backend::cuda::{Reconstruct, StencilVersion};

use crate::field::gamma::GammaBasis;
use crate::geometry::lattice::{Boundary, DEFAULT_BOUNDARY, NDIM};
use crate::linalg::Operator;
use crate::solver::Method;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The seed's problem, embedded so that `qcd-solve` runs with no file at all.
pub const DEFAULT_CONFIG: &str = include_str!("../../configs/16x16x16x32.toml");
pub const DEFAULT_CONFIG_NAME: &str = "configs/16x16x16x32.toml (embedded)";

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Absent, or without some extents: taken from the gauge file's header (`resolve`).
    #[serde(default)]
    pub lattice: LatticeConfig,
    pub gauge: GaugeSection,
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
    #[serde(default)]
    pub tuning: crate::backend::TuningOptions,
    /// The correlators contracted from the propagator; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure: Option<MeasureConfig>,
    /// The multigrid of `[solver] method = "mg"`; absent: its defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multigrid: Option<multigrid::MultigridConfig>,
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
    /// Each rank reads and verifies its own slab of the file (the checks combined over
    /// the ranks); rank 0 gathers the field for the final CPU check and the outputs.
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

/// `[lattice]`: the extents (each absent one taken from the gauge file's header, each
/// given one checked against it: `resolve`) and the fermion boundary conditions.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LatticeConfig {
    #[serde(rename = "LX", default)]
    pub lx: i64,
    #[serde(rename = "LY", default)]
    pub ly: i64,
    #[serde(rename = "LZ", default)]
    pub lz: i64,
    #[serde(rename = "LT", default)]
    pub lt: i64,
    /// Fermion boundary conditions for x, y, z, t.
    #[serde(default = "default_boundary")]
    pub boundary: [Boundary; NDIM],
}

fn default_boundary() -> [Boundary; NDIM] {
    DEFAULT_BOUNDARY
}

impl Default for LatticeConfig {
    /// No extents (0: to be taken from a gauge file) and the default boundary.
    fn default() -> Self {
        LatticeConfig {
            lx: 0,
            ly: 0,
            lz: 0,
            lt: 0,
            boundary: DEFAULT_BOUNDARY,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum GaugeConfig {
    /// U = 1 everywhere (free field).
    Unit,
    /// Random SU(3) links from a seed (a "hot" field).
    Random { seed: u64 },
    /// A gauge file; `format` is "auto" (default), "nersc", "ildg", "scidac", "milc" or
    /// "openqcd".
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
    /// The clover coefficient c_sw >= 0 (0: no clover term). From MILC's clov_c and
    /// tadpole factor u0: c_sw = clov_c / u0^3.
    #[serde(default)]
    pub csw: f64,
    /// The twisted mass mu of D + 2 i kappa mu g5 (0: no twist).
    #[serde(default)]
    pub mu: f64,
    #[serde(default)]
    pub gamma_basis: GammaBasis,
}

impl DiracConfig {
    /// The operator's parameters.
    pub fn action(&self) -> crate::dirac::Action {
        crate::dirac::Action {
            kappa: self.kappa,
            csw: self.csw,
            mu: self.mu,
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
    /// m = `restart`), "cgne" (CG on the normal equations D^dag D x = D^dag b) or "mg"
    /// (GCR(m) preconditioned by adaptive aggregation multigrid, `[multigrid]`).
    #[serde(default = "default_method")]
    pub method: Method,
    /// GCR and MG's outer GCR: directions kept before a restart (1..=64).
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
    /// fixed-point spinors with a per-site norm, 16-bit links on the GPU; the
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
    /// A propagator's columns solved together (1..=16): 1 solves them one after another
    /// with the engine `iteration` chooses; more solves that many at once as one batch
    /// (CR or BiCGStab with host scalars, each step's operator applied to the batch in one
    /// launch on the GPU, a converged column leaving the batch; mixed precision by defect
    /// correction to `reliable_delta`). Each batch holds its columns' fields at once.
    #[serde(default = "default_batch")]
    pub batch: i64,
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
fn default_batch() -> i64 {
    1
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
            batch: default_batch(),
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

/// `[output]`: where the main job writes. `report` and `solution` default to
/// `out/<config stem>.json` and `.npy` (relative to the config's folder, `resolve`);
/// `false` writes none. `None` here: not written.
#[derive(Clone, Debug, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    /// JSON report path, or `false` for none.
    #[serde(
        default,
        deserialize_with = "resolve::path_or_false",
        serialize_with = "resolve::serialize_path_or_false"
    )]
    pub report: Option<PathBuf>,
    /// Solution `.npy` path, or `false` for none.
    #[serde(
        default,
        deserialize_with = "resolve::path_or_false",
        serialize_with = "resolve::serialize_path_or_false"
    )]
    pub solution: Option<PathBuf>,
    /// Write the gauge field used as NERSC (3x3, IEEE64BIG) here; absent: not written.
    #[serde(default)]
    pub gauge: Option<PathBuf>,
}

mod applies;
pub mod cli_values;
mod loaded;
pub mod multigrid;
mod overrides;
pub mod physics;
pub mod resolve;

pub use loaded::LoadedConfig;
pub use overrides::Overrides;
pub use physics::{
    Dilution, GaugeFixKind, GaugeSection, Index, LinkSmearingConfig, MeasureConfig, NoiseConfig,
    Pairs, QuarkSmearingConfig, Sink, SourceConfig,
};
