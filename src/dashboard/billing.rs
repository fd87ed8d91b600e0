//! Payment links, invoices, subscriptions and plans: read pages (lists
//! with a status filter, details) and a subscription's cancel at the end
//! of its period, which posts through
//! `POST /v1/subscriptions/{id}/cancel`'s own endpoint and run. Reads are
//! the API list and retrieve handlers' own service reads, scoped to the
//! session's merchant and mode: another merchant's ids answer the 404
//! page. Also the list helpers the customers and mandates pages share.

use std::collections::HashMap;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};
use uuid::Uuid;

use kobo_actors::invoice::service::{self as invoices, InvoiceFilter};
use kobo_actors::invoice::InvoiceStatus;
use kobo_actors::paging::Page;
use kobo_actors::payment_link::service::{self as links, LinkFilter};
use kobo_actors::plan::service::{self as plans, PlanFilter};
use kobo_actors::subscription::service::{self as subs, SubscriptionFilter};
use kobo_actors::subscription::SubscriptionStatus;
use kobo_actors::{Env, Mode};

use super::layout::{self, money, money_of, status, text, time};
use super::{error_message, see_other, signed_in, signed_in_form, Ctx};
use crate::api::endpoint::Call;
use crate::api::{subscriptions, State};
use crate::checkout::esc;

/// Rows per page of a list.
pub const PAGE_SIZE: usize = 25;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/dashboard/payment_links", web::get().to(link_list))
        .route("/dashboard/payment_links/{id}", web::get().to(link_detail))
        .route("/dashboard/invoices", web::get().to(invoice_list))
        .route("/dashboard/invoices/{id}", web::get().to(invoice_detail))
        .route("/dashboard/subscriptions", web::get().to(subscription_list))
        .route(
            "/dashboard/subscriptions/{id}",
            web::get().to(subscription_detail),
        )
        .route(
            "/dashboard/subscriptions/{id}/cancel",
            web::post().to(cancel),
        )
        .route("/dashboard/plans", web::get().to(plan_list));
}

/// The request's query string, the first value of each name.
pub fn query(req: &HttpRequest) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(req.query_string().as_bytes()) {
        out.entry(k.into_owned())
            .or_insert_with(|| v.trim().to_string());
    }
    out
}

/// A table of `rows` (or one row saying `empty`) under `head`, scrolling
/// sideways inside its box at phone widths, like the payments list.
pub fn table(class: &str, head: &[&str], rows: &str, empty: &str) -> String {
    let th: String = head
        .iter()
        .map(|h| format!(r#"<th scope="col">{h}</th>"#))
        .collect();
    let body = if rows.is_empty() {
        format!(r#"<tr><td colspan="{}">{empty}</td></tr>"#, head.len())
    } else {
        rows.to_string()
    };
    let class = if class.is_empty() {
        String::new()
    } else {
        format!(r#" class="{class}""#)
    };
    format!(
        r#"<div class="scroll"><table{class}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>"#
    )
}

/// The link to the next page of `page` (when there is one).
pub fn more_link(path: &str, page: &Page, extra: &str, label: &str) -> String {
    match page
        .has_more
        .then(|| page.data.last().and_then(|v| v["id"].as_str()))
        .flatten()
    {
        Some(id) => format!(
            r#"<p><a href="{path}?starting_after={}{}">{label}</a></p>"#,
            esc(id),
            esc(extra)
        ),
        None => String::new(),
    }
}

/// A list page with a status filter (invoices, subscriptions, mandates):
/// the filter, the table of rows and the link to older rows (keeping the
/// status and the list's other filters, `keep`), in the page frame.
pub struct StatusList<'a> {
    /// The list's other filters (name, value), kept by the older link and
    /// the status filter's form.
    pub keep: &'a [(&'a str, String)],
    pub path: &'a str,
    pub title: &'a str,
    pub statuses: &'a [&'a str],
    pub current: Option<&'a str>,
    pub class: &'a str,
    pub head: &'a [&'a str],
    pub empty: &'a str,
    pub older: &'a str,
}

