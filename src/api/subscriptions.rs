//! `/v1/subscriptions`: create, list, retrieve, update (plan change,
//! mandate, `cancel_at_period_end`, metadata), cancel, `manage_link`; the
//! test helper `POST /v1/test_helpers/subscriptions/{id}/renew`.

use actix_web::{web, HttpRequest};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::idempotency::{Answer, Outcome};
use kobo_actors::mandate::MandateStatus;
use kobo_actors::money::Currency;
use kobo_actors::payment_intent::metadata_schema;
use kobo_actors::plan::service as plans;
use kobo_actors::plan::MAX_TRIAL_DAYS;
use kobo_actors::query::ListView;
use kobo_actors::subscription::actor::{SubscriptionAction, SubscriptionMessage};
use kobo_actors::subscription::machine::Command;
use kobo_actors::subscription::service::{self as subs, NewSubscription, SubscriptionFilter};
use kobo_actors::subscription::{
    CollectionMethod, Subscription, SubscriptionStatus, SubscriptionView, Terms,
};
use kobo_actors::{DomainError, ErrorCode};
use kobo_storage::Batch;

use super::body::{self, tunnel, NoFields, FIELD};
use super::components::{
    path_id, BadRequest, ByRef, ConflictReplayable, Forbidden, IdempotencyKey, NotFound,
    NotFoundReplayable, Overloaded,
};
use super::endpoint::{test_mode, Call, Endpoint};
use super::params::{self, Choice};
use super::plans::bounded;
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(
        resource("/v1/subscriptions")
            .route(web::post().to(create))
            .route(web::get().to(list)),
    )
    .service(
        resource("/v1/subscriptions/{id}")
            .route(web::get().to(retrieve))
            .route(web::post().to(update)),
    )
    .service(resource("/v1/subscriptions/{id}/cancel").route(web::post().to(cancel)))
    .service(resource("/v1/subscriptions/{id}/manage_link").route(web::post().to(manage_link)))
    .service(
        resource("/v1/test_helpers/subscriptions/{id}/renew").route(web::post().to(test_renew)),
    );
}

pub type SubscriptionRef = ByRef<SubscriptionView>;

path_id!(
    /// The `{id}` of a subscription.
    SubscriptionId,
    "subscription",
    /// The subscription's id; unknown, malformed, another merchant's or the
    /// other mode's: 404.
);

/// The default of `days_until_due`.
pub const DEFAULT_DAYS_UNTIL_DUE: u32 = 7;

fn collection_method<'de, D: Deserializer<'de>>(d: D) -> Result<CollectionMethod, D::Error> {
    match body::required_string::<D, 16>(d)?.as_str() {
        "mandate" => Ok(CollectionMethod::Mandate),
        "send_invoice" => Ok(CollectionMethod::SendInvoice),
        _ => Err(tunnel(DomainError::invalid(
            FIELD,
            "`collection_method` is mandate or send_invoice",
        ))),
    }
}

fn timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    let Some(s) = body::text::<D, 64>(d)? else {
        return Ok(None);
    };
    DateTime::parse_from_rfc3339(&s)
        .map(|t| Some(t.with_timezone(&Utc)))
        .map_err(|_| {
            tunnel(DomainError::invalid(
                FIELD,
                format!("`{FIELD}` must be an RFC 3339 time"),
            ))
        })
}

fn trial_days<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    bounded::<D, 0, MAX_TRIAL_DAYS>(d)
}

fn days_until_due<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    bounded::<D, 0, 90>(d)
}

fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(_) => Err(tunnel(DomainError::invalid(FIELD, "must be true or false"))),
    }
}

fn change_at<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    match body::text::<D, 16>(d)?.as_deref() {
        None => Ok(None),
        Some("now") => Ok(Some(true)),
        Some("period_end") => Ok(Some(false)),
        Some(_) => Err(tunnel(DomainError::invalid(
            FIELD,
            "`change_at` is period_end or now",
        ))),
    }
}

