//! Webhooks: the mode's endpoints (add one; disable, enable, delete, send
//! a test event), an endpoint's deliveries (each with every kept attempt:
//! time, response status or "no answer", duration) with a redeliver button
//! per event, and its signing secret revealed on demand (a confirmed POST,
//! written to the audit log first; owners and developers). Every change
//! posts through the API's own endpoint and run
//! (`POST /v1/webhook_endpoints`, `.../{id}/disable|enable|delete|test`,
//! `POST /v1/events/{id}/redeliver`); a viewer reads.

use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};
use serde_json::{json, Value};
use uuid::Uuid;

use kobo_actors::audit::Audit;
use kobo_actors::webhook::query::{
    attempts, deliveries, list_events, scope_endpoints, test_events, EventFilter,
};
use kobo_actors::webhook::{DeliveryAttempt, EndpointChange, WebhookEndpoint};

use super::layout::{self, status, text, time};
use super::{error_message, see_other, signed_in, signed_in_form, Ctx, Form};
use crate::api::body::NoFields;
use crate::api::endpoint::Call;
use crate::api::request::RequestId;
use crate::api::{events, webhooks, State};
use crate::checkout::esc;

/// Newest events searched for an endpoint's deliveries.
const EVENTS_SEARCHED: usize = 100;
/// Newest test events of an endpoint shown with its deliveries.
const TESTS_SHOWN: usize = 20;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/dashboard/webhooks", web::get().to(list))
        .route("/dashboard/webhooks/create", web::post().to(create))
        .route("/dashboard/webhooks/{id}", web::get().to(detail))
        .route("/dashboard/webhooks/{id}/{change}", web::post().to(act));
}

/// The session's endpoint `raw` names (not deleted), if it is its
/// merchant's and mode's.
fn own(ctx: &Ctx, raw: &str) -> Option<WebhookEndpoint> {
    let id = Uuid::try_parse(raw).ok()?;
    let read = ctx.state.kobo.store.read().ok()?;
    scope_endpoints(&read, ctx.merchant_id(), ctx.mode())
        .ok()?
        .into_iter()
        .find(|e| e.id == id)
}

fn events_of(e: &WebhookEndpoint) -> String {
    if e.events.is_empty() {
        "every event".to_string()
    } else {
        esc(&e.events.join(", "))
    }
}

fn list_page(ctx: &Ctx, error: Option<&str>, form: Option<&Form>) -> HttpResponse {
    let endpoints = match ctx
        .state
        .kobo
        .store
        .read()
        .map_err(Into::into)
        .and_then(|r| scope_endpoints(&r, ctx.merchant_id(), ctx.mode()))
    {
        Ok(e) => e,
        Err(e) => return layout::server_error(e),
    };
    let rows: String = endpoints
        .iter()
        .map(|e| {
            format!(
                r#"<tr><td><a href="/dashboard/webhooks/{id}" class="wrap">{url}</a></td><td>{events}</td><td>{st}</td><td>{created}</td></tr>"#,
                id = e.id,
                url = esc(&e.url),
                events = events_of(e),
                st = status(&json!(e.status)),
                created = time(&json!(e.created_at)),
            )
        })
        .collect();
    let rows = if rows.is_empty() {
        r#"<tr><td colspan="4">No webhook endpoints yet.</td></tr>"#.to_string()
    } else {
        rows
    };
    let new = if ctx.user.role.may_operate() {
        format!(
            r#"<form method="post" action="/dashboard/webhooks/create" class="card stack" aria-labelledby="new-h">
  <h2 id="new-h">Add an endpoint</h2>
  {inputs}
  <label for="w-url">URL (HTTPS, port 443 or 8443)</label>
  <input id="w-url" name="url" type="url" maxlength="2048" required value="{url}">
  <label for="w-events">Event types, separated by commas (empty: every event)</label>
  <input id="w-events" name="events" value="{events}">
  <button type="submit">Add endpoint</button>
</form>"#,
            inputs = ctx.form_inputs(),
            url = esc(form.map(|f| f.get("url")).unwrap_or("")),
            events = esc(form.map(|f| f.get("events")).unwrap_or("")),
        )
    } else {
        r#"<p class="hint">A viewer cannot change webhook endpoints.</p>"#.to_string()
    };
    let main = format!(
        r#"{alert}{new}
<section class="card" aria-labelledby="list-h"><h2 id="list-h">Endpoints</h2>
<div class="scroll"><table><thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Status</th><th scope="col">Created</th></tr></thead><tbody>{rows}</tbody></table></div></section>"#,
        alert = layout::alert(error),
    );
    let code = if error.is_some() { 400 } else { 200 };
    layout::html(
        code,
        layout::frame(ctx, "Webhooks", "/dashboard/webhooks", &main),
    )
}

