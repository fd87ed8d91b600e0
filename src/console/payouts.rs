//! Payouts waiting for an operator's approval (at or above their merchant's
//! `payout_approval_threshold`), oldest first, each with Approve and
//! Reject: the operator API's `review_with`, so the same actor command,
//! audit entry and events.

use crate::api::route_table::Routes;
use actix_web::{web, HttpRequest, HttpResponse};

use kobo_actors::admin::load_merchant;
use kobo_actors::payout::service::awaiting_approval;

use crate::api::payouts::review_with;
use crate::api::{ApiError, State};
use crate::checkout::esc;

use super::{
    audit, error_banner, error_status, html, naira, notice, operator, page, post, see_other,
    ConsoleData, Operator,
};

/// Payouts listed at most.
pub const LIMIT: usize = 100;

pub fn configure(cfg: &mut Routes) {
    cfg.route("/console/payouts", web::get().to(list))
        .route("/console/payouts/{id}/approve", web::post().to(approve))
        .route("/console/payouts/{id}/reject", web::post().to(reject));
}

const NOTICES: &[(&str, &str)] = &[
    ("approved", "Payout approved: it is queued for the bank."),
    (
        "rejected",
        "Payout rejected: the money is back in the merchant's available balance.",
    ),
];

fn list_page(op: &Operator, state: &State, banner: &str) -> String {
    let rows = match awaiting_approval(&state.kobo, LIMIT) {
        Ok(list) if list.is_empty() => {
            "<tr><td colspan=\"6\">No payout is waiting for approval.</td></tr>".to_string()
        }
        Ok(list) => list
            .iter()
            .map(|p| {
                let merchant = load_merchant(&state.kobo, p.merchant)
                    .ok()
                    .flatten()
                    .map(|m| m.name)
                    .unwrap_or_default();
                format!(
                    r#"<tr><th scope="row"><code>{id}</code></th><td data-label="Merchant"><a href="/console/merchants/{mid}">{merchant}</a></td><td data-label="Mode">{mode}</td><td data-label="Amount">{amount}</td><td data-label="Created">{created}</td>
<td class="actions"><form method="post" action="/console/payouts/{id}/approve">{csrf}<button type="submit" aria-label="Approve payout {id}">Approve</button></form>
<form method="post" action="/console/payouts/{id}/reject">{csrf}<button type="submit" class="secondary" aria-label="Reject payout {id}">Reject</button></form></td></tr>"#,
                    id = p.id,
                    mid = p.merchant,
                    merchant = esc(&merchant),
                    mode = p.mode.as_str(),
                    amount = naira(p.amount),
                    created = p.created_at.format("%Y-%m-%d %H:%M"),
                    csrf = op.csrf_input(),
                )
            })
            .collect(),
        Err(e) => format!("<tr><td colspan=\"6\">{}</td></tr>", esc(&e.message)),
    };
    let main = format!(
        r#"{banner}<div class="scroll" tabindex="0" role="region" aria-label="Payouts waiting for approval"><table class="stack">
<thead><tr><th scope="col">Payout</th><th scope="col">Merchant</th><th scope="col">Mode</th><th scope="col">Amount</th><th scope="col">Created</th><th scope="col">Decision</th></tr></thead>
<tbody>{rows}</tbody></table></div>"#
    );
    page(op, "/console/payouts", "Payout approvals", &main, false)
}

async fn list(req: HttpRequest, state: State, console: ConsoleData) -> HttpResponse {
    let op = match operator(&req, &state, &console).await {
        Ok(op) => op,
        Err(r) => return r,
    };
    html(200, list_page(&op, &state, &notice(&req, NOTICES)))
}

async fn decide(
    req: HttpRequest,
    state: State,
    console: ConsoleData,
    path: web::Path<String>,
    payload: web::Payload,
    approve: bool,
) -> HttpResponse {
    let (op, _) = match post(&req, &state, &console, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    match review_with(&state, &path, approve, audit(&req)).await {
        Ok(_) => see_other(if approve {
            "/console/payouts?done=approved"
        } else {
            "/console/payouts?done=rejected"
        }),
        Err(ApiError(e)) => html(error_status(&e), list_page(&op, &state, &error_banner(&e))),
    }
}

async fn approve(
    req: HttpRequest,
    state: State,
    console: ConsoleData,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    decide(req, state, console, path, payload, true).await
}

async fn reject(
    req: HttpRequest,
    state: State,
    console: ConsoleData,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    decide(req, state, console, path, payload, false).await
}
