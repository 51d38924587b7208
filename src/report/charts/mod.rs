//! Charts as SVG and PNG (plotters, default features off, with the DejaVu Sans font
//! embedded so no system font is needed): horizontal bar charts (speed-up and GFLOP/s per
//! version) and line charts (scaling, plaquette history, log-scale residual histories).
//! Every chart is titled with what it compares and, on a second line, the lattice, the
//! device and the date (`Context`); its axes are labelled by `ticks`. Every file is
//! rendered to a temporary name and renamed.

use crate::error::{Error, Result};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

mod bars;
mod lines;
pub mod ticks;

const FONT: &str = "sans-serif";
/// Every chart's size in pixels (the PNG's; the SVG's view box).
pub const SIZE: (u32, u32) = (1000, 600);

fn ensure_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular())
            .unwrap_or_else(|_| panic!("the embedded DejaVu Sans font is a valid TTF"));
    });
}

fn chart_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::format(path, format!("cannot draw chart: {e}"))
}

/// What a chart is of: the run's lattice, the device that measured it and the date, the
/// second line of every chart's title.
#[derive(Clone, Debug, PartialEq)]
pub struct Context {
    /// "16x16x16x32", or a longer phrase ("32x32x32x64 per GPU").
    pub lattice: String,
    pub device: String,
    /// The day of the measurement, YYYY-MM-DD (UTC).
    pub date: String,
}

impl Context {
    /// The title's second line: "lattice 16x16x16x32, NVIDIA H100 80GB HBM3, 2026-11-23".
    pub fn line(&self) -> String {
        format!("lattice {}, {}, {}", self.lattice, self.device, self.date)
    }
}

/// Today's date in UTC, YYYY-MM-DD (a chart drawn by the command that measured it).
pub fn today() -> String {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    stamp.get(..10).unwrap_or(&stamp).to_string()
}

/// How an axis is scaled and labelled (`ticks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    /// Linear, labels in the fewest digits (`ticks::plain`).
    Linear,
    /// Linear from 0 (or below, for negative values): a ratio (speed-up, efficiency)
    /// whose distance from the ideal is seen at its true size.
    FromZero,
    /// Linear over whole numbers (iterations, sweeps, GPUs): ticks at whole numbers only,
    /// labelled as such (`ticks::count`).
    Count,
    /// Logarithmic, labels as powers of ten (`ticks::log`).
    Log,
}

/// One line of a line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// A reference drawn for comparison (ideal scaling): dashed grey, no markers.
    pub reference: bool,
    /// Points that did not reach their goal (a solve stopped before the tolerance):
    /// hollow markers, no line.
    pub stopped: bool,
}

impl Series {
    /// A measured series.
    pub fn measured(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            reference: false,
            stopped: false,
        }
    }

    /// Points that stopped short (`stopped` true).
    pub fn stopped(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            stopped: true,
            ..Series::measured(name, points)
        }
    }

    /// A reference series (`reference` true).
    pub fn reference(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            reference: true,
            ..Series::measured(name, points)
        }
    }
}

/// Series that lie on one another (the same x values, every y within `rel` of the
/// first's) merged into one, named by every member's name joined by ", ": a legend of
/// twelve entries over four visible curves becomes four entries. Order: first member's.
pub fn merge_identical(series: Vec<Series>, rel: f64) -> Vec<Series> {
    let same = |a: &Series, b: &Series| {
        (a.reference, a.stopped) == (b.reference, b.stopped)
            && a.points.len() == b.points.len()
            && a.points
                .iter()
                .zip(&b.points)
                .all(|(p, q)| p.0 == q.0 && (p.1 - q.1).abs() <= rel * p.1.abs().max(q.1.abs()))
    };
    let mut out: Vec<Series> = Vec::new();
    for s in series {
        match out.iter_mut().find(|o| same(o, &s)) {
            Some(o) => {
                o.name.push_str(", ");
                o.name.push_str(&s.name);
            }
            None => out.push(s),
        }
    }
    out
}

/// A simple description of a chart, drawn identically on both backends. `title` says what
/// is compared; `context` (`Context::line`) what it was measured on.
pub enum Chart<'a> {
    /// One horizontal bar per label (labels on the left, each bar's value at its end);
    /// `failed` labels (false) are drawn as a grey stub marked "failed", not as results.
    Bars {
        title: &'a str,
        context: &'a str,
        value_label: &'a str,
        bars: &'a [(String, f64, bool)],
    },
    /// One line per series over x; the legend beside the plot. Series of at most
    /// `MARKED_POINTS` points get a marker at every point (the measured points), longer
    /// ones a marker every few points so that each curve is told apart in grey too.
    Lines {
        title: &'a str,
        context: &'a str,
        x_label: &'a str,
        x_axis: Axis,
        y_label: &'a str,
        y_axis: Axis,
        series: &'a [Series],
    },
}

