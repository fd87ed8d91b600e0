//! The operator API under `/admin/v1`, authenticated by the admin token.
//! POSTs here need no Idempotency-Key.

use actix_web::{web, HttpRequest};
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use sha2::{Digest, Sha256};

use kobo_actors::admin::{self, ChangeMerchant, MerchantChange};
use kobo_actors::merchant::Settings;
use kobo_actors::timers::Advance;
use kobo_actors::{DomainError, Mode};

use super::body::Fields;
use super::{json_response, parse_id, read_body, resource, ApiError, ApiResult, State};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/admin/v1/merchants").route(web::post().to(create_merchant)))
        .service(
            resource("/admin/v1/merchants/{id}")
                .route(web::get().to(get_merchant))
                .route(web::post().to(update_merchant)),
        )
        .service(resource("/admin/v1/merchants/{id}/roll_keys").route(web::post().to(roll_keys)))
        .service(resource("/admin/v1/clock").route(web::get().to(get_clock)))
        .service(resource("/admin/v1/clock/advance").route(web::post().to(advance_clock)))
        .service(resource("/admin/v1/actors").route(web::get().to(actors)));
}

pub fn operator(req: &HttpRequest, state: &State) -> ApiResult<()> {
    let given = req
        .headers()
        .get("authorization")
        .and_then(|h| h.to_str().ok())
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .unwrap_or("")
        .trim();
    // Compare digests so the time taken says nothing about the token. An
    // empty bearer is never an operator, whatever the configured token.
    if given.is_empty()
        || state.admin_token.is_empty()
        || Sha256::digest(given.as_bytes()) != Sha256::digest(state.admin_token.as_bytes())
    {
        return Err(ApiError(DomainError::unauthenticated(
            "invalid admin token",
        )));
    }
    Ok(())
}

async fn create_merchant(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    operator(&req, &state)?;
    let body = read_body(payload).await?;
    let f = Fields::parse(&body, &["name", "settings"])?;
    let name = f.required_string("name", 200)?;
    let settings = match f.raw("settings") {
        Some(s) => Settings::default().patched(s)?,
        None => Settings::default(),
    };
    let view = admin::create_merchant(&state.kobo, name, settings).await?;
    Ok(json_response(201, &view))
}

async fn get_merchant(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    operator(&req, &state)?;
    let id = parse_id(&path, "merchant")?;
    let m = admin::load_merchant(&state.kobo, id)?
        .ok_or_else(|| DomainError::not_found("merchant", id))?;
    Ok(json_response(200, &m.to_api()))
}

async fn change(state: &State, raw_id: &str, change: MerchantChange) -> ApiResult {
    let id = parse_id(raw_id, "merchant")?;
    admin::load_merchant(&state.kobo, id)?.ok_or_else(|| DomainError::not_found("merchant", id))?;
    let view = state
        .kobo
        .merchants
        .send(id, ChangeMerchant(change))
        .await??;
    Ok(json_response(200, &view))
}

async fn update_merchant(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    operator(&req, &state)?;
    let body = read_body(payload).await?;
    let f = Fields::parse(&body, &["settings"])?;
    let patch = f
        .raw("settings")
        .cloned()
        .ok_or_else(|| DomainError::missing("settings"))?;
    Settings::default().patched(&patch)?;
    change(&state, &path, MerchantChange::Settings(patch)).await
}

async fn roll_keys(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    operator(&req, &state)?;
    let body = read_body(payload).await?;
    let f = Fields::parse(&body, &["mode"])?;
    let mode = f.required_string("mode", 8)?;
    let mode = Mode::parse(&mode)
        .ok_or_else(|| DomainError::invalid("mode", "mode must be test or live"))?;
    change(&state, &path, MerchantChange::RollKey(mode)).await
}

fn clock_view(now: DateTime<Utc>) -> serde_json::Value {
    json!({"object": "clock", "now": now, "manual": true})
}

async fn get_clock(req: HttpRequest, state: State) -> ApiResult {
    operator(&req, &state)?;
    let mut v = clock_view(state.kobo.clock.now());
    v["manual"] = state.kobo.clock.is_manual().into();
    Ok(json_response(200, &v))
}

async fn advance_clock(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    operator(&req, &state)?;
    let body = read_body(payload).await?;
    let f = Fields::parse(&body, &["seconds", "to"])?;
    let now = state.kobo.clock.now();
    let to = match (f.raw("seconds"), f.string("to", 64)?) {
        (Some(_), Some(_)) => {
            return Err(ApiError(DomainError::invalid(
                "to",
                "send `seconds` or `to`, not both",
            )))
        }
        (Some(s), None) => {
            let secs = s
                .as_i64()
                .filter(|n| (0..=10 * 366 * 86_400).contains(n))
                .ok_or_else(|| {
                    DomainError::invalid("seconds", "seconds is a whole number from 0 to ten years")
                })?;
            now + Duration::seconds(secs)
        }
        (None, Some(t)) => DateTime::parse_from_rfc3339(&t)
            .map_err(|_| DomainError::invalid("to", "`to` must be an RFC 3339 date-time"))?
            .with_timezone(&Utc),
        (None, None) => return Err(ApiError(DomainError::missing("seconds"))),
    };
    let now = state
        .timers
        .send(Advance { to })
        .await
        .map_err(|e| DomainError::internal(e.to_string()))??;
    Ok(json_response(200, &clock_view(now)))
}

async fn actors(req: HttpRequest, state: State) -> ApiResult {
    operator(&req, &state)?;
    let kinds = state.kobo.actor_health();
    Ok(json_response(
        200,
        &json!({
            "object": "actor_health",
            "kinds": kinds,
            "store_writer": {
                "queue_depth": state.kobo.writer.queue_depth(),
                "commits": state.kobo.writer.commits(),
            },
            "webhooks": state.kobo.webhooks.stats(),
        }),
    ))
}
