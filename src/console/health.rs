//! The actor health page: the health ring's last minutes plotted as
//! server-drawn SVG, the current per-kind counters (with each kind's last
//! panic message) and the webhook queues per endpoint. The page's script
//! fetches `/console/health/live` (the same fragment, freshly drawn) every
//! few seconds and swaps it in: one drawing, on the server.

use crate::api::route_table::Routes;
use actix_web::{web, HttpRequest, HttpResponse};

use crate::api::State;
use crate::checkout::esc;
use crate::health::{queues, Sample};

use super::svg::{chart, Series};
use super::{html, operator, page, ConsoleData};

/// The window plotted.
pub const WINDOW_SECONDS: usize = 300;

pub fn configure(cfg: &mut Routes) {
    cfg.route("/console/health", web::get().to(show))
        .route("/console/health/live", web::get().to(live));
}

async fn show(req: HttpRequest, state: State, console: ConsoleData) -> HttpResponse {
    let op = match operator(&req, &state, &console).await {
        Ok(op) => op,
        Err(r) => return r,
    };
    let main = format!(
        r#"<p class="hint">The last {m} minutes, one sample a second (the server's wall clock), refreshed every few seconds. The same data: <code>GET /admin/v1/actors</code>, <code>GET /admin/v1/health/history</code>, <code>/metrics</code>.</p>
<div id="health-live" data-src="/console/health/live" aria-live="off">{}</div>"#,
        fragment(&state),
        m = WINDOW_SECONDS / 60,
    );
    html(
        200,
        page(&op, "/console/health", "Actor health", &main, true),
    )
}

/// The live part alone (polled by the page's script).
async fn live(req: HttpRequest, state: State, console: ConsoleData) -> HttpResponse {
    match operator(&req, &state, &console).await {
        Ok(_) => html(200, fragment(&state)),
        Err(_) => HttpResponse::Unauthorized()
            .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
            .finish(),
    }
}

fn series<'a>(
    samples: &[Sample],
    label: &'a str,
    class: &'static str,
    f: impl Fn(&Sample) -> Option<f64>,
) -> Series<'a> {
    Series {
        label,
        class,
        values: samples.iter().map(f).collect(),
    }
}

fn sum(s: &Sample, f: impl Fn(&crate::health::KindSample) -> f64) -> Option<f64> {
    Some(s.kinds.iter().map(f).sum())
}

/// The charts and tables.
pub fn fragment(state: &State) -> String {
    let samples = state.health.history(WINDOW_SECONDS);
    let s = samples.as_slice();
    let charts = [
        chart(
            "Live actors",
            "",
            &[series(s, "all kinds", "s1", |x| sum(x, |k| k.live as f64))],
            1.0,
        ),
        chart(
            "Activations and passivations",
            "/s",
            &[
                series(s, "activations", "s1", |x| {
                    sum(x, |k| k.activations_per_second)
                }),
                series(s, "passivations", "s2", |x| {
                    sum(x, |k| k.passivations_per_second)
                }),
            ],
            1.0,
        ),
        chart(
            "Mailbox depth",
            "messages",
            &[
                series(s, "all mailboxes", "s1", |x| {
                    sum(x, |k| k.mailbox_depth as f64)
                }),
                series(s, "deepest", "s2", |x| {
                    x.kinds
                        .iter()
                        .map(|k| k.mailbox_depth_max as f64)
                        .reduce(f64::max)
                }),
            ],
            1.0,
        ),
        chart(
            "Restarts",
            "per sample",
            &[series(s, "restarts", "s3", |x| {
                sum(x, |k| k.restarts as f64)
            })],
            1.0,
        ),
        chart(
            "Store writer commits",
            "/s",
            &[series(s, "commits", "s1", |x| {
                Some(x.writer.commits_per_second)
            })],
            1.0,
        ),
        chart(
            "Batches per commit",
            "",
            &[series(s, "batches per commit", "s2", |x| {
                x.writer.batches_per_commit
            })],
            1.0,
        ),
        chart(
            "Commit latency",
            "ms",
            &[
                series(s, "p50", "s1", |x| {
                    x.writer.commit_latency_ms.map(|l| l.p50)
                }),
                series(s, "p90", "s2", |x| {
                    x.writer.commit_latency_ms.map(|l| l.p90)
                }),
                series(s, "p99", "s3", |x| {
                    x.writer.commit_latency_ms.map(|l| l.p99)
                }),
            ],
            1.0,
        ),
        chart(
            "Writer queue depth",
            "batches",
            &[series(s, "queued", "s1", |x| {
                Some(x.writer.queue_depth as f64)
            })],
            1.0,
        ),
        chart(
            "Timers",
            "",
            &[
                series(s, "due", "s1", |x| Some(x.timers.due as f64)),
                series(s, "overdue", "s3", |x| Some(x.timers.overdue as f64)),
            ],
            1.0,
        ),
        chart(
            "Webhook deliveries",
            "",
            &[
                series(s, "waiting", "s1", |x| Some(x.webhooks.waiting as f64)),
                series(s, "in flight", "s2", |x| Some(x.webhooks.in_flight as f64)),
                series(s, "failing", "s3", |x| Some(x.webhooks.failing as f64)),
            ],
            1.0,
        ),
        chart(
            "Event stream subscribers",
            "",
            &[series(s, "subscribers", "s4", |x| {
                Some(x.stream_subscribers as f64)
            })],
            1.0,
        ),
    ];
    format!(
        r#"<section aria-labelledby="charts-title"><h2 id="charts-title">Over the last minutes</h2><div class="charts">{}</div></section>
{}
{}"#,
        charts.concat(),
        kinds_table(state),
        endpoints_table(state),
    )
}

