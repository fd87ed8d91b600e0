//! Refunds, disputes, and the dispute test helpers.

use actix_web::{web, HttpRequest};
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::idempotency::IdempotencySave;
use kobo_actors::payment_intent::metadata_schema;
use kobo_actors::query::{self, ListView, Principal};
use kobo_actors::refund::actor::{AftercareAction, AftercareMessage};
use kobo_actors::refund::{service, DisputeView, RefundView};
use kobo_actors::DomainError;

use super::body::{Fields, Query};
use super::openapi::{
    BadRequest, BadRequestReplayable, ByRef, ConflictReplayable, IdempotencyKey,
    IdempotencyKeyReused, InternalError, NotFound, NotFoundReplayable, Overloaded, PayloadTooLarge,
    PaymentIntentId, Unauthorized,
};
use super::{
    authenticate, idempotent, json_response, parse_id, read_body, require_test_mode, resource,
    ApiError, ApiResult, Reply, State,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/v1/refunds")
            .route(web::post().to(create_refund))
            .route(web::get().to(list_refunds)),
    )
    .service(resource("/v1/refunds/{id}").route(web::get().to(retrieve_refund)))
    .service(resource("/v1/disputes").route(web::get().to(list_disputes)))
    .service(resource("/v1/disputes/{id}").route(web::get().to(retrieve_dispute)))
    .service(resource("/v1/disputes/{id}/evidence").route(web::post().to(evidence)))
    .service(
        resource("/v1/test_helpers/payment_intents/{id}/dispute")
            .route(web::post().to(open_dispute)),
    )
    .service(resource("/v1/test_helpers/disputes/{id}/resolve").route(web::post().to(resolve)));
}

/// List items: `ListView<RefundRef>` is `List_Refund`.
pub type RefundRef = ByRef<RefundView>;
pub type DisputeRef = ByRef<DisputeView>;

/// The `{id}` of a refund.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct RefundId {
    /// The refund's id; unknown, malformed, another merchant's or the other
    /// mode's: 404.
    id: Uuid,
}

/// The `{id}` of a dispute.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct DisputeId {
    /// The dispute's id; unknown, malformed, another merchant's or the other
    /// mode's: 404.
    id: Uuid,
}

async fn send(
    state: &State,
    p: &Principal,
    payment: Uuid,
    action: AftercareAction,
    idem: IdempotencySave,
) -> Result<Value, DomainError> {
    state
        .kobo
        .aftercare
        .send(
            payment,
            AftercareMessage {
                merchant: p.merchant.id,
                mode: p.mode,
                action,
                idem: Some(idem),
            },
        )
        .await?
}

/// The fields `POST /v1/refunds` accepts: [`CreateRefundRequest`]'s.
pub const REFUND_FIELDS: &[&str] = &["payment_intent", "amount", "reason", "metadata"];

// The body of `POST /v1/refunds`, for the OpenAPI document; a unit test
// keeps these fields and [`REFUND_FIELDS`] equal.
/// The body that creates a refund. `null` is the same as leaving a field
/// out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateRefund)]
#[allow(dead_code)]
pub struct CreateRefundRequest {
    /// A successful payment intent of the merchant (unknown: 404).
    payment_intent: Uuid,
    /// Minor units; default: all that is left to refund. More than is left:
    /// 400 `amount_too_large`.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    amount: Option<i64>,
    /// Free text.
    #[schema(max_length = 500)]
    reason: Option<String>,
    #[schema(schema_with = metadata_schema)]
    #[serde(default)]
    metadata: Map<String, Value>,
}