/// The body that creates a subscription.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateSubscription)]
pub struct CreateSubscriptionRequest {
    /// The customer billed (404 with `param: customer` when unknown).
    #[serde(deserialize_with = "body::required_uuid")]
    customer: Uuid,
    /// An active plan (archived: 409 `plan_archived`).
    #[serde(deserialize_with = "body::required_uuid")]
    plan: Uuid,
    #[schema(value_type = String, pattern = "^(mandate|send_invoice)$")]
    #[serde(deserialize_with = "collection_method")]
    collection_method: CollectionMethod,
    /// `collection_method: mandate`: an active mandate of the customer.
    #[serde(default, deserialize_with = "body::uuid")]
    mandate: Option<Uuid>,
    /// A later start (`scheduled` until then), at most a year ahead;
    /// default now.
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(default, deserialize_with = "timestamp")]
    start_at: Option<DateTime<Utc>>,
    /// 0 to 90; default the plan's.
    #[schema(minimum = 0, maximum = 90)]
    #[serde(default, deserialize_with = "trial_days")]
    trial_days: Option<u32>,
    /// Days from a period's start to its invoice's due date, 0 to 90
    /// (default 7).
    #[schema(minimum = 0, maximum = 90)]
    #[serde(default, deserialize_with = "days_until_due")]
    days_until_due: Option<u32>,
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "body::metadata")]
    metadata: Map<String, Value>,
}

/// The body that changes a subscription: only what is sent changes.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = UpdateSubscription)]
pub struct UpdateSubscriptionRequest {
    /// A new plan (active, same currency).
    #[serde(default, deserialize_with = "body::uuid")]
    plan: Option<Uuid>,
    /// `period_end` (default): the next renewal bills the new plan; `now`:
    /// a new period starts now, billed the new amount less a credit for
    /// the unused time of the current (paid) period, rounded down.
    #[schema(value_type = Option<String>, pattern = "^(period_end|now)$")]
    #[serde(default, deserialize_with = "change_at")]
    change_at: Option<bool>,
    /// Another active mandate of the customer (collection `mandate`).
    #[serde(default, deserialize_with = "body::uuid")]
    mandate: Option<Uuid>,
    #[serde(default, deserialize_with = "boolean")]
    cancel_at_period_end: Option<bool>,
    /// Merges; a key set to `""` is removed.
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "body::metadata")]
    metadata: Map<String, Value>,
}

/// The body of a cancel.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CancelSubscription)]
pub struct CancelRequest {
    /// `true`: canceled at the current period's end; default `false`: now.
    #[serde(default, deserialize_with = "boolean")]
    at_period_end: Option<bool>,
}

struct StatusChoice(SubscriptionStatus);

impl Choice for StatusChoice {
    const WHAT: &'static str =
        "scheduled, trialing, incomplete, active, past_due, canceled or completed";
    fn parse(s: &str) -> Option<Self> {
        SubscriptionStatus::parse(s).map(StatusChoice)
    }
}

fn status_filter<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SubscriptionStatus>, D::Error> {
    Ok(params::one_of::<D, StatusChoice>(d)?.map(|s| s.0))
}

/// The query of `GET /v1/subscriptions`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListSubscriptionsQuery {
    /// Page size, 1 to 100.
    #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
    #[serde(deserialize_with = "params::limit")]
    limit: usize,
    /// The id of the last subscription of the previous page.
    #[serde(deserialize_with = "params::uuid")]
    starting_after: Option<Uuid>,
    /// Only this customer's subscriptions.
    #[serde(deserialize_with = "params::uuid")]
    customer: Option<Uuid>,
    /// Only subscriptions to this plan (now).
    #[serde(deserialize_with = "params::uuid")]
    plan: Option<Uuid>,
    /// Only subscriptions in this status.
    #[param(value_type = Option<String>, pattern = "^(scheduled|trialing|incomplete|active|past_due|canceled|completed)$")]
    #[serde(deserialize_with = "status_filter")]
    status: Option<SubscriptionStatus>,
}

pub fn own(c: &Call, raw: &str) -> Result<Subscription, DomainError> {
    let id = SubscriptionId::parse(raw).map_err(|e| e.0)?.id;
    subs::load(c.kobo(), c.p.merchant.id, c.p.mode, id)
}