impl StatusList<'_> {
    pub fn page(&self, ctx: &Ctx, page: &Page, rows: &str) -> HttpResponse {
        let mut kept: Vec<(&str, String)> = self
            .current
            .map(|s| ("status", s.to_string()))
            .into_iter()
            .collect();
        kept.extend(self.keep.iter().cloned());
        let extra: String = kept
            .iter()
            .map(|(k, v)| {
                let v: String = url::form_urlencoded::byte_serialize(v.as_bytes()).collect();
                format!("&{k}={v}")
            })
            .collect();
        let main = format!(
            "{}{}{}",
            status_filter(self.path, self.statuses, self.current, self.keep),
            table(self.class, self.head, rows, self.empty),
            more_link(self.path, page, &extra, self.older),
        );
        layout::page(ctx, self.title, self.path, &main)
    }
}

/// The status filter of a list.
pub fn status_filter(
    action: &str,
    statuses: &[&str],
    current: Option<&str>,
    keep: &[(&str, String)],
) -> String {
    let kept: String = keep
        .iter()
        .map(|(k, v)| format!(r#"<input type="hidden" name="{k}" value="{}">"#, esc(v)))
        .collect();
    let options: String = std::iter::once(("", "Any status"))
        .chain(statuses.iter().map(|s| (*s, *s)))
        .map(|(v, l)| {
            let sel = if current.unwrap_or("") == v {
                " selected"
            } else {
                ""
            };
            format!(r#"<option value="{v}"{sel}>{l}</option>"#)
        })
        .collect();
    format!(
        r#"<form method="get" action="{action}" class="filters" role="search">
  {kept}<label for="f-status">Status</label>
  <select id="f-status" name="status">{options}</select>
  <button type="submit">Show</button>
</form>"#
    )
}

// ---- payment links

fn link_row(v: &Value) -> String {
    let amount = match v["amount"].as_i64() {
        Some(a) => money(a, v["currency"].as_str().unwrap_or("NGN")),
        None => "Customer chooses".into(),
    };
    format!(
        r#"<tr><td><a href="/dashboard/payment_links/{id}">{name}</a></td><td>{amount}</td><td>{st}</td><td>{count}</td><td>{created}</td></tr>"#,
        id = text(&v["id"]),
        name = text(&v["name"]),
        st = status(&v["status"]),
        count = v["payments_count"].as_i64().unwrap_or(0),
        created = time(&v["created_at"]),
    )
}

async fn link_list(req: HttpRequest, state: State) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let q = query(&req);
    let filter = LinkFilter {
        limit: PAGE_SIZE,
        starting_after: q.get("starting_after").and_then(|s| s.parse().ok()),
        status: None,
        brand: ctx.session.brand,
    };
    let page = match links::list(&state.kobo, ctx.merchant_id(), ctx.mode(), &filter) {
        Ok(p) => p,
        Err(e) => return layout::server_error(e),
    };
    let rows: String = page.data.iter().map(link_row).collect();
    let main = format!(
        "{}{}",
        table(
            "links",
            &["Name", "Amount", "Status", "Payments", "Created"],
            &rows,
            "No payment links yet."
        ),
        more_link("/dashboard/payment_links", &page, "", "Older links"),
    );
    layout::page(&ctx, "Payment links", "/dashboard/payment_links", &main)
}

async fn link_detail(req: HttpRequest, state: State, path: web::Path<String>) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let found = Uuid::try_parse(&path)
        .ok()
        .and_then(|id| links::own(&state.kobo, ctx.merchant_id(), ctx.mode(), id).ok())
        .and_then(|l| links::view(&state.kobo, &l).ok());
    let Some(view) = found else {
        return layout::not_found(&ctx, "payment link");
    };
    let v = serde_json::to_value(view).unwrap_or(Value::Null);
    let amount = match v["amount"].as_i64() {
        Some(a) => money(a, v["currency"].as_str().unwrap_or("NGN")),
        None => "The customer chooses".into(),
    };
    let main = format!(
        r#"<section class="card" aria-labelledby="sum-h">
<h2 id="sum-h">{name} {st}</h2>
<dl>
<dt>Id</dt><dd><code>{id}</code></dd>
<dt>Page</dt><dd><a href="{url}">{url}</a></dd>
<dt>Amount</dt><dd>{amount}</dd>
<dt>Description</dt><dd>{description}</dd>
<dt>Payments</dt><dd>{count}</dd>
<dt>Collected</dt><dd>{collected}</dd>
<dt>Expires</dt><dd>{expires}</dd>
<dt>Created</dt><dd>{created}</dd>
</dl>
<p><a href="/dashboard/payments">Payments</a></p>
</section>"#,
        name = text(&v["name"]),
        st = status(&v["status"]),
        id = text(&v["id"]),
        url = text(&v["url"]),
        description = text(&v["description"]),
        count = v["payments_count"].as_i64().unwrap_or(0),
        collected = money(
            v["amount_collected"].as_i64().unwrap_or(0),
            v["currency"].as_str().unwrap_or("NGN")
        ),
        expires = time(&v["expires_at"]),
        created = time(&v["created_at"]),
    );
    layout::page(&ctx, "Payment link", "/dashboard/payment_links", &main)
}

// ---- invoices

pub const INVOICE_HEAD: &[&str] = &["Number", "Total", "Status", "Due", "Created"];

pub fn invoice_row(v: &Value) -> String {
    format!(
        r#"<tr><td><a href="/dashboard/invoices/{id}">{number}</a></td><td>{total}</td><td>{st}</td><td>{due}</td><td>{created}</td></tr>"#,
        id = text(&v["id"]),
        number = match v["number"].as_str() {
            Some(n) => esc(n),
            None => "Draft".into(),
        },
        total = money(
            v["total"].as_i64().unwrap_or(0),
            v["currency"].as_str().unwrap_or("NGN")
        ),
        st = status(&v["status"]),
        due = text(&v["due_date"]),
        created = time(&v["created_at"]),
    )
}

async fn invoice_list(req: HttpRequest, state: State) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let q = query(&req);
    let st = q.get("status").and_then(|s| InvoiceStatus::parse(s));
    let filter = InvoiceFilter {
        limit: PAGE_SIZE,
        starting_after: q.get("starting_after").and_then(|s| s.parse().ok()),
        customer: None,
        status: st,
        subscription: None,
        overdue: None,
    };
    let page = match invoices::list(&state.kobo, ctx.merchant_id(), ctx.mode(), &filter) {
        Ok(p) => p,
        Err(e) => return layout::server_error(e),
    };
    let rows: String = page.data.iter().map(invoice_row).collect();
    let names: Vec<&str> = InvoiceStatus::ALL.iter().map(|s| s.as_str()).collect();
    StatusList {
        keep: &[],
        path: "/dashboard/invoices",
        title: "Invoices",
        statuses: &names,
        current: st.map(|s| s.as_str()),
        class: "invoices",
        head: INVOICE_HEAD,
        empty: "No invoices yet.",
        older: "Older invoices",
    }
    .page(&ctx, &page, &rows)
}