async fn list(req: HttpRequest, state: State) -> HttpResponse {
    match signed_in(&req, &state).await {
        Ok(ctx) => list_page(&ctx, None, None),
        Err(r) => r,
    }
}

/// A button posting to `/dashboard/webhooks/{id}/{action}`.
fn button(
    ctx: &Ctx,
    id: Uuid,
    action: &str,
    label: &str,
    confirm: Option<&str>,
    extra: &str,
) -> String {
    let confirm = confirm
        .map(|c| format!(r#" data-confirm="{}""#, esc(c)))
        .unwrap_or_default();
    format!(
        r#"<form method="post" action="/dashboard/webhooks/{id}/{action}" class="inline"{confirm}>{inputs}{extra}<button type="submit">{label}</button></form>"#,
        inputs = ctx.form_inputs(),
    )
}

/// A delivery's kept attempts, oldest first: time, the response status
/// (or "no answer" and why), duration.
fn attempt_list(list: &[DeliveryAttempt]) -> String {
    if list.is_empty() {
        return "not yet".into();
    }
    let items: String = list
        .iter()
        .map(|a| {
            let (code, why) = match (a.response_status, &a.error) {
                (Some(c), _) => (c.to_string(), String::new()),
                (None, Some(e)) => ("no answer".into(), format!(r#" <span class="hint wrap">{}</span>"#, esc(e))),
                (None, None) => ("no answer".into(), String::new()),
            };
            format!(
                r#"<li>#{n} {at} <span class="attempt-status">{code}</span> <span class="hint">{ms} ms</span>{why}</li>"#,
                n = a.number,
                at = time(&json!(a.at)),
                ms = a.duration_ms,
            )
        })
        .collect();
    format!(r#"<ol class="attempts">{items}</ol>"#)
}

/// The deliveries to `e` among the newest events and its newest test
/// events, newest first: each event's type, id, delivery status, every
/// kept attempt, the last response status.
fn delivery_rows(ctx: &Ctx, e: &WebhookEndpoint) -> Result<String, kobo_actors::DomainError> {
    let kobo = &ctx.state.kobo;
    let filter = EventFilter {
        limit: EVENTS_SEARCHED,
        starting_after: None,
        event_type: None,
    };
    let page = list_events(kobo, ctx.merchant_id(), ctx.mode(), &filter)?;
    let read = kobo.store.read()?;
    // (created, id, type), newest first.
    let mut shown: Vec<(String, Uuid, Value)> = page
        .data
        .iter()
        .filter_map(|ev| {
            let id = ev["id"].as_str().and_then(|s| Uuid::try_parse(s).ok())?;
            Some((text(&ev["created_at"]), id, ev["type"].clone()))
        })
        .collect();
    for t in test_events(&read, e.id, TESTS_SHOWN)? {
        let created = json!(t.created_at);
        shown.push((text(&created), t.id, json!(t.event_type)));
    }
    shown.sort_by(|a, b| (&b.0, b.1).cmp(&(&a.0, a.1)));
    let operate = ctx.user.role.may_operate();
    let mut rows = String::new();
    for (_, event, ty) in &shown {
        let event = *event;
        for d in deliveries(&read, event)?
            .into_iter()
            .filter(|d| d.endpoint == e.id)
        {
            let redeliver = if operate {
                button(
                    ctx,
                    e.id,
                    "redeliver",
                    "Redeliver",
                    None,
                    &format!(r#"<input type="hidden" name="event" value="{event}">"#),
                )
            } else {
                String::new()
            };
            rows.push_str(&format!(
                "<tr><td><code>{ty}</code><br><code class=\"wrap\">{event}</code></td><td>{st}</td><td>{list}</td><td>{code}</td><td>{redeliver}</td></tr>",
                ty = text(ty),
                st = status(&json!(d.status)),
                list = attempt_list(&attempts(&read, event, Some(e.id))?),
                code = d
                    .last_response_status
                    .map(|c| c.to_string())
                    .or_else(|| d.last_error.as_ref().map(|_| "no answer".to_string()))
                    .unwrap_or_default(),
            ));
        }
    }
    if rows.is_empty() {
        rows = r#"<tr><td colspan="5">No deliveries among the latest events.</td></tr>"#.into();
    }
    Ok(rows)
}

fn detail_page(ctx: &Ctx, raw: &str, top: &str, code: u16) -> HttpResponse {
    let Some(e) = own(ctx, raw) else {
        return layout::not_found(ctx, "webhook endpoint");
    };
    let rows = match delivery_rows(ctx, &e) {
        Ok(r) => r,
        Err(err) => return layout::server_error(err),
    };
    let actions = if ctx.user.role.may_operate() {
        let toggle = if e.status == kobo_actors::webhook::EndpointStatus::Enabled {
            button(
                ctx,
                e.id,
                "disable",
                "Disable",
                Some("Disable this endpoint? Waiting deliveries are dropped."),
                "",
            )
        } else {
            button(ctx, e.id, "enable", "Enable", None, "")
        };
        format!(
            r#"<section class="card stack" aria-labelledby="act-h"><h2 id="act-h">Manage</h2>
<div class="actions">{test}{toggle}{delete}</div>
<form method="post" action="/dashboard/webhooks/{id}/secret" class="stack" data-confirm="Show the signing secret on this screen?">
  {inputs}
  <label><input type="checkbox" name="confirm" value="yes" required> I want to see the signing secret</label>
  <button type="submit">Reveal signing secret</button>
</form></section>"#,
            test = button(ctx, e.id, "test", "Send test event", None, ""),
            delete = button(
                ctx,
                e.id,
                "delete",
                "Delete",
                Some("Delete this endpoint? This cannot be undone."),
                ""
            ),
            id = e.id,
            inputs = ctx.form_inputs(),
        )
    } else {
        r#"<p class="hint">A viewer cannot change endpoints or see signing secrets.</p>"#
            .to_string()
    };
    let main = format!(
        r#"{top}<section class="card" aria-labelledby="sum-h">
<h2 id="sum-h" class="wrap">{url}</h2>
<dl>
<dt>Id</dt><dd><code>{id}</code></dd>
<dt>Status</dt><dd>{st}</dd>
<dt>Events</dt><dd>{events}</dd>
<dt>Created</dt><dd>{created}</dd>
</dl>
</section>
{actions}
<section class="card" aria-labelledby="del-h"><h2 id="del-h">Deliveries</h2>
<p class="hint">Redelivering sends the event again to every enabled endpoint that takes it (a test event: to this endpoint only). The newest 50 attempts of each delivery are kept.</p>
<div class="scroll"><table><thead><tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Response</th><th scope="col"><span class="sr">Actions</span></th></tr></thead><tbody>{rows}</tbody></table></div></section>"#,
        url = esc(&e.url),
        id = e.id,
        st = status(&json!(e.status)),
        events = events_of(&e),
        created = time(&json!(e.created_at)),
    );
    layout::html(
        code,
        layout::frame(ctx, "Webhook endpoint", "/dashboard/webhooks", &main),
    )
}

async fn detail(req: HttpRequest, state: State, path: web::Path<String>) -> HttpResponse {
    match signed_in(&req, &state).await {
        Ok(ctx) => detail_page(&ctx, &path, "", 200),
        Err(r) => r,
    }
}

/// Adds an endpoint through `POST /v1/webhook_endpoints`.
async fn create(req: HttpRequest, state: State, payload: web::Payload) -> HttpResponse {
    let (ctx, form) = match signed_in_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    if !ctx.user.role.may_operate() {
        return layout::forbidden(&ctx, "A viewer cannot add webhook endpoints.");
    }
    let Some(nonce) = form.nonce() else {
        return list_page(
            &ctx,
            Some("The form is incomplete; reload the page."),
            Some(&form),
        );
    };
    let mut body = json!({"url": form.get("url")});
    let types: Vec<&str> = form
        .get("events")
        .split([',', ' ', '\n'])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if !types.is_empty() {
        body["events"] = json!(types);
    }
    let (code, answer) = ctx
        .act(
            webhooks::CREATE_WEBHOOK_ENDPOINT,
            nonce,
            &body,
            webhooks::create_run,
        )
        .await;
    if code >= 300 {
        return list_page(&ctx, Some(&error_message(&answer)), Some(&form));
    }
    see_other(&format!("/dashboard/webhooks/{}", text(&answer["id"])))
}

/// `disable`, `enable`, `delete`, `test` (through the API's own
/// operations), `redeliver` (an event, through
/// `POST /v1/events/{id}/redeliver`), and `secret` (the signing secret,
/// shown once per confirmed POST, after its audit entry commits).
async fn act(
    req: HttpRequest,
    state: State,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> HttpResponse {
    let (ctx, form) = match signed_in_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let (raw, action) = path.into_inner();
    let change = match action.as_str() {
        "disable" => Some(EndpointChange::Disable),
        "enable" => Some(EndpointChange::Enable),
        "delete" => Some(EndpointChange::Delete),
        "redeliver" | "secret" | "test" => None,
        _ => return layout::not_found(&ctx, "page"),
    };
    if !ctx.user.role.may_operate() {
        return layout::forbidden(
            &ctx,
            "A viewer cannot change webhook endpoints or see signing secrets.",
        );
    }
    let Some(endpoint) = own(&ctx, &raw) else {
        return layout::not_found(&ctx, "webhook endpoint");
    };
    let back = format!("/dashboard/webhooks/{}", endpoint.id);
    if action == "secret" {
        if form.get("confirm") != "yes" {
            return detail_page(
                &ctx,
                &raw,
                &layout::alert(Some("Tick the box to confirm.")),
                400,
            );
        }
        let request_id = ctx
            .req
            .extensions()
            .get::<RequestId>()
            .map(|r| r.0.clone())
            .unwrap_or_default();
        if let Err(e) = kobo_actors::webhook::secret_revealed(
            &ctx.state.kobo,
            &Audit::dashboard(request_id),
            &endpoint,
            ctx.user.id,
        )
        .await
        {
            return layout::server_error(e);
        }
        let top = format!(
            r#"<section class="card reveal" aria-labelledby="secret-h" role="status">
<h2 id="secret-h">Signing secret</h2>
<p>Keep it private: anyone with it can sign requests as kobo.</p>
<p><code id="signing-secret" class="wrap">{}</code></p>
</section>"#,
            esc(&endpoint.secret)
        );
        return detail_page(&ctx, &raw, &top, 200);
    }
    let Some(nonce) = form.nonce() else {
        return detail_page(
            &ctx,
            &raw,
            &layout::alert(Some("The form is incomplete; reload the page.")),
            400,
        );
    };
    let id = endpoint.id.to_string();
    let (code, answer) = match change {
        Some(change) => {
            ctx.act(
                webhooks::CHANGE_WEBHOOK_ENDPOINT,
                nonce,
                &json!({}),
                |c: Call, _: NoFields| async move { webhooks::change_run(c, &id, change).await },
            )
            .await
        }
        None if action == "test" => {
            ctx.act(
                webhooks::TEST_WEBHOOK_ENDPOINT,
                nonce,
                &json!({}),
                |c: Call, _: NoFields| async move { webhooks::test_run(c, &id).await },
            )
            .await
        }
        None => {
            let event = form.get("event").to_string();
            ctx.act(
                events::REDELIVER_EVENT,
                nonce,
                &json!({}),
                |c: Call, _: NoFields| async move { events::redeliver_run(c, &event).await },
            )
            .await
        }
    };
    if code == 404 && action == "redeliver" {
        return layout::not_found(&ctx, "event");
    }
    if code >= 300 {
        let err: &Value = &answer;
        return detail_page(&ctx, &raw, &layout::alert(Some(&error_message(err))), 400);
    }
    if action == "delete" {
        return see_other("/dashboard/webhooks");
    }
    see_other(&back)
}
