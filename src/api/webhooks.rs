//! `/v1/webhook_endpoints`: create, list, disable, enable, delete, and a
//! test event to one endpoint (kobo's own, beyond the spec). Every
//! change goes to the webhook supervisor (the single owner of endpoints and
//! deliveries), which saves the response with the change.

use actix_web::{web, HttpRequest};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use kobo_actors::idempotency::Answer;
use kobo_actors::query::ListView;
use kobo_actors::webhook::{
    self, query as webhook_query, Command, DeletedEndpointView, EndpointChange,
    WebhookEndpointView, WebhookTestView, WebhookView,
};
use kobo_actors::DomainError;

use super::body::{self as body, NoFields};
use super::components::{
    path_id, ConflictReplayable, IdempotencyKey, NotFoundReplayable, WebhookEndpointRef,
};
use super::endpoint::{Call, Endpoint};
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(
        resource("/v1/webhook_endpoints")
            .route(web::post().to(create))
            .route(web::get().to(list)),
    )
    .service(resource("/v1/webhook_endpoints/{id}/disable").route(web::post().to(disable)))
    .service(resource("/v1/webhook_endpoints/{id}/enable").route(web::post().to(enable)))
    .service(resource("/v1/webhook_endpoints/{id}/delete").route(web::post().to(delete)))
    .service(resource("/v1/webhook_endpoints/{id}/test").route(web::post().to(test)));
}

// The body of `POST /v1/webhook_endpoints`, for the OpenAPI document; a unit
/// The body that creates a webhook endpoint.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateWebhookEndpoint)]
pub struct CreateWebhookEndpointRequest {
    /// HTTPS, port 443 or 8443, a public host name (not an IP address).
    #[schema(format = "uri", max_length = 2048)]
    #[serde(deserialize_with = "body::required_string::<_, 2048>")]
    url: String,
    /// The event types to send; omitted or empty means every type.
    #[schema(schema_with = event_types)]
    #[serde(deserialize_with = "event_types_list")]
    events: Option<Vec<String>>,
}

fn event_types() -> utoipa::openapi::schema::Schema {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(utoipa::openapi::RefOr::T(
            kobo_actors::event::event_type_schema(),
        ))
        .into()
}

path_id!(
    /// The `{id}` of a webhook endpoint.
    WebhookEndpointId,
    "webhook_endpoint",
    /// The endpoint's id; unknown, deleted, another merchant's or the other
    /// mode's: 404.
);

/// `events`: an array of event types (strings).
fn event_types_list<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<String>>, D::Error> {
    let not_types = || {
        body::tunnel(DomainError::invalid(
            body::FIELD,
            "`events` is an array of event types",
        ))
    };
    match Option::<Value>::deserialize(d)? {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|item| match item {
                Value::String(s) => Ok(s),
                _ => Err(not_types()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(not_types()),
    }
}

impl CreateWebhookEndpointRequest {
    /// The checked URL and event types.
    fn into_parts(self) -> Result<(String, Vec<String>), DomainError> {
        let url = webhook::validate_url(&self.url)?;
        let events = match self.events {
            None => Vec::new(),
            Some(types) => webhook::validate_event_types(&types)?,
        };
        Ok((url, events))
    }
}

/// Create a webhook endpoint
///
/// The response alone carries the signing `secret` (`whsec_...`). At most
/// 10 endpoints per mode (400 `too_many_endpoints`).
#[utoipa::path(
    post,
    path = "/v1/webhook_endpoints",
    operation_id = "create_webhook_endpoint",
    tag = "webhooks",
    params(IdempotencyKey),
    request_body(content = CreateWebhookEndpointRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new endpoint, with its `secret`.", body = WebhookEndpointView),
    )
)]
async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    CREATE_WEBHOOK_ENDPOINT
        .post(req, state, payload, create_run)
        .await
}

/// `POST /v1/webhook_endpoints`' declaration (the dashboard's form posts
/// through it too).
pub const CREATE_WEBHOOK_ENDPOINT: Endpoint = Endpoint::secret_key(201);

/// `POST /v1/webhook_endpoints`' run: the checked URL and event types go to
/// the webhook supervisor.
pub async fn create_run(
    c: Call,
    body: CreateWebhookEndpointRequest,
) -> ApiResult<Answer<WebhookView>> {
    let (url, events) = body.into_parts()?;
    let answer = c
        .state
        .kobo
        .webhooks
        .command(Command::Create {
            merchant: c.p.merchant.id,
            mode: c.p.mode,
            url,
            events,
            idem: c.save.clone(),
        })
        .await?;
    Ok(answer)
}

/// List webhook endpoints
///
/// Every endpoint of the key's mode, newest first, on one page (there are
/// at most 10). Secrets are not shown.
#[utoipa::path(
    get,
    path = "/v1/webhook_endpoints",
    operation_id = "list_webhook_endpoints",
    tag = "webhooks",
    responses(
        (status = 200, description = "The endpoints, newest first.", body = ListView<WebhookEndpointRef>),
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, _: NoFields| async move {
            let page = webhook_query::list_endpoints(c.kobo(), c.p.merchant.id, c.p.mode)?;
            Ok(page.to_api())
        })
        .await
}

async fn change(
    req: HttpRequest,
    state: State,
    raw_id: &str,
    payload: web::Payload,
    change: EndpointChange,
) -> ApiResult {
    CHANGE_WEBHOOK_ENDPOINT
        .post(req, state, payload, |c, _: NoFields| async move {
            change_run(c, raw_id, change).await
        })
        .await
}

