//! The kappa scan's charts: iterations and time to solution against kappa, one line per
//! method, on log axes (Krylov iterations grow like 1 / (kappa_c - kappa)).

use super::{context, Given, Table};
use crate::error::Result;
use crate::report::charts::{self, Axis, Chart, Context, Series};
use std::path::{Path, PathBuf};

/// One solve of the scan, as the charts need it.
#[derive(Clone, Debug, PartialEq)]
pub struct KappaPoint {
    pub method: String,
    pub kappa: f64,
    pub converged: bool,
    pub iterations: f64,
    /// Set-up plus solve.
    pub seconds: f64,
}

/// One series per method over kappa of the converged points, then one of each method's
/// points that stopped before the tolerance (hollow markers at where they stopped).
fn per_method(points: &[KappaPoint], y: impl Fn(&KappaPoint) -> f64) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for p in points.iter().filter(|p| p.converged) {
        match out.iter_mut().find(|s| s.name == p.method) {
            Some(s) => s.points.push((p.kappa, y(p))),
            None => out.push(Series::measured(p.method.clone(), vec![(p.kappa, y(p))])),
        }
    }
    for p in points.iter().filter(|p| !p.converged) {
        let name = format!("{}: stopped, not converged", p.method);
        match out.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((p.kappa, y(p))),
            None => out.push(Series::stopped(name, vec![(p.kappa, y(p))])),
        }
    }
    out
}

/// `<stem>-iterations` and `<stem>-time` (.svg, .png).
pub fn kappa_charts(points: &[KappaPoint], ctx: &Context, stem: &Path) -> Result<Vec<PathBuf>> {
    let named = |suffix: &str| PathBuf::from(format!("{}-{suffix}", stem.display()));
    let line = ctx.line();
    let mut files = charts::draw(
        &named("iterations"),
        &Chart::Lines {
            title: "Iterations against kappa, per method (hollow: stopped short of the tolerance)",
            context: &line,
            x_label: "kappa",
            x_axis: Axis::Linear,
            y_label: "iterations",
            y_axis: Axis::Log,
            series: &per_method(points, |p| p.iterations),
        },
    )?;
    files.extend(charts::draw(
        &named("time"),
        &Chart::Lines {
            title: "Time to solution against kappa, per method (mg: set-up included)",
            context: &line,
            x_label: "kappa",
            x_axis: Axis::Linear,
            y_label: "seconds",
            y_axis: Axis::Log,
            series: &per_method(points, |p| p.seconds),
        },
    )?);
    Ok(files)
}

/// `qcd-solve chart kappa-scan kappa-scan.csv`.
pub fn from(table: &Table, given: &Given, stem: &Path) -> Result<Vec<PathBuf>> {
    let points = (0..table.len())
        .map(|i| {
            Ok(KappaPoint {
                method: table.text(i, "method")?.to_string(),
                kappa: table.number(i, "kappa")?,
                converged: table.flag(i, "converged")?,
                iterations: table.number(i, "iterations")?,
                seconds: table.number(i, "setup_seconds")? + table.number(i, "solve_seconds")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    kappa_charts(&points, &context(given, table, None)?, stem)
}
