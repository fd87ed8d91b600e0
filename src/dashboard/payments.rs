//! Payments: the list (status filter, search by reference, newest first,
//! pages), its rows as a fragment the live script swaps in, and a
//! payment's detail (charge attempts, refunds, events and their webhook
//! deliveries) with the refund form, which posts through
//! `POST /v1/refunds`' own endpoint and run.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};
use uuid::Uuid;

use kobo_actors::payment_intent::Status;
use kobo_actors::query::{self, IntentFilter};
use kobo_actors::webhook::query::{list_events, EventFilter};
use kobo_actors::{DomainError, Mode};
use kobo_storage::Table;

use super::layout::{self, money_of, status, text, time};
use super::{error_message, see_other, signed_in, signed_in_form, Ctx};
use crate::api::{refunds, State};
use crate::checkout::esc;

/// Rows per page of the list.
pub const PAGE_SIZE: usize = 25;
/// Newest events searched for a payment's own (the detail page).
const EVENTS_SEARCHED: usize = 300;

pub const THEAD: &str = r#"<tr><th scope="col">Amount</th><th scope="col">Status</th><th scope="col">Reference</th><th scope="col">Customer</th><th scope="col">Created</th></tr>"#;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/dashboard/payments", web::get().to(list))
        .route("/dashboard/payments/rows", web::get().to(rows_fragment))
        .route("/dashboard/payments/{id}", web::get().to(detail))
        .route("/dashboard/payments/{id}/refund", web::post().to(refund));
}

/// The list's query: `status`, `reference` (exact), `starting_after`.
#[derive(Default)]
pub struct Filters {
    pub status: Option<Status>,
    pub reference: Option<String>,
    pub starting_after: Option<Uuid>,
}

impl Filters {
    fn parse(q: &str) -> Filters {
        let mut f = Filters::default();
        for (k, v) in url::form_urlencoded::parse(q.as_bytes()) {
            match &*k {
                "status" => f.status = Status::parse(&v),
                "reference" if !v.trim().is_empty() => f.reference = Some(v.trim().to_string()),
                "starting_after" => f.starting_after = v.parse().ok(),
                _ => {}
            }
        }
        f
    }
}

fn row(v: &Value) -> String {
    let id = text(&v["id"]);
    format!(
        r#"<tr><td><a href="/dashboard/payments/{id}">{amount}</a></td><td>{status}</td><td>{reference}</td><td>{email}</td><td>{created}</td></tr>"#,
        amount = money_of(v),
        status = status(&v["status"]),
        reference = text(&v["reference"]),
        email = text(&v["customer_email"]),
        created = time(&v["created_at"]),
    )
}

/// The rows of the list and the last id shown when there are more.
pub fn rows(ctx: &Ctx, f: &Filters, limit: usize) -> Result<(String, Option<String>), DomainError> {
    let kobo = &ctx.state.kobo;
    let (merchant, mode) = (ctx.merchant_id(), ctx.mode());
    let (data, has_more) = match &f.reference {
        // A reference names at most one payment of the merchant and mode.
        Some(r) => {
            let read = kobo.store.read()?;
            let key = kobo_actors::payment_intent::service::reference_key(merchant, mode, r);
            let found = read
                .get(Table::PaymentIntentReferences, &key)?
                .and_then(|raw| Uuid::from_slice(&raw).ok())
                .and_then(|id| query::payment_intent(kobo, merchant, mode, id).ok());
            (
                found.map(|i| vec![i.to_api(None)]).unwrap_or_default(),
                false,
            )
        }
        None => {
            let filter = IntentFilter {
                limit,
                starting_after: f.starting_after,
                status: f.status,
                customer: None,
                virtual_account: None,
                payment_link: None,
            };
            let page = query::list_payment_intents(kobo, merchant, mode, &filter)?;
            (page.data, page.has_more)
        }
    };
    let brand = ctx.session.brand.map(|b| b.to_string());
    let shown: Vec<&Value> = data
        .iter()
        .filter(|v| {
            brand
                .as_deref()
                .is_none_or(|b| v["brand"].as_str() == Some(b))
        })
        .collect();
    let mut out: String = shown.iter().map(|v| row(v)).collect();
    if out.is_empty() {
        out = r#"<tr><td colspan="5">No payments yet.</td></tr>"#.into();
    }
    let next = has_more
        .then(|| data.last().and_then(|v| v["id"].as_str().map(String::from)))
        .flatten();
    Ok((out, next))
}