/// Refund a payment
///
/// Only a successful payment without an open dispute can be refunded (409
/// `payment_not_refundable`, `payment_disputed`). The money comes from
/// `pending` while the payment's release is still ahead, else from
/// `available` (409 `insufficient_funds` when that does not cover it); fees
/// are not returned. The refund is `pending` until the provider confirms
/// it.
#[utoipa::path(
    post,
    path = "/v1/refunds",
    operation_id = "create_refund",
    tag = "refunds",
    params(IdempotencyKey),
    request_body(content = CreateRefundRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new refund, `pending`.", body = RefundView,
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

async fn create_refund(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let body = read_body(payload).await?;
    let (state, p, body) = (&state, &p, &body);
    idempotent(&req, state, p, body, |save| async move {
        let f = Fields::parse(body, REFUND_FIELDS)?;
        let payment = f
            .uuid("payment_intent")?
            .ok_or_else(|| DomainError::missing("payment_intent"))?;
        let amount = f.amount("amount", 1)?;
        let reason = f.string("reason", 500)?;
        let metadata = f.metadata("metadata")?;
        query::payment_intent(&state.kobo, p.merchant.id, p.mode, payment)
            .map_err(|e| e.with_param("payment_intent"))?;
        let view = send(
            state,
            p,
            payment,
            AftercareAction::CreateRefund {
                amount,
                reason,
                metadata,
            },
            save,
        )
        .await?;
        Ok(Reply::saved(201, view))
    })
    .await
}

/// The fields `GET /v1/refunds` accepts in its query.
pub const LIST_REFUNDS_PARAMS: &[&str] = &["limit", "starting_after", "payment_intent"];

// The query of `GET /v1/refunds`, for the OpenAPI document; a unit test
// keeps these names and [`LIST_REFUNDS_PARAMS`] equal.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ListRefundsQuery {
    /// Page size, 1 to 100.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<u8>,
    /// The id of the last refund of the previous page.
    starting_after: Option<Uuid>,
    /// Only this payment intent's refunds.
    payment_intent: Option<Uuid>,
}

/// List refunds
///
/// Newest first.
#[utoipa::path(
    get,
    path = "/v1/refunds",
    operation_id = "list_refunds",
    tag = "refunds",
    params(ListRefundsQuery),
    responses(
        (status = 200, description = "A page of refunds, newest first.", body = ListView<RefundRef>),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    )
)]
async fn list_refunds(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let q = Query::parse(req.query_string(), LIST_REFUNDS_PARAMS)?;
    let page = service::list_refunds(
        &state.kobo,
        p.merchant.id,
        p.mode,
        q.uuid("payment_intent")?,
        q.limit()?,
        q.uuid("starting_after")?,
    )?;
    Ok(json_response(200, &page.to_api()))
}

/// Retrieve a refund
#[utoipa::path(
    get,
    path = "/v1/refunds/{id}",
    operation_id = "retrieve_refund",
    tag = "refunds",
    params(RefundId),
    responses(
        (status = 200, description = "The refund.", body = RefundView),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    )
)]
async fn retrieve_refund(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let id = parse_id(&path, "refund")?;
    match service::load_refund(&state.kobo, id)? {
        Some(r) if r.merchant == p.merchant.id && r.mode == p.mode => {
            Ok(json_response(200, &r.to_api()))
        }
        _ => Err(ApiError(DomainError::not_found("refund", id))),
    }
}

/// The fields `GET /v1/disputes` accepts in its query.
pub const LIST_DISPUTES_PARAMS: &[&str] = &["limit", "starting_after"];

// The query of `GET /v1/disputes`, for the OpenAPI document; a unit test
// keeps these names and [`LIST_DISPUTES_PARAMS`] equal.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ListDisputesQuery {
    /// Page size, 1 to 100.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<u8>,
    /// The id of the last dispute of the previous page.
    starting_after: Option<Uuid>,
}

/// List disputes
///
/// Newest first.
#[utoipa::path(
    get,
    path = "/v1/disputes",
    operation_id = "list_disputes",
    tag = "refunds",
    params(ListDisputesQuery),
    responses(
        (status = 200, description = "A page of disputes, newest first.", body = ListView<DisputeRef>),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    )
)]
async fn list_disputes(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let q = Query::parse(req.query_string(), LIST_DISPUTES_PARAMS)?;
    let page = service::list_disputes(
        &state.kobo,
        p.merchant.id,
        p.mode,
        q.limit()?,
        q.uuid("starting_after")?,
    )?;
    Ok(json_response(200, &page.to_api()))
}

