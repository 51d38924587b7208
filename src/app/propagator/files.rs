//! The files of a propagator run (`super` module doc): the solutions as npy, HDF5 and
//! (a propagator's 12 columns) SciDAC LIME, the correlators as CSV and HDF5, the pion's
//! effective-mass chart, the JSON report last. Each is staged and renamed in turn; the
//! report lists every file written.

use super::measure::{self, Measured};
use super::{Paths, PropagatorReport};
use crate::app::rhs::RightHandSides;
use crate::config::{LoadedConfig, Sink};
use crate::error::{Error, Result};
use crate::field::{SpinorField, C64};
use crate::geometry::lattice::Lattice;
use crate::io::hdf5::Attr;
use crate::io::staged::commit_one;
use std::path::Path;

/// The HDF5 dataset "propagator"'s `layout` attribute.
const H5_LAYOUT: &str = "[t, z, y, x, s, c, s', c'] = S(x, x0)_{s c, s' c'}, S = D^-1, \
                         D = A - kappa H; (s', c') the source's spin and colour";
const H5_LAYOUT_N: &str = "[t, z, y, x, s, c, k] = (D^-1 eta_k)(x)_{s c}, D = A - kappa H; \
                           k the report's column k";
/// The HDF5 dataset "pion"'s `layout` attribute.
const PION_LAYOUT: &str = "[t] = Re C_{G5,G5}(t) at zero momentum, point sink, t from the \
                           source's timeslice";

/// Every output of the run, the report last (its `files` filled on the way).
pub fn write(
    cfg: &LoadedConfig,
    paths: &Paths,
    report: &mut PropagatorReport,
    rhs: &RightHandSides,
    solutions: &[SpinorField],
    measured: Option<&Measured>,
) -> Result<()> {
    let d = report.lattice;
    let mut files = Vec::new();
    let mut done = |p: &Path| files.push(p.display().to_string());
    // A propagator's columns in slot order (3 s' + c'); other sources' in column order.
    let ordered: Vec<&SpinorField> = if rhs.is_propagator() {
        let mut v = vec![&solutions[0]; 12];
        for (k, s) in solutions.iter().enumerate() {
            v[rhs.slots[k]] = s;
        }
        v
    } else {
        solutions.iter().collect()
    };
    let n = ordered.len();
    let value = |i: usize| element_of(&ordered, i);
    let mut shape = vec![d[3], d[2], d[1], d[0], 4, 3];
    if rhs.is_propagator() {
        shape.extend([4, 3]);
    } else {
        shape.push(n);
    }
    commit_one(crate::io::npy::stage_c16_npy(&paths.npy, &shape, &value)?)?;
    done(&paths.npy);
    commit_one(stage_h5(cfg, &paths.h5, report, &shape, &value)?)?;
    done(&paths.h5);
    if rhs.is_propagator() {
        commit_one(stage_lime(&paths.lime, report, &value)?)?;
        done(&paths.lime);
    }
    if let Some(m) = measured {
        for s in &m.sinks {
            let path = match s.sink {
                Sink::Point => &paths.csv,
                Sink::Smeared => &paths.csv_smeared,
            };
            crate::io::write_atomic(path, measure::csv(s)?.as_bytes())?;
            done(path);
        }
        let momenta = cfg.config.measure.clone().unwrap_or_default().momenta;
        commit_one(measure::stage_h5(
            &paths.correlators_h5,
            m,
            run_attrs(cfg, report),
            &momenta,
        )?)?;
        done(&paths.correlators_h5);
    }
    if report.pion_effective_mass.iter().any(|m| m.cosh.is_some()) {
        let title = format!("Pion effective mass against t, {}", report.gauge);
        let context = crate::report::charts::Context {
            lattice: report.lattice.map(|d| d.to_string()).join("x"),
            device: report.backend.clone(),
            date: crate::report::charts::today(),
        };
        let m = &report.pion_effective_mass;
        for p in crate::report::meff::chart(&paths.meff, &title, &context, m)? {
            done(&p);
        }
    }
    done(&paths.json);
    report.files = files;
    let json = serde_json::to_vec_pretty(report)
        .map_err(|e| Error::internal(format!("the propagator report: {e}")))?;
    crate::io::write_atomic(&paths.json, &json)
}

/// Every parameter of the run, as HDF5 attributes.
fn run_attrs(cfg: &LoadedConfig, r: &PropagatorReport) -> Vec<Attr> {
    let c = &cfg.config;
    let boundary: Vec<String> = c
        .lattice
        .boundary
        .iter()
        .map(|b| format!("{b:?}").to_lowercase())
        .collect();
    let mut v = vec![
        Attr::new("program", "qcd-solve"),
        Attr::new("version", env!("CARGO_PKG_VERSION")),
        Attr::new("lattice", &r.lattice[..]),
        Attr::new("boundary", boundary.join(",")),
        Attr::new("kappa", r.kappa),
        Attr::new("csw", r.csw),
        Attr::new("mu", r.mu),
        Attr::new("source", r.source.as_str()),
        Attr::new("source_site", &r.source_site[..]),
        Attr::new("gauge", r.gauge.as_str()),
        Attr::new("plaquette", r.plaquette),
        Attr::new("method", r.method.as_str()),
        Attr::new("tolerance", c.solver.tolerance),
        Attr::new("backend", r.backend.as_str()),
    ];
    if let Some(f) = &r.gauge_fixing {
        v.push(Attr::new("gauge_fixing", f.to_string()));
    }
    v
}

/// The HDF5 solutions: the dataset "propagator" (the npy's array, complex128) and, when
/// measured, "pion" (Re C(t), float64), with every parameter of the run as attributes of
/// the file and of "propagator" (docs/formats.md).
fn stage_h5(
    cfg: &LoadedConfig,
    path: &Path,
    r: &PropagatorReport,
    shape: &[usize],
    value: &(dyn Fn(usize) -> C64 + Sync),
) -> Result<crate::io::staged::Staged> {
    use crate::io::hdf5::{Data, Dataset, H5File};
    let params = run_attrs(cfg, r);
    let mut prop_attrs = params.clone();
    let twelve = shape.len() == 8;
    prop_attrs.push(Attr::new(
        "layout",
        if twelve { H5_LAYOUT } else { H5_LAYOUT_N },
    ));
    let pion = |t: usize| r.pion[t];
    let mut datasets = vec![Dataset {
        name: "propagator".into(),
        shape: shape.to_vec(),
        data: Data::C16(value),
        attrs: prop_attrs,
    }];
    if !r.pion.is_empty() {
        datasets.push(Dataset {
            name: "pion".into(),
            shape: vec![r.pion.len()],
            data: Data::F64(&pion),
            attrs: vec![
                Attr::new("source_gamma", "G5"),
                Attr::new("sink_gamma", "G5"),
                Attr::new("momentum", &[0usize, 0, 0][..]),
                Attr::new("layout", PION_LAYOUT),
            ],
        });
    }
    let file = H5File {
        attrs: params,
        datasets,
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

/// Element i (C order) of the array `[site][s][c][k]` of the N columns (for 12 columns
/// in slot order, `[site][s][c][s'][c']`).
fn element_of(columns: &[&SpinorField], i: usize) -> C64 {
    let n = columns.len();
    let (site, within) = (i / (12 * n), i % (12 * n));
    columns[within % n].data[site * 12 + within / n]
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
