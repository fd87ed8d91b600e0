//! `/v1/events`: the event history with each event's deliveries, each
//! delivery's attempts, and redelivery.

use actix_web::{web, HttpRequest};
use serde::{Deserialize, Deserializer};
use utoipa::IntoParams;
use uuid::Uuid;

use kobo_actors::event::EVENT_TYPES;
use kobo_actors::idempotency::Answer;
use kobo_actors::query::ListView;
use kobo_actors::webhook::query::{self as webhook_query, AttemptFilter, EventFilter};
use kobo_actors::webhook::{Command, RedeliveryView, WebhookView};
use kobo_actors::DomainError;

use super::body::{self, NoFields};
use super::components::{
    path_id, BadRequest, DeliveryAttemptRef, EventRef, IdempotencyKey, NotFound, NotFoundReplayable,
};
use super::endpoint::{Call, Endpoint};
use super::params;
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(resource("/v1/events").route(web::get().to(list)))
        .service(resource("/v1/events/{id}/redeliver").route(web::post().to(redeliver)))
        .service(
            resource("/v1/events/{id}/delivery_attempts").route(web::get().to(delivery_attempts)),
        );
}

/// The query of `GET /v1/events`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListEventsQuery {
    /// Page size, 1 to 100.
    #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
    #[serde(deserialize_with = "params::limit")]
    limit: usize,
    /// The id of the last event of the previous page.
    #[serde(deserialize_with = "params::uuid")]
    starting_after: Option<Uuid>,
    /// Only events of this type.
    #[param(schema_with = kobo_actors::event::event_type_schema)]
    #[serde(rename = "type", deserialize_with = "event_type")]
    event_type: Option<String>,
}

/// `type`: one of the event types.
fn event_type<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(d)?
        .map(|s| {
            EVENT_TYPES
                .contains(&s.as_str())
                .then_some(s)
                .ok_or_else(|| {
                    body::tunnel(DomainError::invalid(
                        body::FIELD,
                        format!("`{}` must be an event type", body::FIELD),
                    ))
                })
        })
        .transpose()
}

path_id!(
    /// The `{id}` of an event.
    EventId,
    "event",
    /// The event's id; unknown, another merchant's or the other mode's: 404.
);

/// List events
///
/// Newest first, each with its `deliveries` (one per endpoint it was sent
/// to: status, attempts, last response status).
#[utoipa::path(
    get,
    path = "/v1/events",
    operation_id = "list_events",
    tag = "webhooks",
    params(ListEventsQuery),
    responses(
        (status = 200, description = "A page of events, newest first.", body = ListView<EventRef>),
        (status = 400, response = BadRequest),
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: ListEventsQuery| async move {
            let Call { state, p, .. } = c;
            let filter = EventFilter {
                limit: q.limit,
                starting_after: q.starting_after,
                event_type: q.event_type,
            };
            let page = webhook_query::list_events(&state.kobo, p.merchant.id, p.mode, &filter)?;
            Ok(page.to_api())
        })
        .await
}

/// The query of `GET /v1/events/{id}/delivery_attempts`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListAttemptsQuery {
    /// Page size, 1 to 100.
    #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
    #[serde(deserialize_with = "params::limit")]
    limit: usize,
    /// The id of the last attempt of the previous page.
    #[serde(deserialize_with = "params::uuid")]
    starting_after: Option<Uuid>,
    /// Only the attempts of the delivery to this endpoint.
    #[serde(deserialize_with = "params::uuid")]
    endpoint: Option<Uuid>,
}

/// List an event's delivery attempts
///
/// Every attempt of the event's deliveries (or of its delivery to one
/// `endpoint`), oldest first: when it was made, the endpoint's response
/// status or why there was none, how long it took. The newest 50 attempts
/// of each delivery are kept.
#[utoipa::path(
    get,
    path = "/v1/events/{id}/delivery_attempts",
    operation_id = "list_delivery_attempts",
    tag = "webhooks",
    params(EventId, ListAttemptsQuery),
    responses(
        (status = 200, description = "A page of attempts, oldest first.", body = ListView<DeliveryAttemptRef>),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
    )
)]
async fn delivery_attempts(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: ListAttemptsQuery| async move {
            let event = EventId::parse(&path)?.id;
            let filter = AttemptFilter {
                limit: q.limit,
                starting_after: q.starting_after,
                endpoint: q.endpoint,
            };
            let page =
                webhook_query::list_attempts(c.kobo(), c.p.merchant.id, c.p.mode, event, &filter)?;
            Ok(page.to_api())
        })
        .await
}

/// Redeliver an event
///
/// Queues a new delivery of the event to every enabled endpoint of the mode
/// whose `events` match, now (a fresh retry schedule); the answer counts
/// them.
#[utoipa::path(
    post,
    path = "/v1/events/{id}/redeliver",
    operation_id = "redeliver_event",
    tag = "webhooks",
    params(EventId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "How many deliveries were queued.", body = RedeliveryView),
        (status = 404, response = NotFoundReplayable),
    )
)]
async fn redeliver(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    REDELIVER_EVENT
        .post(req, state, payload, |c, _: NoFields| async move {
            redeliver_run(c, &path).await
        })
        .await
}

/// `POST /v1/events/{id}/redeliver`' declaration (the dashboard's
/// redeliver button posts through it too).
pub const REDELIVER_EVENT: Endpoint = Endpoint::secret_key(200);

/// `POST /v1/events/{id}/redeliver`' run: the webhook supervisor queues the
/// event again for every matching enabled endpoint.
pub async fn redeliver_run(c: Call, raw_id: &str) -> ApiResult<Answer<WebhookView>> {
    let event = EventId::parse(raw_id)?.id;
    let answer = c
        .state
        .kobo
        .webhooks
        .command(Command::Redeliver {
            merchant: c.p.merchant.id,
            mode: c.p.mode,
            event,
            idem: c.save.clone(),
        })
        .await?;
    Ok(answer)
}
