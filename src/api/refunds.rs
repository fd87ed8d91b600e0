//! Refunds, disputes, and the dispute test helpers.

use actix_web::{web, HttpRequest};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::idempotency::{Answer, IdempotencySave};
use kobo_actors::payment_intent::metadata_schema;
use kobo_actors::query::{self, ListView, Principal};
use kobo_actors::refund::actor::{AftercareAction, AftercareMessage};
use kobo_actors::refund::machine::AftercareView;
use kobo_actors::refund::{service, DisputeView, RefundView};
use kobo_actors::DomainError;

use super::body::{self as body};
use super::components::{
    path_id, BadRequest, ByRef, ConflictReplayable, IdempotencyKey, NotFound, NotFoundReplayable,
    Overloaded, PaymentIntentId,
};
use super::endpoint::{test_mode, Call, Endpoint};
use super::params::{self, page_query};
use super::{resource, ApiError, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
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

path_id!(
    /// The `{id}` of a refund.
    RefundId,
    "refund",
    /// The refund's id; unknown, malformed, another merchant's or the other
    /// mode's: 404.
);

path_id!(
    /// The `{id}` of a dispute.
    DisputeId,
    "dispute",
    /// The dispute's id; unknown, malformed, another merchant's or the other
    /// mode's: 404.
);

/// A POST whose body `B` makes an action for a payment's aftercare actor:
/// `action` checks the body and looks up what it names, then the actor
/// runs it and saves its answer (the endpoint's status) under the
/// Idempotency-Key.
async fn aftercare_action<B: DeserializeOwned>(
    endpoint: Endpoint,
    req: HttpRequest,
    state: State,
    payload: web::Payload,
    action: impl FnOnce(&State, &Principal, B) -> ApiResult<(Uuid, AftercareAction)>,
) -> ApiResult {
    endpoint
        .post(req, state, payload, |c, body: B| async move {
            let (payment, action) = action(&c.state, &c.p, body)?;
            Ok(send(&c.state, &c.p, payment, action, c.save.clone()).await?)
        })
        .await
}

async fn send(
    state: &State,
    p: &Principal,
    payment: Uuid,
    action: AftercareAction,
    idem: Option<IdempotencySave>,
) -> Result<Answer<AftercareView>, DomainError> {
    state
        .kobo
        .aftercare
        .send(
            payment,
            AftercareMessage {
                merchant: p.merchant.id,
                mode: p.mode,
                action,
                idem,
            },
        )
        .await?
}

// The body of `POST /v1/refunds`, for the OpenAPI document; a unit test
/// The body that creates a refund. `null` is the same as leaving a field
/// out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateRefund)]
pub struct CreateRefundRequest {
    /// A successful payment intent of the merchant (unknown: 404).
    #[serde(deserialize_with = "body::required_uuid")]
    payment_intent: Uuid,
    /// Minor units; default: all that is left to refund. More than is left:
    /// 400 `amount_too_large`.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::opt_amount::<_, 1>")]
    amount: Option<i64>,
    /// Free text.
    #[schema(max_length = 500)]
    #[serde(deserialize_with = "body::text::<_, 500>")]
    reason: Option<String>,
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "body::metadata")]
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
        (status = 201, description = "The new refund, `pending`.", body = RefundView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]

async fn create_refund(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    CREATE_REFUND.post(req, state, payload, refund).await
}

/// `POST /v1/refunds`' declaration (the dashboard's refund button posts
/// through it too).
pub const CREATE_REFUND: Endpoint = Endpoint::secret_key(201);

/// `POST /v1/refunds`' run: the payment must be the caller's, then the
/// refund goes to the payment's aftercare actor.
pub async fn refund(c: Call, body: CreateRefundRequest) -> ApiResult<Answer<AftercareView>> {
    let CreateRefundRequest {
        payment_intent: payment,
        amount,
        reason,
        metadata,
    } = body;
    query::payment_intent(&c.state.kobo, c.p.merchant.id, c.p.mode, payment)
        .map_err(|e| e.with_param("payment_intent"))?;
    let refund = AftercareAction::CreateRefund {
        amount,
        reason,
        metadata,
    };
    Ok(send(&c.state, &c.p, payment, refund, c.save.clone()).await?)
}

/// The query of `GET /v1/refunds`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListRefundsQuery {
    /// Page size, 1 to 100.
    #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
    #[serde(deserialize_with = "params::limit")]
    limit: usize,
    /// The id of the last refund of the previous page.
    #[serde(deserialize_with = "params::uuid")]
    starting_after: Option<Uuid>,
    /// Only this payment intent's refunds.
    #[serde(deserialize_with = "params::uuid")]
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
    )
)]
async fn list_refunds(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: ListRefundsQuery| async move {
            let Call { state, p, .. } = c;
            let page = service::list_refunds(
                &state.kobo,
                p.merchant.id,
                p.mode,
                q.payment_intent,
                q.limit,
                q.starting_after,
            )?;
            Ok(page.to_api())
        })
        .await
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
        (status = 404, response = NotFound),
    )
)]
async fn retrieve_refund(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let Call { state, p, .. } = c;
            let id = RefundId::parse(&path)?.id;
            match service::load_refund(&state.kobo, id)? {
                Some(r) if r.merchant == p.merchant.id && r.mode == p.mode => Ok(r.to_api()),
                _ => Err(ApiError(DomainError::not_found("refund", id))),
            }
        })
        .await
}

