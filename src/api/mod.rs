//! The HTTP layer: one place that turns errors into responses, reads
//! bodies, authenticates, and runs idempotent POSTs. Route modules are thin:
//! parse the request into a typed command, send it to the owning actor (or
//! read a snapshot), render the reply.

pub mod admin;
pub mod balance;
pub mod body;
pub mod brands;
pub mod cards;
pub mod components;
pub mod docs;
pub mod endpoint;
pub mod events;
pub mod examples;
pub mod fx;
pub mod limits;
pub mod mandates;
pub mod openapi;
pub mod openapi_admin;
pub mod ops;
pub mod payment_intents;
pub mod payouts;
pub mod refunds;
pub mod settlement;
pub mod stream;
pub mod test_helpers;
pub mod usdt;
pub mod webhooks;

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;

use actix::Addr;
use actix_web::http::header::{HeaderValue, CONTENT_TYPE};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use futures_util::StreamExt;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_actors::credential::CheckoutKey;
use kobo_actors::idempotency::{self, IdempotencySave, MAX_KEY_LEN};
use kobo_actors::query::{self, Caller, Principal};
use kobo_actors::timers::TimerSupervisor;
use kobo_actors::{DomainError, ErrorKind, Kobo, Mode};
use kobo_storage::Batch;

use crate::metrics::Metrics;

/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1 << 20;

pub struct AppState {
    pub kobo: Arc<Kobo>,
    pub admin_token: String,
    pub timers: Addr<TimerSupervisor>,
    pub metrics: Metrics,
    /// Idempotency keys whose first request is still running, in the
    /// scope their records are saved in (merchant, mode, caller).
    in_flight: Mutex<HashSet<FlightKey>>,
    /// Keys the idempotency fingerprints of card requests (see
    /// [`cards::fingerprint_key`]).
    pub card_key: [u8; 32],
    /// Makes and checks the hosted checkout's credentials (see
    /// [`kobo_actors::credential`]); loaded from the data directory at start.
    pub checkout_key: CheckoutKey,
}

type FlightKey = (Uuid, Mode, Caller, String);

impl AppState {
    pub fn new(
        kobo: Arc<Kobo>,
        admin_token: String,
        timers: Addr<TimerSupervisor>,
        metrics: Metrics,
    ) -> Self {
        AppState {
            kobo,
            admin_token,
            timers,
            metrics,
            in_flight: Mutex::new(HashSet::new()),
            card_key: rand::random(),
            checkout_key: CheckoutKey::random(),
        }
    }
}

pub type State = web::Data<AppState>;

/// The one mapping from domain errors to HTTP.
#[derive(Debug)]
pub struct ApiError(pub DomainError);

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        ApiError(e)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

pub fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::InvalidRequest => StatusCode::BAD_REQUEST,
        ErrorKind::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorKind::Forbidden => StatusCode::FORBIDDEN,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::State => StatusCode::CONFLICT,
        ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
        ErrorKind::Idempotency => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        ErrorKind::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The `type` of an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub enum ErrorType {
    /// 400, 404, 408, 413: something in the request is wrong.
    #[serde(rename = "invalid_request_error")]
    InvalidRequest,
    /// 401, 403: the key is missing, wrong or revoked, or cannot do this.
    #[serde(rename = "authentication_error")]
    Authentication,
    /// 409: the object's state does not allow the operation.
    #[serde(rename = "state_error")]
    State,
    /// 422: the Idempotency-Key was used with a different request.
    #[serde(rename = "idempotency_error")]
    Idempotency,
    /// 429: too many requests; retry after `Retry-After` seconds.
    #[serde(rename = "rate_limit_error")]
    RateLimit,
    /// 5xx: a failure on the service's side; retry with the same key.
    #[serde(rename = "api_error")]
    Api,
}

fn type_of(kind: ErrorKind) -> ErrorType {
    match kind {
        ErrorKind::InvalidRequest
        | ErrorKind::NotFound
        | ErrorKind::TooLarge
        | ErrorKind::BodyTimeout => ErrorType::InvalidRequest,
        ErrorKind::Unauthenticated | ErrorKind::Forbidden => ErrorType::Authentication,
        ErrorKind::State => ErrorType::State,
        ErrorKind::Idempotency => ErrorType::Idempotency,
        ErrorKind::RateLimited { .. } => ErrorType::RateLimit,
        ErrorKind::Overloaded | ErrorKind::Internal => ErrorType::Api,
    }
}