async fn list(req: HttpRequest, state: State) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let f = Filters::parse(req.query_string());
    let (body, next) = match rows(&ctx, &f, PAGE_SIZE) {
        Ok(x) => x,
        Err(e) => return layout::server_error(e),
    };
    let options: String = std::iter::once(("", "Any status"))
        .chain(Status::ALL.iter().map(|s| (s.as_str(), s.as_str())))
        .map(|(v, l)| {
            let sel = if f.status.map(|s| s.as_str()) == Some(v)
                || (v.is_empty() && f.status.is_none())
            {
                " selected"
            } else {
                ""
            };
            format!(r#"<option value="{v}"{sel}>{l}</option>"#)
        })
        .collect();
    let more = match next {
        Some(id) => {
            let status = f
                .status
                .map(|s| format!("&status={}", s.as_str()))
                .unwrap_or_default();
            format!(
                r#"<p><a href="/dashboard/payments?starting_after={}{status}">Older payments</a></p>"#,
                esc(&id)
            )
        }
        None => String::new(),
    };
    // Live updates only on the first page of the unfiltered list.
    let live = if f.status.is_none() && f.reference.is_none() && f.starting_after.is_none() {
        format!(r#" data-live="/dashboard/payments/rows?limit={PAGE_SIZE}""#)
    } else {
        String::new()
    };
    let main = format!(
        r#"<form method="get" action="/dashboard/payments" class="filters" role="search">
  <label for="f-status">Status</label>
  <select id="f-status" name="status">{options}</select>
  <label for="f-reference">Reference</label>
  <input id="f-reference" name="reference" value="{reference}" maxlength="100">
  <button type="submit">Search</button>
</form>
<div class="scroll"><table class="payments"><thead>{THEAD}</thead><tbody id="payment-rows"{live}>{body}</tbody></table></div>
{more}"#,
        reference = esc(f.reference.as_deref().unwrap_or("")),
    );
    layout::page(&ctx, "Payments", "/dashboard/payments", &main)
}

/// `GET /dashboard/payments/rows?limit=`: the first rows (the live script
/// swaps them in when a payment event arrives).
async fn rows_fragment(req: HttpRequest, state: State) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(_) => return HttpResponse::Unauthorized().finish(),
    };
    let limit = url::form_urlencoded::parse(req.query_string().as_bytes())
        .find(|(k, _)| k == "limit")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(PAGE_SIZE)
        .clamp(1, PAGE_SIZE);
    match rows(&ctx, &Filters::default(), limit) {
        Ok((body, _)) => layout::html(200, body),
        Err(e) => layout::server_error(e),
    }
}

/// The payment `raw` names, if it is the session's merchant's and mode's.
fn own(ctx: &Ctx, raw: &str) -> Option<kobo_actors::payment_intent::PaymentIntent> {
    let id = Uuid::try_parse(raw).ok()?;
    query::payment_intent(&ctx.state.kobo, ctx.merchant_id(), ctx.mode(), id).ok()
}

