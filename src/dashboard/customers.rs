//! Customers and mandates (read pages): the customer list (search by
//! email, the API list's own filter), a customer's detail (their mandates,
//! virtual accounts, invoices and subscriptions), the mandate list and a
//! mandate's detail. Reads are the API list and retrieve handlers' own
//! service reads, scoped to the session's merchant and mode: another
//! merchant's ids answer the 404 page.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;
use uuid::Uuid;

use kobo_actors::customer::{self, service::CustomerFilter};
use kobo_actors::invoice::service::{self as invoices, InvoiceFilter};
use kobo_actors::mandate::service::{self as mandates, MandateFilter};
use kobo_actors::mandate::MandateStatus;
use kobo_actors::subscription::service::{self as subs, SubscriptionFilter};
use kobo_actors::virtual_account::service::{self as accounts, AccountFilter};

use super::billing::{more_link, query, table, StatusList, PAGE_SIZE};
use super::layout::{self, money, status, text, time};
use super::{signed_in, Ctx};
use crate::api::State;
use crate::checkout::esc;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/dashboard/customers", web::get().to(list))
        .route("/dashboard/customers/{id}", web::get().to(detail))
        .route("/dashboard/mandates", web::get().to(mandate_list))
        .route("/dashboard/mandates/{id}", web::get().to(mandate_detail));
}

/// A customer's name, else email, else phone, escaped.
fn who(v: &Value) -> String {
    for k in ["name", "email", "phone"] {
        if let Some(s) = v[k].as_str().filter(|s| !s.is_empty()) {
            return esc(s);
        }
    }
    "(no name)".into()
}

fn customer_row(v: &Value) -> String {
    format!(
        r#"<tr><td><a href="/dashboard/customers/{id}">{who}</a></td><td>{email}</td><td>{phone}</td><td>{created}</td></tr>"#,
        id = text(&v["id"]),
        who = who(v),
        email = text(&v["email"]),
        phone = text(&v["phone"]),
        created = time(&v["created_at"]),
    )
}

async fn list(req: HttpRequest, state: State) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let q = query(&req);
    let email = q.get("email").cloned().filter(|e| !e.is_empty());
    let starting_after = q.get("starting_after").and_then(|s| s.parse().ok());
    let filter = CustomerFilter {
        limit: PAGE_SIZE,
        starting_after,
        email: email.clone(),
        phone: None,
        brand: ctx.session.brand,
        risk_action: None,
    };
    let page = match customer::service::list(&state.kobo, ctx.merchant_id(), ctx.mode(), &filter) {
        Ok(p) => p,
        Err(e) => return layout::server_error(e),
    };
    let rows: String = page.data.iter().map(customer_row).collect();
    let extra = email
        .as_deref()
        .map(|e| format!("&email={}", urlencoding(e)))
        .unwrap_or_default();
    let main = format!(
        r#"<form method="get" action="/dashboard/customers" class="filters" role="search">
  <label for="f-email">Email</label>
  <input id="f-email" name="email" type="email" value="{email}" maxlength="254">
  <button type="submit">Search</button>
</form>
{table}{more}"#,
        email = esc(email.as_deref().unwrap_or("")),
        table = table(
            "customers",
            &["Customer", "Email", "Phone", "Created"],
            &rows,
            "No customers yet."
        ),
        more = more_link("/dashboard/customers", &page, &extra, "Older customers"),
    );
    layout::page(&ctx, "Customers", "/dashboard/customers", &main)
}

