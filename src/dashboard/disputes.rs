//! Disputes: the list (newest first), a dispute's detail with its
//! evidence, and the evidence form (owners and developers; a viewer reads),
//! which posts through `POST /v1/disputes/{id}/evidence`' own endpoint and
//! run.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Map, Value};
use uuid::Uuid;

use kobo_actors::refund::{service, Dispute};

use super::layout::{self, money_of, status, text, time};
use super::{error_message, see_other, signed_in, signed_in_form, Ctx, Form};
use crate::api::{refunds, State};
use crate::checkout::esc;

/// Rows of the list.
const PAGE_SIZE: usize = 50;

/// The evidence fields: the API's names and their labels.
const EVIDENCE: &[(&str, &str)] = &[
    ("text", "What happened"),
    ("customer_name", "Customer name"),
    ("customer_email", "Customer email"),
    ("service_date", "Date the goods or service were provided"),
    ("receipt_url", "Receipt URL"),
    ("tracking_number", "Tracking number"),
];

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/dashboard/disputes", web::get().to(list))
        .route("/dashboard/disputes/{id}", web::get().to(detail))
        .route(
            "/dashboard/disputes/{id}/evidence",
            web::post().to(evidence),
        );
}

async fn list(req: HttpRequest, state: State) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let page = match service::list_disputes(
        &ctx.state.kobo,
        ctx.merchant_id(),
        ctx.mode(),
        PAGE_SIZE,
        None,
    ) {
        Ok(p) => p,
        Err(e) => return layout::server_error(e),
    };
    let rows: String = page
        .data
        .iter()
        .map(|d| {
            format!(
                r#"<tr><td><a href="/dashboard/disputes/{id}">{amount}</a></td><td>{st}</td><td>{reason}</td><td>{respond_by}</td><td>{created}</td></tr>"#,
                id = text(&d["id"]),
                amount = money_of(d),
                st = status(&d["status"]),
                reason = text(&d["reason"]),
                respond_by = time(&d["respond_by"]),
                created = time(&d["created_at"]),
            )
        })
        .collect();
    let rows = if rows.is_empty() {
        r#"<tr><td colspan="5">No disputes.</td></tr>"#.to_string()
    } else {
        rows
    };
    let main = format!(
        r#"<section class="card" aria-labelledby="list-h"><h2 id="list-h">Disputes</h2>
<div class="scroll"><table><thead><tr><th scope="col">Amount</th><th scope="col">Status</th><th scope="col">Reason</th><th scope="col">Respond by</th><th scope="col">Opened</th></tr></thead><tbody>{rows}</tbody></table></div></section>"#
    );
    layout::page(&ctx, "Disputes", "/dashboard/disputes", &main)
}

/// The dispute `raw` names, if it is the session's merchant's and mode's.
fn own(ctx: &Ctx, raw: &str) -> Option<Dispute> {
    let id = Uuid::try_parse(raw).ok()?;
    service::load_dispute(&ctx.state.kobo, id)
        .ok()
        .flatten()
        .filter(|d| d.merchant == ctx.merchant_id() && d.mode == ctx.mode())
}

