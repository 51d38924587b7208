//! Line charts: one line per series, each in its own colour and marker shape (reference
//! series dashed grey), on linear, count or log axes labelled by `ticks`, with the legend
//! in a column beside the plot so that it never covers a curve.

use super::{ticks, Axis, Series, FONT, MARKED_POINTS};
use plotters::coord::Shift;
use plotters::prelude::*;

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];
const REFERENCE: RGBColor = RGBColor(110, 110, 110);
/// A measured series of at most this many points has each value written beside its
/// point.
const VALUED_POINTS: usize = 12;
/// A series of more than this many points is drawn in a one-pixel line.
const THIN_POINTS: usize = 200;
/// Characters per legend line before a name wraps.
const LEGEND_CHARS: usize = 26;

/// The k-th measured series' colour.
fn colour(k: usize) -> RGBColor {
    PALETTE[k % PALETTE.len()]
}

/// Run `$body` with `$m` bound to a function from a point to the marker of shape
/// `$k % 4` (circle, triangle, square, cross) in colour `$c` centred there, filled or
/// (`$hollow`) drawn as an outline.
macro_rules! with_marker {
    ($k:expr, $c:expr, $hollow:expr, |$m:ident| $body:expr) => {{
        let c: RGBColor = $c;
        let st: ShapeStyle = if $hollow {
            c.stroke_width(2)
        } else {
            c.filled()
        };
        match $k % 4 {
            0 => {
                let $m = |p| EmptyElement::at(p) + Circle::new((0, 0), 5, st);
                $body
            }
            1 => {
                let $m = |p| EmptyElement::at(p) + TriangleMarker::new((0, 0), 7, st);
                $body
            }
            2 => {
                let $m = |p| EmptyElement::at(p) + Rectangle::new([(-5, -5), (5, 5)], st);
                $body
            }
            _ => {
                let $m = |p| EmptyElement::at(p) + Cross::new((0, 0), 6, c.stroke_width(2));
                $body
            }
        }
    }};
}

/// Which points of a series of `n` carry a marker: all of a short series; of a long one,
/// every `step`-th, staggered by the series' index so that curves lying close do not
/// stack their markers.
fn marked(n: usize, k: usize) -> impl Fn(usize) -> bool {
    let step = if n <= MARKED_POINTS {
        1
    } else {
        n.div_ceil(12)
    };
    let offset = (k * step / 4) % step;
    move |i| i % step == offset || (step > 1 && i + 1 == n && k == 0)
}

/// `name` broken at spaces into lines of at most `LEGEND_CHARS` characters (a longer
/// word keeps its own line).
fn wrap(name: &str) -> Vec<String> {
    let mut lines: Vec<String> = vec![String::new()];
    for word in name.split(' ') {
        let last = lines.last_mut().expect("one line at least");
        if last.is_empty() {
            last.push_str(word);
        } else if last.chars().count() + 1 + word.chars().count() <= LEGEND_CHARS {
            last.push(' ');
            last.push_str(word);
        } else {
            lines.push(word.to_string());
        }
    }
    lines
}

/// The series' points a chart can place: finite, and positive on a log axis.
fn placeable(s: &Series, y_axis: Axis) -> Vec<(f64, f64)> {
    s.points
        .iter()
        .copied()
        .filter(|&(x, y)| x.is_finite() && y.is_finite() && (y_axis != Axis::Log || y > 0.0))
        .collect()
}