page_query!(
    /// The query of `GET /v1/disputes`.
    ListDisputesQuery,
    "The id of the last dispute of the previous page."
);

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
    )
)]
async fn list_disputes(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .list_page::<ListDisputesQuery, _>(req, state, service::list_disputes)
        .await
}

fn own_dispute(state: &State, p: &Principal, raw: &str) -> ApiResult<kobo_actors::refund::Dispute> {
    let id = DisputeId::parse(raw)?.id;
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
        (status = 404, response = NotFound),
    )
)]
async fn retrieve_dispute(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let Call { state, p, .. } = c;
            Ok(own_dispute(&state, &p, &path)?.to_api())
        })
        .await
}

// The body of `POST /v1/disputes/{id}/evidence`, for the OpenAPI document;
/// A dispute's evidence: at least one field (none: 400 on `text`); each a
/// string of up to 5,000 characters, kept as given. `null` is the same as
/// leaving a field out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SubmitEvidence)]
pub struct SubmitEvidenceRequest {
    /// The merchant's account of what happened.
    #[schema(max_length = 5000)]
    #[serde(deserialize_with = "body::text::<_, 5000>")]
    text: Option<String>,
    #[schema(max_length = 5000)]
    #[serde(deserialize_with = "body::text::<_, 5000>")]
    customer_name: Option<String>,
    #[schema(max_length = 5000)]
    #[serde(deserialize_with = "body::text::<_, 5000>")]
    customer_email: Option<String>,
    /// When the goods or service were provided.
    #[schema(max_length = 5000)]
    #[serde(deserialize_with = "body::text::<_, 5000>")]
    service_date: Option<String>,
    #[schema(max_length = 5000)]
    #[serde(deserialize_with = "body::text::<_, 5000>")]
    receipt_url: Option<String>,
    /// The delivery's tracking number.
    #[schema(max_length = 5000)]
    #[serde(deserialize_with = "body::text::<_, 5000>")]
    tracking_number: Option<String>,
}

impl SubmitEvidenceRequest {
    /// The fields given, by name.
    fn into_map(self) -> Map<String, Value> {
        let fields = [
            ("text", self.text),
            ("customer_name", self.customer_name),
            ("customer_email", self.customer_email),
            ("service_date", self.service_date),
            ("receipt_url", self.receipt_url),
            ("tracking_number", self.tracking_number),
        ];
        fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), Value::from(v))))
            .collect()
    }
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
        (status = 200, description = "The dispute with its `evidence`.", body = DisputeView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]

async fn evidence(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    SUBMIT_EVIDENCE
        .post(
            req,
            state,
            payload,
            |c, body: SubmitEvidenceRequest| async move { evidence_run(c, &path, body).await },
        )
        .await
}

/// `POST /v1/disputes/{id}/evidence`' declaration (the dashboard's evidence
/// form posts through it too).
pub const SUBMIT_EVIDENCE: Endpoint = Endpoint::secret_key(200);

/// `POST /v1/disputes/{id}/evidence`' run: at least one field, the dispute
/// must be the caller's, then the evidence goes to the payment's aftercare
/// actor.
pub async fn evidence_run(
    c: Call,
    raw_id: &str,
    body: SubmitEvidenceRequest,
) -> ApiResult<Answer<AftercareView>> {
    let evidence = body.into_map();
    if evidence.is_empty() {
        return Err(DomainError::missing("text").into());
    }
    let d = own_dispute(&c.state, &c.p, raw_id)?;
    let action = AftercareAction::SubmitEvidence {
        dispute: d.id,
        evidence: Value::Object(evidence),
    };
    Ok(send(&c.state, &c.p, d.payment_intent, action, c.save.clone()).await?)
}

// The body of `POST /v1/test_helpers/payment_intents/{id}/dispute`, for the
// OpenAPI document; a unit test keeps these fields and
/// A simulated dispute; `null` is the same as leaving a field out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = OpenDispute)]
pub struct OpenDisputeRequest {
    /// Minor units; default: all that is left of the payment (more: 400
    /// `amount_too_large`).
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::opt_amount::<_, 1>")]
    amount: Option<i64>,
    /// Default `general`.
    #[schema(max_length = 200)]
    #[serde(deserialize_with = "body::text::<_, 200>")]
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
        (status = 200, description = "The new dispute, `open` (every test helper answers 200).", body = DisputeView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn open_dispute(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let open = Endpoint::secret_key(200).gate(test_mode);
    aftercare_action(
        open,
        req,
        state,
        payload,
        |state, p, body: OpenDisputeRequest| {
            let OpenDisputeRequest { amount, reason } = body;
            let id = PaymentIntentId::parse(&path)?.id;
            query::payment_intent(&state.kobo, p.merchant.id, p.mode, id)?;
            Ok((id, AftercareAction::OpenDispute { amount, reason }))
        },
    )
    .await
}

/// How a dispute is decided.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DisputeOutcome {
    /// The held amount returns to the merchant.
    Won,
    /// The held amount leaves the business (it counts as refunded).
    Lost,
}

/// The decision of a simulated dispute.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ResolveDispute)]
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
        (status = 200, description = "The dispute, `won` or `lost`.", body = DisputeView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn resolve(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let resolve = Endpoint::secret_key(200).gate(test_mode);
    aftercare_action(
        resolve,
        req,
        state,
        payload,
        |state, p, body: ResolveDisputeRequest| {
            let won = matches!(body.outcome, DisputeOutcome::Won);
            let d = own_dispute(state, p, &path)?;
            let decision = AftercareAction::ResolveDispute { dispute: d.id, won };
            Ok((d.payment_intent, decision))
        },
    )
    .await
}
