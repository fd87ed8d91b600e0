//! Merchants: search, create, and one merchant's page (approve live, payout
//! tier, payout approval threshold, payout limits, any other setting as a
//! JSON patch). Creating runs the operator API's `create_merchant_with`
//! and every change its `update_merchant_with`, each with the API's own
//! body type: the same validation, audit entry and effects.

use crate::api::route_table::Routes;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Map, Value};

use kobo_actors::admin::{load_merchant, search_merchants};
use kobo_actors::merchant::Merchant;
use kobo_actors::DomainError;

use crate::api::admin::{
    create_merchant_with, update_merchant_with, CreateMerchant, UpdateMerchant,
};
use crate::api::{ApiError, State};
use crate::checkout::esc;

use super::{
    audit, body, error_banner, error_status, html, naira, notice, operator, page, post, see_other,
    ConsoleData, Operator,
};

/// Merchants listed per search.
pub const SEARCH_LIMIT: usize = 50;

pub fn configure(cfg: &mut Routes) {
    cfg.route("/console/merchants", web::get().to(list))
        .route("/console/merchants", web::post().to(create))
        .route("/console/merchants/{id}", web::get().to(show))
        .route("/console/merchants/{id}", web::post().to(update));
}

fn query(req: &HttpRequest) -> String {
    web::Query::<std::collections::HashMap<String, String>>::from_query(req.query_string())
        .ok()
        .and_then(|q| q.get("q").cloned())
        .unwrap_or_default()
}

fn list_page(op: &Operator, state: &State, q: &str, banner: &str, name: &str) -> String {
    let rows = match search_merchants(&state.kobo, q, SEARCH_LIMIT) {
        Ok(list) if list.is_empty() => {
            "<tr><td colspan=\"5\">No merchant matches.</td></tr>".to_string()
        }
        Ok(list) => list.iter().map(row).collect(),
        Err(e) => format!("<tr><td colspan=\"5\">{}</td></tr>", esc(&e.message)),
    };
    let main = format!(
        r#"{banner}<form method="get" action="/console/merchants" class="inline" role="search">
<label for="q">Search by name or id</label>
<input id="q" name="q" type="search" value="{q}">
<button type="submit">Search</button>
</form>
<div class="scroll" tabindex="0" role="region" aria-label="Merchants"><table class="stack">
<thead><tr><th scope="col">Name</th><th scope="col">Id</th><th scope="col">Live</th><th scope="col">Payout tier</th><th scope="col">Created</th></tr></thead>
<tbody>{rows}</tbody></table></div>
<section aria-labelledby="create-title" class="card">
<h2 id="create-title">Create a merchant</h2>
<form method="post" action="/console/merchants">{csrf}
<label for="name">Name</label>
<input id="name" name="name" required maxlength="200" value="{name}">
<button type="submit">Create merchant</button>
</form>
</section>"#,
        q = esc(q),
        name = esc(name),
        csrf = op.csrf_input(),
    );
    page(op, "/console/merchants", "Merchants", &main, false)
}

fn row(m: &Merchant) -> String {
    format!(
        "<tr><th scope=\"row\"><a href=\"/console/merchants/{id}\">{name}</a></th><td data-label=\"Id\"><code>{id}</code></td><td data-label=\"Live\">{live}</td><td data-label=\"Payout tier\">{tier}</td><td data-label=\"Created\">{created}</td></tr>",
        id = m.id,
        name = esc(&m.name),
        live = if m.settings.live_approved { "approved" } else { "not yet" },
        tier = tier_name(m),
        created = m.created_at.format("%Y-%m-%d %H:%M"),
    )
}