/// The mandate `id`, checked for a mandate subscription of `customer`.
fn check_mandate(c: &Call, customer: Uuid, id: Uuid) -> Result<(), DomainError> {
    let m = kobo_actors::mandate::service::own(c.kobo(), c.p.merchant.id, c.p.mode, id)
        .map_err(|e| e.with_param("mandate"))?;
    if m.customer != customer {
        return Err(DomainError::invalid(
            "mandate",
            "this mandate belongs to another customer",
        ));
    }
    if m.status != MandateStatus::Active {
        return Err(
            DomainError::state(ErrorCode::MandateNotActive, "this mandate is not active")
                .with_param("mandate"),
        );
    }
    Ok(())
}

/// Sends `action` to the subscription's actor.
pub async fn act(
    c: &Call,
    s: &Subscription,
    action: SubscriptionAction,
) -> Result<Answer<SubscriptionView>, DomainError> {
    let msg = SubscriptionMessage {
        merchant: s.merchant,
        mode: s.mode,
        action,
        idem: c.save.clone(),
    };
    c.kobo().subscriptions.send(s.id, msg).await?
}

/// Create a subscription
///
/// `scheduled` until `start_at`; then `trialing` for a trial, else
/// `incomplete` with its first period's invoice (finalized, and debited
/// through the mandate for `collection_method: mandate`) until it is paid.
/// A second unfinished subscription of the customer to the plan: 409
/// `subscription_exists`; an archived plan: 409 `plan_archived`; a mandate
/// of another customer: 400 `param: mandate`; a mandate not active: 409
/// `mandate_not_active`.
#[utoipa::path(
    post,
    path = "/v1/subscriptions",
    operation_id = "create_subscription",
    tag = "subscriptions",
    params(IdempotencyKey),
    request_body(content = CreateSubscriptionRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new subscription.", body = SubscriptionView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    Endpoint::secret_key(201)
        .post(
            req,
            state,
            payload,
            |c, b: CreateSubscriptionRequest| async move {
                let (m, mode) = (c.p.merchant.id, c.p.mode);
                let now = c.kobo().clock.now();
                if let Some(t) = b.start_at {
                    if t < now || t > now + Duration::days(366) {
                        return Err(DomainError::invalid(
                            "start_at",
                            "`start_at` is now or later, at most a year ahead",
                        )
                        .into());
                    }
                }
                match (b.collection_method, b.mandate) {
                    (CollectionMethod::Mandate, None) => {
                        return Err(DomainError::missing("mandate").into())
                    }
                    (CollectionMethod::SendInvoice, Some(_)) => {
                        return Err(DomainError::invalid(
                            "mandate",
                            "`mandate` is for `collection_method: mandate`",
                        )
                        .into())
                    }
                    _ => {}
                }
                let customer = kobo_actors::customer::load(c.kobo(), m, mode, b.customer)
                    .map_err(|e| e.with_param("customer"))?;
                let plan = plans::load(c.kobo(), m, mode, b.plan)
                    .map_err(|e| e.with_param("plan"))?;
                if let Some(id) = b.mandate {
                    if plan.currency != Currency::NGN {
                        return Err(DomainError::invalid(
                            "collection_method",
                            "direct debit is naira only: this plan is not in NGN",
                        )
                        .into());
                    }
                    check_mandate(&c, customer.id, id)?;
                    super::mandates::direct_debit_enabled(&c.p)?;
                }
                plan.require_active()?;
                let new = NewSubscription {
                    customer: customer.id,
                    brand: customer.brand.unwrap_or_else(|| c.p.merchant.default_brand(mode)),
                    terms: Terms::of(&plan),
                    collection_method: b.collection_method,
                    mandate: b.mandate,
                    start_at: b.start_at,
                    trial_days: b.trial_days.unwrap_or(plan.trial_days),
                    days_until_due: b.days_until_due.unwrap_or(DEFAULT_DAYS_UNTIL_DUE),
                    metadata: b.metadata,
                };
                let answer = subs::create(c.kobo(), (m, mode), new, c.save.as_ref()).await?;
                // The first period's invoice and debit, before answering
                // (a failure here is retried by the subscription's timer).
                let work = SubscriptionMessage {
                    merchant: m,
                    mode,
                    action: SubscriptionAction::Work,
                    idem: None,
                };
                let id = answer.view().id;
                match c.kobo().subscriptions.send(id, work).await.and_then(|r| r) {
                    // The first invoice made: the answer carries it, and
                    // the saved response becomes this one (a replay
                    // answers the same).
                    Ok(after) if after.view().latest_invoice.is_some() => {
                        let mut batch = Batch::new();
                        batch.owned_by(m.as_bytes());
                        let view = after.view().clone();
                        let now = c.kobo().clock.now();
                        let again =
                            Answer::save(Outcome::Created(view), c.save.as_ref(), &mut batch, now);
                        if c.kobo().writer.commit(batch).await.is_ok() {
                            return Ok(again);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, subscription = %id, "first bill deferred to the timer");
                    }
                }
                Ok(answer)
            },
        )
        .await
}

