//! `qcd_solve._native`: the Python module over the qcd-solve library (`app::embed`). Its
//! functions take and return numpy arrays (complex128, C order) and JSON text for the
//! reports; `qcd_solve/__init__.py` is the public face (keyword arguments, exceptions).
//! Every error of the library is raised as `NativeError(exit_code, message)`, which the
//! Python side turns into the exception of that exit code. The GIL is released while a
//! file is read, a problem is built and solved.

use num_complex::Complex64;
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use qcd_solve::app::embed::{self, GaugeInput};
use qcd_solve::field::su3::Su3;
use qcd_solve::field::{GaugeField, SpinorField};
use qcd_solve::io::ReadOptions;
use std::path::PathBuf;

create_exception!(_native, NativeError, PyException);

/// A library error as `NativeError(exit_code, message)`.
fn raise(e: qcd_solve::Error) -> PyErr {
    NativeError::new_err((e.exit_code(), e.to_string()))
}

/// A bad argument (exit 2, as a bad config value).
fn bad(key: &str, message: String) -> PyErr {
    raise(qcd_solve::Error::invalid(key, message))
}

/// The lattice extents (x, y, z, t) of an array whose first four axes are t, z, y, x and
/// whose remaining axes are `tail`.
fn extents(shape: &[usize], tail: &[usize], what: &str) -> PyResult<[usize; 4]> {
    if shape.len() != 4 + tail.len() || shape[4..] != *tail {
        return Err(bad(
            what,
            format!("array of shape {shape:?}: expected [LT, LZ, LY, LX] + {tail:?}"),
        ));
    }
    Ok([shape[3], shape[2], shape[1], shape[0]])
}

/// A C-ordered complex128 array as a flat slice copied out.
fn flat(a: &PyReadonlyArrayDyn<'_, Complex64>, what: &str) -> PyResult<Vec<Complex64>> {
    a.as_slice()
        .map(<[Complex64]>::to_vec)
        .map_err(|_| bad(what, "the array is not C-contiguous".into()))
}

/// Links `[t, z, y, x, mu, 3, 3]` as the library's gauge field (checked there).
fn links_of(a: &PyReadonlyArrayDyn<'_, Complex64>, reunitarise: bool) -> PyResult<GaugeField> {
    let dims = extents(a.shape(), &[4, 3, 3], "gauge")?;
    let data = flat(a, "gauge")?;
    let links = data
        .chunks_exact(9)
        .map(|m| Su3([[m[0], m[1], m[2]], [m[3], m[4], m[5]], [m[6], m[7], m[8]]]))
        .collect();
    embed::links_field(links, dims, reunitarise).map_err(raise)
}

/// A numpy array of `shape` over `data`.
fn array<'py>(
    py: Python<'py>,
    data: Vec<Complex64>,
    shape: Vec<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyArray1::from_vec(py, data).reshape(shape)?.into_any())
}

/// `[LT, LZ, LY, LX]` of extents (x, y, z, t).
fn site_shape(dims: [usize; 4]) -> Vec<usize> {
    vec![dims[3], dims[2], dims[1], dims[0]]
}

/// Read a gauge file: (links `[LT, LZ, LY, LX, 4, 3, 3]`, the file's description as JSON).
#[pyfunction]
#[pyo3(signature = (path, format, reunitarise, accept_unchecked))]
fn read_gauge<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: &str,
    reunitarise: bool,
    accept_unchecked: bool,
) -> PyResult<(Bound<'py, PyAny>, String)> {
    let format = format.to_string();
    let (field, info) = py
        .detach(|| {
            embed::read_gauge(
                &path,
                &format,
                ReadOptions { reunitarise },
                accept_unchecked,
            )
        })
        .map_err(raise)?;
    let info = serde_json::to_string(&info).map_err(|e| bad("info", e.to_string()))?;
    let mut shape = site_shape(field.lattice.dims);
    shape.extend([4, 3, 3]);
    let data: Vec<Complex64> = field.links.iter().flat_map(|u| u.0.concat()).collect();
    Ok((array(py, data, shape)?, info))
}

/// The gauge input of a call: a path, or links.
fn gauge_input(
    gauge_path: Option<PathBuf>,
    links: Option<PyReadonlyArrayDyn<'_, Complex64>>,
    format: &str,
    reunitarise: bool,
    accept_unchecked: bool,
) -> PyResult<GaugeInput> {
    match (gauge_path, links) {
        (Some(path), None) => Ok(GaugeInput::File {
            path,
            format: qcd_solve::io::parse_format(format).map_err(raise)?,
            options: ReadOptions { reunitarise },
            accept_unchecked,
        }),
        (None, Some(a)) => Ok(GaugeInput::Links(links_of(&a, reunitarise)?)),
        _ => Err(bad(
            "gauge",
            "give a gauge file's path or the links as an array".into(),
        )),
    }
}

/// A source `[t, z, y, x, 4, 3]` as a spinor field (its extents checked against the
/// lattice's by `embed::prepare`).
fn source_of(a: Option<PyReadonlyArrayDyn<'_, Complex64>>) -> PyResult<Option<SpinorField>> {
    let Some(a) = a else { return Ok(None) };
    extents(a.shape(), &[4, 3], "source")?;
    Ok(Some(SpinorField {
        data: flat(&a, "source")?,
    }))
}

