//! `/v1/events`: the event history with each event's deliveries, and
//! redelivery.

use actix_web::{web, HttpRequest};
use utoipa::IntoParams;
use uuid::Uuid;

use kobo_actors::event::EVENT_TYPES;
use kobo_actors::query::ListView;
use kobo_actors::webhook::query::{self as webhook_query, EventFilter};
use kobo_actors::webhook::{Command, RedeliveryView};
use kobo_actors::DomainError;

use super::body::NoFields;
use super::body::Query;
use super::components::{BadRequest, EventRef, IdempotencyKey, NotFoundReplayable};
use super::endpoint::{Call, Endpoint};
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/v1/events").route(web::get().to(list)))
        .service(resource("/v1/events/{id}/redeliver").route(web::post().to(redeliver)));
}

/// The fields `GET /v1/events` accepts in its query.
pub const LIST_PARAMS: &[&str] = &["limit", "starting_after", "type"];

// The query of `GET /v1/events`, for the OpenAPI document; a unit test keeps
// these names and [`LIST_PARAMS`] equal.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ListEventsQuery {
    /// Page size, 1 to 100.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<u8>,
    /// The id of the last event of the previous page.
    starting_after: Option<Uuid>,
    /// Only events of this type.
    #[param(rename = "type", schema_with = kobo_actors::event::event_type_schema)]
    event_type: Option<String>,
}

/// The `{id}` of an event.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct EventId {
    /// The event's id; unknown, another merchant's or the other mode's: 404.
    id: Uuid,
}

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
        .get(req, state, |c| async move {
            let Call { req, state, p, .. } = c;
            let q = Query::parse(req.query_string(), LIST_PARAMS)?;
            let event_type = q.one_of(
                "type",
                |s| EVENT_TYPES.contains(&s).then(|| s.to_string()),
                "an event type",
            )?;
            let filter = EventFilter {
                limit: q.limit()?,
                starting_after: q.uuid("starting_after")?,
                event_type,
            };
            let page = webhook_query::list_events(&state.kobo, p.merchant.id, p.mode, &filter)?;
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
    Endpoint::secret_key(200)
        .post(req, state, payload, |c, _: NoFields| async move {
            let (state, p) = (&c.state, &c.p);
            let raw_id = path.as_str();
            let event =
                Uuid::try_parse(raw_id).map_err(|_| DomainError::not_found("event", raw_id))?;
            let answer = state
                .kobo
                .webhooks
                .command(Command::Redeliver {
                    merchant: p.merchant.id,
                    mode: p.mode,
                    event,
                    idem: c.save.clone(),
                })
                .await?;
            Ok(answer)
        })
        .await
}
