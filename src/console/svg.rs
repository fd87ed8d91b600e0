//! Line charts as inline SVG, drawn on the server: no script, no library.
//! Colours come from the style sheet (a class per series), text stays in
//! HTML around the chart (so it never stretches with the drawing).

use crate::checkout::esc;

/// One line: its label, its CSS class (`s1`..`s4`), its values (oldest
/// first; `None` is a gap).
pub struct Series<'a> {
    pub label: &'a str,
    pub class: &'static str,
    pub values: Vec<Option<f64>>,
}

const W: f64 = 600.0;
const H: f64 = 140.0;

/// A chart with a caption (title, each series' latest value) and a y scale
/// from 0 to the largest value (at least `min_top`).
pub fn chart(title: &str, unit: &str, series: &[Series], min_top: f64) -> String {
    let top = series
        .iter()
        .flat_map(|s| s.values.iter().flatten().copied())
        .fold(min_top, f64::max);
    let n = series.iter().map(|s| s.values.len()).max().unwrap_or(0);
    let mut lines = String::new();
    let mut legend = String::new();
    for s in series {
        lines.push_str(&polylines(&s.values, n, top, s.class));
        let latest = s
            .values
            .iter()
            .rev()
            .flatten()
            .next()
            .map(|v| format_value(*v))
            .unwrap_or_else(|| "–".into());
        legend.push_str(&format!(
            r#"<li><span class="key {}" aria-hidden="true"></span>{} <strong>{latest}</strong></li>"#,
            s.class,
            esc(s.label)
        ));
    }
    let label = format!(
        "{title}{}",
        if unit.is_empty() {
            String::new()
        } else {
            format!(" ({unit})")
        }
    );
    format!(
        r#"<figure class="chart">
<figcaption><span class="title">{label}</span> <span class="top">max {top}</span><ul class="legend">{legend}</ul></figcaption>
<svg viewBox="0 0 {W} {H}" preserveAspectRatio="none" role="img" aria-label="{label}">
<line class="axis" x1="0" y1="{H}" x2="{W}" y2="{H}"/>
<line class="grid" x1="0" y1="{half}" x2="{W}" y2="{half}"/>
{lines}</svg>
</figure>"#,
        label = esc(&label),
        top = format_value(top),
        half = H / 2.0,
    )
}

/// The polylines of `values` (split at gaps), `n` points across.
fn polylines(values: &[Option<f64>], n: usize, top: f64, class: &str) -> String {
    let mut out = String::new();
    let mut points = String::new();
    let step = if n > 1 { W / (n - 1) as f64 } else { W };
    let offset = n - values.len();
    let flush = |points: &mut String, out: &mut String| {
        // A lone point (between gaps) is drawn as a dot: the segment to
        // itself, with round caps.
        if points.matches(' ').count() == 1 {
            let p = points.clone();
            points.push_str(&p);
        }
        if !points.is_empty() {
            out.push_str(&format!(
                r#"<polyline class="{class}" vector-effect="non-scaling-stroke" points="{}"/>"#,
                points.trim_end()
            ));
            points.clear();
        }
    };
    for (i, v) in values.iter().enumerate() {
        match v {
            Some(v) => {
                let x = (i + offset) as f64 * step;
                let y = H - (v / top).clamp(0.0, 1.0) * (H - 4.0);
                points.push_str(&format!("{x:.1},{y:.1} "));
            }
            None => flush(&mut points, &mut out),
        }
    }
    flush(&mut points, &mut out);
    out
}

/// `12`, `3.5`, `0.25`.
pub fn format_value(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e12 {
        format!("{}", v as i64)
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_scales_to_its_largest_value_and_breaks_at_gaps() {
        let svg = chart(
            "Commits <per> second",
            "/s",
            &[Series {
                label: "a&b",
                class: "s1",
                values: vec![Some(0.0), Some(10.0), None, Some(5.0)],
            }],
            1.0,
        );
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains(r#"points="0.0,140.0 200.0,4.0""#), "{svg}");
        assert!(svg.contains(r#"points="600.0,72.0 600.0,72.0""#), "{svg}");
        assert!(svg.contains("max 10"));
        assert!(svg.contains("Commits &lt;per&gt; second"));
        assert!(svg.contains("a&amp;b <strong>5</strong>"));
        assert!(!svg.contains("style="));
    }
}
