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
//! - `<stem>.propagator.h5`: HDF5, the dataset "propagator" (the npy's array, complex128)
//!   and "pion" (C(t)), with the run's parameters as attributes;
//! - `<stem>.propagator.lime`: SciDAC LIME, the record `QDP_D3_DiracPropagator`, each site
//!   `[c][s][c'][s']` big-endian (docs/formats.md);
//! - `<stem>.propagator.json`: every column's iterations, stop and true residual, the
//!   pion, the action, the source and the backend.
//!
//! A column that does not converge stops the run (exit 7) before anything is written.
//!
//! One device (a GPU or the CPU); a split lattice is refused by `parallel.grid`. The host
//! holds the 12 solutions (2304 bytes a site); each file is encoded from them in blocks.

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
/// The HDF5 dataset "propagator"'s `layout` attribute.
const H5_LAYOUT: &str = "[t, z, y, x, s, c, s', c'] = S(x, x0)_{s c, s' c'}, S = D^-1, \
                         D = A - kappa H; (s', c') the point source's spin and colour";
/// The HDF5 dataset "pion"'s `layout` attribute.
const PION_LAYOUT: &str = "[t] = sum over the sites of timeslice (t0 + t) mod LT of \
                           sum |S|^2 (the G5-G5 correlator at zero momentum), t0 the source's";

/// The output paths under `out` for the config `cfg`: propagator (npy), correlators,
/// report, propagator (HDF5), propagator (SciDAC LIME).
pub fn output_paths(cfg: &LoadedConfig, out: &Path) -> [PathBuf; 5] {
    let stem = Path::new(&cfg.source_name)
        .file_stem()
        .map_or_else(|| "propagator".to_string(), |s| s.to_string_lossy().into());
    [
        out.join(format!("{stem}.propagator.npy")),
        out.join(format!("{stem}.correlators.csv")),
        out.join(format!("{stem}.propagator.json")),
        out.join(format!("{stem}.propagator.h5")),
        out.join(format!("{stem}.propagator.lime")),
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
    let c = &cfg.config;
    let report = PropagatorReport {
        lattice: lattice.dims,
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
    write_files(cfg, &paths, &report, &solutions)?;
    Ok(report)
}

/// The outputs, each staged and renamed in turn, the report last: the propagator as
/// npy, HDF5 and SciDAC LIME, the correlator table, the JSON report.
fn write_files(
    cfg: &LoadedConfig,
    paths: &[PathBuf; 5],
    report: &PropagatorReport,
    solutions: &[SpinorField],
) -> Result<()> {
    use crate::io::staged::commit_one;
    let d = report.lattice;
    let value = |i: usize| element(solutions, i);
    commit_one(crate::io::npy::stage_c16_npy(
        &paths[0],
        &[d[3], d[2], d[1], d[0], 4, 3, 4, 3],
        &value,
    )?)?;
    commit_one(stage_h5(cfg, &paths[3], report, &value)?)?;
    commit_one(stage_lime(&paths[4], report, &value)?)?;
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
        report.pion.iter().enumerate().map(|(t, c)| {
            ["G5", "G5", "0", "0", "0"]
                .map(String::from)
                .into_iter()
                .chain([t.to_string(), format!("{c:.17e}"), "0".to_string()])
                .collect()
        }),
    )?;
    crate::io::write_atomic(&paths[1], csv.as_bytes())?;
    let json = serde_json::to_vec_pretty(report)
        .map_err(|e| Error::internal(format!("the propagator report: {e}")))?;
    crate::io::write_atomic(&paths[2], &json)
}

/// The HDF5 propagator: the dataset "propagator" (the npy's array, complex128) and
/// "pion" (C(t), float64), with every parameter of the run as attributes of the file and
/// of "propagator" (docs/formats.md).
fn stage_h5(
    cfg: &LoadedConfig,
    path: &Path,
    r: &PropagatorReport,
    value: &(dyn Fn(usize) -> C64 + Sync),
) -> Result<crate::io::staged::Staged> {
    use crate::io::hdf5::{Attr, Data, Dataset, H5File};
    let c = &cfg.config;
    let d = r.lattice;
    let boundary: Vec<String> = c
        .lattice
        .boundary
        .iter()
        .map(|b| format!("{b:?}").to_lowercase())
        .collect();
    let params = vec![
        Attr::new("program", "qcd-solve"),
        Attr::new("version", env!("CARGO_PKG_VERSION")),
        Attr::new("lattice", &d[..]),
        Attr::new("boundary", boundary.join(",")),
        Attr::new("kappa", r.kappa),
        Attr::new("csw", r.csw),
        Attr::new("mu", r.mu),
        Attr::new("source_site", &r.source_site[..]),
        Attr::new("gauge", r.gauge.as_str()),
        Attr::new("plaquette", r.plaquette),
        Attr::new("method", r.method.as_str()),
        Attr::new("tolerance", c.solver.tolerance),
        Attr::new("backend", r.backend.as_str()),
    ];
    let mut prop_attrs = params.clone();
    prop_attrs.push(Attr::new("layout", H5_LAYOUT));
    let pion = |t: usize| r.pion[t];
    let file = H5File {
        attrs: params,
        datasets: vec![
            Dataset {
                name: "propagator".into(),
                shape: vec![d[3], d[2], d[1], d[0], 4, 3, 4, 3],
                data: Data::C16(value),
                attrs: prop_attrs,
            },
            Dataset {
                name: "pion".into(),
                shape: vec![r.pion.len()],
                data: Data::F64(&pion),
                attrs: vec![
                    Attr::new("source_gamma", "G5"),
                    Attr::new("sink_gamma", "G5"),
                    Attr::new("momentum", &[0usize, 0, 0][..]),
                    Attr::new("layout", PION_LAYOUT),
                ],
            },
        ],
    };
    crate::io::hdf5::stage_h5(path, &file)
}

/// The SciDAC LIME propagator (`io::scidac_write::stage_propagator`), the run's
/// parameters in the user XML's `<info>`.
fn stage_lime(
    path: &Path,
    r: &PropagatorReport,
    value: &(dyn Fn(usize) -> C64 + Sync),
) -> Result<crate::io::staged::Staged> {
    use crate::io::scidac_write::{stage_propagator, utc_date, PropagatorMeta};
    let s = r.source_site;
    let info = format!(
        "qcd-solve {} propagator S = D^-1, D = A - kappa H; per site [c][s][c'][s'] = \
         S(x, x0)_{{s c, s' c'}}, (s', c') the point source's spin and colour; \
         kappa = {}, csw = {}, mu = {}, source (x, y, z, t) = ({}, {}, {}, {}), \
         gauge = {}, plaquette = {}, method = {}",
        env!("CARGO_PKG_VERSION"),
        r.kappa,
        r.csw,
        r.mu,
        s[0],
        s[1],
        s[2],
        s[3],
        r.gauge,
        r.plaquette,
        r.method
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.as_secs());
    let meta = PropagatorMeta {
        dims: r.lattice,
        date: &utc_date(now),
        info: &info,
    };
    stage_propagator(path, &meta, value)
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
