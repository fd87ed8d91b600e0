//! `/v1/payment_intents`: create, list, retrieve, cancel, bank transfer,
//! charge attempts.

use actix_web::{web, HttpRequest};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::idempotency::{Answer, IdempotencySave};
use kobo_actors::money::{Currency, FeeBearer};
use kobo_actors::payment_intent::actor::{Action, IntentMessage};
use kobo_actors::payment_intent::service::{self, CreatePaymentIntent};
use kobo_actors::payment_intent::{metadata_schema, PaymentIntentView, Status};
use kobo_actors::query::{self, IntentFilter, ListView, Principal};
use kobo_actors::DomainError;

use super::body;
pub use super::body::NoFields;
use super::components::{
    BadRequest, ChargeAttemptRef, ConflictReplayable, Forbidden, IdempotencyKey, NotFound,
    NotFoundReplayable, Overloaded, PaymentIntentId, PaymentIntentRef,
};
use super::endpoint::{live_payments, Endpoint};
use super::params;
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
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

/// Amounts of a payment intent start at 100 minor units.
pub const MIN_PAYMENT_AMOUNT: i64 = 100;

/// The body that creates a payment intent. Only `amount` and `currency` are
/// required; `null` is the same as leaving a field out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreatePaymentIntent)]
pub struct CreatePaymentIntentRequest {
    /// Minor units (kobo, cents); at least 100.
    #[schema(minimum = 100, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::amount::<_, MIN_PAYMENT_AMOUNT>")]
    amount: i64,
    #[serde(deserialize_with = "body::required_currency")]
    currency: Currency,
    /// Default `merchant`.
    fee_bearer: Option<FeeBearer>,
    /// Unique per merchant and mode (409 `duplicate_reference`).
    #[schema(max_length = 255)]
    #[serde(deserialize_with = "body::text::<_, 255>")]
    reference: Option<String>,
    #[schema(max_length = 1000)]
    #[serde(deserialize_with = "body::text::<_, 1000>")]
    description: Option<String>,
    #[schema(format = Email, max_length = 254)]
    #[serde(deserialize_with = "body::email")]
    customer_email: Option<String>,
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "body::metadata")]
    metadata: Map<String, Value>,
    /// One of the merchant's brands (default: the merchant's default brand);
    /// an unknown brand is 404.
    #[serde(deserialize_with = "body::uuid")]
    brand: Option<Uuid>,
    #[serde(deserialize_with = "body::uuid")]
    customer: Option<Uuid>,
    /// Where checkout sends the customer after paying: an http(s) URL.
    #[schema(format = "uri", max_length = 2048)]
    #[serde(deserialize_with = "body::url")]
    return_url: Option<String>,
}

impl From<CreatePaymentIntentRequest> for CreatePaymentIntent {
    fn from(r: CreatePaymentIntentRequest) -> Self {
        CreatePaymentIntent {
            amount: r.amount,
            currency: r.currency,
            reference: r.reference,
            description: r.description,
            customer_email: r.customer_email,
            metadata: r.metadata,
            fee_bearer: r.fee_bearer.unwrap_or(FeeBearer::Merchant),
            brand: r.brand,
            customer: r.customer,
            return_url: r.return_url,
        }
    }
}

/// The query of `GET /v1/payment_intents`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListPaymentIntentsQuery {
    /// Page size, 1 to 100.
    #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
    #[serde(deserialize_with = "params::limit")]
    limit: usize,
    /// The id of the last payment intent of the previous page.
    #[serde(deserialize_with = "params::uuid")]
    starting_after: Option<Uuid>,
    /// Only this customer's payment intents.
    #[serde(deserialize_with = "params::uuid")]
    customer: Option<Uuid>,
    /// Only payment intents in this status.
    #[param(inline)]
    #[serde(deserialize_with = "params::one_of")]
    status: Option<Status>,
    /// Only the payments made by transfers into this virtual account.
    #[serde(deserialize_with = "params::uuid")]
    virtual_account: Option<Uuid>,
    /// Only the payment intents of this payment link.
    #[serde(deserialize_with = "params::uuid")]
    payment_link: Option<Uuid>,
}

impl From<ListPaymentIntentsQuery> for IntentFilter {
    fn from(q: ListPaymentIntentsQuery) -> Self {
        IntentFilter {
            limit: q.limit,
            starting_after: q.starting_after,
            status: q.status,
            customer: q.customer,
            virtual_account: q.virtual_account,
            payment_link: q.payment_link,
        }
    }
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
            body = PaymentIntentView),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
    )
)]
async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    const CREATE: Endpoint = Endpoint::secret_key(201).gate(live_payments);
    CREATE
        .post(
            req,
            state,
            payload,
            |c, body: CreatePaymentIntentRequest| async move {
                let (p, save) = (&c.p, c.save());
                let customers = &c.kobo().customers;
                let params = body.into();
                Ok(service::create(c.kobo(), customers, &p.merchant, p.mode, params, save).await?)
            },
        )
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
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: ListPaymentIntentsQuery| async move {
            let filter = q.into();
            let page = query::list_payment_intents(c.kobo(), c.p.merchant.id, c.p.mode, &filter)?;
            Ok(page.to_api())
        })
        .await
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
        (status = 404, response = NotFound),
    )
)]
async fn retrieve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::intent_key(200)
        .get(req, state, |c| async move {
            let id = PaymentIntentId::parse(&path)?.id;
            let intent = query::payment_intent(c.kobo(), c.p.merchant.id, c.p.mode, id)?;
            Ok(intent.to_api(None))
        })
        .await
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
        (status = 404, response = NotFound),
    )
)]
async fn charge_attempts(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let id = PaymentIntentId::parse(&path)?.id;
            let intent = query::payment_intent(c.kobo(), c.p.merchant.id, c.p.mode, id)?;
            Ok(query::charge_attempts(c.kobo(), &intent)?.to_api())
        })
        .await
}

/// Sends `action` to the intent's actor, after checking it exists for this
/// merchant and mode (so another merchant's request or an unknown id never
/// reaches an actor). The check reads only the head of the intent's row;
/// the actor reads the intent itself.
pub async fn act(
    state: &State,
    p: &Principal,
    id: Uuid,
    action: Action,
    save: Option<IdempotencySave>,
) -> Result<Answer<PaymentIntentView>, DomainError> {
    query::check_payment_intent(&state.kobo, p.merchant.id, p.mode, id)?;
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

/// A POST on the intent `{id}` whose body `B` makes the `action` sent to
/// the intent's actor.
pub async fn intent_action<B: DeserializeOwned>(
    endpoint: Endpoint,
    req: HttpRequest,
    state: State,
    payload: web::Payload,
    action: impl FnOnce(B) -> Action,
) -> ApiResult {
    endpoint
        .post(req, state, payload, |c, body: B| async move {
            let raw = c.req.match_info().get("id").unwrap_or_default();
            let id = PaymentIntentId::parse(raw)?.id;
            Ok(act(&c.state, &c.p, id, action(body), c.save).await?)
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
        (status = 200, description = "The canceled payment intent.", body = PaymentIntentView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn cancel(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let cancel = Endpoint::secret_key(200);
    intent_action(cancel, req, state, payload, |_: NoFields| Action::Cancel).await
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
            body = PaymentIntentView),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn bank_transfer(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let transfer = Endpoint::intent_key(200).gate(live_payments);
    intent_action(transfer, req, state, payload, |_: NoFields| {
        Action::BankTransfer
    })
    .await
}
