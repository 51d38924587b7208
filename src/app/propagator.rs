//! `qcd-solve propagator CONFIG`: the point-to-all propagator in one process. The 12
//! spin-colour columns of S = D^-1 from the config's point source are solved on one
//! backend, built once: the gauge field is read, verified, uploaded and tuned once. The
//! outputs, in the `--out` folder, named after the config:
//! - `<stem>.propagator.npy`: complex128, shape `[LT, LZ, LY, LX, 4, 3, 4, 3]`, element
//!   `[t, z, y, x, s, c, s', c']` = S(x, x0)_{s c, s' c'}, with (s', c') the source's spin
//!   and colour and D = A - kappa H (`docs/conventions.md`);
//! - `<stem>.correlators.csv`: the pion two-point function at zero momentum,
//!   C(t) = sum over the spatial sites of timeslice t0 + t of sum |S|^2 (by gamma5
//!   hermiticity, the G5-G5 correlator), t counted from the source's timeslice, with the
//!   columns `source_gamma, sink_gamma, px, py, pz, t, re, im`;
//! - `<stem>.propagator.json`: every column's iterations, stop and true residual, the
//!   pion, the action, the source and the backend.
//!
//! A column that does not converge stops the run (exit 7) before anything is written.
//!
//! One device (a GPU or the CPU); a split lattice is refused by `parallel.grid`. The host
//! holds the 12 solutions (2304 bytes a site); the file is encoded from them in blocks.

