//! The chart of a timed run: achieved bandwidth per kernel and shape, generated and hand-written
//! side by side, with the copy bandwidth measured in the same run as a horizontal line. SVG, drawn
//! with plotters' SVG backend (no font or image library: the viewer lays out the text).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::report::{AbReport, Row};

const GENERATED: RGBColor = RGBColor(31, 119, 180);
const MANUAL: RGBColor = RGBColor(255, 127, 14);
const COPY: RGBColor = RGBColor(214, 39, 40);

/// The chart as SVG text; `Err` when nothing was timed.
pub fn svg(report: &AbReport) -> Result<String, PlotError> {
    let rows: Vec<&Row> = report
        .rows
        .iter()
        .filter(|r| r.gbps(&r.generated).is_some())
        .collect();
    if rows.is_empty() {
        return Err(PlotError::NothingTimed);
    }
    let copy = report.header.copy.first().map(|c| c.gbps);
    let top = rows
        .iter()
        .flat_map(|r| r.versions().into_iter().filter_map(|(_, v)| r.gbps(v)))
        .chain(copy)
        .fold(0.0f64, f64::max)
        * 1.15;
    let width = (160 + 90 * rows.len() as u32).max(640);
    // Rotated category labels: about 7 px per character at 12 px.
    let longest = rows
        .iter()
        .map(|r| r.label().chars().count())
        .max()
        .unwrap_or(0) as u32;
    let labels = 7 * longest + 24;
    let mut out = String::new();
    draw(
        &mut out,
        (width, 420 + labels),
        labels,
        &rows,
        copy,
        top,
        &report.header.provenance.device.name,
    )
    .map_err(|e| PlotError::Draw(e.to_string()))?;
    Ok(out)
}

/// Why there is no chart.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No row was timed.
    #[error("nothing was timed")]
    NothingTimed,
    /// The chart could not be drawn (the plotting library's message).
    #[error("{0}")]
    Draw(String),
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw(
    out: &mut String,
    size: (u32, u32),
    label_area: u32,
    rows: &[&Row],
    copy: Option<f64>,
    top: f64,
    device: &str,
) -> DrawResult {
    let root = SVGBackend::with_string(out, size).into_drawing_area();
    root.fill(&WHITE)?;
    let n = rows.len() as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("wavefuse ab on {device}: achieved bandwidth, generated vs hand-written"),
            ("sans-serif", 18),
        )
        .margin(16)
        .x_label_area_size(label_area)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n, 0f64..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .light_line_style(WHITE.mix(0.0))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .y_desc("GB/s (bytes each input read + each output written once, per launch)")
        .axis_desc_style(("sans-serif", 13))
        .draw()?;
    let bar = |i: usize, left: f64, v: f64, color: RGBColor| {
        Rectangle::new(
            [(i as f64 + left, 0.0), (i as f64 + left + 0.36, v)],
            color.filled(),
        )
    };
    let values = |which: usize| {
        rows.iter().enumerate().filter_map(move |(i, r)| {
            let v = if which == 0 {
                Some(&r.generated)
            } else {
                r.manual_version()
            };
            v.and_then(|v| r.gbps(v)).map(|bw| (i, bw))
        })
    };
    chart
        .draw_series(values(0).map(|(i, bw)| bar(i, 0.12, bw, GENERATED)))?
        .label("generated")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], GENERATED.filled()));
    chart
        .draw_series(values(1).map(|(i, bw)| bar(i, 0.52, bw, MANUAL)))?
        .label("hand-written")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], MANUAL.filled()));
    let small = ("sans-serif", 11)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    for (which, left) in [(0, 0.30), (1, 0.70)] {
        chart
            .draw_series(values(which).map(|(i, bw)| {
                Text::new(format!("{bw:.0}"), (i as f64 + left, bw), small.clone())
            }))?;
    }
    // Say so where a row has no hand-written bar.
    let missing = rows.iter().enumerate().filter_map(|(i, r)| {
        let why = match r.manual_version() {
            None => "none",
            Some(m) if r.gbps(m).is_none() => "not timed",
            Some(_) => return None,
        };
        Some(Text::new(why, (i as f64 + 0.70, 0.0), small.clone()))
    });
    chart.draw_series(missing)?;
    if let Some(c) = copy {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, c), (n, c)],
                COPY.stroke_width(2),
            )))?
            .label(format!("copy bandwidth, same run: {c:.0} GB/s"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], COPY.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    // Category labels under the axis, rotated: kernel@shape names are long.
    let label = ("sans-serif", 12)
        .into_font()
        .transform(FontTransform::Rotate90)
        .color(&BLACK);
    for (i, r) in rows.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&Text::new(r.label(), (x - 6, y + 8), label.clone()))?;
    }
    root.present()?;
    Ok(())
}
