//! The propagator and its correlators in one process: `qcd-solve propagator CONFIG`, and
//! the main job when its source has more than one right-hand side (`spin = "all"`,
//! `colour = "all"`, a diluted noise) or the config asks for `[measure]`. The columns of
//! the config's source (`app::rhs`) are solved on one backend, built once: the gauge
//! field is read, verified, fixed (`[gauge] fix`), uploaded and tuned once. The outputs,
//! in one folder, named after the config (docs/formats.md, "Propagator and correlator
//! files"):
//! - `<stem>.propagator.npy` and `.h5`: complex128, `[LT, LZ, LY, LX, 4, 3, 4, 3]`,
//!   element `[t, z, y, x, s, c, s', c']` = S(x, x0)_{s c, s' c'} for the 12 columns of a
//!   propagator source, (s', c') the source's spin and colour, D = A - kappa H; for other
//!   sources `[LT, LZ, LY, LX, 4, 3, N]`, the N solutions in the report's order;
//! - `<stem>.propagator.lime`: SciDAC LIME `QDP_D3_DiracPropagator` (12 columns only);
//! - `<stem>.correlators.csv` (point sink) and `<stem>.correlators.smeared.csv` (smeared
//!   sink, when asked), columns `source_gamma, sink_gamma, px, py, pz, t, re, im`, and
//!   `<stem>.correlators.h5` with the same numbers (`measure`);
//! - `<stem>.pion-meff.svg` and `.png`: the pion's effective mass;
//! - `<stem>.propagator.json`: every column's iterations, stop and true residual, the
//!   pion, its effective mass, the action, the source, the gauge fixing and the backend.
//!
//! A column that does not converge stops the run (exit 7) before anything is written.
//!
//! One device (a GPU or the CPU); a split lattice is refused by `parallel.grid`. The host
//! holds the solutions (192 bytes a site each); the files are encoded from them in blocks.

mod files;
pub(crate) mod measure;

pub use files::pion;

use crate::app::outputs::prepare_side;
use crate::app::parallel::one;
use crate::app::rhs::RightHandSides;
use crate::config::{Index, LoadedConfig, SourceConfig};
use crate::field::SpinorField;
use crate::problem::Problem;
use crate::report::meff::EffectiveMass;
use crate::report::provenance::{self, Provenance};
use crate::{Error, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One column's solve.
#[derive(Clone, Debug, Serialize)]
pub struct Column {
    /// The column's place among the 12 of a propagator, 3 spin' + colour'.
    pub slot: usize,
    pub spin: usize,
    pub colour: usize,
    pub iterations: usize,
    pub stop_reason: String,
    /// ||b - D x|| / ||b|| on the backend that solved.
    pub true_residual: f64,
    pub solve_seconds: f64,
    /// `method = "mg"`: the multigrid set-up this column's solve made (the first
    /// column's; the others reuse it: 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multigrid_setup_seconds: Option<f64>,
}

/// The JSON report of a propagator run.
#[derive(Debug, Serialize)]
pub struct PropagatorReport {
    /// `schema_version`, `kind`, `build`, `host`, `device`, `inputs` (docs/report.md).
    #[serde(flatten)]
    pub provenance: Provenance,
    pub config_file: String,
    /// Every option in force, defaults written out (`provenance::resolved_options`).
    pub config: crate::config::Config,
    /// The gauge file read (`inputs`' entry), null when the field was not read from a
    /// file.
    pub gauge_file: Option<crate::report::provenance::InputFile>,
    /// How `<stem>.propagator.npy` (and the HDF5 dataset) hold the solutions.
    pub propagator_layout: crate::report::provenance::ArrayLayout,
    pub lattice: [usize; 4],
    /// What the source is.
    pub source: String,
    /// The source's spatial origin and timeslice (x, y, z, t): the correlators' t = 0 and
    /// the momenta's origin.
    pub source_site: [usize; 4],
    pub kappa: f64,
    pub csw: f64,
    pub mu: f64,
    pub gauge: String,
    pub plaquette: f64,
    /// The gauge fixing done before the solves, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gauge_fixing: Option<serde_json::Value>,
    pub method: String,
    /// Columns solved together (`[solver] batch`; 1: one at a time).
    pub batch: usize,
    /// Wall time of every column's solve together (s).
    pub solve_seconds: f64,
    pub backend: String,
    /// What the propagator file holds.
    pub layout: String,
    pub columns: Vec<Column>,
    /// The pion, Re C_{G5,G5}(t) at zero momentum with a point sink, t = 0 .. LT - 1 from
    /// the source's timeslice (empty when the source gives no correlators).
    pub pion: Vec<f64>,
    pub pion_effective_mass: Vec<EffectiveMass>,
    /// How many correlators each file holds.
    pub correlators: usize,
    pub files: Vec<String>,
}

pub(crate) const LAYOUT_12: &str = "propagator[t, z, y, x, s, c, s', c'] = S(x, x0)_{s c, s' c'}, \
                         complex128, S = D^-1, D = A - kappa H; (s', c') the source's spin \
                         and colour";
const LAYOUT_N: &str = "solutions[t, z, y, x, s, c, k] = (D^-1 eta_k)(x)_{s c}, complex128, \
                        D = A - kappa H; k the report's column k";

/// The output files of a run into `out` (module doc).
pub struct Paths {
    pub npy: PathBuf,
    pub h5: PathBuf,
    pub lime: PathBuf,
    pub csv: PathBuf,
    pub csv_smeared: PathBuf,
    pub correlators_h5: PathBuf,
    pub meff: PathBuf,
    pub json: PathBuf,
}

impl Paths {
    pub fn new(cfg: &LoadedConfig, out: &Path) -> Paths {
        let stem = Path::new(&cfg.source_name)
            .file_stem()
            .map_or_else(|| "propagator".to_string(), |s| s.to_string_lossy().into());
        let at = |suffix: &str| out.join(format!("{stem}.{suffix}"));
        Paths {
            npy: at("propagator.npy"),
            h5: at("propagator.h5"),
            lime: at("propagator.lime"),
            csv: at("correlators.csv"),
            csv_smeared: at("correlators.smeared.csv"),
            correlators_h5: at("correlators.h5"),
            meff: at("pion-meff"),
            json: at("propagator.json"),
        }
    }

    fn all(&self) -> Vec<PathBuf> {
        vec![
            self.npy.clone(),
            self.h5.clone(),
            self.lime.clone(),
            self.csv.clone(),
            self.csv_smeared.clone(),
            self.correlators_h5.clone(),
            self.meff.with_extension("svg"),
            self.meff.with_extension("png"),
            self.json.clone(),
        ]
    }
}

/// The folder the main job writes a propagator into: `[output] solution`'s, else
/// `[output] report`'s, else `out`.
pub fn main_job_folder(cfg: &LoadedConfig) -> PathBuf {
    let o = &cfg.config.output;
    o.solution
        .as_ref()
        .or(o.report.as_ref())
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("out"))
}