/// The declaration of disable, enable and delete (the dashboard's buttons
/// post through it too).
pub const CHANGE_WEBHOOK_ENDPOINT: Endpoint = Endpoint::secret_key(200);

/// The run of disable, enable and delete: the change goes to the webhook
/// supervisor (unknown, deleted or another merchant's endpoint: 404).
pub async fn change_run(
    c: Call,
    raw_id: &str,
    change: EndpointChange,
) -> ApiResult<Answer<WebhookView>> {
    let id = WebhookEndpointId::parse(raw_id)?.id;
    let answer = c
        .state
        .kobo
        .webhooks
        .command(Command::Change {
            merchant: c.p.merchant.id,
            mode: c.p.mode,
            id,
            change,
            idem: c.save.clone(),
        })
        .await?;
    Ok(answer)
}

/// Disable a webhook endpoint
///
/// Deliveries still waiting are dropped (`failed`); nothing is sent to it
/// until it is enabled.
#[utoipa::path(
    post,
    path = "/v1/webhook_endpoints/{id}/disable",
    operation_id = "disable_webhook_endpoint",
    tag = "webhooks",
    params(WebhookEndpointId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The endpoint, `disabled`.", body = WebhookEndpointView),
        (status = 404, response = NotFoundReplayable),
    )
)]
async fn disable(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    change(req, state, &path, payload, EndpointChange::Disable).await
}

/// Enable a webhook endpoint
///
/// Events from now on are sent to it; events it missed are not resent
/// (redeliver them one by one). 400 when its URL no longer passes the rules.
#[utoipa::path(
    post,
    path = "/v1/webhook_endpoints/{id}/enable",
    operation_id = "enable_webhook_endpoint",
    tag = "webhooks",
    params(WebhookEndpointId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The endpoint, `enabled`.", body = WebhookEndpointView),
        (status = 404, response = NotFoundReplayable),
    )
)]
async fn enable(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    change(req, state, &path, payload, EndpointChange::Enable).await
}

/// Delete a webhook endpoint
///
/// Irreversible: waiting deliveries are dropped, the endpoint leaves the
/// list, its past deliveries stay in the events' history.
#[utoipa::path(
    post,
    path = "/v1/webhook_endpoints/{id}/delete",
    operation_id = "delete_webhook_endpoint",
    tag = "webhooks",
    params(WebhookEndpointId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The deleted endpoint.", body = DeletedEndpointView),
        (status = 404, response = NotFoundReplayable),
    )
)]
async fn delete(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    change(req, state, &path, payload, EndpointChange::Delete).await
}

/// Send a test event to a webhook endpoint
///
/// Queues a `webhook_endpoint.test` event (kobo's own type; `data.object`
/// is the endpoint, without its secret) to this endpoint only, signed and
/// retried like any delivery. The event is in no event list and no
/// stream; its attempts are at `GET /v1/events/{event_id}/delivery_attempts`.
/// A disabled endpoint: 409 `webhook_endpoint_disabled`.
#[utoipa::path(
    post,
    path = "/v1/webhook_endpoints/{id}/test",
    operation_id = "test_webhook_endpoint",
    tag = "webhooks",
    params(WebhookEndpointId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The test event, queued.", body = WebhookTestView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
    )
)]
async fn test(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    TEST_WEBHOOK_ENDPOINT
        .post(req, state, payload, |c, _: NoFields| async move {
            test_run(c, &path).await
        })
        .await
}

/// `POST /v1/webhook_endpoints/{id}/test`' declaration (the dashboard's
/// "Send test event" button posts through it too).
pub const TEST_WEBHOOK_ENDPOINT: Endpoint = Endpoint::secret_key(200);

/// `POST /v1/webhook_endpoints/{id}/test`' run: the webhook supervisor
/// makes the test event and queues it to the endpoint.
pub async fn test_run(c: Call, raw_id: &str) -> ApiResult<Answer<WebhookView>> {
    let id = WebhookEndpointId::parse(raw_id)?.id;
    let answer = c
        .state
        .kobo
        .webhooks
        .command(Command::Test {
            merchant: c.p.merchant.id,
            mode: c.p.mode,
            id,
            idem: c.save.clone(),
        })
        .await?;
    Ok(answer)
}

#[cfg(test)]
fn parse_create(bytes: &[u8]) -> Result<(String, Vec<String>), DomainError> {
    body::parse::<CreateWebhookEndpointRequest>(bytes)?.into_parts()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_bodies_are_checked_field_by_field() {
        let ok = parse_create(br#"{"url": "https://hooks.example.com/k", "events": []}"#).unwrap();
        assert_eq!(ok, ("https://hooks.example.com/k".to_string(), vec![]));
        for (body, param) in [
            (&br#"{}"#[..], "url"),
            (br#"{"url": "http://hooks.example.com/"}"#, "url"),
            (br#"{"url": 5}"#, "url"),
            (
                br#"{"url": "https://hooks.example.com/", "events": "all"}"#,
                "events",
            ),
            (
                br#"{"url": "https://hooks.example.com/", "events": [1]}"#,
                "events",
            ),
            (
                br#"{"url": "https://hooks.example.com/", "events": ["x.y"]}"#,
                "events",
            ),
            (
                br#"{"url": "https://hooks.example.com/", "secret": "s"}"#,
                "secret",
            ),
        ] {
            let e = parse_create(body).unwrap_err();
            assert_eq!(
                e.param.as_deref(),
                Some(param),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