fn own_dispute(state: &State, p: &Principal, raw: &str) -> ApiResult<kobo_actors::refund::Dispute> {
    let id = parse_id(raw, "dispute")?;
    match service::load_dispute(&state.kobo, id)? {
        Some(d) if d.merchant == p.merchant.id && d.mode == p.mode => Ok(d),
        _ => Err(ApiError(DomainError::not_found("dispute", id))),
    }
}

/// Retrieve a dispute
#[utoipa::path(
    get,
    path = "/v1/disputes/{id}",
    operation_id = "retrieve_dispute",
    tag = "refunds",
    params(DisputeId),
    responses(
        (status = 200, description = "The dispute.", body = DisputeView),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    )
)]
async fn retrieve_dispute(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let p = authenticate(&req, &state)?;
    Ok(json_response(
        200,
        &own_dispute(&state, &p, &path)?.to_api(),
    ))
}

/// The fields `POST /v1/disputes/{id}/evidence` accepts:
/// [`SubmitEvidenceRequest`]'s.
pub const EVIDENCE_FIELDS: &[&str] = &[
    "text",
    "customer_name",
    "customer_email",
    "service_date",
    "receipt_url",
    "tracking_number",
];

// The body of `POST /v1/disputes/{id}/evidence`, for the OpenAPI document;
// a unit test keeps these fields and [`EVIDENCE_FIELDS`] equal.
/// A dispute's evidence: at least one field (none: 400 on `text`); each a
/// string of up to 5,000 characters, kept as given. `null` is the same as
/// leaving a field out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SubmitEvidence)]
#[allow(dead_code)]
pub struct SubmitEvidenceRequest {
    /// The merchant's account of what happened.
    #[schema(max_length = 5000)]
    text: Option<String>,
    #[schema(max_length = 5000)]
    customer_name: Option<String>,
    #[schema(max_length = 5000)]
    customer_email: Option<String>,
    /// When the goods or service were provided.
    #[schema(max_length = 5000)]
    service_date: Option<String>,
    #[schema(max_length = 5000)]
    receipt_url: Option<String>,
    /// The delivery's tracking number.
    #[schema(max_length = 5000)]
    tracking_number: Option<String>,
}