/// The body of every error.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorDetail {
    #[serde(rename = "type")]
    pub error_type: ErrorType,
    /// Stable; programs use this, not `message`.
    pub code: String,
    /// For people.
    pub message: String,
    /// The offending field on 400 errors; null elsewhere.
    #[schema(required = true)]
    pub param: Option<String>,
}

impl ErrorBody {
    /// The one rendering of an error. `param` names a field only on 400s and
    /// on 404s for an id the request named (CONTRACT 3a); on every other
    /// status it is null, whatever the error carried.
    pub fn new(e: &DomainError) -> Self {
        let names_param = matches!(e.kind, ErrorKind::InvalidRequest | ErrorKind::NotFound);
        ErrorBody {
            error: ErrorDetail {
                error_type: type_of(e.kind),
                code: e.code.clone(),
                message: e.message.clone(),
                param: e.param.clone().filter(|_| names_param),
            },
        }
    }
}

pub fn error_body(e: &DomainError) -> Value {
    serde_json::to_value(ErrorBody::new(e)).expect("an error body serializes")
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        status_of(self.0.kind)
    }
    fn error_response(&self) -> HttpResponse {
        if self.0.kind == ErrorKind::Internal {
            tracing::error!(code = %self.0.code, message = %self.0.message, "request failed");
        }
        let mut r = HttpResponse::build(self.status_code());
        match self.0.kind {
            ErrorKind::Overloaded => {
                r.insert_header(("Retry-After", "1"));
            }
            ErrorKind::RateLimited { retry_after_secs } => {
                r.insert_header(("Retry-After", retry_after_secs.to_string()));
            }
            _ => {}
        }
        r.json(error_body(&self.0))
    }
}

pub type ApiResult<T = HttpResponse> = Result<T, ApiError>;

pub fn json_response(status: u16, body: &Value) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK)).json(body)
}

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
        Err(_) => Err(ApiError(DomainError::new(
            ErrorKind::BodyTimeout,
            "request_timeout",
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
    ApiError(DomainError::new(
        ErrorKind::TooLarge,
        "body_too_large",
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
    Ok(principal)
}

pub fn parse_id(raw: &str, what: &str) -> ApiResult<Uuid> {
    Uuid::try_parse(raw).map_err(|_| ApiError(DomainError::not_found(what, raw)))
}

/// What an idempotent operation produced.
pub struct Reply {
    pub status: u16,
    pub body: Value,
    /// The operation saved its response itself, in the batch of its effect.
    pub saved: bool,
}

impl Reply {
    /// A response the operation already saved with its effect.
    pub fn saved(status: u16, body: Value) -> Self {
        Reply {
            status,
            body,
            saved: true,
        }
    }
}

struct InFlight<'a> {
    state: &'a AppState,
    key: FlightKey,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.state.in_flight.lock().remove(&self.key);
    }
}

fn replay(status: u16, body: &str) -> HttpResponse {
    let mut r = HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK));
    r.insert_header(("Idempotent-Replayed", "true"));
    r.insert_header((CONTENT_TYPE, HeaderValue::from_static("application/json")));
    r.body(body.to_string())
}

