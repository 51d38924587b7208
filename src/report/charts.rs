//! Charts as SVG and PNG (plotters, default features off, with the DejaVu Sans font
//! embedded so no system font is needed): bar charts (speed-up and GFLOP/s per version),
//! line charts (scaling, plaquette history) and log-scale residual histories.
//! Every file is rendered to a temporary name and renamed.

use crate::error::{Error, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};
use std::sync::Once;

const FONT: &str = "sans-serif";
const SIZE: (u32, u32) = (900, 540);

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

/// A simple description of a chart, drawn identically on both backends.
pub enum Chart<'a> {
    /// One bar per label; `failed` labels are drawn hatched grey and annotated, not as
    /// results.
    Bars {
        title: &'a str,
        y_label: &'a str,
        bars: &'a [(String, f64, bool)],
    },
    /// One line per series over x; `log_y` for residual histories.
    Lines {
        title: &'a str,
        x_label: &'a str,
        y_label: &'a str,
        series: &'a [(String, Vec<(f64, f64)>)],
        log_y: bool,
    },
}

fn draw_on<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    chart: &Chart,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    match chart {
        Chart::Bars {
            title,
            y_label,
            bars,
        } => {
            let n = bars.len().max(1);
            let ymax = bars
                .iter()
                .filter(|b| b.2)
                .map(|b| b.1)
                .fold(0.0f64, f64::max)
                .max(1e-9)
                * 1.15;
            let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
            let mut c = ChartBuilder::on(&root)
                .caption(*title, (FONT, 24))
                .margin(16)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..ymax)
                .map_err(|e| e.to_string())?;
            c.configure_mesh()
                .disable_x_mesh()
                .y_desc(*y_label)
                .x_labels(n)
                .x_label_formatter(&|v| match v {
                    SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
                    _ => String::new(),
                })
                .label_style((FONT, 15))
                .draw()
                .map_err(|e| e.to_string())?;
            for (i, (_, v, ok)) in bars.iter().enumerate() {
                let (style, height) = if *ok {
                    (BLUE.mix(0.7).filled(), *v)
                } else {
                    (RGBColor(170, 170, 170).filled(), ymax * 0.05)
                };
                let mut bar = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), height),
                    ],
                    style,
                );
                bar.set_margin(0, 0, 6, 6);
                c.draw_series(std::iter::once(bar))
                    .map_err(|e| e.to_string())?;
                let text = if !*ok {
                    "failed".to_string()
                } else if v.abs() >= 100.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.3}")
                };
                let style = TextStyle::from((FONT, 13).into_font())
                    .pos(Pos::new(HPos::Center, VPos::Bottom));
                c.draw_series(std::iter::once(Text::new(
                    text,
                    (SegmentValue::CenterOf(i), height + ymax * 0.01),
                    style,
                )))
                .map_err(|e| e.to_string())?;
            }
        }
        Chart::Lines {
            title,
            x_label,
            y_label,
            series,
            log_y,
        } => {
            let pts = series.iter().flat_map(|s| s.1.iter());
            let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
            for &(x, y) in pts {
                if !y.is_finite() || (*log_y && y <= 0.0) {
                    continue;
                }
                x0 = x0.min(x);
                x1 = x1.max(x);
                y0 = y0.min(y);
                y1 = y1.max(y);
            }
            if x0 > x1 {
                (x0, x1, y0, y1) = (0.0, 1.0, 0.1, 1.0);
            }
            if x1 == x0 {
                x1 = x0 + 1.0;
            }
            if y1 == y0 {
                y1 = y0 * 1.01 + 1e-12;
            }
            let mut builder = ChartBuilder::on(&root);
            builder
                .caption(*title, (FONT, 24))
                .margin(16)
                .x_label_area_size(40)
                .y_label_area_size(80);
            let palette = [
                RGBColor(31, 119, 180),
                RGBColor(255, 127, 14),
                RGBColor(44, 160, 44),
                RGBColor(214, 39, 40),
                RGBColor(148, 103, 189),
                RGBColor(140, 86, 75),
                RGBColor(227, 119, 194),
                RGBColor(127, 127, 127),
                RGBColor(188, 189, 34),
                RGBColor(23, 190, 207),
            ];
            macro_rules! body {
                ($c:expr) => {{
                    let mut c = $c;
                    c.configure_mesh()
                        .x_desc(*x_label)
                        .y_desc(*y_label)
                        .label_style((FONT, 15))
                        .draw()
                        .map_err(|e| e.to_string())?;
                    for (k, (name, data)) in series.iter().enumerate() {
                        let color = palette[k % palette.len()];
                        let data: Vec<(f64, f64)> = data
                            .iter()
                            .copied()
                            .filter(|&(_, y)| y.is_finite() && (!*log_y || y > 0.0))
                            .collect();
                        c.draw_series(LineSeries::new(data, color.stroke_width(2)))
                            .map_err(|e| e.to_string())?
                            .label(name.clone())
                            .legend(move |(x, y)| {
                                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                            });
                    }
                    if series.len() > 1 {
                        c.configure_series_labels()
                            .background_style(WHITE.mix(0.85))
                            .border_style(BLACK)
                            .label_font((FONT, 14))
                            .draw()
                            .map_err(|e| e.to_string())?;
                    }
                }};
            }
            if *log_y {
                body!(builder
                    .build_cartesian_2d(x0..x1, (y0 * 0.8..y1 * 1.25).log_scale())
                    .map_err(|e| e.to_string())?);
            } else {
                let pad = 0.05 * (y1 - y0);
                body!(builder
                    .build_cartesian_2d(x0..x1, (y0 - pad)..(y1 + pad))
                    .map_err(|e| e.to_string())?);
            }
        }
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

    /// The PNG is a whole image of `SIZE` (decoded back by the `image` crate), and the
    /// folder holds the two charts and nothing else: no temporary is left behind.
    #[test]
    fn charts_are_whole_files_with_no_temporary_left() {
        let d = tempfile::tempdir().unwrap();
        let bars = [("a".to_string(), 1.0, false), ("b".to_string(), 2.0, true)];
        let chart = Chart::Bars {
            title: "t",
            y_label: "y",
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
