//! The ablation's charts: speed-up and GFLOP/s per kernel version (horizontal bars), and
//! the residual history of each version's solve (one line per distinct curve), with the
//! residual histories' CSV that lets them be drawn again.

use super::{context, Given, Table};
use crate::error::Result;
use crate::report::charts::{self, Axis, Chart, Context, Series};
use std::path::{Path, PathBuf};

/// One kernel version's row of ablation.csv, as the bar charts need it.
#[derive(Clone, Debug, PartialEq)]
pub struct VersionBars {
    pub version: String,
    pub valid: bool,
    pub speedup: f64,
    pub gflops_1320: f64,
    pub gflops_own: f64,
}

/// Histories that differ by at most this (relative, at every iteration) are one curve:
/// on a log axis of about 40 pixels a decade, 1% is a tenth of a pixel (the half-double
/// variants of one solver differ by up to 0.5%).
pub const SAME_CURVE: f64 = 1e-2;

/// speedup, gflops and gflops_own (.svg, .png) in `out`; `cpu` says what the speed-up is
/// against ("16 threads"), if known.
pub fn version_charts(
    rows: &[VersionBars],
    cpu: Option<&str>,
    ctx: &Context,
    out: &Path,
) -> Result<Vec<PathBuf>> {
    let bars = |f: &dyn Fn(&VersionBars) -> f64| -> Vec<(String, f64, bool)> {
        rows.iter()
            .map(|x| (x.version.clone(), f(x), x.valid))
            .collect()
    };
    let line = ctx.line();
    let against = cpu.map_or_else(
        || "the CPU solve".to_string(),
        |c| format!("the CPU solve ({c})"),
    );
    let mut files = charts::draw(
        &out.join("speedup"),
        &Chart::Bars {
            title: &format!("Time to solution: speed-up of each kernel version over {against}"),
            context: &line,
            value_label: "speed-up (CPU time / GPU time, higher is faster)",
            bars: &bars(&|x| x.speedup),
        },
    )?;
    files.extend(charts::draw(
        &out.join("gflops"),
        &Chart::Bars {
            title: "Stencil GFLOP/s of each kernel version (1320 flops a site)",
            context: &line,
            value_label: "GFLOP/s",
            bars: &bars(&|x| x.gflops_1320),
        },
    )?);
    files.extend(charts::draw(
        &out.join("gflops_own"),
        &Chart::Bars {
            title: "Stencil GFLOP/s of each kernel version (its own flop count)",
            context: &line,
            value_label: "GFLOP/s",
            bars: &bars(&|x| x.gflops_own),
        },
    )?);
    Ok(files)
}

/// residuals (.svg, .png) in `out`: ||r|| / ||b|| per iteration, one line per distinct
/// history (`SAME_CURVE`), named by every version that follows it.
pub fn residual_chart(
    histories: &[(String, Vec<f64>)],
    ctx: &Context,
    out: &Path,
) -> Result<Vec<PathBuf>> {
    let series: Vec<Series> = histories
        .iter()
        .map(|(name, h)| {
            Series::measured(
                name.clone(),
                h.iter().enumerate().map(|(k, &y)| (k as f64, y)).collect(),
            )
        })
        .collect();
    let series = charts::merge_identical(series, SAME_CURVE);
    charts::draw(
        &out.join("residuals"),
        &Chart::Lines {
            title:
                "Residual history of each version's solve (versions on one curve listed together)",
            context: &ctx.line(),
            x_label: "iteration",
            x_axis: Axis::Count,
            y_label: "||r|| / ||b||",
            y_axis: Axis::Log,
            series: &series,
        },
    )
}

/// The residual histories as CSV (residuals.csv): series, iteration, residual.
pub fn residuals_csv(histories: &[(String, Vec<f64>)]) -> Result<String> {
    crate::report::csv::table(
        &["series", "iteration", "residual"],
        histories.iter().flat_map(|(name, h)| {
            h.iter()
                .enumerate()
                .map(move |(k, y)| vec![name.clone(), k.to_string(), format!("{y:e}")])
        }),
    )
}

/// `qcd-solve chart ablate ablation.csv`.
pub fn versions_from(table: &Table, given: &Given, out: &Path) -> Result<Vec<PathBuf>> {
    let rows = (0..table.len())
        .map(|i| {
            Ok(VersionBars {
                version: table.text(i, "version")?.to_string(),
                valid: table.flag(i, "valid")?,
                speedup: table.number(i, "speedup_over_cpu")?,
                gflops_1320: table.number(i, "gflops_model_1320")?,
                gflops_own: table.number(i, "gflops_own_count")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let ctx = context(given, table, None)?;
    let cpu = match &given.cpu {
        Some(c) => Some(c.clone()),
        None => table.constant("cpu")?,
    };
    version_charts(&rows, cpu.as_deref(), &ctx, out)
}

/// `qcd-solve chart residuals residuals.csv`.
pub fn residuals_from(table: &Table, given: &Given, out: &Path) -> Result<Vec<PathBuf>> {
    let mut histories: Vec<(String, Vec<f64>)> = Vec::new();
    for i in 0..table.len() {
        let name = table.text(i, "series")?;
        let (k, y) = (table.number(i, "iteration")?, table.number(i, "residual")?);
        let h = match histories.iter_mut().find(|(n, _)| n == name) {
            Some((_, h)) => h,
            None => {
                histories.push((name.to_string(), Vec::new()));
                &mut histories.last_mut().expect("just pushed").1
            }
        };
        if k != h.len() as f64 {
            return Err(crate::Error::format(
                &table.path,
                format!("row {}: series {name:?} skips to iteration {k}", i + 2),
            ));
        }
        h.push(y);
    }
    residual_chart(&histories, &context(given, table, None)?, out)
}