/// Submit evidence for a dispute
///
/// Replaces any earlier evidence. Accepted while the dispute is `open`
/// (409 `dispute_not_open`) and until `respond_by` (409
/// `dispute_response_late`).
#[utoipa::path(
    post,
    path = "/v1/disputes/{id}/evidence",
    operation_id = "submit_dispute_evidence",
    tag = "refunds",
    params(DisputeId, IdempotencyKey),
    request_body(content = SubmitEvidenceRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The dispute with its `evidence`.", body = DisputeView,
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

async fn evidence(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let body = read_body(payload).await?;
    let (state, p, body, raw) = (&state, &p, &body, path.as_str());
    idempotent(&req, state, p, body, |save| async move {
        let f = Fields::parse(body, EVIDENCE_FIELDS)?;
        let mut evidence = Map::new();
        for name in EVIDENCE_FIELDS {
            if let Some(v) = f.string(name, 5000)? {
                evidence.insert(name.to_string(), Value::from(v));
            }
        }
        if evidence.is_empty() {
            return Err(DomainError::missing("text").into());
        }
        let d = own_dispute(state, p, raw)?;
        let view = send(
            state,
            p,
            d.payment_intent,
            AftercareAction::SubmitEvidence {
                dispute: d.id,
                evidence: Value::Object(evidence),
            },
            save,
        )
        .await?;
        Ok(Reply::saved(200, view))
    })
    .await
}

/// The fields the dispute test helper accepts: [`OpenDisputeRequest`]'s.
pub const OPEN_DISPUTE_FIELDS: &[&str] = &["amount", "reason"];

// The body of `POST /v1/test_helpers/payment_intents/{id}/dispute`, for the
// OpenAPI document; a unit test keeps these fields and
// [`OPEN_DISPUTE_FIELDS`] equal.
/// A simulated dispute; `null` is the same as leaving a field out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = OpenDispute)]
#[allow(dead_code)]
pub struct OpenDisputeRequest {
    /// Minor units; default: all that is left of the payment (more: 400
    /// `amount_too_large`).
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    amount: Option<i64>,
    /// Default `general`.
    #[schema(max_length = 200)]
    reason: Option<String>,
}

/// Open a dispute on a test payment
///
/// Test keys only (404 for live keys). The payment must be successful (409
/// `payment_not_disputable`) without an open dispute (409
/// `dispute_already_open`). The amount is held in `dispute_hold`, taken
/// like a refund (pending first), and may take `available` below zero.
#[utoipa::path(
    post,
    path = "/v1/test_helpers/payment_intents/{id}/dispute",
    operation_id = "test_open_dispute",
    tag = "test_helpers",
    params(PaymentIntentId, IdempotencyKey),
    request_body(content = Option<OpenDisputeRequest>, content_type = "application/json"),
    responses(
        (status = 200, description = "The new dispute, `open` (every test helper answers 200).", body = DisputeView,
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
async fn open_dispute(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    require_test_mode(&p)?;
    let body = read_body(payload).await?;
    let (state, p, body, raw) = (&state, &p, &body, path.as_str());
    idempotent(&req, state, p, body, |save| async move {
        let f = Fields::parse(body, OPEN_DISPUTE_FIELDS)?;
        let amount = f.amount("amount", 1)?;
        let reason = f.string("reason", 200)?;
        let id = parse_id(raw, "payment_intent")?;
        query::payment_intent(&state.kobo, p.merchant.id, p.mode, id)?;
        let view = send(
            state,
            p,
            id,
            AftercareAction::OpenDispute { amount, reason },
            save,
        )
        .await?;
        Ok(Reply::saved(200, view))
    })
    .await
}

/// The fields the resolve test helper accepts: [`ResolveDisputeRequest`]'s.
pub const RESOLVE_FIELDS: &[&str] = &["outcome"];

/// How a dispute is decided.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum DisputeOutcome {
    /// The held amount returns to the merchant.
    Won,
    /// The held amount leaves the business (it counts as refunded).
    Lost,
}

// The body of `POST /v1/test_helpers/disputes/{id}/resolve`, for the
// OpenAPI document; a unit test keeps these fields and [`RESOLVE_FIELDS`]
// equal.
/// The decision of a simulated dispute.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ResolveDispute)]
#[allow(dead_code)]
pub struct ResolveDisputeRequest {
    #[schema(inline)]
    outcome: DisputeOutcome,
}

/// Decide a test dispute
///
/// Test keys only (404 for live keys). Won: the hold returns (to `pending`
/// while the payment's release is ahead, else `available`). Lost: the hold
/// leaves the business. A decided dispute: 409 `dispute_not_open`.
#[utoipa::path(
    post,
    path = "/v1/test_helpers/disputes/{id}/resolve",
    operation_id = "test_resolve_dispute",
    tag = "test_helpers",
    params(DisputeId, IdempotencyKey),
    request_body(content = ResolveDisputeRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The dispute, `won` or `lost`.", body = DisputeView,
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
async fn resolve(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    require_test_mode(&p)?;
    let body = read_body(payload).await?;
    let (state, p, body, raw) = (&state, &p, &body, path.as_str());
    idempotent(&req, state, p, body, |save| async move {
        let f = Fields::parse(body, RESOLVE_FIELDS)?;
        let won = match f.string("outcome", 10)?.as_deref() {
            Some("won") => true,
            Some("lost") => false,
            Some(_) => return Err(DomainError::invalid("outcome", "outcome is won or lost").into()),
            None => return Err(DomainError::missing("outcome").into()),
        };
        let d = own_dispute(state, p, raw)?;
        let view = send(
            state,
            p,
            d.payment_intent,
            AftercareAction::ResolveDispute { dispute: d.id, won },
            save,
        )
        .await?;
        Ok(Reply::saved(200, view))
    })
    .await
}