fn tier_name(m: &Merchant) -> String {
    serde_json::to_value(m.settings.payout_tier)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

async fn list(req: HttpRequest, state: State, console: ConsoleData) -> HttpResponse {
    let op = match operator(&req, &state, &console).await {
        Ok(op) => op,
        Err(r) => return r,
    };
    html(200, list_page(&op, &state, &query(&req), "", ""))
}

async fn create(
    req: HttpRequest,
    state: State,
    console: ConsoleData,
    payload: web::Payload,
) -> HttpResponse {
    let (op, form) = match post(&req, &state, &console, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let name = form.text("name").to_string();
    let mut fields = Map::new();
    fields.insert("name".into(), Value::String(name.clone()));
    let made: Result<Value, ApiError> = async {
        let b: CreateMerchant = body(fields)?;
        create_merchant_with(&state, b, audit(&req)).await
    }
    .await;
    match made {
        Ok(v) => see_other(&format!(
            "/console/merchants/{}?done=created",
            v["id"].as_str().unwrap_or_default()
        )),
        Err(ApiError(e)) => html(
            error_status(&e),
            list_page(&op, &state, "", &error_banner(&e), &name),
        ),
    }
}

const NOTICES: &[(&str, &str)] = &[
    ("created", "Merchant created. Its secret keys were made and are never shown here: roll a key through the operator API to hand one over."),
    ("updated", "Settings saved."),
];

fn merchant_page(op: &Operator, m: &Merchant, banner: &str, patch: &str) -> String {
    let s = &m.settings;
    let settings = serde_json::to_string_pretty(s).unwrap_or_default();
    let tier = tier_name(m);
    let tiers: String = ["starter", "verified", "enterprise"]
        .iter()
        .map(|t| {
            let sel = if *t == tier { " selected" } else { "" };
            format!(r#"<option value="{t}"{sel}>{t}</option>"#)
        })
        .collect();
    let threshold = s
        .payout_approval_threshold
        .map(|t| t.to_string())
        .unwrap_or_default();
    let (per_payout, daily) = s
        .payout_limits
        .as_ref()
        .map(|l| (l.per_payout.to_string(), l.daily.to_string()))
        .unwrap_or_default();
    let live = if s.live_approved {
        "<p>Live payments: <strong>approved</strong>.</p>".to_string()
    } else {
        format!(
            r#"<form method="post" action="/console/merchants/{id}">{csrf}<input type="hidden" name="action" value="live">
<p>Live payments: <strong>not approved</strong>.</p><button type="submit">Approve live payments</button></form>"#,
            id = m.id,
            csrf = op.csrf_input()
        )
    };
    let threshold_now = s
        .payout_approval_threshold
        .map(naira)
        .unwrap_or_else(|| "none".into());
    let main = format!(
        r#"{banner}<dl class="facts"><dt>Id</dt><dd><code>{id}</code></dd><dt>Created</dt><dd>{created}</dd><dt>Payout approval threshold</dt><dd>{threshold_now}</dd></dl>
<section class="card" aria-labelledby="live-title"><h2 id="live-title">Live approval</h2>{live}</section>
<section class="card" aria-labelledby="tier-title"><h2 id="tier-title">Payout tier</h2>
<form method="post" action="/console/merchants/{id}">{csrf}<input type="hidden" name="action" value="tier">
<label for="tier">Tier</label><select id="tier" name="tier">{tiers}</select>
<button type="submit">Save tier</button></form></section>
<section class="card" aria-labelledby="limits-title"><h2 id="limits-title">Payout approval and limits</h2>
<form method="post" action="/console/merchants/{id}">{csrf}<input type="hidden" name="action" value="limits">
<label for="threshold">Approval threshold (kobo; empty: none)</label><input id="threshold" name="threshold" inputmode="numeric" value="{threshold}">
<label for="per_payout">Limit per payout (kobo; both empty: the tier's)</label><input id="per_payout" name="per_payout" inputmode="numeric" value="{per_payout}">
<label for="daily">Daily limit (kobo)</label><input id="daily" name="daily" inputmode="numeric" value="{daily}">
<button type="submit">Save approval and limits</button></form></section>
<section class="card" aria-labelledby="patch-title"><h2 id="patch-title">Other settings</h2>
<form method="post" action="/console/merchants/{id}">{csrf}<input type="hidden" name="action" value="patch">
<label for="patch">A JSON patch of the settings (fields named change; <code>null</code> resets one)</label>
<textarea id="patch" name="patch" rows="5" spellcheck="false">{patch}</textarea>
<button type="submit">Apply patch</button></form>
<h3>Current settings</h3><pre class="scroll" tabindex="0">{settings}</pre></section>"#,
        id = m.id,
        created = m.created_at.format("%Y-%m-%d %H:%M UTC"),
        csrf = op.csrf_input(),
        settings = esc(&settings),
        patch = esc(patch),
    );
    page(op, "/console/merchants", &m.name, &main, false)
}

async fn show(
    req: HttpRequest,
    state: State,
    console: ConsoleData,
    path: web::Path<String>,
) -> HttpResponse {
    let op = match operator(&req, &state, &console).await {
        Ok(op) => op,
        Err(r) => return r,
    };
    match merchant(&state, &path) {
        Ok(m) => html(200, merchant_page(&op, &m, &notice(&req, NOTICES), "")),
        Err(e) => super::message(error_status(&e), "Not found", &e.message),
    }
}

fn merchant(state: &State, raw: &str) -> Result<Merchant, DomainError> {
    let id = crate::api::parse_id(raw, "merchant").map_err(|e| e.0)?;
    load_merchant(&state.kobo, id)?.ok_or_else(|| DomainError::not_found("merchant", id))
}

/// An integer field of kobo (empty: null).
fn kobo_field(form: &super::Form, name: &str) -> Result<Value, DomainError> {
    let t = form.text(name).trim();
    if t.is_empty() {
        return Ok(Value::Null);
    }
    t.parse::<i64>()
        .map(Value::from)
        .map_err(|_| DomainError::invalid(name, format!("{name} is a whole number of kobo")))
}

/// The settings patch a form asks for.
fn patch_of(form: &super::Form) -> Result<Value, DomainError> {
    Ok(match form.text("action") {
        "live" => json!({"live_approved": true}),
        "tier" => json!({"payout_tier": form.text("tier")}),
        "limits" => {
            let threshold = kobo_field(form, "threshold")?;
            let (per, daily) = (kobo_field(form, "per_payout")?, kobo_field(form, "daily")?);
            let limits = if per.is_null() && daily.is_null() {
                Value::Null
            } else {
                json!({"per_payout": per, "daily": daily})
            };
            json!({"payout_approval_threshold": threshold, "payout_limits": limits})
        }
        "patch" => serde_json::from_str::<Value>(form.text("patch"))
            .map_err(|e| DomainError::invalid("settings", format!("the patch is not JSON: {e}")))?,
        _ => return Err(DomainError::invalid("action", "unknown action")),
    })
}

async fn update(
    req: HttpRequest,
    state: State,
    console: ConsoleData,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    let (op, form) = match post(&req, &state, &console, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let done: Result<Value, ApiError> = async {
        let patch = patch_of(&form)?;
        let mut fields = Map::new();
        fields.insert("settings".into(), patch);
        let b: UpdateMerchant = body(fields)?;
        update_merchant_with(&state, &path, b, audit(&req)).await
    }
    .await;
    match done {
        Ok(_) => see_other(&format!(
            "/console/merchants/{}?done=updated",
            path.as_str()
        )),
        Err(ApiError(e)) => match merchant(&state, &path) {
            Ok(m) => html(
                error_status(&e),
                merchant_page(&op, &m, &error_banner(&e), form.text("patch")),
            ),
            Err(e) => super::message(error_status(&e), "Not found", &e.message),
        },
    }
}
