//! `kobo load --html FILE`: the report as one self-contained HTML page (no
//! script, no style sheet or font fetched, plots drawn as inline SVG): the
//! totals, the table per operation, errors, the audit, and per operation
//! two plots over the run: latency (p50 and p99 per second) and throughput
//! (successes and errors per second).

use std::fmt::Write;

use super::report::{Point, Report};

/// Escapes text for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const W: f64 = 560.0;
const H: f64 = 180.0;
const LEFT: f64 = 78.0;
const BOTTOM: f64 = 24.0;

/// A line plot of `series` (name, colour, y per second) over `seconds`.
fn plot(title: &str, unit: &str, seconds: usize, series: &[(&str, &str, Vec<f64>)]) -> String {
    let max_y = series
        .iter()
        .flat_map(|(_, _, ys)| ys.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let span_x = (seconds.max(2) - 1) as f64;
    let x = |i: usize| LEFT + (W - LEFT - 10.0) * i as f64 / span_x;
    let y = |v: f64| 10.0 + (H - BOTTOM - 10.0) * (1.0 - v / max_y);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<figure><figcaption>{}</figcaption><svg width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img">"#,
        esc(title)
    );
    let _ = write!(
        s,
        r##"<line x1="{LEFT}" y1="{b}" x2="{r}" y2="{b}" stroke="#888"/><line x1="{LEFT}" y1="10" x2="{LEFT}" y2="{b}" stroke="#888"/>"##,
        b = H - BOTTOM,
        r = W - 10.0
    );
    let _ = write!(
        s,
        r#"<text x="{}" y="14" font-size="11" text-anchor="end">{:.2} {}</text><text x="{}" y="{}" font-size="11" text-anchor="end">0</text>"#,
        LEFT - 4.0,
        max_y,
        esc(unit),
        LEFT - 4.0,
        H - BOTTOM
    );
    let _ = write!(
        s,
        r#"<text x="{LEFT}" y="{}" font-size="11">0 s</text><text x="{}" y="{}" font-size="11" text-anchor="end">{} s</text>"#,
        H - 6.0,
        W - 10.0,
        H - 6.0,
        seconds.saturating_sub(1)
    );
    for (k, (name, colour, ys)) in series.iter().enumerate() {
        let points: Vec<String> = ys
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
            points.join(" ")
        );
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" font-size="11" fill="{colour}">{}</text>"#,
            LEFT + 8.0 + 90.0 * k as f64,
            24.0,
            esc(name)
        );
    }
    s.push_str("</svg></figure>");
    s
}

/// Each of the run's `seconds`, with empty seconds as zeros.
fn per_second(seconds: usize, timeline: &[Point], f: impl Fn(&Point) -> f64) -> Vec<f64> {
    let mut out = vec![0.0; seconds];
    for p in timeline {
        if let Some(slot) = out.get_mut(p.second as usize) {
            *slot = f(p);
        }
    }
    out
}

/// The page.
pub fn render(r: &Report) -> String {
    let mut h = String::new();
    h.push_str("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>kobo load report</title><style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th:first-child,td:first-child{text-align:left}figure{display:inline-block;margin:0 1em 1em 0}figcaption{font-weight:bold;font-size:90%}.bad{color:#b00}.good{color:#070}</style></head><body>");
    let how = match (r.rate, r.connections) {
        (Some(rate), _) => format!(
            "open loop at {rate}/s (at most {} in flight)",
            r.max_in_flight.unwrap_or(0)
        ),
        (_, Some(c)) => format!("closed loop, {c} connections"),
        _ => String::new(),
    };
    let _ = write!(
        h,
        "<h1>kobo load</h1><p>{}, {:.1} s. {} operations succeeded ({}/s), {} errors ({:.2}%), {} started late (at most {} ms), {} not sent. Latency is counted from each operation's intended start.</p>",
        esc(&how),
        r.seconds,
        r.ops,
        r.ops_per_sec,
        r.errors,
        r.error_rate * 100.0,
        r.late,
        r.max_send_delay_ms,
        r.unsent
    );
    h.push_str("<table><tr><th>operation</th><th>weight</th><th>ok</th><th>errors</th><th>ops/s</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th></tr>");
    for (name, o) in &r.operations {
        let l = o.latency;
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            r.mix.get(name).copied().unwrap_or(0),
            o.ok,
            o.errors,
            o.ops_per_sec,
            l.p50_ms,
            l.p90_ms,
            l.p99_ms,
            l.p999_ms,
            l.max_ms
        );
    }
    h.push_str("</table>");
    if !r.errors_by.is_empty() {
        h.push_str("<h2>Errors</h2><table><tr><th>operation</th><th>error</th><th>count</th></tr>");
        for (name, o) in &r.operations {
            for (e, n) in &o.errors_by {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{n}</td></tr>",
                    esc(name),
                    esc(e)
                );
            }
        }
        h.push_str("</table>");
    }
    if let Some(w) = &r.webhooks {
        let _ = write!(
            h,
            "<h2>Webhooks</h2><p>{} deliveries received, {} verified, {} with a bad signature, {} distinct events.</p>",
            w.received, w.verified, w.bad_signature, w.events
        );
    }
    if let Some(a) = &r.audit {
        let _ = write!(
            h,
            "<h2>Audit: <span class=\"{}\">{}</span></h2><pre>{}</pre>",
            if a.passed { "good" } else { "bad" },
            if a.passed { "passed" } else { "failed" },
            esc(&a.text())
        );
    }
    h.push_str("<h2>Over time</h2><p>Per second of the run, by completion time (the last second may be partial).</p>");
    // One time axis for every operation: the whole run.
    let seconds = r
        .operations
        .values()
        .filter_map(|o| o.timeline.last())
        .map(|p| p.second as usize + 1)
        .max()
        .unwrap_or(0);
    for (name, o) in &r.operations {
        let _ = write!(h, "<h3>{}</h3>", esc(name));
        h.push_str(&plot(
            &format!("{name}: latency per second"),
            "ms",
            seconds,
            &[
                (
                    "p50",
                    "#1f77b4",
                    per_second(seconds, &o.timeline, |p| p.p50_ms),
                ),
                (
                    "p99",
                    "#d62728",
                    per_second(seconds, &o.timeline, |p| p.p99_ms),
                ),
            ],
        ));
        h.push_str(&plot(
            &format!("{name}: throughput"),
            "/s",
            seconds,
            &[
                (
                    "ok/s",
                    "#2ca02c",
                    per_second(seconds, &o.timeline, |p| p.ok as f64),
                ),
                (
                    "errors/s",
                    "#d62728",
                    per_second(seconds, &o.timeline, |p| p.errors as f64),
                ),
            ],
        ));
    }
    h.push_str("</body></html>\n");
    h
}
