//! Payouts (owners only): the list with each payout's state (awaiting
//! approval, queued, ...) and a cancel button where the state allows it;
//! a new payout in two steps: the bank account's name enquiry (through
//! `POST /v1/bank_accounts`' own endpoint and run) is shown with the fee
//! before anything is sent, then the confirmation posts through
//! `POST /v1/payouts`' own endpoint and run.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};
use uuid::Uuid;

use kobo_actors::banks;
use kobo_actors::payout::service as payout_service;

use super::layout::{self, money, money_of, status, text, time};
use super::payments::minor_units;
use super::{error_message, see_other, signed_in, signed_in_form, Ctx, Form};
use crate::api::endpoint::Call;
use crate::api::{body::NoFields, payouts, State};
use crate::checkout::esc;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/dashboard/payouts", web::get().to(list))
        .route("/dashboard/payouts/enquire", web::post().to(enquire))
        .route("/dashboard/payouts/create", web::post().to(create))
        .route("/dashboard/payouts/{id}/cancel", web::post().to(cancel));
}

fn owner_only(ctx: &Ctx) -> Option<HttpResponse> {
    (!ctx.user.role.is_owner())
        .then(|| layout::forbidden(ctx, "Only an owner can send or cancel payouts."))
}

fn list_page(ctx: &Ctx, error: Option<&str>, form: Option<&Form>) -> HttpResponse {
    let kobo = &ctx.state.kobo;
    let page = match payout_service::list(kobo, ctx.merchant_id(), ctx.mode(), 50, None) {
        Ok(p) => p,
        Err(e) => return layout::server_error(e),
    };
    let owner = ctx.user.role.is_owner();
    let rows: String = page
        .data
        .iter()
        .map(|p| {
            let st = p["status"].as_str().unwrap_or("");
            let cancel = if owner && matches!(st, "awaiting_approval" | "queued") {
                format!(
                    r#"<form method="post" action="/dashboard/payouts/{id}/cancel" data-confirm="Cancel this payout?">{inputs}<button type="submit">Cancel</button></form>"#,
                    id = text(&p["id"]),
                    inputs = ctx.form_inputs()
                )
            } else {
                String::new()
            };
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{cancel}</td></tr>",
                money_of(p),
                status(&p["status"]),
                money(p["total_debited"].as_i64().unwrap_or(0), "NGN"),
                time(&p["created_at"]),
            )
        })
        .collect();
    let rows = if rows.is_empty() {
        r#"<tr><td colspan="5">No payouts yet.</td></tr>"#.to_string()
    } else {
        rows
    };
    let new = if owner {
        let banks = banks::banks_view(ctx.mode());
        let chosen = form.map(|f| f.get("bank_code")).unwrap_or("");
        let options: String = banks["data"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|b| {
                        let code = b["code"].as_str().unwrap_or("");
                        format!(
                            r#"<option value="{c}"{sel}>{n}</option>"#,
                            c = esc(code),
                            sel = if code == chosen { " selected" } else { "" },
                            n = text(&b["name"])
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        format!(
            r#"<form method="post" action="/dashboard/payouts/enquire" class="card stack" aria-labelledby="new-h">
  <h2 id="new-h">New payout</h2>
  {inputs}
  <label for="p-bank">Bank</label>
  <select id="p-bank" name="bank_code" required>{options}</select>
  <label for="p-account">Account number (10 digits)</label>
  <input id="p-account" name="account_number" inputmode="numeric" pattern="[0-9]{{10}}" maxlength="10" required value="{account}">
  <label for="p-amount">Amount in naira</label>
  <input id="p-amount" name="amount" inputmode="decimal" required value="{amount}">
  <button type="submit">Check account</button>
</form>"#,
            inputs = ctx.form_inputs(),
            account = esc(form.map(|f| f.get("account_number")).unwrap_or("")),
            amount = esc(form.map(|f| f.get("amount")).unwrap_or("")),
        )
    } else {
        r#"<p class="hint">Only an owner can send payouts.</p>"#.to_string()
    };
    let main = format!(
        r#"{alert}{new}
<section class="card" aria-labelledby="list-h"><h2 id="list-h">Payouts</h2>
<div class="scroll"><table><thead><tr><th scope="col">Amount</th><th scope="col">State</th><th scope="col">Debited</th><th scope="col">Created</th><th scope="col"><span class="sr">Actions</span></th></tr></thead><tbody>{rows}</tbody></table></div></section>"#,
        alert = layout::alert(error),
    );
    let code = if error.is_some() { 400 } else { 200 };
    layout::html(
        code,
        layout::frame(ctx, "Payouts", "/dashboard/payouts", &main),
    )
}

async fn list(req: HttpRequest, state: State) -> HttpResponse {
    match signed_in(&req, &state).await {
        Ok(ctx) => list_page(&ctx, None, None),
        Err(r) => r,
    }
}

/// Step one: name enquiry (the account is saved once the bank confirms
/// it, as `POST /v1/bank_accounts` does), then the confirmation page.
async fn enquire(req: HttpRequest, state: State, payload: web::Payload) -> HttpResponse {
    let (ctx, form) = match signed_in_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    if let Some(r) = owner_only(&ctx) {
        return r;
    }
    let Some(nonce) = form.nonce() else {
        return list_page(
            &ctx,
            Some("The form is incomplete; reload the page."),
            Some(&form),
        );
    };
    let Some(amount) = minor_units(form.get("amount")) else {
        return list_page(
            &ctx,
            Some("The amount must be a number like 5000 or 5000.50."),
            Some(&form),
        );
    };
    let body = json!({
        "bank_code": form.get("bank_code"),
        "account_number": form.get("account_number"),
    });
    let (code, account) = ctx
        .act(
            payouts::ADD_BANK_ACCOUNT,
            nonce,
            &body,
            payouts::add_bank_account_run,
        )
        .await;
    if code >= 300 {
        return list_page(&ctx, Some(&error_message(&account)), Some(&form));
    }
    let brand = ctx
        .session
        .brand
        .unwrap_or_else(|| ctx.merchant.default_brand(ctx.mode()));
    let quote =
        payout_service::quote_view(&ctx.state.kobo, &ctx.merchant, ctx.mode(), amount, brand)
            .ok()
            .and_then(|q| serde_json::to_value(q).ok())
            .unwrap_or(Value::Null);
    let main = format!(
        r#"<section class="card" aria-labelledby="confirm-h">
<h2 id="confirm-h">Confirm the payout</h2>
<dl>
<dt>Account name</dt><dd id="account-name">{name}</dd>
<dt>Bank</dt><dd>{bank}</dd>
<dt>Account number</dt><dd>{number}</dd>
<dt>Amount</dt><dd>{amount}</dd>
<dt>Fee and VAT</dt><dd>{fee}</dd>
<dt>Taken from the balance</dt><dd>{total}</dd>
</dl>
<form method="post" action="/dashboard/payouts/create" class="stack">
  {inputs}
  <input type="hidden" name="bank_account_id" value="{account_id}">
  <input type="hidden" name="amount" value="{amount_minor}">
  <input type="hidden" name="brand" value="{brand}">
  <button type="submit">Send {amount} to {name}</button>
</form>
<p><a href="/dashboard/payouts">Change</a></p>
</section>"#,
        name = text(&account["account_name"]),
        bank = text(&account["bank_name"]),
        number = text(&account["account_number"]),
        amount = money(amount, "NGN"),
        fee = money(
            quote["fee"].as_i64().unwrap_or(0) + quote["vat"].as_i64().unwrap_or(0),
            "NGN"
        ),
        total = money(quote["total_debited"].as_i64().unwrap_or(amount), "NGN"),
        inputs = ctx.form_inputs(),
        account_id = text(&account["id"]),
        amount_minor = amount,
    );
    layout::page(&ctx, "New payout", "/dashboard/payouts", &main)
}

/// Step two: the payout, through `POST /v1/payouts`.
async fn create(req: HttpRequest, state: State, payload: web::Payload) -> HttpResponse {
    let (ctx, form) = match signed_in_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    if let Some(r) = owner_only(&ctx) {
        return r;
    }
    let Some(nonce) = form.nonce() else {
        return list_page(&ctx, Some("The form is incomplete; reload the page."), None);
    };
    let mut body = json!({
        "amount": form.get("amount").parse::<i64>().unwrap_or(0),
        "currency": "NGN",
        "bank_account_id": form.get("bank_account_id"),
    });
    if !form.get("brand").is_empty() {
        body["brand"] = form.get("brand").into();
    }
    let (code, answer) = ctx
        .act(payouts::CREATE_PAYOUT, nonce, &body, payouts::create_run)
        .await;
    if code >= 300 {
        return list_page(&ctx, Some(&error_message(&answer)), None);
    }
    see_other("/dashboard/payouts")
}

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
    if let Some(r) = owner_only(&ctx) {
        return r;
    }
    let Some(nonce) = form.nonce() else {
        return list_page(&ctx, Some("The form is incomplete; reload the page."), None);
    };
    if Uuid::try_parse(&path).is_err() {
        return layout::not_found(&ctx, "payout");
    }
    let raw = path.into_inner();
    let (code, answer) = ctx
        .act(
            payouts::CANCEL_PAYOUT,
            nonce,
            &json!({}),
            |c: Call, _: NoFields| async move { payouts::cancel_run(c, &raw).await },
        )
        .await;
    if code == 404 {
        return layout::not_found(&ctx, "payout");
    }
    if code >= 300 {
        return list_page(&ctx, Some(&error_message(&answer)), None);
    }
    see_other("/dashboard/payouts")
}
