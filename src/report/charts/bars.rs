//! Horizontal bar charts: one bar per label, the labels left of the bars (readable
//! whatever their length and number), each bar's value written at its end.

use super::{ticks, FONT};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// A bar's value as written at its end: three significant figures, whole above 100.
pub(super) fn value_text(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Draw `bars` (label, value, valid) into `area`, the first bar at the top.
pub(super) fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    value_label: &str,
    bars: &[(String, f64, bool)],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let n = bars.len().max(1);
    // Room right of the longest bar for its value.
    let xmax = bars
        .iter()
        .filter(|b| b.2 && b.1.is_finite())
        .map(|b| b.1)
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    // About 8 pixels a character at the labels' size, within a third of the width.
    let longest = bars.iter().map(|b| b.0.chars().count()).max().unwrap_or(1);
    let label_width = (longest as u32 * 8 + 16).clamp(60, area.dim_in_pixel().0 / 3);
    // Segment j from the bottom holds bar n-1-j: the table's first row at the top.
    let label = |j: usize| bars.get(n - 1 - j).map(|b| b.0.clone()).unwrap_or_default();
    let mut c = ChartBuilder::on(area)
        .margin(16)
        .margin_right(40)
        .x_label_area_size(50)
        .y_label_area_size(label_width)
        .build_cartesian_2d(0.0..xmax, (0..n - 1).into_segmented())
        .map_err(|e| e.to_string())?;
    c.configure_mesh()
        .disable_y_mesh()
        .light_line_style(WHITE)
        .x_desc(value_label)
        .x_label_formatter(&|v| ticks::plain(*v))
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(j) => label(*j),
            _ => String::new(),
        })
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (_, v, ok)) in bars.iter().enumerate() {
        let j = n - 1 - i;
        let (style, length) = if *ok && v.is_finite() {
            (RGBColor(31, 119, 180).mix(0.8).filled(), *v)
        } else {
            (RGBColor(170, 170, 170).filled(), xmax * 0.03)
        };
        let mut bar = Rectangle::new(
            [
                (0.0, SegmentValue::Exact(j)),
                (length, SegmentValue::Exact(j + 1)),
            ],
            style,
        );
        bar.set_margin(4, 4, 0, 0);
        c.draw_series(std::iter::once(bar))
            .map_err(|e| e.to_string())?;
        let text = if *ok && v.is_finite() {
            value_text(*v)
        } else {
            "failed".to_string()
        };
        let style = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        c.draw_series(std::iter::once(Text::new(
            text,
            (length + xmax * 0.01, SegmentValue::CenterOf(j)),
            style,
        )))
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}
