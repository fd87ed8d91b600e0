//! Settings (owners change them; everyone reads them): automatic
//! settlement (on or off, the bank account, the minimum, what happens to
//! dollars), USDT wallets (add, clear, which one settles), brands (owners
//! add one through `POST /v1/brands`' own declaration and run), the
//! payout approval threshold (set by kobo; shown), and the team (owners
//! invite people and sign a person out everywhere).
//!
//! Settings changes send the merchant actor the same `UpdateSettings` the
//! operator's `POST /admin/v1/merchants/{id}` sends, limited to the fields
//! a merchant may set (`auto_settlement`, `usdt.settle_wallet`; the rest
//! are kobo's: pricing, limits, live approval, ...); wallets go through the same
//! functions as the operator's wallet routes; invitations through
//! [`dashboard_user::invite`]. Each is audited with origin `dashboard`.

use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};
use serde_json::{json, Value};
use uuid::Uuid;

use kobo_actors::admin::UpdateSettings;
use kobo_actors::audit::Audit;
use kobo_actors::dashboard_user::{self, Role};
use kobo_actors::merchant::{AutoSettlement, Settings};
use kobo_actors::usdt::service::wallets;

use super::layout::{self, money, text};
use super::payments::minor_units;
use super::{error_message, see_other, signed_in, signed_in_form, Ctx, Form};
use crate::api::request::RequestId;
use crate::api::{body, brands, error_body, usdt, State};
use crate::checkout::esc;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/dashboard/settings", web::get().to(page))
        .route("/dashboard/settings/settlement", web::post().to(settlement))
        .route("/dashboard/settings/wallets", web::post().to(add_wallet))
        .route(
            "/dashboard/settings/wallets/{id}/clear",
            web::post().to(clear_wallet),
        )
        .route(
            "/dashboard/settings/settle-wallet",
            web::post().to(settle_wallet),
        )
        .route("/dashboard/settings/brands", web::post().to(add_brand))
        .route("/dashboard/settings/team", web::post().to(invite))
        .route(
            "/dashboard/settings/team/{id}/sign-out",
            web::post().to(revoke),
        );
}

fn audit(req: &HttpRequest) -> Audit {
    Audit::dashboard(
        req.extensions()
            .get::<RequestId>()
            .map(|r| r.0.clone())
            .unwrap_or_default(),
    )
}

fn owner_only(ctx: &Ctx) -> Option<HttpResponse> {
    (!ctx.user.role.is_owner())
        .then(|| layout::forbidden(ctx, "Only an owner can change settings and the team."))
}