/// The options' JSON as a value.
fn options_of(options: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(options).map_err(|e| bad("options", e.to_string()))
}

/// `f` inside the thread pool of `[backend] threads` (0: every core).
fn in_pool<T: Send>(
    table: &serde_json::Value,
    f: impl FnOnce() -> qcd_solve::Result<T> + Send,
) -> qcd_solve::Result<T> {
    let threads = table
        .pointer("/backend/threads")
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0);
    qcd_solve::app::run::thread_pool(threads)?.install(f)
}

/// Solve D x = b: (x `[LT, LZ, LY, LX, 4, 3]`, the report as JSON, converged).
#[pyfunction]
#[pyo3(signature = (options, gauge_path, links, source, format, reunitarise, accept_unchecked, progress))]
#[allow(clippy::too_many_arguments)]
fn solve<'py>(
    py: Python<'py>,
    options: &str,
    gauge_path: Option<PathBuf>,
    links: Option<PyReadonlyArrayDyn<'py, Complex64>>,
    source: Option<PyReadonlyArrayDyn<'py, Complex64>>,
    format: &str,
    reunitarise: bool,
    accept_unchecked: bool,
    progress: bool,
) -> PyResult<(Bound<'py, PyAny>, String, bool)> {
    let table = options_of(options)?;
    let gauge = gauge_input(gauge_path, links, format, reunitarise, accept_unchecked)?;
    let source = source_of(source)?;
    qcd_solve::report::progress::set_quiet(!progress);
    let (x, report, dims, converged) = py
        .detach(|| {
            in_pool(&table, || {
                let (cfg, problem) = embed::prepare(&table, gauge, source, "qcd_solve.solve")?;
                let (result, report) = embed::solve(&cfg, &problem)?;
                let converged = result.reason == qcd_solve::solver::StopReason::Converged;
                Ok((result.solution, report, problem.lattice.dims, converged))
            })
        })
        .map_err(raise)?;
    let report = serde_json::to_string(&report).map_err(|e| bad("report", e.to_string()))?;
    let mut shape = site_shape(dims);
    shape.extend([4, 3]);
    Ok((array(py, x.data, shape)?, report, converged))
}

/// One correlator as (sink, kind, source gamma, sink gamma, momentum, values).
type CorrelatorRow<'py> = (String, String, String, String, [i64; 3], Bound<'py, PyAny>);

/// The 12-column propagator of a point (wall, Gaussian) source: (S `[LT, LZ, LY, LX, 4, 3,
/// 4, 3]`, the report as JSON, the correlators as rows (sink, kind, source gamma, sink
/// gamma, momentum, values)).
#[pyfunction]
#[pyo3(signature = (options, gauge_path, links, format, reunitarise, accept_unchecked, progress))]
#[allow(clippy::too_many_arguments)]
fn propagator<'py>(
    py: Python<'py>,
    options: &str,
    gauge_path: Option<PathBuf>,
    links: Option<PyReadonlyArrayDyn<'py, Complex64>>,
    format: &str,
    reunitarise: bool,
    accept_unchecked: bool,
    progress: bool,
) -> PyResult<(Bound<'py, PyAny>, String, Vec<CorrelatorRow<'py>>)> {
    let table = options_of(options)?;
    let gauge = gauge_input(gauge_path, links, format, reunitarise, accept_unchecked)?;
    qcd_solve::report::progress::set_quiet(!progress);
    let (out, dims) = py
        .detach(|| {
            in_pool(&table, || {
                let (cfg, problem) = embed::prepare(&table, gauge, None, "qcd_solve.propagator")?;
                Ok((embed::propagator(&cfg, &problem)?, problem.lattice.dims))
            })
        })
        .map_err(raise)?;
    let report = serde_json::to_string(&out.report).map_err(|e| bad("report", e.to_string()))?;
    let volume: usize = dims.iter().product();
    let data = py.detach(|| interleave(&out.columns, volume));
    let mut shape = site_shape(dims);
    shape.extend([4, 3, 4, 3]);
    let names = qcd_solve::measure::GAMMA_NAMES;
    let mut rows = Vec::new();
    for (sink, mesons, nucleons) in out.correlators {
        for (kind, list) in [("meson", mesons), ("nucleon", nucleons)] {
            for c in list {
                let n = c.values.len();
                rows.push((
                    sink.clone(),
                    kind.to_string(),
                    names[c.source_gamma].to_string(),
                    names[c.sink_gamma].to_string(),
                    c.momentum,
                    array(py, c.values, vec![n])?,
                ));
            }
        }
    }
    Ok((array(py, data, shape)?, report, rows))
}

/// The columns `[k][site][s][c]` (k = 3 s' + c') as `[site][s][c][s'][c']`.
fn interleave(columns: &[SpinorField], volume: usize) -> Vec<Complex64> {
    let mut out = vec![Complex64::new(0.0, 0.0); volume * 144];
    for (k, col) in columns.iter().enumerate() {
        for (i, z) in col.data.iter().enumerate() {
            out[i * 12 + k] = *z;
        }
    }
    out
}

/// The library's version.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add_function(wrap_pyfunction!(read_gauge, m)?)?;
    m.add_function(wrap_pyfunction!(solve, m)?)?;
    m.add_function(wrap_pyfunction!(propagator, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    Ok(())
}