async fn invoice_detail(req: HttpRequest, state: State, path: web::Path<String>) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let found = Uuid::try_parse(&path)
        .ok()
        .and_then(|id| invoices::load(&state.kobo, ctx.merchant_id(), ctx.mode(), id).ok())
        .and_then(|i| invoices::to_api(&state.kobo, &i).ok());
    let Some(v) = found else {
        return layout::not_found(&ctx, "invoice");
    };
    let currency = v["currency"].as_str().unwrap_or("NGN");
    let lines: String = v["line_items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                text(&l["description"]),
                l["quantity"].as_i64().unwrap_or(0),
                money(l["unit_amount"].as_i64().unwrap_or(0), currency),
                money(l["amount"].as_i64().unwrap_or(0), currency),
            )
        })
        .collect();
    let payments: String = v["payments"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let intent = match p["payment_intent"].as_str() {
                Some(id) => format!(r#"<a href="/dashboard/payments/{0}">{0}</a>"#, esc(id)),
                None => text(&p["note"]),
            };
            format!(
                "<tr><td>{}</td><td>{}</td><td>{intent}</td><td>{}</td></tr>",
                money(p["amount"].as_i64().unwrap_or(0), currency),
                text(&p["method"]),
                time(&p["paid_at"]),
            )
        })
        .collect();
    let hosted = match v["hosted_url"].as_str() {
        Some(u) => format!(r#"<a href="{0}">{0}</a>"#, esc(u)),
        None => "Not yet (a draft has no page)".into(),
    };
    let subscription = match v["subscription"].as_str() {
        Some(s) => format!(r#"<a href="/dashboard/subscriptions/{0}">{0}</a>"#, esc(s)),
        None => String::new(),
    };
    let main = format!(
        r#"<section class="card" aria-labelledby="sum-h">
<h2 id="sum-h">{total} {st}</h2>
<dl>
<dt>Id</dt><dd><code>{id}</code></dd>
<dt>Number</dt><dd>{number}</dd>
<dt>Customer</dt><dd><a href="/dashboard/customers/{customer}">{customer}</a></dd>
<dt>Hosted page</dt><dd>{hosted}</dd>
<dt>Paid</dt><dd>{paid}</dd>
<dt>Remaining</dt><dd>{remaining}</dd>
<dt>Due</dt><dd>{due}</dd>
<dt>Subscription</dt><dd>{subscription}</dd>
<dt>Memo</dt><dd>{memo}</dd>
<dt>Created</dt><dd>{created}</dd>
</dl>
</section>
<section class="card" aria-labelledby="lines-h"><h2 id="lines-h">Lines</h2>{lines}</section>
<section class="card" aria-labelledby="pay-h"><h2 id="pay-h">Payments</h2>{payments}</section>"#,
        total = money(v["total"].as_i64().unwrap_or(0), currency),
        st = status(&v["status"]),
        id = text(&v["id"]),
        number = text(&v["number"]),
        customer = text(&v["customer"]),
        paid = money(v["amount_paid"].as_i64().unwrap_or(0), currency),
        remaining = money(v["amount_remaining"].as_i64().unwrap_or(0), currency),
        due = text(&v["due_date"]),
        memo = text(&v["memo"]),
        created = time(&v["created_at"]),
        lines = table(
            "",
            &["Description", "Quantity", "Unit amount", "Amount"],
            &lines,
            "No lines."
        ),
        payments = table(
            "",
            &["Amount", "Method", "Payment", "Paid"],
            &payments,
            "No payments yet."
        ),
    );
    layout::page(&ctx, "Invoice", "/dashboard/invoices", &main)
}

// ---- subscriptions

pub const SUBSCRIPTION_HEAD: &[&str] = &["Plan", "Amount", "Status", "Period ends", "Created"];

/// The name of plan `id` (escaped; the id when unknown).
fn plan_name(kobo: &Env, merchant: Uuid, mode: Mode, id: &Value) -> String {
    id.as_str()
        .and_then(|s| s.parse().ok())
        .and_then(|id| plans::load(kobo, merchant, mode, id).ok())
        .map(|p| esc(&p.name))
        .unwrap_or_else(|| text(id))
}

pub fn subscription_row(kobo: &Env, merchant: Uuid, mode: Mode, v: &Value) -> String {
    format!(
        r#"<tr><td><a href="/dashboard/subscriptions/{id}">{plan}</a></td><td>{amount}</td><td>{st}</td><td>{end}</td><td>{created}</td></tr>"#,
        id = text(&v["id"]),
        plan = plan_name(kobo, merchant, mode, &v["plan"]),
        amount = money_of(v),
        st = status(&v["status"]),
        end = time(&v["current_period_end"]),
        created = time(&v["created_at"]),
    )
}

async fn subscription_list(req: HttpRequest, state: State) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let q = query(&req);
    let st = q.get("status").and_then(|s| SubscriptionStatus::parse(s));
    let filter = SubscriptionFilter {
        limit: PAGE_SIZE,
        starting_after: q.get("starting_after").and_then(|s| s.parse().ok()),
        customer: None,
        plan: q.get("plan").and_then(|s| s.parse().ok()),
        status: st,
    };
    let (m, mode) = (ctx.merchant_id(), ctx.mode());
    let page = match subs::list(&state.kobo, m, mode, &filter) {
        Ok(p) => p,
        Err(e) => return layout::server_error(e),
    };
    let rows: String = page
        .data
        .iter()
        .map(|v| subscription_row(&state.kobo, m, mode, v))
        .collect();
    let names: Vec<&str> = SubscriptionStatus::ALL.iter().map(|s| s.as_str()).collect();
    let keep: Vec<(&str, String)> = filter
        .plan
        .map(|p| ("plan", p.to_string()))
        .into_iter()
        .collect();
    StatusList {
        keep: &keep,
        path: "/dashboard/subscriptions",
        title: "Subscriptions",
        statuses: &names,
        current: st.map(|s| s.as_str()),
        class: "subscriptions",
        head: SUBSCRIPTION_HEAD,
        empty: "No subscriptions yet.",
        older: "Older subscriptions",
    }
    .page(&ctx, &page, &rows)
}