fn detail_page(ctx: &Ctx, raw: &str, error: Option<&str>, form: Option<&Form>) -> HttpResponse {
    let Some(d) = own(ctx, raw) else {
        return layout::not_found(ctx, "dispute");
    };
    let v = d.to_api();
    let evidence: String = EVIDENCE
        .iter()
        .filter_map(|(k, label)| {
            let given = v["evidence"][*k].as_str()?;
            Some(format!("<dt>{}</dt><dd>{}</dd>", esc(label), esc(given)))
        })
        .collect();
    let evidence = if evidence.is_empty() {
        "<p>No evidence submitted yet.</p>".to_string()
    } else {
        format!(
            "<dl>{evidence}</dl><p class=\"hint\">Submitted {}</p>",
            time(&v["evidence_submitted_at"])
        )
    };
    let form_html = if v["status"] == "open" && ctx.user.role.may_operate() {
        let fields: String = EVIDENCE
            .iter()
            .map(|(k, label)| {
                let value = form
                    .map(|f| f.get(k).to_string())
                    .or_else(|| v["evidence"][*k].as_str().map(str::to_string))
                    .unwrap_or_default();
                if *k == "text" {
                    format!(
                        r#"<label for="e-{k}">{label}</label>
  <textarea id="e-{k}" name="{k}" maxlength="5000" rows="5">{value}</textarea>"#,
                        value = esc(&value)
                    )
                } else {
                    format!(
                        r#"<label for="e-{k}">{label}</label>
  <input id="e-{k}" name="{k}" maxlength="5000" value="{value}">"#,
                        value = esc(&value)
                    )
                }
            })
            .collect();
        format!(
            r#"<form method="post" action="/dashboard/disputes/{id}/evidence" class="card stack" aria-labelledby="ev-form-h">
  <h2 id="ev-form-h">Submit evidence</h2>
  <p class="hint">Replaces any evidence submitted before. Accepted until {respond_by}.</p>
  {inputs}
  {fields}
  <button type="submit">Submit evidence</button>
</form>"#,
            id = d.id,
            respond_by = time(&v["respond_by"]),
            inputs = ctx.form_inputs(),
        )
    } else if v["status"] == "open" {
        r#"<p class="hint">A viewer cannot submit evidence.</p>"#.to_string()
    } else {
        String::new()
    };
    let main = format!(
        r#"{alert}<section class="card" aria-labelledby="sum-h">
<h2 id="sum-h">{amount} {st}</h2>
<dl>
<dt>Id</dt><dd><code>{id}</code></dd>
<dt>Payment</dt><dd><a href="/dashboard/payments/{pi}"><code>{pi}</code></a></dd>
<dt>Reason</dt><dd>{reason}</dd>
<dt>Respond by</dt><dd>{respond_by}</dd>
<dt>Opened</dt><dd>{created}</dd>
</dl>
</section>
<section class="card" aria-labelledby="evidence-h"><h2 id="evidence-h">Evidence</h2>{evidence}</section>
{form_html}"#,
        alert = layout::alert(error),
        amount = money_of(&v),
        st = status(&v["status"]),
        id = text(&v["id"]),
        pi = text(&v["payment_intent"]),
        reason = text(&v["reason"]),
        respond_by = time(&v["respond_by"]),
        created = time(&v["created_at"]),
    );
    let code = if error.is_some() { 400 } else { 200 };
    layout::html(
        code,
        layout::frame(ctx, "Dispute", "/dashboard/disputes", &main),
    )
}

async fn detail(req: HttpRequest, state: State, path: web::Path<String>) -> HttpResponse {
    match signed_in(&req, &state).await {
        Ok(ctx) => detail_page(&ctx, &path, None, None),
        Err(r) => r,
    }
}

/// The evidence form, through `POST /v1/disputes/{id}/evidence`.
async fn evidence(
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
        return layout::forbidden(&ctx, "A viewer cannot submit dispute evidence.");
    }
    let Some(d) = own(&ctx, &path) else {
        return layout::not_found(&ctx, "dispute");
    };
    let Some(nonce) = form.nonce() else {
        return detail_page(
            &ctx,
            &path,
            Some("The form is incomplete; reload the page."),
            Some(&form),
        );
    };
    // Empty fields are left out, as a person leaving them blank means.
    let body: Map<String, Value> = EVIDENCE
        .iter()
        .filter(|(k, _)| !form.get(k).is_empty())
        .map(|(k, _)| (k.to_string(), json!(form.get(k))))
        .collect();
    let raw = d.id.to_string();
    let (code, answer) = ctx
        .act(
            refunds::SUBMIT_EVIDENCE,
            nonce,
            &Value::Object(body),
            |c, b: refunds::SubmitEvidenceRequest| async move {
                refunds::evidence_run(c, &raw, b).await
            },
        )
        .await;
    if code >= 300 {
        return detail_page(&ctx, &path, Some(&error_message(&answer)), Some(&form));
    }
    see_other(&format!("/dashboard/disputes/{}", d.id))
}