/// Draw the legend of `series` into `area` (entries from the top).
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    series: &[Series],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let font = (FONT, 14).into_font();
    let mut y = 40;
    let mut measured = 0;
    for s in series {
        let (sample, k) = if s.reference {
            (REFERENCE, None)
        } else {
            measured += 1;
            (colour(measured - 1), Some(measured - 1))
        };
        let (x0, x1) = (8, 44);
        if s.stopped {
            // Markers only.
        } else if k.is_some() {
            area.draw(&PathElement::new(
                vec![(x0, y), (x1, y)],
                sample.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?;
        } else {
            for (a, b) in [(x0, x0 + 10), (x0 + 16, x0 + 26), (x0 + 32, x1)] {
                area.draw(&PathElement::new(
                    vec![(a, y), (b, y)],
                    sample.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?;
            }
        }
        if let Some(k) = k.filter(|_| s.points.len() <= THIN_POINTS) {
            with_marker!(k, sample, s.stopped, |m| area.draw(&m(((x0 + x1) / 2, y))))
                .map_err(|e| e.to_string())?;
        }
        for (i, line) in wrap(&s.name).iter().enumerate() {
            area.draw(&Text::new(
                line.clone(),
                (x1 + 8, y - 8 + 17 * i as i32),
                font.clone(),
            ))
            .map_err(|e| e.to_string())?;
        }
        y += 17 * wrap(&s.name).len() as i32 + 10;
    }
    Ok(())
}

/// Draw `series` into `area` with the axes' labels and kinds (x: linear or count; a log
/// or from-zero x is drawn linear).
pub(super) fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (x_label, x_axis): (&str, Axis),
    (y_label, y_axis): (&str, Axis),
    series: &[Series],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let data: Vec<Vec<(f64, f64)>> = series.iter().map(|s| placeable(s, y_axis)).collect();
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in data.iter().flatten() {
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
    // The legend's column: as wide as its longest line, at most a third of the width.
    let plot = if series.len() > 1 {
        let longest = series
            .iter()
            .flat_map(|s| wrap(&s.name))
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(1);
        let width = area.dim_in_pixel().0;
        let legend_width = (longest as u32 * 8 + 64).min(width / 3);
        let (plot, side) = area.split_horizontally(width - legend_width);
        legend(&side, series)?;
        plot
    } else {
        area.clone()
    };
    // A count axis: ticks one or more whole numbers apart (the library's steps are 1, 2
    // or 5 times a power of ten, so at most span + 1 ticks keeps the step at least 1).
    let x_ticks = match x_axis {
        Axis::Count => ((x1 - x0).round() as usize + 1).clamp(2, 11),
        _ => 11,
    };
    let x_fmt = |v: &f64| match x_axis {
        Axis::Count => ticks::count(*v),
        _ => ticks::plain(*v),
    };
    let mut builder = ChartBuilder::on(&plot);
    builder
        .margin(16)
        .margin_right(24)
        .x_label_area_size(50)
        .y_label_area_size(80);
    macro_rules! body {
        ($c:expr, $y_ticks:expr, $y_fmt:expr) => {{
            let mut c = $c;
            c.configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .x_labels(x_ticks)
                .y_labels($y_ticks)
                .x_label_formatter(&x_fmt)
                .y_label_formatter(&$y_fmt)
                .label_style((FONT, 14))
                .axis_desc_style((FONT, 15))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(|e| e.to_string())?;
            let mut measured = 0;
            for (s, pts) in series.iter().zip(&data) {
                if s.reference {
                    c.draw_series(DashedLineSeries::new(
                        pts.clone(),
                        8,
                        6,
                        REFERENCE.stroke_width(2),
                    ))
                    .map_err(|e| e.to_string())?;
                    continue;
                }
                let k = measured;
                measured += 1;
                let col = colour(k);
                if s.stopped {
                    with_marker!(k, col, true, |m| c.draw_series(pts.iter().map(|p| m(*p))))
                        .map_err(|e| e.to_string())?;
                    continue;
                }
                // A long noisy series (a Monte Carlo history) in a thin line, so that
                // the series drawn under it still show.
                let width = if pts.len() > THIN_POINTS { 1 } else { 2 };
                c.draw_series(LineSeries::new(pts.clone(), col.stroke_width(width)))
                    .map_err(|e| e.to_string())?;
                // A Monte Carlo history's markers would only add to its noise.
                let keep = |i| pts.len() <= THIN_POINTS && marked(pts.len(), k)(i);
                let chosen = || {
                    pts.iter()
                        .enumerate()
                        .filter(|(i, _)| keep(*i))
                        .map(|(_, p)| *p)
                };
                with_marker!(k, col, false, |m| c.draw_series(chosen().map(m)))
                    .map_err(|e| e.to_string())?;
                if pts.len() <= VALUED_POINTS {
                    let font = (FONT, 12).into_font().color(&col);
                    c.draw_series(pts.iter().map(|p| {
                        EmptyElement::at(*p) + Text::new(ticks::value(p.1), (7, -18), font.clone())
                    }))
                    .map_err(|e| e.to_string())?;
                }
            }
        }};
    }
    // A margin of 4% each side, so that the first and last markers are whole.
    let x_pad = 0.04 * (x1 - x0);
    let x_range = (x0 - x_pad)..(x1 + x_pad);
    match y_axis {
        Axis::Log => {
            // Every power of ten labelled for up to 12 decades.
            body!(
                builder
                    .build_cartesian_2d(x_range, (y0 * 0.8..y1 * 1.25).log_scale())
                    .map_err(|e| e.to_string())?,
                12,
                |v: &f64| ticks::log(*v)
            );
        }
        Axis::Count | Axis::Linear | Axis::FromZero => {
            if y_axis == Axis::FromZero {
                y0 = y0.min(0.0);
            }
            let pad = 0.06 * (y1 - y0);
            let lo = if y_axis == Axis::FromZero && y0 == 0.0 {
                0.0
            } else {
                y0 - pad
            };
            let hi = y1 + pad;
            let y_ticks = if y_axis == Axis::Count {
                ((hi - lo).round() as usize + 1).clamp(2, 10)
            } else {
                10
            };
            body!(
                builder
                    .build_cartesian_2d(x_range, lo..hi)
                    .map_err(|e| e.to_string())?,
                y_ticks,
                |v: &f64| if y_axis == Axis::Count {
                    ticks::count(*v)
                } else {
                    ticks::plain(*v)
                }
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected: the wrapping rule of `wrap` (at spaces, `LEGEND_CHARS` a line).
    #[test]
    fn legend_names_wrap_at_spaces() {
        assert_eq!(wrap("cr"), ["cr"]);
        let w = wrap("3.0 fused+eo+single, 3.0 fused+eo+single+r12, 3.0 fused+eo+single+r8");
        assert_eq!(
            w,
            [
                "3.0 fused+eo+single, 3.0",
                "fused+eo+single+r12, 3.0",
                "fused+eo+single+r8"
            ]
        );
        assert!(w.iter().all(|l| l.chars().count() <= LEGEND_CHARS));
    }

    /// A short series is marked at every point (the measured points); a long one every
    /// ceil(n / 12)-th point.
    #[test]
    fn short_series_are_marked_at_every_point() {
        let keep = marked(3, 1);
        assert!((0..3).all(&keep));
        let keep = marked(94, 0);
        let n = (0..94).filter(|&i| keep(i)).count();
        // Every 8th of 94 (0, 8, ..., 88: 12 points) and the last.
        assert_eq!(n, 13);
    }
}