use crate::app::outputs::prepare_side;
use crate::app::parallel::one;
use crate::config::{LoadedConfig, SourceConfig};
use crate::field::{SpinorField, C64};
use crate::geometry::lattice::Lattice;
use crate::{Error, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One column's solve.
#[derive(Clone, Debug, Serialize)]
pub struct Column {
    pub spin: usize,
    pub colour: usize,
    pub iterations: usize,
    pub stop_reason: String,
    /// ||b - D x|| / ||b|| on the backend that solved.
    pub true_residual: f64,
    pub solve_seconds: f64,
}

/// The JSON report of a propagator run.
#[derive(Debug, Serialize)]
pub struct PropagatorReport {
    pub lattice: [usize; 4],
    pub source_site: [usize; 4],
    pub kappa: f64,
    pub csw: f64,
    pub mu: f64,
    pub gauge: String,
    pub plaquette: f64,
    pub method: String,
    pub backend: String,
    /// What the propagator file holds.
    pub layout: &'static str,
    pub columns: Vec<Column>,
    /// C(t), t = 0 .. LT - 1 from the source's timeslice.
    pub pion: Vec<f64>,
    pub files: Vec<String>,
}

const LAYOUT: &str = "propagator[t, z, y, x, s, c, s', c'] = S(x, x0)_{s c, s' c'}, complex128, \
                      S = D^-1, D = A - kappa H; (s', c') the point source's spin and colour";

/// The output paths under `out` for the config `cfg`: propagator, correlators, report.
pub fn output_paths(cfg: &LoadedConfig, out: &Path) -> [PathBuf; 3] {
    let stem = Path::new(&cfg.source_name)
        .file_stem()
        .map_or_else(|| "propagator".to_string(), |s| s.to_string_lossy().into());
    [
        out.join(format!("{stem}.propagator.npy")),
        out.join(format!("{stem}.correlators.csv")),
        out.join(format!("{stem}.propagator.json")),
    ]
}

/// The point source's site, or an error naming `source.type`.
fn source_site(cfg: &LoadedConfig) -> Result<[usize; 4]> {
    match &cfg.config.source {
        SourceConfig::Point { site, .. } => Ok(site.map(|v| v as usize)),
        _ => Err(cfg.bad(
            "source",
            "type",
            "the propagator is solved from a point source (type = \"point\", its site); \
             its 12 spin-colour columns are all solved, so the config's spin and colour \
             are not used"
                .into(),
        )),
    }
}

/// Solve the 12 columns and write the outputs into `out` (the config's checks done).
pub fn run(cfg: &LoadedConfig, out: &Path) -> Result<PropagatorReport> {
    let site = source_site(cfg)?;
    if cfg.config.parallel.is_decomposed() {
        return Err(cfg.bad(
            "parallel",
            "grid",
            "the propagator runs on one device (a GPU or the CPU); a split lattice is \
             solved by the main job, one source at a time"
                .into(),
        ));
    }
    let paths = output_paths(cfg, out);
    prepare_side(cfg, &paths)?;
    let problem = crate::app::problem::build_problem(cfg)?;
    let lattice = &problem.lattice;
    let mut device = one::open(cfg, &problem, one::warm_up(cfg))?;
    let mut solutions = Vec::with_capacity(12);
    let mut columns = Vec::with_capacity(12);
    for spin in 0..4 {
        for colour in 0..3 {
            let source = SpinorField::point(lattice, site, spin, colour);
            let r = device.solve(&problem, &source)?;
            tracing::info!(
                spin,
                colour,
                iterations = r.iterations,
                true_residual = r.true_residual,
                "propagator column done"
            );
            columns.push(Column {
                spin,
                colour,
                iterations: r.iterations,
                stop_reason: format!("{:?}", r.reason),
                true_residual: r.true_residual,
                solve_seconds: r.timings.solve,
            });
            if r.reason != crate::solver::StopReason::Converged {
                return Err(Error::NotConverged(format!(
                    "propagator column spin {spin}, colour {colour} did not converge ({}, \
                     {} iterations, true residual {:e}): nothing written",
                    r.reason.describe(),
                    r.iterations,
                    r.true_residual
                )));
            }
            solutions.push(r.solution);
        }
    }
    // No `close`: its triad and memory books are the main job's report's.
    let backend = device.described().to_string();
    drop(device);
    let pion = pion(lattice, &solutions, site[3]);
    let d = lattice.dims;
    let staged =
        crate::io::npy::stage_c16_npy(&paths[0], &[d[3], d[2], d[1], d[0], 4, 3, 4, 3], &|i| {
            element(&solutions, i)
        })?;
    crate::io::staged::commit_one(staged)?;
    let csv = crate::report::csv::table(
        &[
            "source_gamma",
            "sink_gamma",
            "px",
            "py",
            "pz",
            "t",
            "re",
            "im",
        ],
        pion.iter().enumerate().map(|(t, c)| {
            ["G5", "G5", "0", "0", "0"]
                .map(String::from)
                .into_iter()
                .chain([t.to_string(), format!("{c:.17e}"), "0".to_string()])
                .collect()
        }),
    )?;
    crate::io::write_atomic(&paths[1], csv.as_bytes())?;
    let c = &cfg.config;
    let report = PropagatorReport {
        lattice: d,
        source_site: site,
        kappa: c.dirac.kappa,
        csw: c.dirac.csw,
        mu: c.dirac.mu,
        gauge: problem.gauge_description.clone(),
        plaquette: problem.plaquette.total,
        method: c.solver.method.to_string(),
        backend,
        layout: LAYOUT,
        columns,
        pion,
        files: paths.iter().map(|p| p.display().to_string()).collect(),
    };
    let json = serde_json::to_vec_pretty(&report)
        .map_err(|e| Error::internal(format!("the propagator report: {e}")))?;
    crate::io::write_atomic(&paths[2], &json)?;
    Ok(report)
}

/// What the command prints: the columns' iterations and worst true residual, the pion
/// and the files written.
pub fn summary(r: &PropagatorReport) -> String {
    let its: Vec<usize> = r.columns.iter().map(|c| c.iterations).collect();
    let worst = r
        .columns
        .iter()
        .map(|c| c.true_residual)
        .fold(0.0, f64::max);
    let mut s = format!(
        "propagator: 12 columns on {}, iterations {its:?}, worst true residual {worst:.2e}\n\
         pion C(t) from the source's timeslice:\n",
        r.backend
    );
    for (t, c) in r.pion.iter().enumerate() {
        s.push_str(&format!("{t:>4} {c:.10e}\n"));
    }
    for f in &r.files {
        s.push_str(&format!("wrote {f}\n"));
    }
    s
}

/// Element i (C order) of the propagator array `[site][s][c][s'][c']` whose column
/// s' * 3 + c' is `columns[s' * 3 + c']`.
pub fn element(columns: &[SpinorField], i: usize) -> C64 {
    let (site, within) = (i / 144, i % 144);
    columns[within % 12].data[site * 12 + within / 12]
}

/// The pion two-point function at zero momentum from the 12 columns of a point source on
/// timeslice `t0`: C(t) = sum over the sites of timeslice (t0 + t) mod LT of the squared
/// moduli of every column's 12 components.
pub fn pion(lattice: &Lattice, columns: &[SpinorField], t0: usize) -> Vec<f64> {
    let lt = lattice.dims[3];
    let slice = lattice.volume() / lt;
    let mut c = vec![0.0; lt];
    for col in columns {
        for (x, site) in col.data.chunks_exact(12).enumerate() {
            let t = x / slice;
            c[(t + lt - t0 % lt) % lt] += site.iter().map(|z| z.norm_sqr()).sum::<f64>();
        }
    }
    c
}
