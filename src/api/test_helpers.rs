//! `/v1/test_helpers`: simulate provider behaviour in test mode (404 for live
//! keys).

use actix_web::{web, HttpRequest};
use serde::Deserialize;
use utoipa::ToSchema;

use kobo_actors::payment_intent::actor::Action;
use kobo_actors::payment_intent::PaymentIntentView;

use super::openapi::{
    BadRequestReplayable, ConflictReplayable, IdempotencyKey, IdempotencyKeyReused, InternalError,
    NotFoundReplayable, Overloaded, PayloadTooLarge, PaymentIntentId, Unauthorized,
};
use super::payment_intents::{intent_action, NoFields, NO_FIELDS};
use super::{authenticate, require_test_mode, resource, ApiResult, State};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/v1/test_helpers/payment_intents/{id}/succeed").route(web::post().to(succeed)),
    )
    .service(
        resource("/v1/test_helpers/payment_intents/{id}/simulate_transfer")
            .route(web::post().to(simulate_transfer)),
    );
}

// The body of `simulate_transfer`, for its schema in the OpenAPI document;
// a unit test keeps these fields and [`SIMULATE_TRANSFER_FIELDS`] equal.
/// A simulated transfer into the payment intent's account; `null` is the
/// same as leaving a field out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SimulateTransfer)]
#[allow(dead_code)]
pub struct SimulateTransferRequest {
    /// Minor units; default `bank_transfer.amount`. A different amount is
    /// returned to the sender: a failed charge attempt `amount_mismatch`,
    /// the payment unchanged.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    amount: Option<i64>,
}

/// The fields `simulate_transfer` accepts.
pub const SIMULATE_TRANSFER_FIELDS: &[&str] = &["amount"];

/// Make a test payment intent successful
///
/// Test keys only (404 for live keys). The capture is posted to the ledger.
#[utoipa::path(
    post,
    path = "/v1/test_helpers/payment_intents/{id}/succeed",
    operation_id = "test_succeed_payment_intent",
    tag = "test_helpers",
    params(PaymentIntentId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The payment intent, now successful.", body = PaymentIntentView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the saved response of an earlier request with the same Idempotency-Key"))),
        (status = 400, response = BadRequestReplayable),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 413, response = PayloadTooLarge),
        (status = 422, response = IdempotencyKeyReused),
        (status = 500, response = InternalError),
        (status = 503, response = Overloaded),
    )
)]
async fn succeed(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    require_test_mode(&p)?;
    intent_action(
        req,
        state,
        payload,
        p,
        &path,
        |_| Ok(Action::TestSucceed),
        NO_FIELDS,
    )
    .await
}

/// Simulate a bank transfer into a test payment intent
///
/// Test keys only (404 for live keys). Issues the transfer account first if
/// none was; the exact amount completes the payment and sends its webhook.
#[utoipa::path(
    post,
    path = "/v1/test_helpers/payment_intents/{id}/simulate_transfer",
    operation_id = "test_simulate_transfer",
    tag = "test_helpers",
    params(PaymentIntentId, IdempotencyKey),
    request_body(content = Option<SimulateTransferRequest>, content_type = "application/json"),
    responses(
        (status = 200, description = "The payment intent after the transfer.", body = PaymentIntentView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the saved response of an earlier request with the same Idempotency-Key"))),
        (status = 400, response = BadRequestReplayable),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 413, response = PayloadTooLarge),
        (status = 422, response = IdempotencyKeyReused),
        (status = 500, response = InternalError),
        (status = 503, response = Overloaded),
    )
)]
async fn simulate_transfer(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    require_test_mode(&p)?;
    intent_action(
        req,
        state,
        payload,
        p,
        &path,
        |f| {
            Ok(Action::SimulateTransfer {
                amount: f.amount("amount", 1)?,
            })
        },
        SIMULATE_TRANSFER_FIELDS,
    )
    .await
}