/// `s` for a query string.
pub fn urlencoding(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

pub fn mandate_row(v: &Value) -> String {
    format!(
        r#"<tr><td><a href="/dashboard/mandates/{id}">{bank}</a></td><td>{st}</td><td>{who}</td><td>{created}</td></tr>"#,
        id = text(&v["id"]),
        bank = match v["bank_name"].as_str() {
            Some(b) if !b.is_empty() => esc(b),
            _ => "Mandate".into(),
        },
        st = status(&v["status"]),
        who = match v["customer_name"].as_str().or(v["customer_email"].as_str()) {
            Some(s) => esc(s),
            None => String::new(),
        },
        created = time(&v["created_at"]),
    )
}

pub const MANDATE_HEAD: &[&str] = &["Bank", "Status", "Customer", "Created"];

fn own_customer(ctx: &Ctx, raw: &str) -> Option<customer::Customer> {
    let id = Uuid::try_parse(raw).ok()?;
    customer::load(&ctx.state.kobo, ctx.merchant_id(), ctx.mode(), id)
        .ok()
        .filter(|c| c.deleted_at.is_none())
}

async fn detail(req: HttpRequest, state: State, path: web::Path<String>) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let Some(c) = own_customer(&ctx, &path) else {
        return layout::not_found(&ctx, "customer");
    };
    let kobo = &state.kobo;
    let (m, mode) = (ctx.merchant_id(), ctx.mode());
    let v = c.to_api();
    let mandate_rows: String = mandates::list(
        kobo,
        m,
        mode,
        &MandateFilter {
            limit: 100,
            starting_after: None,
            customer: Some(c.id),
            status: None,
        },
    )
    .map(|p| p.data.iter().map(mandate_row).collect())
    .unwrap_or_default();
    let account_rows: String = accounts::list(
        kobo,
        m,
        mode,
        &AccountFilter {
            limit: 100,
            starting_after: None,
            customer: Some(c.id),
            status: None,
            account_number: None,
        },
    )
    .map(|p| {
        p.data
            .iter()
            .map(|a| {
                format!(
                    "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    text(&a["account_number"]),
                    text(&a["bank_name"]),
                    status(&a["status"]),
                    time(&a["created_at"])
                )
            })
            .collect()
    })
    .unwrap_or_default();
    let invoice_rows: String = invoices::list(
        kobo,
        m,
        mode,
        &InvoiceFilter {
            limit: 100,
            starting_after: None,
            customer: Some(c.id),
            status: None,
            subscription: None,
            overdue: None,
        },
    )
    .map(|p| p.data.iter().map(super::billing::invoice_row).collect())
    .unwrap_or_default();
    let sub_rows: String = subs::list(
        kobo,
        m,
        mode,
        &SubscriptionFilter {
            limit: 100,
            starting_after: None,
            customer: Some(c.id),
            plan: None,
            status: None,
        },
    )
    .map(|p| {
        p.data
            .iter()
            .map(|s| super::billing::subscription_row(kobo, m, mode, s))
            .collect()
    })
    .unwrap_or_default();
    let main = format!(
        r#"<section class="card" aria-labelledby="sum-h">
<h2 id="sum-h">{who}</h2>
<dl>
<dt>Id</dt><dd><code>{id}</code></dd>
<dt>Email</dt><dd>{email}</dd>
<dt>Phone</dt><dd>{phone}</dd>
<dt>Credit balance</dt><dd>{credit}</dd>
<dt>Risk action</dt><dd>{risk}</dd>
<dt>Created</dt><dd>{created}</dd>
</dl>
</section>
<section class="card" aria-labelledby="man-h"><h2 id="man-h">Mandates</h2>{mandates}</section>
<section class="card" aria-labelledby="va-h"><h2 id="va-h">Virtual accounts</h2>{accounts}</section>
<section class="card" aria-labelledby="inv-h"><h2 id="inv-h">Invoices</h2>{invoices}</section>
<section class="card" aria-labelledby="sub-h"><h2 id="sub-h">Subscriptions</h2>{subs}</section>"#,
        who = who(&v),
        id = text(&v["id"]),
        email = text(&v["email"]),
        phone = text(&v["phone"]),
        credit = money(invoices::credit_balance(kobo, c.id).unwrap_or(0), "NGN"),
        risk = text(&v["risk_action"]),
        created = time(&v["created_at"]),
        mandates = table("", MANDATE_HEAD, &mandate_rows, "No mandates."),
        accounts = table(
            "",
            &["Account number", "Bank", "Status", "Created"],
            &account_rows,
            "No virtual account."
        ),
        invoices = table(
            "",
            super::billing::INVOICE_HEAD,
            &invoice_rows,
            "No invoices."
        ),
        subs = table(
            "",
            super::billing::SUBSCRIPTION_HEAD,
            &sub_rows,
            "No subscriptions."
        ),
    );
    layout::page(&ctx, "Customer", "/dashboard/customers", &main)
}

async fn mandate_list(req: HttpRequest, state: State) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let q = query(&req);
    let st = q.get("status").and_then(|s| MandateStatus::parse(s));
    let filter = MandateFilter {
        limit: PAGE_SIZE,
        starting_after: q.get("starting_after").and_then(|s| s.parse().ok()),
        customer: None,
        status: st,
    };
    let page = match mandates::list(&state.kobo, ctx.merchant_id(), ctx.mode(), &filter) {
        Ok(p) => p,
        Err(e) => return layout::server_error(e),
    };
    let rows: String = page.data.iter().map(mandate_row).collect();
    let names: Vec<&str> = MandateStatus::ALL.iter().map(|s| s.as_str()).collect();
    StatusList {
        keep: &[],
        path: "/dashboard/mandates",
        title: "Mandates",
        statuses: &names,
        current: st.map(|s| s.as_str()),
        class: "mandates",
        head: MANDATE_HEAD,
        empty: "No mandates yet.",
        older: "Older mandates",
    }
    .page(&ctx, &page, &rows)
}

async fn mandate_detail(req: HttpRequest, state: State, path: web::Path<String>) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let found = Uuid::try_parse(&path)
        .ok()
        .and_then(|id| mandates::own(&state.kobo, ctx.merchant_id(), ctx.mode(), id).ok());
    let Some(mandate) = found else {
        return layout::not_found(&ctx, "mandate");
    };
    let v = mandate.to_api();
    let main = format!(
        r#"<section class="card" aria-labelledby="sum-h">
<h2 id="sum-h">Mandate {st}</h2>
<dl>
<dt>Id</dt><dd><code>{id}</code></dd>
<dt>Customer</dt><dd><a href="/dashboard/customers/{customer}">{who}</a></dd>
<dt>Bank</dt><dd>{bank}</dd>
<dt>Account name</dt><dd>{account}</dd>
<dt>Failure</dt><dd>{failure}</dd>
<dt>Created</dt><dd>{created}</dd>
<dt>Activated</dt><dd>{activated}</dd>
<dt>Canceled</dt><dd>{canceled}</dd>
</dl>
</section>"#,
        st = status(&v["status"]),
        id = text(&v["id"]),
        customer = text(&v["customer"]),
        who = match v["customer_name"].as_str().or(v["customer_email"].as_str()) {
            Some(s) => esc(s),
            None => text(&v["customer"]),
        },
        bank = text(&v["bank_name"]),
        account = text(&v["account_name"]),
        failure = text(&v["failure_reason"]),
        created = time(&v["created_at"]),
        activated = time(&v["activated_at"]),
        canceled = time(&v["canceled_at"]),
    );
    layout::page(&ctx, "Mandate", "/dashboard/mandates", &main)
}
