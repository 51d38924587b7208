//! The scaling charts: strong and weak scaling of the split solve over GPUs
//! (scale-strong, scale-weak) and the CPU's thread scaling (scale): a marker at every
//! measured point, whole-number GPU and thread counts, the ideal line dashed.

use super::{context, resolve, Given, Table};
use crate::error::{Error, Result};
use crate::report::charts::{self, Axis, Chart, Context, Series};
use std::path::{Path, PathBuf};

/// One point of scale-ranks.csv.
#[derive(Clone, Debug, PartialEq)]
pub struct RankPoint {
    /// "strong" or "weak".
    pub kind: String,
    pub ranks: usize,
    /// The whole lattice of the point ("32x32x32x128").
    pub lattice: String,
    pub speedup: f64,
    pub efficiency: f64,
}

/// How the split is named in a title (from "t" or "zt", as `--split` takes it, or "z and t").
fn split_words(split: &str) -> String {
    match split {
        "t" => "split along t".to_string(),
        "zt" | "z and t" => "split along z and t".to_string(),
        other => format!("split {other}"),
    }
}

/// scale-strong and scale-weak (.svg, .png) in `out`. The lattice in each title is the
/// first point's (strong: the lattice every count solves; weak: one GPU's share).
pub fn rank_charts(
    points: &[RankPoint],
    split: &str,
    device: &str,
    date: &str,
    out: &Path,
) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for kind in ["strong", "weak"] {
        let pts: Vec<&RankPoint> = points.iter().filter(|p| p.kind == kind).collect();
        let Some(first) = pts.first() else {
            continue;
        };
        let n0 = first.ranks as f64;
        let counts: Vec<String> = pts.iter().map(|p| p.ranks.to_string()).collect();
        let ctx = Context {
            lattice: if kind == "strong" {
                first.lattice.clone()
            } else {
                format!("{} per GPU", first.lattice)
            },
            device: format!("{device}, {} GPUs", counts.join("/")),
            date: date.to_string(),
        };
        let (title, y_label, measured, ideal): (String, &str, Vec<_>, Vec<_>) = if kind == "strong"
        {
            (
                format!(
                    "Strong scaling of the solve, {}: speed-up over {} GPU",
                    split_words(split),
                    first.ranks
                ),
                "speed-up (time on the first count / time)",
                pts.iter().map(|p| (p.ranks as f64, p.speedup)).collect(),
                pts.iter()
                    .map(|p| (p.ranks as f64, p.ranks as f64 / n0))
                    .collect(),
            )
        } else {
            (
                format!(
                    "Weak scaling of the solve, {}: efficiency against {} GPU",
                    split_words(split),
                    first.ranks
                ),
                "efficiency (1 = ideal)",
                pts.iter().map(|p| (p.ranks as f64, p.efficiency)).collect(),
                pts.iter().map(|p| (p.ranks as f64, 1.0)).collect(),
            )
        };
        files.extend(charts::draw(
            &out.join(format!("scale-{kind}")),
            &Chart::Lines {
                title: &title,
                context: &ctx.line(),
                x_label: "GPUs (ranks)",
                x_axis: Axis::Count,
                y_label,
                y_axis: Axis::FromZero,
                series: &[
                    Series::measured("measured", measured),
                    Series::reference("ideal", ideal),
                ],
            },
        )?);
    }
    Ok(files)
}

/// scale (.svg, .png) in `out`: the CPU's speed-up per thread count against the first.
pub fn thread_chart(points: &[(usize, f64)], ctx: &Context, out: &Path) -> Result<Vec<PathBuf>> {
    let n0 = points.first().map_or(1.0, |p| p.0 as f64);
    charts::draw(
        &out.join("scale"),
        &Chart::Lines {
            title: &format!("CPU strong scaling of the solve: speed-up over {n0} thread(s)"),
            context: &ctx.line(),
            x_label: "threads",
            x_axis: Axis::Count,
            y_label: "speed-up (time on the first count / time)",
            y_axis: Axis::FromZero,
            series: &[
                Series::measured(
                    "measured",
                    points.iter().map(|&(n, s)| (n as f64, s)).collect(),
                ),
                Series::reference(
                    "ideal",
                    points
                        .iter()
                        .map(|&(n, _)| (n as f64, n as f64 / n0))
                        .collect(),
                ),
            ],
        },
    )
}

/// A whole number of column `name` in row `i`.
fn count(table: &Table, i: usize, name: &str) -> Result<usize> {
    let v = table.number(i, name)?;
    if v.fract() == 0.0 && v >= 0.0 {
        Ok(v as usize)
    } else {
        Err(Error::format(
            &table.path,
            format!("row {}, column `{name}`: {v} is not a count", i + 2),
        ))
    }
}

/// `qcd-solve chart scale-ranks scale-ranks.csv --split t|zt`.
pub fn ranks_from(table: &Table, given: &Given, out: &Path) -> Result<Vec<PathBuf>> {
    let points = (0..table.len())
        .map(|i| {
            Ok(RankPoint {
                kind: table.text(i, "kind")?.to_string(),
                ranks: count(table, i, "ranks")?,
                lattice: table.text(i, "lattice")?.to_string(),
                speedup: table.number(i, "speedup")?,
                efficiency: table.number(i, "efficiency")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let split = resolve(given.split.as_deref(), table, "split", "--split")?;
    let device = resolve(given.device.as_deref(), table, "device", "--device")?;
    // The lattice is the CSV's; the context checks the date.
    let ctx = context(given, table, Some(points[0].lattice.clone()))?;
    rank_charts(&points, &split, &device, &ctx.date, out)
}

/// `qcd-solve chart scale scale.csv`.
pub fn threads_from(table: &Table, given: &Given, out: &Path) -> Result<Vec<PathBuf>> {
    let points = (0..table.len())
        .map(|i| Ok((count(table, i, "threads")?, table.number(i, "speedup")?)))
        .collect::<Result<Vec<_>>>()?;
    thread_chart(&points, &context(given, table, None)?, out)
}