/// List subscriptions
///
/// Newest first.
#[utoipa::path(
    get,
    path = "/v1/subscriptions",
    operation_id = "list_subscriptions",
    tag = "subscriptions",
    params(ListSubscriptionsQuery),
    responses(
        (status = 200, description = "A page of subscriptions, newest first.", body = ListView<SubscriptionRef>),
        (status = 400, response = BadRequest),
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: ListSubscriptionsQuery| async move {
            let f = SubscriptionFilter {
                limit: q.limit,
                starting_after: q.starting_after,
                customer: q.customer,
                plan: q.plan,
                status: q.status,
            };
            Ok(subs::list(c.kobo(), c.p.merchant.id, c.p.mode, &f)?.to_api())
        })
        .await
}

/// Retrieve a subscription
#[utoipa::path(
    get,
    path = "/v1/subscriptions/{id}",
    operation_id = "retrieve_subscription",
    tag = "subscriptions",
    params(SubscriptionId),
    responses(
        (status = 200, description = "The subscription.", body = SubscriptionView),
        (status = 404, response = NotFound),
    )
)]
async fn retrieve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move { Ok(own(&c, &path)?.to_api()) })
        .await
}

/// Update a subscription
///
/// A plan change (`change_at: period_end` by default, or `now` with
/// proration), another mandate, `cancel_at_period_end`, metadata. A
/// `canceled` or `completed` subscription: 409 `subscription_ended`.
#[utoipa::path(
    post,
    path = "/v1/subscriptions/{id}",
    operation_id = "update_subscription",
    tag = "subscriptions",
    params(SubscriptionId, IdempotencyKey),
    request_body(content = UpdateSubscriptionRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The subscription after the change.", body = SubscriptionView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn update(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    Endpoint::secret_key(200)
        .post(
            req,
            state,
            payload,
            |c, b: UpdateSubscriptionRequest| async move {
                let s = own(&c, &path)?;
                if b.change_at.is_some() && b.plan.is_none() {
                    return Err(DomainError::missing("plan").into());
                }
                let plan = match b.plan {
                    Some(id) => {
                        let p = plans::load(c.kobo(), c.p.merchant.id, c.p.mode, id)
                            .map_err(|e| e.with_param("plan"))?;
                        if p.currency != s.terms.currency {
                            return Err(DomainError::invalid(
                                "plan",
                                "the new plan must bill the subscription's currency",
                            )
                            .into());
                        }
                        p.require_active()?;
                        Some((Terms::of(&p), b.change_at.unwrap_or(false)))
                    }
                    None => None,
                };
                if let Some(m) = b.mandate {
                    if s.collection_method != CollectionMethod::Mandate {
                        return Err(DomainError::invalid(
                            "mandate",
                            "`mandate` is for `collection_method: mandate`",
                        )
                        .into());
                    }
                    check_mandate(&c, s.customer, m)?;
                }
                let command = Command::Update {
                    mandate: b.mandate,
                    cancel_at_period_end: b.cancel_at_period_end,
                    metadata: Some(b.metadata),
                    plan,
                };
                Ok(act(&c, &s, SubscriptionAction::Command(command)).await?)
            },
        )
        .await
}