fn detail_page(ctx: &Ctx, id: &str, error: Option<&str>) -> HttpResponse {
    let Some(intent) = own(ctx, id) else {
        return layout::not_found(ctx, "payment");
    };
    let kobo = &ctx.state.kobo;
    let v = intent.to_api(None);
    let attempts = query::charge_attempts(kobo, &intent)
        .map(|p| p.data)
        .unwrap_or_default();
    let attempts: String = attempts
        .iter()
        .map(|a| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                text(&a["channel"]),
                status(&a["status"]),
                text(&a["failure_code"]),
                time(&a["created_at"])
            )
        })
        .collect();
    let refunds = kobo_actors::refund::service::list_refunds(
        kobo,
        ctx.merchant_id(),
        ctx.mode(),
        Some(intent.id),
        100,
        None,
    )
    .map(|p| p.data)
    .unwrap_or_default();
    let refunds: String = refunds
        .iter()
        .map(|r| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                money_of(r),
                status(&r["status"]),
                text(&r["reason"]),
                time(&r["created_at"])
            )
        })
        .collect();
    let events = list_events(
        kobo,
        ctx.merchant_id(),
        ctx.mode(),
        &EventFilter {
            limit: EVENTS_SEARCHED,
            starting_after: None,
            event_type: None,
        },
    )
    .map(|p| p.data)
    .unwrap_or_default();
    let own_id = intent.id.to_string();
    let events: String = events
        .iter()
        .filter(|e| e["data"]["object"]["id"].as_str() == Some(own_id.as_str()))
        .map(|e| {
            let deliveries: String = e["deliveries"]
                .as_array()
                .map(|ds| {
                    ds.iter()
                        .map(|d| {
                            format!(
                                "<li>endpoint {}: {} after {} attempt(s), last response {}</li>",
                                text(&d["endpoint"]),
                                text(&d["status"]),
                                d["attempts"].as_u64().unwrap_or(0),
                                d["last_response_status"]
                                    .as_u64()
                                    .map(|s| s.to_string())
                                    .unwrap_or_else(|| "none".into())
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let deliveries = if deliveries.is_empty() {
                "<li>No webhook endpoint was sent this event.</li>".to_string()
            } else {
                deliveries
            };
            format!(
                "<li><code>{}</code> at {}<ul>{deliveries}</ul></li>",
                text(&e["type"]),
                time(&e["created_at"])
            )
        })
        .collect();
    let refund_form = if intent.status == Status::Successful && ctx.user.role.may_operate() {
        format!(
            r#"<form method="post" action="/dashboard/payments/{id}/refund" class="card stack" data-confirm="Refund this payment?">
  {inputs}
  <h2>Refund</h2>
  <label for="r-amount">Amount in naira or dollars (empty: all that is left)</label>
  <input id="r-amount" name="amount" inputmode="decimal" pattern="[0-9]+(\.[0-9]{{1,2}})?">
  <label for="r-reason">Reason</label>
  <input id="r-reason" name="reason" maxlength="500">
  <button type="submit">Refund payment</button>
</form>"#,
            id = intent.id,
            inputs = ctx.form_inputs(),
        )
    } else {
        String::new()
    };
    let main = format!(
        r#"{alert}<section class="card" aria-labelledby="sum-h">
<h2 id="sum-h">{amount} {st}</h2>
<dl>
<dt>Id</dt><dd><code>{id}</code></dd>
<dt>Reference</dt><dd>{reference}</dd>
<dt>Description</dt><dd>{description}</dd>
<dt>Customer</dt><dd>{email}</dd>
<dt>Channel</dt><dd>{channel}</dd>
<dt>Created</dt><dd>{created}</dd>
<dt>Mode</dt><dd>{mode}</dd>
</dl>
</section>
{refund_form}
<section class="card" aria-labelledby="att-h"><h2 id="att-h">Charge attempts</h2>
<div class="scroll"><table><thead><tr><th scope="col">Channel</th><th scope="col">Status</th><th scope="col">Failure</th><th scope="col">At</th></tr></thead><tbody>{attempts}</tbody></table></div></section>
<section class="card" aria-labelledby="ref-h"><h2 id="ref-h">Refunds</h2>
<div class="scroll"><table><thead><tr><th scope="col">Amount</th><th scope="col">Status</th><th scope="col">Reason</th><th scope="col">At</th></tr></thead><tbody id="refund-rows">{refunds}</tbody></table></div></section>
<section class="card" aria-labelledby="ev-h"><h2 id="ev-h">Events and webhook deliveries</h2><ul class="events">{events}</ul></section>"#,
        alert = layout::alert(error),
        amount = money_of(&v),
        st = status(&v["status"]),
        id = text(&v["id"]),
        reference = text(&v["reference"]),
        description = text(&v["description"]),
        email = text(&v["customer_email"]),
        channel = text(&v["channel"]),
        created = time(&v["created_at"]),
        mode = if intent.mode == Mode::Live {
            "live"
        } else {
            "test"
        },
    );
    let status = if error.is_some() { 400 } else { 200 };
    layout::html(
        status,
        layout::frame(ctx, "Payment", "/dashboard/payments", &main),
    )
}

async fn detail(req: HttpRequest, state: State, path: web::Path<String>) -> HttpResponse {
    match signed_in(&req, &state).await {
        Ok(ctx) => detail_page(&ctx, &path, None),
        Err(r) => r,
    }
}

/// Minor units of a decimal amount typed by a person (`1500`, `1500.5`).
pub fn minor_units(s: &str) -> Option<i64> {
    let (units, frac) = match s.split_once('.') {
        Some((u, f)) => (u, f),
        None => (s, ""),
    };
    if units.is_empty()
        || frac.len() > 2
        || !units.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let units: i64 = units.parse().ok()?;
    let frac: i64 = format!("{frac:0<2}").parse().ok()?;
    units.checked_mul(100)?.checked_add(frac)
}

async fn refund(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    let (ctx, form) = match signed_in_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    if !ctx.user.role.may_operate() {
        return layout::forbidden(&ctx, "A viewer cannot refund payments.");
    }
    let Some(intent) = own(&ctx, &path) else {
        return layout::not_found(&ctx, "payment");
    };
    let Some(nonce) = form.nonce() else {
        return detail_page(
            &ctx,
            &path,
            Some("The form is incomplete; reload the page."),
        );
    };
    let mut body = json!({"payment_intent": intent.id});
    match form.get("amount") {
        "" => {}
        raw => match minor_units(raw) {
            Some(a) => body["amount"] = a.into(),
            None => {
                return detail_page(
                    &ctx,
                    &path,
                    Some("The amount must be a number like 1500 or 1500.50."),
                )
            }
        },
    }
    if !form.get("reason").is_empty() {
        body["reason"] = form.get("reason").into();
    }
    let (status, answer) = ctx
        .act(refunds::CREATE_REFUND, nonce, &body, refunds::refund)
        .await;
    if status >= 300 {
        return detail_page(&ctx, &path, Some(&error_message(&answer)));
    }
    see_other(&format!("/dashboard/payments/{}", intent.id))
}

#[cfg(test)]
mod tests {
    use super::minor_units;

    #[test]
    fn amounts_typed_by_people_become_minor_units() {
        assert_eq!(minor_units("1500"), Some(150_000));
        assert_eq!(minor_units("1500.5"), Some(150_050));
        assert_eq!(minor_units("0.07"), Some(7));
        for bad in ["", ".5", "1.234", "1,000", "-1", "1e3", "abc"] {
            assert_eq!(minor_units(bad), None, "{bad}");
        }
    }
}
