//! `/v1/payment_intents`: create, list, retrieve, cancel, bank transfer,
//! charge attempts.

use actix_web::{web, HttpRequest};
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::idempotency::IdempotencySave;
use kobo_actors::money::{Currency, FeeBearer};
use kobo_actors::payment_intent::actor::{Action, IntentMessage};
use kobo_actors::payment_intent::service::{self, CreatePaymentIntent};
use kobo_actors::payment_intent::{metadata_schema, PaymentIntentView, Status};
use kobo_actors::query::{self, IntentFilter, ListView, Principal};
use kobo_actors::{DomainError, Mode};

use super::body::{Fields, Query};
use super::openapi::{
    BadRequest, BadRequestReplayable, ChargeAttemptRef, ConflictReplayable, Forbidden,
    IdempotencyKey, IdempotencyKeyReused, InternalError, NotFound, NotFoundReplayable, Overloaded,
    PayloadTooLarge, PaymentIntentId, PaymentIntentRef, Unauthorized,
};
use super::{
    authenticate, authenticate_for, idempotent, json_response, parse_id, read_body, resource,
    ApiError, ApiResult, Reply, State,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/v1/payment_intents")
            .route(web::post().to(create))
            .route(web::get().to(list)),
    )
    .service(resource("/v1/payment_intents/{id}").route(web::get().to(retrieve)))
    .service(resource("/v1/payment_intents/{id}/cancel").route(web::post().to(cancel)))
    .service(
        resource("/v1/payment_intents/{id}/bank_transfer").route(web::post().to(bank_transfer)),
    )
    .service(
        resource("/v1/payment_intents/{id}/charge_attempts").route(web::get().to(charge_attempts)),
    );
}

/// The fields [`parse_create`] accepts: [`CreatePaymentIntentRequest`]'s.
pub const CREATE_FIELDS: &[&str] = &[
    "amount",
    "currency",
    "reference",
    "description",
    "customer_email",
    "metadata",
    "fee_bearer",
    "brand",
    "customer",
    "return_url",
];

/// Amounts of a payment intent start at 100 minor units.
pub const MIN_PAYMENT_AMOUNT: i64 = 100;

// The body of `POST /v1/payment_intents`, for its schema in the OpenAPI
// document: [`parse_create`] reads the body field by field (naming the
// offending field on every error); a unit test keeps these fields and
// [`CREATE_FIELDS`] equal.
/// The body that creates a payment intent. Only `amount` and `currency` are
/// required; `null` is the same as leaving a field out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreatePaymentIntent)]
#[allow(dead_code)]
pub struct CreatePaymentIntentRequest {
    /// Minor units (kobo, cents); at least 100.
    #[schema(minimum = 100, maximum = 1_000_000_000_000_i64)]
    amount: i64,
    currency: Currency,
    /// Unique per merchant and mode (409 `duplicate_reference`).
    #[schema(max_length = 255)]
    reference: Option<String>,
    #[schema(max_length = 1000)]
    description: Option<String>,
    #[schema(format = Email, max_length = 254)]
    customer_email: Option<String>,
    #[schema(schema_with = metadata_schema)]
    #[serde(default)]
    metadata: Map<String, Value>,
    /// Default `merchant`.
    fee_bearer: Option<FeeBearer>,
    /// One of the merchant's brands (default: the merchant's default brand);
    /// an unknown brand is 404.
    brand: Option<Uuid>,
    customer: Option<Uuid>,
    /// Where checkout sends the customer after paying: an http(s) URL.
    #[schema(format = "uri", max_length = 2048)]
    return_url: Option<String>,
}

/// The fields `GET /v1/payment_intents` accepts in its query.
pub const LIST_PARAMS: &[&str] = &["limit", "starting_after", "customer", "status"];

// The query of `GET /v1/payment_intents`, for the OpenAPI document; a unit
// test keeps these names and [`LIST_PARAMS`] equal.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ListPaymentIntentsQuery {
    /// Page size, 1 to 100.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<u8>,
    /// The id of the last payment intent of the previous page.
    starting_after: Option<Uuid>,
    /// Only this customer's payment intents.
    customer: Option<Uuid>,
    /// Only payment intents in this status.
    #[param(inline)]
    status: Option<Status>,
}

/// No body, or an object without fields.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NoFields)]
pub struct NoFields {}