fn own_subscription(ctx: &Ctx, raw: &str) -> Option<kobo_actors::subscription::Subscription> {
    let id = Uuid::try_parse(raw).ok()?;
    subs::load(&ctx.state.kobo, ctx.merchant_id(), ctx.mode(), id).ok()
}

fn subscription_page(ctx: &Ctx, raw: &str, error: Option<&str>) -> HttpResponse {
    let Some(s) = own_subscription(ctx, raw) else {
        return layout::not_found(ctx, "subscription");
    };
    let kobo = &ctx.state.kobo;
    let (m, mode) = (ctx.merchant_id(), ctx.mode());
    let v = s.to_api();
    let invoice_rows: String = invoices::list(
        kobo,
        m,
        mode,
        &InvoiceFilter {
            limit: 100,
            starting_after: None,
            customer: None,
            status: None,
            subscription: Some(s.id),
            overdue: None,
        },
    )
    .map(|p| p.data.iter().map(invoice_row).collect())
    .unwrap_or_default();
    let ended = matches!(v["status"].as_str(), Some("canceled") | Some("completed"));
    let cancel_form = if !ended
        && !v["cancel_at_period_end"].as_bool().unwrap_or(false)
        && ctx.user.role.may_operate()
    {
        format!(
            r#"<form method="post" action="/dashboard/subscriptions/{id}/cancel" class="card stack" data-confirm="Cancel this subscription at the end of its period?">
  {inputs}
  <h2>Cancel</h2>
  <p>The subscription ends at the end of its current period ({end}); it is not billed again.</p>
  <button type="submit">Cancel at period end</button>
</form>"#,
            id = s.id,
            inputs = ctx.form_inputs(),
            end = time(&v["current_period_end"]),
        )
    } else {
        String::new()
    };
    let main = format!(
        r#"{alert}<section class="card" aria-labelledby="sum-h">
<h2 id="sum-h">{plan} {st}</h2>
<dl>
<dt>Id</dt><dd><code>{id}</code></dd>
<dt>Customer</dt><dd><a href="/dashboard/customers/{customer}">{customer}</a></dd>
<dt>Amount</dt><dd>{amount} every {count} {interval}(s)</dd>
<dt>Collection</dt><dd>{method}</dd>
<dt>Current period</dt><dd>{period}: {start} to {end}</dd>
<dt>Next charge</dt><dd>{next}</dd>
<dt>Cancels at period end</dt><dd>{at_end}</dd>
<dt>Canceled</dt><dd>{canceled} {reason}</dd>
<dt>Created</dt><dd>{created}</dd>
</dl>
</section>
{cancel_form}
<section class="card" aria-labelledby="inv-h"><h2 id="inv-h">Invoices</h2>{invoices}</section>"#,
        alert = layout::alert(error),
        plan = plan_name(kobo, m, mode, &v["plan"]),
        st = status(&v["status"]),
        id = text(&v["id"]),
        customer = text(&v["customer"]),
        amount = money_of(&v),
        count = v["interval_count"].as_u64().unwrap_or(1),
        interval = text(&v["interval"]),
        method = text(&v["collection_method"]),
        period = v["current_period"].as_u64().unwrap_or(0),
        start = time(&v["current_period_start"]),
        end = time(&v["current_period_end"]),
        next = time(&v["next_charge_at"]),
        at_end = if v["cancel_at_period_end"].as_bool().unwrap_or(false) {
            "yes"
        } else {
            "no"
        },
        canceled = time(&v["canceled_at"]),
        reason = text(&v["cancellation_reason"]),
        created = time(&v["created_at"]),
        invoices = table("", INVOICE_HEAD, &invoice_rows, "No invoices yet."),
    );
    let code = if error.is_some() { 400 } else { 200 };
    layout::html(
        code,
        layout::frame(ctx, "Subscription", "/dashboard/subscriptions", &main),
    )
}

