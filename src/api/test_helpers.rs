//! `/v1/test_helpers`: simulate provider behaviour in test mode (404 for live
//! keys).

use actix_web::{web, HttpRequest};
use serde::Deserialize;
use utoipa::ToSchema;

use kobo_actors::payment_intent::actor::Action;
use kobo_actors::payment_intent::PaymentIntentView;

use super::body::{self, NoFields};
use super::components::{
    ConflictReplayable, IdempotencyKey, NotFoundReplayable, Overloaded, PaymentIntentId,
};
use super::endpoint::{test_mode, Endpoint};
use super::payment_intents::intent_action;
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(
        resource("/v1/test_helpers/payment_intents/{id}/succeed").route(web::post().to(succeed)),
    )
    .service(
        resource("/v1/test_helpers/payment_intents/{id}/simulate_transfer")
            .route(web::post().to(simulate_transfer)),
    );
}

/// A simulated transfer into the payment intent's account; `null` is the
/// same as leaving a field out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SimulateTransfer)]
pub struct SimulateTransferRequest {
    /// Minor units; default `bank_transfer.amount`. A different amount is
    /// returned to the sender: a failed charge attempt `amount_mismatch`,
    /// the payment unchanged.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::opt_amount::<_, 1>")]
    amount: Option<i64>,
}

/// Test keys only: live keys get 404.
const TEST_HELPER: Endpoint = Endpoint::secret_key(200).gate(test_mode);

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
        (status = 200, description = "The payment intent, now successful.", body = PaymentIntentView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn succeed(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    intent_action(TEST_HELPER, req, state, payload, |_: NoFields| {
        Action::TestSucceed
    })
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
        (status = 200, description = "The payment intent after the transfer.", body = PaymentIntentView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn simulate_transfer(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    intent_action(
        TEST_HELPER,
        req,
        state,
        payload,
        |b: SimulateTransferRequest| Action::SimulateTransfer { amount: b.amount },
    )
    .await
}