/// Runs a POST under its Idempotency-Key, in the caller's own scope
/// (merchant, mode and credential: a client secret or checkout page never
/// shares keys with the merchant's server): a replay answers the saved
/// response; a different request with the same key 422; a key whose first
/// request is still running 409. 2xx and 4xx answers are saved (an effect's
/// answer in the effect's own batch); 5xx saves nothing.
pub async fn idempotent<F, Fut>(
    req: &HttpRequest,
    state: &AppState,
    principal: &Principal,
    body: &[u8],
    run: F,
) -> ApiResult
where
    F: FnOnce(IdempotencySave) -> Fut,
    Fut: Future<Output = ApiResult<Reply>>,
{
    let key = match req.headers().get("idempotency-key") {
        None => {
            return Err(ApiError(
                DomainError::new(
                    ErrorKind::InvalidRequest,
                    "parameter_missing",
                    "every POST needs an Idempotency-Key header",
                )
                .with_param("Idempotency-Key"),
            ))
        }
        Some(v) => v.to_str().ok().map(str::to_string).unwrap_or_default(),
    };
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(ApiError(DomainError::invalid(
            "Idempotency-Key",
            format!("the Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters"),
        )));
    }
    let mut h = Sha256::new();
    h.update(req.method().as_str().as_bytes());
    h.update(b" ");
    h.update(req.path().as_bytes());
    h.update(b"\n");
    h.update(body);
    let fingerprint = hex::encode(h.finalize());
    let merchant = principal.merchant.id;
    let mode = principal.mode;
    let caller = principal.caller;
    let kobo = &state.kobo;

    let flight_key = (merchant, mode, caller, key.clone());
    {
        let mut in_flight = state.in_flight.lock();
        if !in_flight.insert(flight_key.clone()) {
            return Err(ApiError(DomainError::state(
                "idempotency_key_in_use",
                "a request with this Idempotency-Key is still running; retry when it has finished",
            )));
        }
    }
    let _guard = InFlight {
        state,
        key: flight_key,
    };

    let read = kobo.store.read().map_err(DomainError::from)?;
    if let Some(rec) = idempotency::lookup(&read, merchant, mode, caller, &key, kobo.clock.now())
        .map_err(DomainError::from)?
    {
        if rec.fingerprint == fingerprint {
            return Ok(replay(rec.status, rec.body.get()));
        }
        return Err(ApiError(DomainError::new(
            ErrorKind::Idempotency,
            "idempotency_key_reused",
            "this Idempotency-Key was used with a different request",
        )));
    }
    drop(read);

    let save = IdempotencySave {
        merchant,
        mode,
        caller,
        key,
        fingerprint,
    };
    let outcome = run(save.clone()).await;
    let (status, body, saved) = match outcome {
        Ok(r) => (r.status, r.body, r.saved),
        Err(e) if status_of(e.0.kind).is_server_error() => return Err(e),
        // Another request is working on the object: nothing happened, and
        // the same key may be retried once it has finished.
        Err(e) if e.0.code == "payment_in_progress" => return Err(e),
        Err(e) => (status_of(e.0.kind).as_u16(), error_body(&e.0), false),
    };
    if !saved {
        let mut batch = Batch::new();
        save.add_to(&mut batch, status, &body.to_string(), kobo.clock.now());
        kobo.writer
            .commit(batch)
            .await
            .map_err(|e| DomainError::internal(e.to_string()))?;
    }
    Ok(json_response(status, &body))
}

pub async fn not_found(req: HttpRequest) -> HttpResponse {
    ApiError(DomainError::new(
        ErrorKind::NotFound,
        "resource_missing",
        format!("no route for {} {}", req.method(), req.path()),
    ))
    .error_response()
}

pub async fn method_not_allowed(req: HttpRequest) -> HttpResponse {
    HttpResponse::MethodNotAllowed().json(error_body(&DomainError::request(
        "method_not_allowed",
        None,
        format!("{} is not allowed on {}", req.method(), req.path()),
    )))
}

/// A resource whose unmatched methods answer 405 with the error body.
pub fn resource(path: &str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(method_not_allowed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The typed body renders exactly what the `json!` rendering it
    /// replaced did.
    #[test]
    fn error_body_json_is_unchanged() {
        let kinds = [
            (ErrorKind::InvalidRequest, "invalid_request_error"),
            (ErrorKind::Unauthenticated, "authentication_error"),
            (ErrorKind::Forbidden, "authentication_error"),
            (ErrorKind::NotFound, "invalid_request_error"),
            (ErrorKind::State, "state_error"),
            (ErrorKind::TooLarge, "invalid_request_error"),
            (ErrorKind::Idempotency, "idempotency_error"),
            (
                ErrorKind::RateLimited {
                    retry_after_secs: 1,
                },
                "rate_limit_error",
            ),
            (ErrorKind::Overloaded, "api_error"),
            (ErrorKind::Internal, "api_error"),
        ];
        for (kind, type_name) in kinds {
            for param in [None, Some("amount")] {
                let mut e = DomainError::new(kind, "some_code", "what happened");
                e.param = param.map(str::to_string);
                let named = matches!(kind, ErrorKind::InvalidRequest | ErrorKind::NotFound);
                let old = json!({"error": {
                    "type": type_name,
                    "code": e.code,
                    "message": e.message,
                    "param": if named { e.param.clone() } else { None },
                }});
                assert_eq!(error_body(&e), old);
            }
        }
    }
}
