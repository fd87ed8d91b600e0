//! Idempotent POSTs: the Idempotency-Key, replays, and saving answers.

use std::future::Future;

use actix_web::http::header::{HeaderValue, CONTENT_TYPE};
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use serde_json::value::RawValue;
use serde_json::Value;
use sha2::{Digest, Sha256};

use kobo_actors::idempotency::{self, IdempotencySave, Statuses};
use kobo_actors::query::Principal;
use kobo_actors::{DomainError, ErrorCode};
use kobo_storage::Batch;

use super::error::{error_body, json_response, status_of, ApiError, ApiResult};
use super::state::{AppState, FlightKey};

/// What an idempotent operation produced.
pub struct Reply {
    pub status: u16,
    pub body: Body,
}

/// A reply's body.
pub enum Body {
    /// Not saved yet: the idempotency layer saves it (in a batch of its own).
    Json(Value),
    /// Saved by the operation in the batch of its effect, exactly as it is
    /// sent.
    Saved(Box<RawValue>),
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

/// A JSON response of a body already rendered (the bytes that were saved).
fn rendered(status: u16, body: String) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("application/json")))
        .body(body)
}

/// Runs a POST under its Idempotency-Key, in the caller's own scope
/// (merchant, mode and credential: a client secret or checkout page never
/// shares keys with the merchant's server): a replay answers the saved
/// response; a different request with the same key 422; a key whose first
/// request is still running 409. 2xx and 4xx answers are saved (an effect's
/// answer in the effect's own batch, with the status `statuses` gives its
/// kind of outcome); 5xx saves nothing.
/// The key is the request's `Idempotency-Key` (read by the endpoint), or
/// the dashboard form's nonce.
pub async fn idempotent_keyed<F, Fut>(
    req: &HttpRequest,
    state: &AppState,
    principal: &Principal,
    key: String,
    body: &[u8],
    statuses: Statuses,
    run: F,
) -> ApiResult
where
    F: FnOnce(IdempotencySave) -> Fut,
    Fut: Future<Output = ApiResult<Reply>>,
{
    let mut h = Sha256::new();
    h.update(req.method().as_str().as_bytes());
    h.update(b" ");
    h.update(req.path().as_bytes());
    h.update(b"\n");
    h.update(body);
    let fingerprint: idempotency::Fingerprint = h.finalize().into();
    let merchant = principal.merchant.id;
    let mode = principal.mode;
    let caller = principal.caller;
    let kobo = &state.kobo;

    let flight_key = (merchant, mode, caller, key.clone());
    {
        let mut in_flight = state.in_flight.lock();
        if !in_flight.insert(flight_key.clone()) {
            return Err(ApiError(DomainError::state(
                ErrorCode::IdempotencyKeyInUse,
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
        return Err(ApiError(DomainError::of(
            ErrorCode::IdempotencyKeyReused,
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
        statuses,
    };
    let outcome = run(save.clone()).await;
    let (status, body) = match outcome {
        Ok(r) => (r.status, r.body),
        Err(e) if status_of(e.0.kind).is_server_error() => return Err(e),
        // Another request is working on the object: nothing happened, and
        // the same key may be retried once it has finished.
        Err(e) if e.0.code == ErrorCode::PaymentInProgress => return Err(e),
        Err(e) => (status_of(e.0.kind).as_u16(), Body::Json(error_body(&e.0))),
    };
    match body {
        Body::Saved(body) => Ok(rendered(status, String::from(Box::<str>::from(body)))),
        Body::Json(body) => {
            let mut batch = Batch::new();
            batch.owned_by(save.merchant.as_bytes());
            save.add_to(&mut batch, status, &body.to_string(), kobo.clock.now());
            kobo.writer.commit(batch).await.map_err(DomainError::from)?;
            Ok(json_response(status, &body))
        }
    }
}
