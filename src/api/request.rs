//! Reading a request: its body (cap and deadline), its bearer credential,
//! its path ids, and the 405 of a resource.

use actix_web::{web, HttpRequest};
use futures_util::StreamExt;
use uuid::Uuid;

use kobo_actors::query::{self, Principal};
use kobo_actors::{DomainError, ErrorCode};

use super::error::{ApiError, ApiResult};
use super::limits;
use super::state::{AppState, MAX_BODY_BYTES};

/// The request's id (the `Request-Id` answer header), kept in the
/// request's extensions by the telemetry middleware for the operator audit
/// log.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// How long a client may take to send a whole body (`--body-timeout-ms`,
/// set once at start-up; [`DEFAULT_BODY_TIMEOUT`] until then).
static BODY_TIMEOUT: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();

/// The default of `--body-timeout-ms`: 10 s, far more than a 1 MiB body
/// needs on any working connection.
pub const DEFAULT_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Sets the body deadline (once, before serving).
pub fn set_body_timeout(t: std::time::Duration) {
    let _ = BODY_TIMEOUT.set(t);
}

/// Reads the body, refusing more than [`MAX_BODY_BYTES`] with 413, and a
/// body still incomplete after the body deadline with 408
/// `request_timeout` (a slow sender cannot hold a worker's request open).
pub async fn read_body(payload: web::Payload) -> ApiResult<web::Bytes> {
    let deadline = *BODY_TIMEOUT.get().unwrap_or(&DEFAULT_BODY_TIMEOUT);
    match tokio::time::timeout(deadline, read_all(payload)).await {
        Ok(read) => read,
        Err(_) => Err(ApiError(DomainError::of(
            ErrorCode::RequestTimeout,
            format!(
                "the body did not arrive within {} ms; send it at once",
                deadline.as_millis()
            ),
        ))),
    }
}

async fn read_all(mut payload: web::Payload) -> ApiResult<web::Bytes> {
    let mut buf = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| match e {
            actix_web::error::PayloadError::Overflow => too_large(),
            other => ApiError(DomainError::invalid(
                "body",
                format!("unreadable body: {other}"),
            )),
        })?;
        if buf.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(too_large());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

fn too_large() -> ApiError {
    ApiError(DomainError::of(
        ErrorCode::BodyTooLarge,
        format!("the body is larger than {MAX_BODY_BYTES} bytes"),
    ))
}

fn bearer(req: &HttpRequest) -> Option<&str> {
    let h = req.headers().get("authorization")?.to_str().ok()?;
    let (scheme, token) = h.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Authenticates with a secret key, or with the client secret or checkout
/// credential of `intent` when given.
pub fn authenticate_for(
    req: &HttpRequest,
    state: &AppState,
    intent: Option<&str>,
) -> ApiResult<Principal> {
    let token = bearer(req).ok_or_else(|| {
        ApiError(DomainError::unauthenticated(
            "send your secret key as `Authorization: Bearer <key>`",
        ))
    })?;
    let principal = query::authenticate(&state.kobo, token, &state.checkout_key)?;
    if let Some(scope) = principal.caller.intent() {
        let allowed = intent.is_some_and(|i| Uuid::try_parse(i).ok() == Some(scope));
        if !allowed {
            return Err(ApiError(DomainError::unauthenticated(
                "a client secret or checkout credential acts only on its own payment intent",
            )));
        }
    }
    limits::check_caller(req, &principal)?;
    if principal.caller == kobo_actors::auth::Caller::SecretKey {
        use actix_web::HttpMessage;
        req.extensions_mut().insert(super::request_log::LogScope(
            principal.merchant.id,
            principal.mode,
        ));
    }
    Ok(principal)
}

pub fn parse_id(raw: &str, what: &str) -> ApiResult<Uuid> {
    Uuid::try_parse(raw).map_err(|_| ApiError(DomainError::not_found(what, raw)))
}

/// A resource whose unmatched methods answer 405 with the error body
/// (registered in its group's scope by `route_table::Routes`).
pub fn resource(path: &str) -> crate::api::route_table::Resource {
    crate::api::route_table::Resource::new(path, true)
}
