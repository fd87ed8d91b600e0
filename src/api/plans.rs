//! `/v1/plans`: create, list, retrieve, update (name and metadata),
//! archive.

use actix_web::{web, HttpRequest};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::money::Currency;
use kobo_actors::payment_intent::metadata_schema;
use kobo_actors::plan::actor::{PlanAction, PlanMessage};
use kobo_actors::plan::service::{self as plans, NewPlan, PlanFilter};
use kobo_actors::plan::{Interval, Plan, PlanPatch, PlanView, MAX_INVOICE_LIMIT, MAX_TRIAL_DAYS};
use kobo_actors::query::ListView;
use kobo_actors::DomainError;

use super::body::{self, tunnel, NoFields, FIELD};
use super::components::{
    path_id, BadRequest, ByRef, ConflictReplayable, IdempotencyKey, NotFound, NotFoundReplayable,
    Overloaded,
};
use super::endpoint::{Call, Endpoint};
use super::params::{self, Choice};
use super::payment_intents::MIN_PAYMENT_AMOUNT;
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(
        resource("/v1/plans")
            .route(web::post().to(create))
            .route(web::get().to(list)),
    )
    .service(
        resource("/v1/plans/{id}")
            .route(web::get().to(retrieve))
            .route(web::post().to(update)),
    )
    .service(resource("/v1/plans/{id}/archive").route(web::post().to(archive)));
}

pub type PlanRef = ByRef<PlanView>;

path_id!(
    /// The `{id}` of a plan.
    PlanId,
    "plan",
    /// The plan's id; unknown, malformed, another merchant's or the other
    /// mode's: 404.
);

fn interval<'de, D: Deserializer<'de>>(d: D) -> Result<Interval, D::Error> {
    let s = body::required_string::<D, 8>(d)?;
    Interval::parse(&s).ok_or_else(|| {
        tunnel(DomainError::invalid(
            FIELD,
            "`interval` is day, week, month or year",
        ))
    })
}

/// An optional integer from `MIN` to `MAX`.
pub fn bounded<'de, D: Deserializer<'de>, const MIN: u32, const MAX: u32>(
    d: D,
) -> Result<Option<u32>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| (MIN as u64..=MAX as u64).contains(n))
            .map(|n| Some(n as u32))
            .ok_or_else(|| {
                tunnel(DomainError::invalid(
                    FIELD,
                    format!("`{FIELD}` is an integer from {MIN} to {MAX}"),
                ))
            }),
    }
}

fn interval_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    bounded::<D, 1, 12>(d)
}

fn trial_days<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    bounded::<D, 0, MAX_TRIAL_DAYS>(d)
}

fn invoice_limit<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    bounded::<D, 1, MAX_INVOICE_LIMIT>(d)
}

/// The body that creates a plan.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreatePlan)]
pub struct CreatePlanRequest {
    #[schema(min_length = 1, max_length = 200)]
    #[serde(deserialize_with = "body::required_text::<_, 200>")]
    name: String,
    /// Minor units billed each period, as a payment intent's amount.
    #[schema(minimum = 100, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::amount::<_, MIN_PAYMENT_AMOUNT>")]
    amount: i64,
    #[schema(value_type = String, example = "NGN")]
    #[serde(deserialize_with = "body::required_currency")]
    currency: Currency,
    #[schema(value_type = String, pattern = "^(day|week|month|year)$")]
    #[serde(deserialize_with = "interval")]
    interval: Interval,
    /// 1 to 12 (default 1); the period is at most a year in all.
    #[schema(minimum = 1, maximum = 12)]
    #[serde(default, deserialize_with = "interval_count")]
    interval_count: Option<u32>,
    /// 0 to 90 (default 0): the trial of each new subscription.
    #[schema(minimum = 0, maximum = 90)]
    #[serde(default, deserialize_with = "trial_days")]
    trial_days: Option<u32>,
    /// Periods billed before a subscription is `completed` (default: until
    /// canceled).
    #[schema(minimum = 1, maximum = 1000)]
    #[serde(default, deserialize_with = "invoice_limit")]
    invoice_limit: Option<u32>,
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "body::metadata")]
    metadata: Map<String, Value>,
}

/// The body that updates a plan: its name and metadata only (a new price
/// is a new plan).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = UpdatePlan)]
pub struct UpdatePlanRequest {
    #[schema(min_length = 1, max_length = 200)]
    #[serde(default, deserialize_with = "opt_name")]
    name: Option<String>,
    /// Merges; a key set to `""` is removed.
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "body::metadata")]
    metadata: Map<String, Value>,
}

fn opt_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    body::required_text::<D, 200>(d).map(Some)
}

struct ActiveChoice(bool);

impl Choice for ActiveChoice {
    const WHAT: &'static str = "true or false";
    fn parse(s: &str) -> Option<Self> {
        match s {
            "true" => Some(ActiveChoice(true)),
            "false" => Some(ActiveChoice(false)),
            _ => None,
        }
    }
}