async fn subscription_detail(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
) -> HttpResponse {
    match signed_in(&req, &state).await {
        Ok(ctx) => subscription_page(&ctx, &path, None),
        Err(r) => r,
    }
}

/// `POST /dashboard/subscriptions/{id}/cancel`: cancel at the period's
/// end, through the API's own endpoint (owner and developer only).
async fn cancel(
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
        return layout::forbidden(&ctx, "A viewer cannot cancel subscriptions.");
    }
    let Some(s) = own_subscription(&ctx, &path) else {
        return layout::not_found(&ctx, "subscription");
    };
    let Some(nonce) = form.nonce() else {
        return subscription_page(
            &ctx,
            &path,
            Some("The form is incomplete; reload the page."),
        );
    };
    let raw = s.id.to_string();
    let (code, answer) = ctx
        .act(
            subscriptions::CANCEL_SUBSCRIPTION,
            nonce,
            &json!({"at_period_end": true}),
            |c: Call, b: subscriptions::CancelRequest| async move {
                subscriptions::cancel_run(c, &raw, b).await
            },
        )
        .await;
    if code >= 300 {
        return subscription_page(&ctx, &path, Some(&error_message(&answer)));
    }
    see_other(&format!("/dashboard/subscriptions/{}", s.id))
}

// ---- plans