/// The fields the body-less POSTs accept: none ([`NoFields`]).
pub const NO_FIELDS: &[&str] = &[];

fn parse_create(body: &[u8]) -> Result<CreatePaymentIntent, DomainError> {
    let f = Fields::parse(body, CREATE_FIELDS)?;
    let amount = f.required_amount("amount", MIN_PAYMENT_AMOUNT)?;
    let currency = f
        .currency("currency")?
        .ok_or_else(|| DomainError::missing("currency"))?;
    let fee_bearer = match f.string("fee_bearer", 16)?.as_deref() {
        None | Some("merchant") => FeeBearer::Merchant,
        Some("customer") => FeeBearer::Customer,
        Some(_) => {
            return Err(DomainError::invalid(
                "fee_bearer",
                "fee_bearer must be merchant or customer",
            ))
        }
    };
    Ok(CreatePaymentIntent {
        amount,
        currency,
        reference: f.string("reference", 255)?,
        description: f.string("description", 1000)?,
        customer_email: f.email("customer_email")?,
        metadata: f.metadata("metadata")?,
        fee_bearer,
        brand: f.uuid("brand")?,
        customer: f.uuid("customer")?,
        return_url: f.url("return_url")?,
    })
}

/// Live payments need an activated account (403 before anything else).
pub fn ensure_can_take_payments(p: &Principal) -> ApiResult<()> {
    if p.mode == Mode::Live && !p.merchant.settings.live_approved {
        return Err(ApiError(DomainError::forbidden(
            "account_not_activated",
            "live payments are not yet enabled for this account",
        )));
    }
    Ok(())
}

/// Create a payment intent
///
/// Fees and VAT are fixed at creation from the merchant's pricing. The
/// response alone carries `checkout_url` and `client_secret`.
#[utoipa::path(
    post,
    path = "/v1/payment_intents",
    operation_id = "create_payment_intent",
    tag = "payment_intents",
    params(IdempotencyKey),
    request_body(content = CreatePaymentIntentRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new payment intent, with `checkout_url` and `client_secret`.",
            body = PaymentIntentView, headers(("Idempotent-Replayed" = String, description = "`true` when this is the saved response of an earlier request with the same Idempotency-Key"))),
        (status = 400, response = BadRequestReplayable),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 413, response = PayloadTooLarge),
        (status = 422, response = IdempotencyKeyReused),
        (status = 500, response = InternalError),
    )
)]
async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let p = authenticate(&req, &state)?;
    ensure_can_take_payments(&p)?;
    let body = read_body(payload).await?;
    let (state, p, body) = (&state, &p, &body);
    idempotent(&req, state, p, body, |save| async move {
        let params = parse_create(body)?;
        let view = service::create(&state.kobo, &p.merchant, p.mode, params, Some(&save)).await?;
        Ok(Reply::saved(201, view))
    })
    .await
}

/// List payment intents
///
/// Newest first.
#[utoipa::path(
    get,
    path = "/v1/payment_intents",
    operation_id = "list_payment_intents",
    tag = "payment_intents",
    params(ListPaymentIntentsQuery),
    responses(
        (status = 200, description = "A page of payment intents, newest first.",
            body = ListView<PaymentIntentRef>),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let q = Query::parse(req.query_string(), LIST_PARAMS)?;
    let filter = IntentFilter {
        limit: q.limit()?,
        starting_after: q.uuid("starting_after")?,
        status: q.one_of("status", Status::parse, "a payment intent status")?,
        customer: q.uuid("customer")?,
    };
    let page = query::list_payment_intents(&state.kobo, p.merchant.id, p.mode, &filter)?;
    Ok(json_response(200, &page.to_api()))
}

/// Retrieve a payment intent
///
/// Shows `next_action` and `bank_transfer`. The payment intent's
/// `client_secret` may be the bearer.
#[utoipa::path(
    get,
    path = "/v1/payment_intents/{id}",
    operation_id = "retrieve_payment_intent",
    tag = "payment_intents",
    params(PaymentIntentId),
    security(("bearer" = []), ("client_secret" = [])),
    responses(
        (status = 200, description = "The payment intent.", body = PaymentIntentView),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    )
)]
async fn retrieve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let p = authenticate_for(&req, &state, Some(&path))?;
    let id = parse_id(&path, "payment_intent")?;
    let intent = query::payment_intent(&state.kobo, p.merchant.id, p.mode, id)?;
    Ok(json_response(200, &intent.to_api(None)))
}

