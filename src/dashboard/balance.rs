//! Balance transactions: the newest ledger lines of the session's mode
//! (and brand), and their CSV download, written by the same
//! [`statement_csv`](crate::api::balance::statement_csv) as
//! `GET /v1/balance_transactions/export` (oldest first, at most
//! [`EXPORT_MAX_LINES`] lines, the last 31 days).

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::Duration;

use kobo_actors::ledger::query::{balance_transactions, statement_lines, LineFilter};

use super::layout::{self, money, text, time};
use super::{signed_in, Ctx};
use crate::api::balance::statement_csv;
use crate::api::State;

/// Lines the download holds at most.
pub const EXPORT_MAX_LINES: usize = 10_000;
/// Days the download covers.
pub const EXPORT_DAYS: i64 = 31;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/dashboard/balance", web::get().to(page))
        .route("/dashboard/balance/export.csv", web::get().to(export));
}

fn filter(ctx: &Ctx) -> LineFilter {
    LineFilter {
        brand: ctx.session.brand,
        ..LineFilter::default()
    }
}

async fn page(req: HttpRequest, state: State) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let lines = match balance_transactions(
        &state.kobo,
        ctx.merchant_id(),
        ctx.mode(),
        &filter(&ctx),
        100,
        None,
    ) {
        Ok(p) => p.data,
        Err(e) => return layout::server_error(e),
    };
    let rows: String = lines
        .iter()
        .map(|l| {
            let currency = l["currency"].as_str().unwrap_or("NGN");
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                time(&l["created_at"]),
                text(&l["type"]),
                text(&l["bucket"]),
                money(l["amount"].as_i64().unwrap_or(0), currency),
                money(l["balance_after"].as_i64().unwrap_or(0), currency),
                text(&l["description"]),
            )
        })
        .collect();
    let rows = if rows.is_empty() {
        r#"<tr><td colspan="6">No balance transactions yet.</td></tr>"#.to_string()
    } else {
        rows
    };
    let main = format!(
        r#"<p><a href="/dashboard/balance/export.csv" download>Download the last {EXPORT_DAYS} days as CSV</a></p>
<section class="card" aria-labelledby="bt-h"><h2 id="bt-h">Newest 100</h2>
<div class="scroll"><table><thead><tr><th scope="col">At</th><th scope="col">Type</th><th scope="col">Bucket</th><th scope="col">Amount</th><th scope="col">Balance after</th><th scope="col">Description</th></tr></thead><tbody id="balance-rows">{rows}</tbody></table></div></section>"#
    );
    layout::page(&ctx, "Balance transactions", "/dashboard/balance", &main)
}

async fn export(req: HttpRequest, state: State) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let today = state.kobo.calendar.lagos_date(state.kobo.clock.now());
    let f = LineFilter {
        from: Some(today - Duration::days(EXPORT_DAYS - 1)),
        to: Some(today),
        ..filter(&ctx)
    };
    let csv = statement_lines(
        &state.kobo,
        ctx.merchant_id(),
        ctx.mode(),
        &f,
        EXPORT_MAX_LINES,
    )
    .and_then(|(lines, _)| statement_csv(&lines));
    match csv {
        Ok(data) => HttpResponse::Ok()
            .content_type("text/csv; charset=utf-8")
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .insert_header(("X-Content-Type-Options", "nosniff"))
            .insert_header((
                header::CONTENT_DISPOSITION,
                format!(
                    "attachment; filename=\"kobo-statement-{}-{today}.csv\"",
                    ctx.mode().as_str()
                ),
            ))
            .body(data),
        Err(e) => layout::server_error(e),
    }
}