/// Cancel a subscription
///
/// Now (default: `canceled`, reason `cancellation_requested`; its open
/// invoices stay open and are no longer debited) or at the current
/// period's end (`at_period_end: true`). A `canceled` or `completed`
/// subscription: 409 `subscription_ended`.
#[utoipa::path(
    post,
    path = "/v1/subscriptions/{id}/cancel",
    operation_id = "cancel_subscription",
    tag = "subscriptions",
    params(SubscriptionId, IdempotencyKey),
    request_body(content = Option<CancelRequest>, content_type = "application/json"),
    responses(
        (status = 200, description = "The subscription.", body = SubscriptionView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn cancel(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    CANCEL_SUBSCRIPTION
        .post(req, state, payload, |c, b: CancelRequest| async move {
            cancel_run(c, path.as_str(), b).await
        })
        .await
}

/// `POST /v1/subscriptions/{id}/cancel`'s declaration (the dashboard's
/// cancel button posts through it too).
pub const CANCEL_SUBSCRIPTION: Endpoint = Endpoint::secret_key(200);

/// `POST /v1/subscriptions/{id}/cancel`'s run on the subscription `raw`
/// names.
pub async fn cancel_run(
    c: Call,
    raw: &str,
    b: CancelRequest,
) -> ApiResult<Answer<SubscriptionView>> {
    let s = own(&c, raw)?;
    let command = Command::Cancel {
        at_period_end: b.at_period_end.unwrap_or(false),
    };
    Ok(act(&c, &s, SubscriptionAction::Command(command)).await?)
}

/// How long a manage link works.
pub const MANAGE_LINK_SECONDS: i64 = 3600;

/// A link to the customer's subscription page.
#[derive(serde::Serialize, ToSchema)]
#[schema(as = SubscriptionManageLink)]
pub struct ManageLinkView {
    /// Always `subscription_manage_link`.
    #[schema(pattern = "^subscription_manage_link$")]
    object: &'static str,
    livemode: bool,
    subscription: Uuid,
    /// The page (`/s/<token>`): the plan, the next charge, cancel at the
    /// period's end. Anyone with the URL can act on it until it expires.
    url: String,
    expires_at: DateTime<Utc>,
}

/// Make a link to the customer's subscription page
///
/// A capability URL valid for an hour (HMAC-signed, never stored): the
/// customer sees the plan and the next charge and can cancel at the
/// period's end. A `canceled` or `completed` subscription: 409
/// `subscription_ended`.
#[utoipa::path(
    post,
    path = "/v1/subscriptions/{id}/manage_link",
    operation_id = "create_subscription_manage_link",
    tag = "subscriptions",
    params(SubscriptionId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 201, description = "The link and when it expires.", body = ManageLinkView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
    )
)]
async fn manage_link(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    Endpoint::secret_key(201)
        .post(req, state, payload, |c, _: NoFields| async move {
            let s = own(&c, &path)?;
            if s.status.ended() {
                return Err(DomainError::state(
                    ErrorCode::SubscriptionEnded,
                    format!("this subscription is {}", s.status.as_str()),
                )
                .into());
            }
            let now = c.kobo().clock.now();
            let expires = now.timestamp() + MANAGE_LINK_SECONDS;
            let expires_at = DateTime::<Utc>::from_timestamp(expires, 0).unwrap_or(now);
            let token = c.state.checkout_key.manage_token(s.id, expires);
            let url = format!("{}/s/{token}", c.kobo().config.base_url);
            let view = ManageLinkView {
                object: "subscription_manage_link",
                livemode: s.mode.livemode(),
                subscription: s.id,
                url,
                expires_at,
            };
            Ok(serde_json::to_value(view).expect("a link serializes"))
        })
        .await
}

/// Renew a test subscription now
///
/// Test keys only (404 for live keys). The current period ends now and the
/// next is billed (its invoice, and its debit for `mandate`), at most once
/// per period: a second call in the period the helper started changes
/// nothing. The billing day becomes today.
#[utoipa::path(
    post,
    path = "/v1/test_helpers/subscriptions/{id}/renew",
    operation_id = "test_renew_subscription",
    tag = "test_helpers",
    params(SubscriptionId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The subscription.", body = SubscriptionView),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn test_renew(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    Endpoint::secret_key(200)
        .gate(test_mode)
        .post(req, state, payload, |c, _: NoFields| async move {
            let s = own(&c, &path)?;
            Ok(act(&c, &s, SubscriptionAction::Command(Command::Renew)).await?)
        })
        .await
}