fn kinds_table(state: &State) -> String {
    let mut rows = String::new();
    for k in state.kobo.actor_health() {
        let panic = k
            .last_panic
            .as_deref()
            .map(|p| format!("<code>{}</code>", esc(p)))
            .unwrap_or_else(|| "–".into());
        rows.push_str(&format!(
            "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"wrap\">{panic}</td></tr>",
            esc(k.kind),
            k.live,
            k.mailbox_depth,
            k.mailbox_depth_max,
            k.mailbox_capacity,
            k.activations,
            k.passivations,
            k.restarts,
        ));
    }
    format!(
        r#"<section aria-labelledby="kinds-title"><h2 id="kinds-title">Actors by kind (since start)</h2>
<div class="scroll" tabindex="0" role="region" aria-labelledby="kinds-title"><table>
<thead><tr><th scope="col">Kind</th><th scope="col">Live</th><th scope="col">Mailbox depth</th><th scope="col">Deepest</th><th scope="col">Capacity</th><th scope="col">Activations</th><th scope="col">Passivations</th><th scope="col">Restarts</th><th scope="col">Last panic</th></tr></thead>
<tbody>{rows}</tbody></table></div></section>"#
    )
}

fn endpoints_table(state: &State) -> String {
    let (list, truncated) = match queues(&state.kobo) {
        Ok(q) => q,
        Err(e) => {
            return format!(
                r#"<p class="error" role="alert">The webhook queues could not be read: {}</p>"#,
                esc(&e.message)
            )
        }
    };
    let timers = match kobo_actors::timers::timer_backlog(&state.kobo, state.kobo.clock.now()) {
        Ok(t) => format!(
            "<p>Timers due now: <strong>{}</strong>, overdue (due over {} s ago): <strong>{}</strong>. Event stream subscribers: <strong>{}</strong>.</p>",
            t.due,
            kobo_actors::timers::OVERDUE_AFTER_SECS,
            t.overdue,
            crate::health::stream_subscribers(&state.kobo)
        ),
        Err(_) => String::new(),
    };
    if list.is_empty() {
        return format!(
            r#"<section aria-labelledby="queues-title"><h2 id="queues-title">Webhook queues</h2>{timers}<p>No webhook delivery is waiting or in flight.</p></section>"#
        );
    }
    let mut rows = String::new();
    for q in list.iter().take(crate::health::ENDPOINTS_SHOWN) {
        rows.push_str(&format!(
            "<tr><td class=\"wrap\">{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&q.url),
            q.merchant,
            if q.livemode { "live" } else { "test" },
            q.waiting,
            q.in_flight,
            q.failing
        ));
    }
    let more = if truncated || list.len() > crate::health::ENDPOINTS_SHOWN {
        "<p class=\"hint\">Only the busiest endpoints are shown.</p>"
    } else {
        ""
    };
    format!(
        r#"<section aria-labelledby="queues-title"><h2 id="queues-title">Webhook queues</h2>{timers}
<div class="scroll" tabindex="0" role="region" aria-labelledby="queues-title"><table>
<thead><tr><th scope="col">Endpoint</th><th scope="col">Merchant</th><th scope="col">Mode</th><th scope="col">Waiting</th><th scope="col">In flight</th><th scope="col">Failing</th></tr></thead>
<tbody>{rows}</tbody></table></div>{more}</section>"#
    )
}