/// List a payment intent's charge attempts
///
/// Oldest first, all of them on one page.
#[utoipa::path(
    get,
    path = "/v1/payment_intents/{id}/charge_attempts",
    operation_id = "list_charge_attempts",
    tag = "payment_intents",
    params(PaymentIntentId),
    responses(
        (status = 200, description = "The charge attempts, oldest first.",
            body = ListView<ChargeAttemptRef>),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    )
)]
async fn charge_attempts(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let id = parse_id(&path, "payment_intent")?;
    let intent = query::payment_intent(&state.kobo, p.merchant.id, p.mode, id)?;
    Ok(json_response(
        200,
        &query::charge_attempts(&state.kobo, &intent)?.to_api(),
    ))
}

/// Sends `action` to the intent's actor, after checking it exists for this
/// merchant and mode (so unknown ids never activate an actor).
pub async fn act(
    state: &State,
    p: &Principal,
    id: Uuid,
    action: Action,
    save: Option<IdempotencySave>,
) -> Result<Value, DomainError> {
    query::payment_intent(&state.kobo, p.merchant.id, p.mode, id)?;
    let msg = IntentMessage {
        merchant: p.merchant.id,
        mode: p.mode,
        merchant_name: p.merchant.name.clone(),
        bank_transfer_enabled: p.merchant.settings.payment_methods.bank_transfer,
        action,
        idem: save,
    };
    state.kobo.payment_intents.send(id, msg).await?
}

/// A POST on one intent that takes no body: idempotent, then the action.
pub async fn intent_action(
    req: HttpRequest,
    state: State,
    payload: web::Payload,
    p: Principal,
    raw_id: &str,
    action: impl FnOnce(&Fields) -> Result<Action, DomainError>,
    allowed: &[&str],
) -> ApiResult {
    let body = read_body(payload).await?;
    let (state, p, body) = (&state, &p, &body);
    idempotent(&req, state, p, body, |save| async move {
        let fields = Fields::parse(body, allowed)?;
        let id = parse_id(raw_id, "payment_intent").map_err(|e| e.0)?;
        let action = action(&fields)?;
        let view = act(state, p, id, action, Some(save)).await?;
        Ok(Reply::saved(200, view))
    })
    .await
}

/// Cancel a payment intent
///
/// Only a `created`, `failed` or `abandoned` payment intent can be
/// canceled; otherwise 409.
#[utoipa::path(
    post,
    path = "/v1/payment_intents/{id}/cancel",
    operation_id = "cancel_payment_intent",
    tag = "payment_intents",
    params(PaymentIntentId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The canceled payment intent.", body = PaymentIntentView,
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
async fn cancel(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    intent_action(
        req,
        state,
        payload,
        p,
        &path,
        |_| Ok(Action::Cancel),
        NO_FIELDS,
    )
    .await
}

/// Pay a payment intent by bank transfer
///
/// Naira only. Issues the account the customer pays into (`bank_transfer`;
/// asking again returns the same account while it is open) and moves the
/// payment intent to `processing`. The payment intent's `client_secret` may
/// be the bearer.
#[utoipa::path(
    post,
    path = "/v1/payment_intents/{id}/bank_transfer",
    operation_id = "bank_transfer_payment_intent",
    tag = "payment_intents",
    params(PaymentIntentId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    security(("bearer" = []), ("client_secret" = [])),
    responses(
        (status = 200, description = "The payment intent with `bank_transfer` and `next_action: null`, status `processing`.",
            body = PaymentIntentView, headers(("Idempotent-Replayed" = String, description = "`true` when this is the saved response of an earlier request with the same Idempotency-Key"))),
        (status = 400, response = BadRequestReplayable),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 413, response = PayloadTooLarge),
        (status = 422, response = IdempotencyKeyReused),
        (status = 500, response = InternalError),
        (status = 503, response = Overloaded),
    )
)]
async fn bank_transfer(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate_for(&req, &state, Some(&path))?;
    ensure_can_take_payments(&p)?;
    intent_action(
        req,
        state,
        payload,
        p,
        &path,
        |_| Ok(Action::BankTransfer),
        NO_FIELDS,
    )
    .await
}