/// Whether the main job of `cfg` is a propagator run.
pub fn is_propagator_job(cfg: &LoadedConfig) -> bool {
    cfg.config.source.columns() > 1 || cfg.config.measure.is_some()
}

/// `qcd-solve propagator`: every spin and colour of a point, wall or Gaussian source.
pub fn all_spins_and_colours(cfg: &mut LoadedConfig) {
    if let SourceConfig::Point { spin, colour, .. }
    | SourceConfig::Wall { spin, colour, .. }
    | SourceConfig::Gaussian { spin, colour, .. } = &mut cfg.config.source
    {
        *spin = Index::All;
        *colour = Index::All;
    }
}

/// Solve the source's columns, contract them, and write the outputs into `out` (the
/// config's checks done).
pub fn run(cfg: &LoadedConfig, out: &Path) -> Result<PropagatorReport> {
    if cfg.config.parallel.is_decomposed() {
        return Err(cfg.bad(
            "parallel",
            "grid",
            "a propagator runs on one device (a GPU or the CPU); a split lattice solves \
             one right-hand side at a time (spin and colour not \"all\", no [measure])"
                .into(),
        ));
    }
    let paths = Paths::new(cfg, out);
    prepare_side(cfg, &paths.all())?;
    let problem = crate::app::problem::build_problem(cfg)?;
    let lattice = &problem.lattice;
    let rhs = RightHandSides::of(cfg, &problem.gauge, || {
        Ok((problem.source.clone(), problem.source_description.clone()))
    })?;
    let (solutions, columns, backend) = solve_columns(cfg, &problem, &rhs)?;
    let measured = measure::contract(cfg, lattice, &rhs, &solutions);
    let pion = measured.as_ref().map_or_else(Vec::new, |m| m.pion());
    let mut report = report_of(cfg, &problem, &rhs, columns, backend, pion, &measured);
    files::write(
        cfg,
        &paths,
        &mut report,
        &rhs,
        &solutions,
        measured.as_ref(),
    )?;
    Ok(report)
}

/// The propagator job's report (its `files` empty until they are written).
pub(crate) fn report_of(
    cfg: &LoadedConfig,
    problem: &Problem,
    rhs: &RightHandSides,
    columns: Vec<Column>,
    backend: String,
    pion: Vec<f64>,
    measured: &Option<measure::Measured>,
) -> PropagatorReport {
    let lattice = &problem.lattice;
    let c = &cfg.config;
    let mut provenance = Provenance::new("propagator", provenance::gpu_of_backend(&backend));
    provenance.hash_inputs();
    let source_norm = rhs.make(lattice, 0).norm2().sqrt();
    PropagatorReport {
        config_file: cfg.source_name.clone(),
        config: provenance::resolved_options(c),
        gauge_file: provenance.gauge_file(),
        propagator_layout: provenance::propagator_layout(
            lattice.dims,
            (!rhs.is_propagator()).then_some(rhs.len()),
            &rhs.description,
            source_norm,
        ),
        provenance,
        lattice: lattice.dims,
        source: rhs.description.clone(),
        source_site: [rhs.origin[0], rhs.origin[1], rhs.origin[2], rhs.t0],
        kappa: c.dirac.kappa,
        csw: c.dirac.csw,
        mu: c.dirac.mu,
        gauge: problem.gauge_description.clone(),
        plaquette: problem.plaquette.total,
        gauge_fixing: problem.gauge_fixing.clone(),
        method: c.solver.method.to_string(),
        batch: c.solver.batch as usize,
        solve_seconds: columns.iter().map(|c| c.solve_seconds).sum(),
        backend,
        layout: if rhs.is_propagator() {
            LAYOUT_12
        } else {
            LAYOUT_N
        }
        .into(),
        columns,
        pion_effective_mass: crate::report::meff::effective_mass(&pion),
        pion,
        correlators: measured.as_ref().map_or(0, |m| m.len()),
        files: Vec::new(),
    }
}