async fn plan_list(req: HttpRequest, state: State) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let q = query(&req);
    let filter = PlanFilter {
        limit: PAGE_SIZE,
        starting_after: q.get("starting_after").and_then(|s| s.parse().ok()),
        active: None,
    };
    let page = match plans::list(&state.kobo, ctx.merchant_id(), ctx.mode(), &filter) {
        Ok(p) => p,
        Err(e) => return layout::server_error(e),
    };
    let rows: String = page
        .data
        .iter()
        .map(|v| {
            format!(
                r#"<tr><td><a href="/dashboard/subscriptions?plan={id}">{name}</a></td><td>{amount}</td><td>every {count} {interval}(s)</td><td>{trial}</td><td>{active}</td></tr>"#,
                id = text(&v["id"]),
                name = text(&v["name"]),
                amount = money_of(v),
                count = v["interval_count"].as_u64().unwrap_or(1),
                interval = text(&v["interval"]),
                trial = v["trial_days"].as_u64().unwrap_or(0),
                active = if v["active"].as_bool().unwrap_or(false) {
                    "active"
                } else {
                    "archived"
                },
            )
        })
        .collect();
    let main = format!(
        "{}{}",
        table(
            "plans",
            &["Name", "Amount", "Schedule", "Trial days", "State"],
            &rows,
            "No plans yet."
        ),
        more_link("/dashboard/plans", &page, "", "Older plans"),
    );
    layout::page(&ctx, "Plans", "/dashboard/plans", &main)
}