/// A series of at most this many points gets a marker at each.
pub const MARKED_POINTS: usize = 40;

fn draw_on<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    chart: &Chart,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (title, context) = match chart {
        Chart::Bars { title, context, .. } | Chart::Lines { title, context, .. } => {
            (*title, *context)
        }
    };
    let area = root
        .margin(8, 0, 0, 0)
        .titled(title, (FONT, 22))
        .map_err(|e| e.to_string())?
        .titled(context, (FONT, 15).into_font().color(&RGBColor(80, 80, 80)))
        .map_err(|e| e.to_string())?;
    match chart {
        Chart::Bars {
            value_label, bars, ..
        } => bars::draw(&area, value_label, bars)?,
        Chart::Lines {
            x_label,
            x_axis,
            y_label,
            y_axis,
            series,
            ..
        } => lines::draw(&area, (x_label, *x_axis), (y_label, *y_axis), series)?,
    }
    root.present().map_err(|e| e.to_string())
}

/// Draw `chart` to `stem.svg` and `stem.png` (parent folders created); returns the paths.
pub fn draw(stem: &Path, chart: &Chart) -> Result<Vec<PathBuf>> {
    ensure_font();
    if let Some(dir) = stem.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    // Appended, not replaced: a stem may hold dots ("b6.0.plaquette").
    let svg = PathBuf::from(format!("{}.svg", stem.display()));
    let png = PathBuf::from(format!("{}.png", stem.display()));
    let mut text = String::new();
    draw_on(
        SVGBackend::with_string(&mut text, SIZE).into_drawing_area(),
        chart,
    )
    .map_err(|e| chart_err(&svg, e))?;
    crate::io::write_atomic(&svg, text.as_bytes())?;

    // Drawn into memory and written like every other output (an exclusive temporary in
    // the target's folder, renamed over the target: `io::staged`), never by the plotting
    // library under a name of its own.
    let (w, h) = SIZE;
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    draw_on(
        BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area(),
        chart,
    )
    .map_err(|e| chart_err(&png, e))?;
    let mut encoded = Vec::new();
    image::ImageEncoder::write_image(
        image::codecs::png::PngEncoder::new(&mut encoded),
        &rgb,
        w,
        h,
        image::ColorType::Rgb8,
    )
    .map_err(|e| chart_err(&png, e.to_string()))?;
    crate::io::write_atomic(&png, &encoded)?;
    Ok(vec![svg, png])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Twelve histories of which three pairs agree to 1e-9 and one differs by 1%: the
    /// identical ones become one entry named by both, the different one stays apart.
    #[test]
    fn identical_series_merge_into_one_legend_entry() {
        let h = |scale: f64| -> Vec<(f64, f64)> {
            (0..5).map(|k| (k as f64, scale * 0.5f64.powi(k))).collect()
        };
        let series = vec![
            Series::measured("a", h(1.0)),
            Series::measured("b", h(1.0 + 1e-9)),
            Series::measured("c", h(1.01)),
            Series::reference("ideal", h(1.0)),
            Series::measured("d", h(1.0)[..4].to_vec()),
        ];
        let merged = merge_identical(series, 1e-3);
        let names: Vec<&str> = merged.iter().map(|s| s.name.as_str()).collect();
        // A reference never merges with a measured series; another length is another curve.
        assert_eq!(names, ["a, b", "c", "ideal", "d"]);
    }

    /// Expected: the format `Context::line` documents.
    #[test]
    fn the_context_line_names_lattice_device_and_date() {
        let c = Context {
            lattice: "16x16x16x32".into(),
            device: "NVIDIA H100 80GB HBM3".into(),
            date: "2026-11-23".into(),
        };
        assert_eq!(
            c.line(),
            "lattice 16x16x16x32, NVIDIA H100 80GB HBM3, 2026-11-23"
        );
        // Today's date has the YYYY-MM-DD shape.
        let t = today();
        assert_eq!(t.len(), 10, "{t}");
        assert_eq!((&t[4..5], &t[7..8]), ("-", "-"));
    }

    /// The PNG is a whole image of `SIZE` (decoded back by the `image` crate), and the
    /// folder holds the two charts and nothing else: no temporary is left behind.
    #[test]
    fn charts_are_whole_files_with_no_temporary_left() {
        let d = tempfile::tempdir().unwrap();
        let bars = [("a".to_string(), 1.0, false), ("b".to_string(), 2.0, true)];
        let chart = Chart::Bars {
            title: "t",
            context: "c",
            value_label: "y",
            bars: &bars,
        };
        let files = draw(&d.path().join("c"), &chart).unwrap();
        assert_eq!(files.len(), 2);
        let png = image::load_from_memory(&std::fs::read(&files[1]).unwrap()).unwrap();
        assert_eq!((png.width(), png.height()), SIZE);
        let mut names: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["c.png", "c.svg"]);
    }
}
