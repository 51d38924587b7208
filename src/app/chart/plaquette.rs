//! The gauge generation's chart: the plaquette per sweep (total, spatial, temporal), and
//! the CSV of the history that lets it be drawn again.

use super::{context, Given, Table};
use crate::error::Result;
use crate::report::charts::{self, Axis, Chart, Context, Series};
use std::path::{Path, PathBuf};

/// One sweep's plaquettes.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPlaquette {
    pub sweep: usize,
    pub total: f64,
    pub spatial: f64,
    pub temporal: f64,
}

/// `<stem>.svg/.png`: the plaquettes per sweep; `run` says which generation ("beta 6,
/// cold start").
pub fn plaquette_chart(
    sweeps: &[SweepPlaquette],
    run: &str,
    ctx: &Context,
    stem: &Path,
) -> Result<Vec<PathBuf>> {
    let series = |name: &str, f: fn(&SweepPlaquette) -> f64| {
        Series::measured(
            name,
            sweeps.iter().map(|s| (s.sweep as f64, f(s))).collect(),
        )
    };
    charts::draw(
        stem,
        &Chart::Lines {
            title: &format!("Plaquette per heatbath sweep, {run}: total, spatial and temporal"),
            context: &ctx.line(),
            x_label: "sweep",
            x_axis: Axis::Count,
            y_label: "plaquette (Re tr U_p / 3)",
            y_axis: Axis::Linear,
            // The total (the mean of the other two) last, drawn over them.
            series: &[
                series("spatial", |s| s.spatial),
                series("temporal", |s| s.temporal),
                series("total", |s| s.total),
            ],
        },
    )
}

/// The history as CSV (<stem>.plaquette.csv): run, sweep, total, spatial, temporal.
pub fn plaquette_csv(sweeps: &[SweepPlaquette], run: &str) -> Result<String> {
    crate::report::csv::table(
        &["run", "sweep", "total", "spatial", "temporal"],
        sweeps.iter().map(|s| {
            vec![
                run.to_string(),
                s.sweep.to_string(),
                s.total.to_string(),
                s.spatial.to_string(),
                s.temporal.to_string(),
            ]
        }),
    )
}

/// `qcd-solve chart plaquette <stem>.plaquette.csv`.
pub fn from(table: &Table, given: &Given, stem: &Path) -> Result<Vec<PathBuf>> {
    let sweeps = (0..table.len())
        .map(|i| {
            Ok(SweepPlaquette {
                sweep: table.number(i, "sweep")? as usize,
                total: table.number(i, "total")?,
                spatial: table.number(i, "spatial")?,
                temporal: table.number(i, "temporal")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let run = table.constant("run")?.unwrap_or_else(|| "quenched".into());
    plaquette_chart(&sweeps, &run, &context(given, table, None)?, stem)
}
