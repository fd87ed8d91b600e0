//! The home page: balances per bucket and currency (the session's brand or
//! the whole business), today's captured volume, and an inline SVG chart of
//! the last 30 days' captures drawn here from the ledger's payment lines.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{Duration, NaiveDate};
use uuid::Uuid;

use kobo_actors::ledger::query::{balance, statement_lines, LineFilter};
use kobo_actors::ledger::EntryType;
use kobo_actors::money::Currency;

use super::layout::{self, money};
use super::{payments, signed_in, Ctx};
use crate::api::State;

/// Days the chart covers.
pub const CHART_DAYS: i64 = 30;
/// Lines the chart reads at most.
const CHART_LINES_MAX: usize = 20_000;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/dashboard", web::get().to(home));
}

/// Captured naira per Lagos day of the last [`CHART_DAYS`] (oldest first),
/// from the payment lines that carry a gross amount (one per payment).
pub fn captures_by_day(
    ctx: &Ctx,
) -> Result<Vec<(NaiveDate, i64, usize)>, kobo_actors::DomainError> {
    let calendar = &ctx.state.kobo.calendar;
    let today = calendar.lagos_date(ctx.state.kobo.clock.now());
    let from = today - Duration::days(CHART_DAYS - 1);
    let filter = LineFilter {
        brand: ctx.session.brand,
        currency: Some(Currency::NGN),
        bucket: None,
        types: Some(vec![EntryType::Payment]),
        from: Some(from),
        to: Some(today),
    };
    let (lines, _) = statement_lines(
        &ctx.state.kobo,
        ctx.merchant_id(),
        ctx.mode(),
        &filter,
        CHART_LINES_MAX,
    )?;
    let mut days: BTreeMap<NaiveDate, (i64, Vec<Uuid>)> = (0..CHART_DAYS)
        .map(|i| (from + Duration::days(i), (0, Vec::new())))
        .collect();
    for l in lines {
        let Some(gross) = l.gross else { continue };
        let day = calendar.lagos_date(l.created_at);
        if let Some((sum, sources)) = days.get_mut(&day) {
            if !sources.contains(&l.source) {
                sources.push(l.source);
                *sum += gross;
            }
        }
    }
    Ok(days
        .into_iter()
        .map(|(d, (sum, sources))| (d, sum, sources.len()))
        .collect())
}

/// The bar chart (inline SVG, no script): one bar per day, each with a
/// title, and a text summary for screen readers.
pub fn chart(days: &[(NaiveDate, i64, usize)]) -> String {
    let (w, h, pad) = (600.0_f64, 160.0_f64, 20.0_f64);
    let max = days.iter().map(|d| d.1).max().unwrap_or(0).max(1) as f64;
    let bar_w = (w - 2.0 * pad) / days.len().max(1) as f64;
    let total: i64 = days.iter().map(|d| d.1).sum();
    let mut bars = String::new();
    for (i, (day, amount, count)) in days.iter().enumerate() {
        let bh = (*amount as f64 / max) * (h - 2.0 * pad);
        let x = pad + i as f64 * bar_w;
        let y = h - pad - bh;
        bars.push_str(&format!(
            r#"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{bw:.1}" height="{bh:.1}"><title>{day}: {m} ({count} payments)</title></rect>"#,
            bw = (bar_w - 2.0).max(1.0),
            m = money(*amount, "NGN"),
        ));
    }
    let first = days.first().map(|d| d.0.to_string()).unwrap_or_default();
    let last = days.last().map(|d| d.0.to_string()).unwrap_or_default();
    format!(
        r#"<figure class="chart">
<svg viewBox="0 0 {w} {h}" role="img" aria-labelledby="chart-title" preserveAspectRatio="none">
<title id="chart-title">Captures per day, {first} to {last}: {total} in all</title>
<line class="axis" x1="{pad}" y1="{base}" x2="{right}" y2="{base}"></line>
{bars}
</svg>
<figcaption>Captured naira per day, last {CHART_DAYS} days ({first} to {last}): {total} in all; highest day {top}.</figcaption>
</figure>"#,
        base = h - pad,
        right = w - pad,
        total = money(total, "NGN"),
        top = money(max as i64, "NGN"),
    )
}

async fn home(req: HttpRequest, state: State) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let bal = match balance(
        &state.kobo,
        ctx.merchant_id(),
        ctx.mode(),
        ctx.session.brand,
    ) {
        Ok(b) => b,
        Err(e) => return layout::server_error(e),
    };
    let days = match captures_by_day(&ctx) {
        Ok(d) => d,
        Err(e) => return layout::server_error(e),
    };
    let mut rows = String::new();
    for (bucket, label) in [
        ("available", "Available"),
        ("pending", "Pending"),
        ("reserve", "Reserve"),
        ("payout_in_flight", "Payouts in flight"),
        ("refund_in_flight", "Refunds in flight"),
        ("dispute_hold", "Held for disputes"),
    ] {
        let cells: String = bal[bucket]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| format!("<td>{}</td>", layout::money_of(x)))
                    .collect()
            })
            .unwrap_or_default();
        rows.push_str(&format!(r#"<tr><th scope="row">{label}</th>{cells}</tr>"#));
    }
    let heads: String = bal["available"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| format!(r#"<th scope="col">{}</th>"#, layout::text(&x["currency"])))
                .collect()
        })
        .unwrap_or_default();
    let (today_sum, today_count) = days.last().map(|d| (d.1, d.2)).unwrap_or((0, 0));
    let recent = payments::rows(&ctx, &payments::Filters::default(), 5)
        .map(|(rows, _)| rows)
        .unwrap_or_default();
    let main = format!(
        r#"<section aria-labelledby="today-h" class="card">
<h2 id="today-h">Today</h2>
<p class="big" id="today-volume">{today}</p>
<p>{today_count} captured payments today (Lagos time).</p>
</section>
<section aria-labelledby="bal-h" class="card">
<h2 id="bal-h">Balances</h2>
<div class="scroll"><table><thead><tr><th scope="col">Bucket</th>{heads}</tr></thead><tbody>{rows}</tbody></table></div>
</section>
<section aria-labelledby="chart-h" class="card">
<h2 id="chart-h">Last {CHART_DAYS} days</h2>
{chart}
</section>
<section aria-labelledby="recent-h" class="card">
<h2 id="recent-h">Latest payments</h2>
<div class="scroll"><table class="payments"><thead>{thead}</thead><tbody id="payment-rows" data-live="/dashboard/payments/rows?limit=5">{recent}</tbody></table></div>
<p><a href="/dashboard/payments">All payments</a></p>
</section>"#,
        today = money(today_sum, "NGN"),
        chart = chart(&days),
        thead = payments::THEAD,
    );
    layout::page(&ctx, "Home", "/dashboard", &main)
}