fn render(ctx: &Ctx, top: &str, status: u16) -> HttpResponse {
    let kobo = &ctx.state.kobo;
    let s = &ctx.merchant.settings;
    let auto: AutoSettlement = s
        .auto_settlement
        .clone()
        .unwrap_or_else(|| serde_json::from_value(json!({})).expect("every field has a default"));
    let settle_wallet = s.usdt.as_ref().and_then(|u| u.settle_wallet);
    let owner = ctx.user.role.is_owner();
    let disabled = if owner { "" } else { " disabled" };
    let accounts = kobo_actors::banks::list(kobo, ctx.merchant_id(), ctx.mode())
        .ok()
        .and_then(|v| v["data"].as_array().cloned())
        .unwrap_or_default();
    let account_options: String = std::iter::once(r#"<option value="">None</option>"#.to_string())
        .chain(accounts.iter().map(|a| {
            let id = a["id"].as_str().unwrap_or("");
            format!(
                r#"<option value="{}"{}>{} · {} · {}</option>"#,
                esc(id),
                if auto.bank_account_id.map(|u| u.to_string()).as_deref() == Some(id) {
                    " selected"
                } else {
                    ""
                },
                text(&a["account_name"]),
                text(&a["bank_name"]),
                text(&a["account_number_last4"]),
            )
        }))
        .collect();
    let usd_options: String = [
        ("keep", "Keep dollars"),
        ("convert", "Convert to naira"),
        ("usdt", "Send as USDT"),
    ]
    .iter()
    .map(|(v, l)| {
        let current = serde_json::to_value(auto.usd).ok();
        let sel = if current.as_ref().and_then(|c| c.as_str()) == Some(v) {
            " selected"
        } else {
            ""
        };
        format!(r#"<option value="{v}"{sel}>{l}</option>"#)
    })
    .collect();
    let minimum = format!("{}.{:02}", auto.minimum / 100, auto.minimum % 100);
    let settlement = format!(
        r#"<section class="card" aria-labelledby="set-h"><h2 id="set-h">Automatic settlement</h2>
<form method="post" action="/dashboard/settings/settlement" class="stack">
  {inputs}
  <input type="checkbox" id="s-enabled" name="enabled" value="yes"{checked}{disabled}>
  <label for="s-enabled" class="inline">Pay out the available naira balance automatically</label>
  <label for="s-account">Bank account</label>
  <select id="s-account" name="bank_account_id"{disabled}>{account_options}</select>
  <label for="s-minimum">Minimum payout in naira</label>
  <input id="s-minimum" name="minimum" inputmode="decimal" value="{minimum}"{disabled}>
  <label for="s-usd">Dollars</label>
  <select id="s-usd" name="usd"{disabled}>{usd_options}</select>
  {button}
</form>
<p class="hint">Payouts at or above {threshold} wait for kobo's approval (set by kobo).</p></section>"#,
        inputs = ctx.form_inputs(),
        checked = if auto.enabled { " checked" } else { "" },
        minimum = minimum,
        button = if owner {
            r#"<button type="submit">Save settlement</button>"#
        } else {
            ""
        },
        threshold = s
            .payout_approval_threshold
            .map(|t| money(t, "NGN"))
            .unwrap_or_else(|| "no amount".into()),
    );
    let wallets = wallets(kobo, ctx.merchant_id(), ctx.mode()).unwrap_or_default();
    let wallet_rows: String = wallets
        .iter()
        .map(|w| {
            let settles = settle_wallet == Some(w.id);
            let actions = if owner {
                format!(
                    r#"<form method="post" action="/dashboard/settings/settle-wallet" class="inline-form">{inputs}<input type="hidden" name="wallet" value="{id}"><button type="submit"{dis}>Settle here</button></form>
<form method="post" action="/dashboard/settings/wallets/{id}/clear" class="inline-form" data-confirm="Clear this wallet?">{inputs}<button type="submit">Clear</button></form>"#,
                    inputs = ctx.form_inputs(),
                    id = w.id,
                    dis = if settles { " disabled" } else { "" },
                )
            } else {
                String::new()
            };
            format!(
                r#"<tr><td>{}</td><td><code class="wrap">{}</code></td><td>{}</td><td>{}</td><td>{actions}</td></tr>"#,
                esc(w.label.as_deref().unwrap_or("")),
                esc(&w.address),
                w.network.as_str(),
                if settles { "Settles here" } else { "" },
            )
        })
        .collect();
    let wallet_rows = if wallet_rows.is_empty() {
        r#"<tr><td colspan="5">No USDT wallets.</td></tr>"#.to_string()
    } else {
        wallet_rows
    };
    let add_wallet = if owner {
        format!(
            r#"<form method="post" action="/dashboard/settings/wallets" class="stack">
  {inputs}
  <label for="w-network">Network</label>
  <select id="w-network" name="network"><option value="TRC20">TRC20 (Tron)</option><option value="ERC20">ERC20 (Ethereum)</option></select>
  <label for="w-address">Address</label>
  <input id="w-address" name="address" required maxlength="128" autocomplete="off">
  <label for="w-label">Label</label>
  <input id="w-label" name="label" maxlength="100">
  <button type="submit">Add wallet</button>
</form>"#,
            inputs = ctx.form_inputs()
        )
    } else {
        String::new()
    };
    let brands: String = ctx
        .brands
        .iter()
        .map(|(id, name)| format!("<li>{} <code>{id}</code></li>", esc(name)))
        .collect();
    let add_brand = if owner {
        format!(
            r#"<form method="post" action="/dashboard/settings/brands" class="stack">
  {inputs}
  <label for="b-name">New brand's name</label>
  <input id="b-name" name="name" required maxlength="200">
  <button type="submit">Add brand</button>
</form>"#,
            inputs = ctx.form_inputs()
        )
    } else {
        r#"<p class="hint">Only an owner adds brands.</p>"#.to_string()
    };
    let team = dashboard_user::team(kobo, ctx.merchant_id()).unwrap_or_default();
    let team_rows: String = team
        .iter()
        .map(|u| {
            let action = if owner && u.id != ctx.user.id {
                format!(
                    r#"<form method="post" action="/dashboard/settings/team/{}/sign-out" data-confirm="Sign this person out everywhere?">{}<button type="submit">Sign out everywhere</button></form>"#,
                    u.id,
                    ctx.csrf_input()
                )
            } else {
                String::new()
            };
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{action}</td></tr>",
                esc(&u.email),
                u.role.as_str(),
                if u.password_hash.is_some() { "active" } else { "invited" },
            )
        })
        .collect();
    let invite = if owner {
        format!(
            r#"<form method="post" action="/dashboard/settings/team" class="stack">
  {csrf}
  <label for="t-email">Email</label>
  <input id="t-email" name="email" type="email" required maxlength="254">
  <label for="t-role">Role</label>
  <select id="t-role" name="role"><option value="viewer">Viewer (reads only)</option><option value="developer">Developer (payments, refunds)</option><option value="owner">Owner (everything)</option></select>
  <button type="submit">Invite</button>
</form>"#,
            csrf = ctx.csrf_input()
        )
    } else {
        String::new()
    };
    let main = format!(
        r#"{top}{settlement}
<section class="card" aria-labelledby="w-h"><h2 id="w-h">USDT wallets ({mode} mode)</h2>
<div class="scroll"><table><thead><tr><th scope="col">Label</th><th scope="col">Address</th><th scope="col">Network</th><th scope="col">Settlement</th><th scope="col"><span class="sr">Actions</span></th></tr></thead><tbody id="wallet-rows">{wallet_rows}</tbody></table></div>
{add_wallet}</section>
<section class="card" aria-labelledby="b-h"><h2 id="b-h">Brands ({mode} mode)</h2><ul id="brand-list">{brands}</ul>
{add_brand}</section>
<section class="card" aria-labelledby="t-h"><h2 id="t-h">Team</h2>
<div class="scroll"><table><thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">State</th><th scope="col"><span class="sr">Actions</span></th></tr></thead><tbody>{team_rows}</tbody></table></div>
{invite}</section>"#,
        mode = ctx.mode().as_str(),
    );
    layout::html(
        status,
        layout::frame(ctx, "Settings", "/dashboard/settings", &main),
    )
}

async fn page(req: HttpRequest, state: State) -> HttpResponse {
    match signed_in(&req, &state).await {
        Ok(ctx) => render(&ctx, "", 200),
        Err(r) => r,
    }
}

/// An owner's POST: session, CSRF, role.
async fn owner_form(
    req: &HttpRequest,
    state: &State,
    payload: web::Payload,
) -> Result<(Ctx, Form), HttpResponse> {
    let (ctx, form) = signed_in_form(req, state, payload).await?;
    if let Some(r) = owner_only(&ctx) {
        return Err(r);
    }
    Ok((ctx, form))
}

/// Sends the settings patch (a merchant's fields only) as the operator API
/// would, then shows the page again.
async fn patch(req: &HttpRequest, ctx: &Ctx, patch: Value) -> HttpResponse {
    if let Err(e) = Settings::default().patched(&patch) {
        return render(ctx, &layout::alert(Some(&e.message)), 400);
    }
    let update = UpdateSettings(patch, audit(req));
    match ctx
        .state
        .kobo
        .merchants
        .send(ctx.merchant_id(), update)
        .await
    {
        Ok(Ok(_)) => see_other("/dashboard/settings"),
        Ok(Err(e)) | Err(e) if e.kind != kobo_actors::ErrorKind::Internal => {
            render(ctx, &layout::alert(Some(&e.message)), 400)
        }
        Ok(Err(e)) | Err(e) => layout::server_error(e),
    }
}

async fn settlement(req: HttpRequest, state: State, payload: web::Payload) -> HttpResponse {
    let (ctx, form) = match owner_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let minimum = match form.get("minimum") {
        "" => 0,
        raw => match minor_units(raw) {
            Some(m) => m,
            None => {
                return render(
                    &ctx,
                    &layout::alert(Some("The minimum must be a number like 5000.")),
                    400,
                )
            }
        },
    };
    let account = match form.get("bank_account_id") {
        "" => Value::Null,
        raw => match Uuid::try_parse(raw) {
            Ok(id) => json!(id),
            Err(_) => {
                return render(
                    &ctx,
                    &layout::alert(Some("Choose one of your bank accounts.")),
                    400,
                )
            }
        },
    };
    let body = json!({"auto_settlement": {
        "enabled": form.get("enabled") == "yes",
        "bank_account_id": account,
        "minimum": minimum,
        "usd": form.get("usd"),
    }});
    patch(&req, &ctx, body).await
}

async fn add_wallet(req: HttpRequest, state: State, payload: web::Payload) -> HttpResponse {
    let (ctx, form) = match owner_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let mut b = json!({
        "address": form.get("address"),
        "network": form.get("network"),
        "mode": ctx.mode().as_str(),
    });
    if !form.get("label").is_empty() {
        b["label"] = form.get("label").into();
    }
    let parsed = match body::parse::<usdt::AddWallet>(b.to_string().as_bytes()) {
        Ok(p) => p,
        Err(e) => return render(&ctx, &layout::alert(Some(&e.message)), 400),
    };
    match usdt::add_wallet_for(&state, ctx.merchant_id(), parsed, audit(&req)).await {
        Ok(_) => see_other("/dashboard/settings"),
        Err(e) if !crate::api::status_of(e.0.kind).is_server_error() => render(
            &ctx,
            &layout::alert(Some(&error_message(&error_body(&e.0)))),
            400,
        ),
        Err(e) => layout::server_error(e.0),
    }
}

/// The session's merchant's live wallet `raw` names, if any.
fn own_wallet(ctx: &Ctx, raw: &str) -> Option<Uuid> {
    let id = Uuid::try_parse(raw).ok()?;
    wallets(&ctx.state.kobo, ctx.merchant_id(), ctx.mode())
        .ok()?
        .iter()
        .any(|w| w.id == id)
        .then_some(id)
}

async fn clear_wallet(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    let (ctx, _) = match owner_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(wallet) = own_wallet(&ctx, &path) else {
        return layout::not_found(&ctx, "wallet");
    };
    match usdt::delete_wallet_for(&state, ctx.merchant_id(), wallet, audit(&req)).await {
        Ok(_) => see_other("/dashboard/settings"),
        Err(e) => render(&ctx, &layout::alert(Some(&e.0.message)), 400),
    }
}

async fn settle_wallet(req: HttpRequest, state: State, payload: web::Payload) -> HttpResponse {
    let (ctx, form) = match owner_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(wallet) = own_wallet(&ctx, form.get("wallet")) else {
        return layout::not_found(&ctx, "wallet");
    };
    patch(&req, &ctx, json!({"usdt": {"settle_wallet": wallet}})).await
}

/// Adds a brand of the session's mode through `POST /v1/brands`' own
/// declaration and run (its validation; the form's nonce as the
/// Idempotency-Key). Owners only.
async fn add_brand(req: HttpRequest, state: State, payload: web::Payload) -> HttpResponse {
    let (ctx, form) = match owner_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(nonce) = form.nonce() else {
        return render(
            &ctx,
            &layout::alert(Some("The form is incomplete; reload the page.")),
            400,
        );
    };
    let (code, answer) = ctx
        .act(
            brands::CREATE_BRAND,
            nonce,
            &json!({"name": form.get("name")}),
            brands::create_run,
        )
        .await;
    if code >= 500 {
        return layout::message(code, "Something went wrong", &error_message(&answer));
    }
    if code >= 300 {
        return render(&ctx, &layout::alert(Some(&error_message(&answer))), 400);
    }
    see_other("/dashboard/settings")
}

async fn invite(req: HttpRequest, state: State, payload: web::Payload) -> HttpResponse {
    let (ctx, form) = match owner_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(role) = Role::parse(form.get("role")) else {
        return render(&ctx, &layout::alert(Some("Choose a role.")), 400);
    };
    match dashboard_user::invite(
        &state.kobo,
        ctx.merchant_id(),
        form.get("email"),
        role,
        Some(ctx.user.id),
        &audit(&req),
    )
    .await
    {
        Ok(invited) => {
            let url = dashboard_user::set_password_url(&state.kobo.config.base_url, &invited.token);
            let top = format!(
                r#"<section class="card reveal" role="status" aria-labelledby="inv-h"><h2 id="inv-h">Invitation made</h2>
<p>Send this one-time link to {email}; it works once, for 72 hours:</p><p><code class="wrap" id="invite-link">{url}</code></p></section>"#,
                email = esc(&invited.user.email),
                url = esc(&url),
            );
            render(&ctx, &top, 200)
        }
        Err(e) if e.kind != kobo_actors::ErrorKind::Internal => {
            render(&ctx, &layout::alert(Some(&e.message)), 400)
        }
        Err(e) => layout::server_error(e),
    }
}

async fn revoke(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    let (ctx, _) = match owner_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let user = Uuid::try_parse(&path)
        .ok()
        .and_then(|id| dashboard_user::load_user(&state.kobo, id).ok().flatten())
        .filter(|u| u.merchant == ctx.merchant_id());
    let Some(user) = user else {
        return layout::not_found(&ctx, "team member");
    };
    match dashboard_user::revoke_sessions(&state.kobo, user.id).await {
        Ok(_) => see_other("/dashboard/settings"),
        Err(e) => layout::server_error(e),
    }
}
