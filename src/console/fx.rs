//! FX rates: the current dollar rate, publishing a new one (the operator
//! API's `publish_rate_with`), and the history of the latest rates as an
//! SVG chart and a table.

use crate::api::route_table::Routes;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{Map, Value};

use kobo_actors::fx::recent_rates;

use crate::api::fx::{publish_rate_with, PublishRate};
use crate::api::{ApiError, State};
use crate::checkout::esc;

use super::svg::{chart, Series};
use super::{
    audit, body, error_banner, error_status, html, naira, notice, operator, page, post, see_other,
    ConsoleData, Operator,
};

/// Rates in the history.
pub const HISTORY: usize = 60;

pub fn configure(cfg: &mut Routes) {
    cfg.route("/console/fx", web::get().to(show))
        .route("/console/fx", web::post().to(publish));
}

const NOTICES: &[(&str, &str)] = &[("published", "Rate published.")];

fn fx_page(op: &Operator, state: &State, banner: &str, rate: &str) -> String {
    let rates = recent_rates(&state.kobo, HISTORY).unwrap_or_default();
    let current = rates
        .first()
        .map(|r| {
            format!(
                "<p>Current rate: <strong>{} per US dollar</strong> (<code>{}</code> kobo), published {}.</p>",
                naira(r.rate),
                r.rate,
                r.published_at.format("%Y-%m-%d %H:%M UTC")
            )
        })
        .unwrap_or_else(|| "<p>No rate has been published yet: dollar conversions are closed.</p>".into());
    let oldest_first: Vec<_> = rates.iter().rev().collect();
    let graph = if oldest_first.len() > 1 {
        chart(
            "Naira per dollar, latest rates",
            "₦",
            &[Series {
                label: "rate",
                class: "s1",
                values: oldest_first
                    .iter()
                    .map(|r| Some(r.rate as f64 / 100.0))
                    .collect(),
            }],
            1.0,
        )
    } else {
        String::new()
    };
    let rows: String = rates
        .iter()
        .map(|r| {
            format!(
                "<tr><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
                r.published_at.format("%Y-%m-%d %H:%M:%S UTC"),
                naira(r.rate),
                r.id
            )
        })
        .collect();
    let main = format!(
        r#"{banner}{current}
<section class="card" aria-labelledby="publish-title"><h2 id="publish-title">Publish a rate</h2>
<form method="post" action="/console/fx">{csrf}
<label for="rate">Kobo per US dollar (160000 is ₦1,600.00)</label>
<input id="rate" name="rate" inputmode="numeric" required value="{rate}">
<button type="submit">Publish rate</button></form></section>
<section aria-labelledby="history-title"><h2 id="history-title">History</h2>{graph}
<div class="scroll" tabindex="0" role="region" aria-labelledby="history-title"><table>
<thead><tr><th scope="col">Published</th><th scope="col">Rate</th><th scope="col">Id</th></tr></thead>
<tbody>{rows}</tbody></table></div></section>"#,
        csrf = op.csrf_input(),
        rate = esc(rate),
    );
    page(op, "/console/fx", "FX rates", &main, false)
}

async fn show(req: HttpRequest, state: State, console: ConsoleData) -> HttpResponse {
    let op = match operator(&req, &state, &console).await {
        Ok(op) => op,
        Err(r) => return r,
    };
    html(200, fx_page(&op, &state, &notice(&req, NOTICES), ""))
}

async fn publish(
    req: HttpRequest,
    state: State,
    console: ConsoleData,
    payload: web::Payload,
) -> HttpResponse {
    let (op, form) = match post(&req, &state, &console, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let text = form.text("rate").trim().to_string();
    // The API takes a JSON integer: a form's digits become one; anything
    // else goes as text, which the API refuses on `rate`.
    let rate = text
        .parse::<i64>()
        .map(Value::from)
        .unwrap_or_else(|_| Value::String(text.clone()));
    let mut fields = Map::new();
    fields.insert("rate".into(), rate);
    let done: Result<Value, ApiError> = async {
        let b: PublishRate = body(fields)?;
        publish_rate_with(&state, b, audit(&req)).await
    }
    .await;
    match done {
        Ok(_) => see_other("/console/fx?done=published"),
        Err(ApiError(e)) => html(
            error_status(&e),
            fx_page(&op, &state, &error_banner(&e), &text),
        ),
    }
}