/// Every column solved on one backend opened once; the solutions in column order, the
/// columns' records and the backend's description.
pub(crate) fn solve_columns(
    cfg: &LoadedConfig,
    problem: &Problem,
    rhs: &RightHandSides,
) -> Result<(Vec<SpinorField>, Vec<Column>, String)> {
    let lattice = &problem.lattice;
    let mut device = one::open(cfg, problem, one::warm_up(cfg))?;
    let mut solutions = Vec::with_capacity(rhs.len());
    let mut columns = Vec::with_capacity(rhs.len());
    let batch = cfg.config.solver.batch.max(1) as usize;
    let mut first = 0;
    while first < rhs.len() {
        let ks: Vec<usize> = (first..rhs.len().min(first + batch)).collect();
        first += ks.len();
        let sources = ks
            .iter()
            .map(|&k| {
                let source = rhs.make(lattice, k);
                if source.norm2() == 0.0 {
                    let (spin, colour) = (rhs.slots[k] / 3, rhs.slots[k] % 3);
                    return Err(Error::invalid(
                        "source",
                        format!("column {k} (spin {spin}, colour {colour}) is zero everywhere"),
                    ));
                }
                Ok(source)
            })
            .collect::<Result<Vec<_>>>()?;
        let results = if batch > 1 {
            device.solve_batch(problem, &sources)?
        } else {
            vec![device.solve(problem, &sources[0])?]
        };
        drop(sources);
        for (k, r) in ks.into_iter().zip(results) {
            columns.push(column(rhs, k, &r)?);
            solutions.push(r.solution);
        }
    }
    // No `close`: its triad and memory books are the main job's report's.
    let backend = device.described().to_string();
    Ok((solutions, columns, backend))
}

/// Column `k`'s record, logged; a column that did not converge stops the run (nothing
/// written).
fn column(rhs: &RightHandSides, k: usize, r: &crate::problem::SolveResult) -> Result<Column> {
    let slot = rhs.slots[k];
    let (spin, colour) = (slot / 3, slot % 3);
    tracing::info!(
        column = k,
        spin,
        colour,
        iterations = r.iterations,
        true_residual = r.true_residual,
        "propagator column done"
    );
    if r.reason != crate::solver::StopReason::Converged {
        return Err(Error::NotConverged(format!(
            "propagator column {k} (spin {spin}, colour {colour}) did not converge ({}, \
             {} iterations, true residual {:e}): nothing written",
            r.reason.describe(),
            r.iterations,
            r.true_residual
        )));
    }
    Ok(Column {
        slot,
        spin,
        colour,
        iterations: r.iterations,
        stop_reason: format!("{:?}", r.reason),
        true_residual: r.true_residual,
        solve_seconds: r.timings.solve,
        multigrid_setup_seconds: r.multigrid.as_ref().map(|m| m.setup_seconds),
    })
}

/// What the command prints: the columns' iterations and worst true residual, the pion,
/// its effective mass and the files written.
pub fn summary(r: &PropagatorReport) -> String {
    let its: Vec<usize> = r.columns.iter().map(|c| c.iterations).collect();
    let worst = r
        .columns
        .iter()
        .map(|c| c.true_residual)
        .fold(0.0, f64::max);
    let mut s = format!(
        "propagator: {} columns on {}, iterations {its:?}, worst true residual {worst:.2e}, \
         solves {:.3} s (batch {})\n\
         source: {}\n",
        r.columns.len(),
        r.backend,
        r.solve_seconds,
        r.batch,
        r.source
    );
    let setups: Vec<f64> = r
        .columns
        .iter()
        .filter_map(|c| c.multigrid_setup_seconds)
        .filter(|&t| t > 0.0)
        .collect();
    if !setups.is_empty() {
        s.push_str(&format!(
            "multigrid: {} set-up(s), {:.3} s\n",
            setups.len(),
            setups.iter().sum::<f64>()
        ));
    }
    if !r.pion.is_empty() {
        s.push_str("   t  pion C(t) from the source's timeslice  effective mass (cosh)\n");
        for (t, c) in r.pion.iter().enumerate() {
            let m = r.pion_effective_mass[t]
                .cosh
                .map_or(String::new(), |m| format!("{m:.6}"));
            s.push_str(&format!("{t:>4}  {c:.10e}  {m}\n"));
        }
    }
    for f in &r.files {
        s.push_str(&format!("wrote {f}\n"));
    }
    s
}