fn active_filter<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Ok(params::one_of::<D, ActiveChoice>(d)?.map(|a| a.0))
}

/// The query of `GET /v1/plans`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListPlansQuery {
    /// Page size, 1 to 100.
    #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
    #[serde(deserialize_with = "params::limit")]
    limit: usize,
    /// The id of the last plan of the previous page.
    #[serde(deserialize_with = "params::uuid")]
    starting_after: Option<Uuid>,
    /// `true`: only plans taking new subscriptions; `false`: archived ones.
    #[param(value_type = Option<bool>)]
    #[serde(deserialize_with = "active_filter")]
    active: Option<bool>,
}

fn own(c: &Call, raw: &str) -> Result<Plan, DomainError> {
    let id = PlanId::parse(raw).map_err(|e| e.0)?.id;
    plans::load(c.kobo(), c.p.merchant.id, c.p.mode, id)
}

async fn act(
    c: &Call,
    raw: &str,
    action: PlanAction,
) -> ApiResult<kobo_actors::idempotency::Answer<PlanView>> {
    let p = own(c, raw)?;
    let msg = PlanMessage {
        merchant: c.p.merchant.id,
        mode: c.p.mode,
        action,
        idem: c.save.clone(),
    };
    Ok(c.kobo().plans.send(p.id, msg).await??)
}

/// Create a plan
///
/// A price billed every `interval_count` `interval`s. Bad fields: 400
/// naming `param` (`interval_count` 1 to 12 and at most a year in all,
/// `trial_days` 0 to 90, `amount` as a payment intent's, `currency` NGN or
/// USD).
#[utoipa::path(
    post,
    path = "/v1/plans",
    operation_id = "create_plan",
    tag = "subscriptions",
    params(IdempotencyKey),
    request_body(content = CreatePlanRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new plan.", body = PlanView),
        (status = 503, response = Overloaded),
    )
)]
async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    Endpoint::secret_key(201)
        .post(req, state, payload, |c, b: CreatePlanRequest| async move {
            let new = NewPlan {
                name: b.name,
                amount: b.amount,
                currency: b.currency,
                interval: b.interval,
                interval_count: b.interval_count.unwrap_or(1),
                trial_days: b.trial_days.unwrap_or(0),
                invoice_limit: b.invoice_limit,
                metadata: b.metadata,
            };
            let scope = (c.p.merchant.id, c.p.mode);
            Ok(plans::create(c.kobo(), scope, new, c.save.as_ref()).await?)
        })
        .await
}

/// List plans
///
/// Newest first.
#[utoipa::path(
    get,
    path = "/v1/plans",
    operation_id = "list_plans",
    tag = "subscriptions",
    params(ListPlansQuery),
    responses(
        (status = 200, description = "A page of plans, newest first.", body = ListView<PlanRef>),
        (status = 400, response = BadRequest),
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: ListPlansQuery| async move {
            let f = PlanFilter {
                limit: q.limit,
                starting_after: q.starting_after,
                active: q.active,
            };
            Ok(plans::list(c.kobo(), c.p.merchant.id, c.p.mode, &f)?.to_api())
        })
        .await
}

/// Retrieve a plan
#[utoipa::path(
    get,
    path = "/v1/plans/{id}",
    operation_id = "retrieve_plan",
    tag = "subscriptions",
    params(PlanId),
    responses(
        (status = 200, description = "The plan.", body = PlanView),
        (status = 404, response = NotFound),
    )
)]
async fn retrieve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move { Ok(own(&c, &path)?.to_api()) })
        .await
}

/// Update a plan
///
/// Its name and metadata only: the amount and schedule are fixed (make a
/// new plan); `plan.updated` when something changed.
#[utoipa::path(
    post,
    path = "/v1/plans/{id}",
    operation_id = "update_plan",
    tag = "subscriptions",
    params(PlanId, IdempotencyKey),
    request_body(content = UpdatePlanRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The plan after the update.", body = PlanView),
        (status = 404, response = NotFoundReplayable),
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
        .post(req, state, payload, |c, b: UpdatePlanRequest| async move {
            let patch = PlanPatch {
                name: b.name,
                metadata: Some(b.metadata),
            };
            act(&c, &path, PlanAction::Update(patch)).await
        })
        .await
}

/// Archive a plan
///
/// No new subscriptions to it (409 `plan_archived`); its subscriptions go
/// on. Archiving an archived plan changes nothing.
#[utoipa::path(
    post,
    path = "/v1/plans/{id}/archive",
    operation_id = "archive_plan",
    tag = "subscriptions",
    params(PlanId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The archived plan.", body = PlanView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn archive(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    Endpoint::secret_key(200)
        .post(req, state, payload, |c, _: NoFields| async move {
            act(&c, &path, PlanAction::Archive).await
        })
        .await
}
