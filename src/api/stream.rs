//! `GET /v1/stream`: server-sent events announcing every new event of the
//! key's merchant and mode (payments, payouts, and the balance moves they
//! carry), as `id: <stream position>`, `event: <type>`, `data: <Event>`.
//!
//! A connection first replays what came after `Last-Event-ID` (at most
//! [`REPLAY_MAX`] events; when more were missed it says `event: resync`,
//! and the client should fetch current state), then follows the live
//! announcements. A comment line every 15 s keeps idle connections open.
//! Connections are bounded in all and per merchant and mode; server
//! shutdown ends them.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::{broadcast, mpsc};
use uuid::Uuid;

use utoipa::openapi::extensions::ExtensionsBuilder;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use kobo_actors::event::{EventView, EVENT_TYPES};
use kobo_actors::webhook::query as webhook_query;
use kobo_actors::webhook::StreamItem;
use kobo_actors::{DomainError, Kobo, Mode};

use super::endpoint::{Call, Endpoint};
use super::{resource, ApiError, ApiResult, State};

/// Heartbeat interval (real time, whatever the service clock).
pub const HEARTBEAT: Duration = Duration::from_secs(15);
/// Events replayed on resume at most.
pub const REPLAY_MAX: usize = 1000;
/// Open streams in all at most.
pub const STREAMS_MAX: usize = 1024;
/// Open streams per merchant and mode at most.
pub const STREAMS_PER_SCOPE_MAX: usize = 16;
/// A stream's first frame: the connection is open, and how long to wait
/// before reconnecting.
const OPENER: &[u8] = b"retry: 3000\n: connected\n\n";
/// The comment that keeps an idle connection open.
const HEARTBEAT_FRAME: &[u8] = b": heartbeat\n\n";
/// Frames buffered per connection before the sender waits.
const CONNECTION_BUFFER: usize = 64;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(resource("/v1/stream").route(web::get().to(stream)));
}

/// Open streams per scope (the total is in the hub's stats).
static OPEN: Mutex<Vec<((Uuid, Mode), usize)>> = Mutex::new(Vec::new());

/// Holds a connection slot; gives it back when the stream ends.
struct Slot {
    kobo: Arc<Kobo>,
    scope: (Uuid, Mode),
}

impl Slot {
    fn take(kobo: &Arc<Kobo>, scope: (Uuid, Mode)) -> Result<Slot, DomainError> {
        let mut open = OPEN.lock();
        let stats = &kobo.webhooks.stats;
        let total = stats.streams_open.load(Ordering::Relaxed);
        let here = open
            .iter()
            .find(|(s, _)| *s == scope)
            .map(|(_, n)| *n)
            .unwrap_or(0);
        if total >= STREAMS_MAX || here >= STREAMS_PER_SCOPE_MAX {
            return Err(DomainError::overloaded("the event stream"));
        }
        match open.iter_mut().find(|(s, _)| *s == scope) {
            Some((_, n)) => *n += 1,
            None => open.push((scope, 1)),
        }
        stats.streams_open.fetch_add(1, Ordering::Relaxed);
        Ok(Slot {
            kobo: kobo.clone(),
            scope,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = OPEN.lock();
        if let Some(i) = open.iter().position(|(s, _)| *s == self.scope) {
            open[i].1 -= 1;
            if open[i].1 == 0 {
                open.swap_remove(i);
            }
        }
        self.kobo
            .webhooks
            .stats
            .streams_open
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// The `event:` of the frame that tells a resuming client it missed too
/// much and should fetch current state.
pub const RESYNC: &str = "resync";
/// The `reason` in a resync frame's data.
pub const RESYNC_REASON: &str = "too_many_missed";

/// One event of `GET /v1/stream`, the schema of its `200` response.
///
/// OpenAPI 3.2 describes a `text/event-stream` with `itemSchema`, one
/// event in the SSE model `{event, data, id, retry}` (the fields an SSE
/// parser dispatches; comment lines and blocks without `data:`, such as our
/// `retry: 3000` / `: connected` opener and the heartbeats, are no events).
/// This document is OpenAPI 3.1, whose Media Type Object has no
/// `itemSchema` (its only extra keys are `x-`), so `schema` carries that
/// per-event schema: the reading schemathesis 4 gives a pre-3.2 event
/// stream's `schema` (it validates each event of the stream it read
/// against it), and a truthful one for any 3.1 reader, unlike `string`
/// (the whole body as one string), which schemathesis 4 rejects every event
/// against. `data` is JSON text: `contentMediaType: application/json` with
/// a `contentSchema` (JSON Schema 2020-12, valid in 3.1), so the Event in
/// it is checked too. utoipa writes only `x-` extensions, so the keyword
/// is built as `x-contentSchema` and renamed when the document is
/// serialized ([`super::openapi::document_json`]).
pub struct StreamEvent;

impl StreamEvent {
    fn variant(
        description: &str,
        event: Schema,
        data_description: &str,
        data: RefOr<Schema>,
    ) -> Schema {
        let id = ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[0-9]+$"))
            .description(Some(
                "The stream position (increasing); send it as `Last-Event-ID` to resume after it.",
            ));
        let data = ObjectBuilder::new()
            .schema_type(Type::String)
            .content_media_type("application/json")
            .description(Some(data_description))
            .extensions(Some(
                ExtensionsBuilder::new()
                    .add(
                        super::components::CONTENT_SCHEMA,
                        serde_json::to_value(data).expect("a schema serializes"),
                    )
                    .build(),
            ));
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(description))
            .property("id", id)
            .required("id")
            .property("event", event)
            .required("event")
            .property("data", data)
            .required("data")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
            .into()
    }
}

impl PartialSchema for StreamEvent {
    fn schema() -> RefOr<Schema> {
        let announced = Self::variant(
            "An event of the key's merchant and mode.",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(EVENT_TYPES.iter().copied()))
                .description(Some("The event's `type`."))
                .into(),
            "The Event, as JSON (without `deliveries`).",
            RefOr::Ref(Ref::from_schema_name(EventView::name())),
        );
        let resync = Self::variant(
            "Resuming missed more than 1,000 events: fetch current state; its `id` is the newest position.",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some([RESYNC]))
                .into(),
            "Why, as JSON.",
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .property(
                    "reason",
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some([RESYNC_REASON])),
                )
                .required("reason")
                .additional_properties(Some(AdditionalProperties::FreeForm(false)))
                .into(),
        );
        OneOfBuilder::new()
            .item(announced)
            .item(resync)
            .description(Some(
                "One server-sent event (`id:`, `event:`, `data:` lines), as an SSE parser hands it over.",
            ))
            .into()
    }
}

impl ToSchema for StreamEvent {
    fn name() -> std::borrow::Cow<'static, str> {
        "StreamEvent".into()
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((EventView::name().into_owned(), EventView::schema()));
        EventView::schemas(schemas);
    }
}

fn frame(item: &StreamItem) -> Bytes {
    Bytes::from(format!(
        "id: {}\nevent: {}\ndata: {}\n\n",
        item.pos, item.event_type, item.data
    ))
}

/// The frame that tells a resuming client to fetch current state.
fn resync_frame(head: u64) -> Bytes {
    Bytes::from(format!(
        "id: {head}\nevent: {RESYNC}\ndata: {}\n\n",
        serde_json::json!({ "reason": RESYNC_REASON })
    ))
}

/// Sends replayed events after `after`; returns the new position, or None
/// when the client went away.
async fn replay(
    kobo: &Kobo,
    scope: (Uuid, Mode),
    after: u64,
    out: &mpsc::Sender<Bytes>,
) -> Result<Option<u64>, DomainError> {
    let (items, more) = webhook_query::stream_after(kobo, scope.0, scope.1, after, REPLAY_MAX)?;
    let mut last = after;
    if more {
        // Too much was missed: say so; the client fetches current state.
        let head = webhook_query::stream_head(kobo, scope.0, scope.1)?;
        if out.send(resync_frame(head)).await.is_err() {
            return Ok(None);
        }
        return Ok(Some(head));
    }
    for item in items {
        if out.send(frame(&item)).await.is_err() {
            return Ok(None);
        }
        last = item.pos;
    }
    Ok(Some(last))
}

async fn pump(
    kobo: Arc<Kobo>,
    scope: (Uuid, Mode),
    resume: Option<u64>,
    mut live: broadcast::Receiver<Arc<StreamItem>>,
    out: mpsc::Sender<Bytes>,
    _slot: Slot,
) {
    let mut closing = kobo.webhooks.closing();
    if *closing.borrow() {
        return;
    }
    // Subscribed before reading the store, so nothing falls in between.
    let mut last = match resume {
        Some(after) => {
            // A position from the future (another server's, a typo) would
            // hide every event until the stream caught up with it.
            let head = match webhook_query::stream_head(&kobo, scope.0, scope.1) {
                Ok(head) => head,
                Err(_) => return,
            };
            match replay(&kobo, scope, after.min(head), &out).await {
                Ok(Some(p)) => p,
                _ => return,
            }
        }
        None => match webhook_query::stream_head(&kobo, scope.0, scope.1) {
            Ok(head) => head,
            Err(_) => return,
        },
    };
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    heartbeat.tick().await;
    loop {
        tokio::select! {
            item = live.recv() => match item {
                Ok(item) => {
                    if (item.merchant, item.mode) != scope || item.pos <= last {
                        continue;
                    }
                    if out.send(frame(&item)).await.is_err() {
                        return;
                    }
                    last = item.pos;
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Fell behind the live feed: catch up from the store.
                    match replay(&kobo, scope, last, &out).await {
                        Ok(Some(p)) => last = p,
                        _ => return,
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = heartbeat.tick() => {
                if out.send(Bytes::from_static(HEARTBEAT_FRAME)).await.is_err() {
                    return;
                }
            }
            _ = closing.changed() => return,
            _ = out.closed() => return,
        }
    }
}

/// Stream events
///
/// Server-sent events (`text/event-stream`): every new event of the key's
/// merchant and mode as `id: <position>`, `event: <type>`, `data: <Event
/// JSON>`. Send `Last-Event-ID` to resume after a position (up to 1,000
/// missed events; beyond that an `event: resync` tells you to fetch current
/// state). A `: heartbeat` comment comes every 15 seconds.
#[utoipa::path(
    get,
    path = "/v1/stream",
    operation_id = "stream_events",
    tag = "webhooks",
    params(("Last-Event-ID" = Option<u64>, Header, description = "Resume after this stream position (the `id:` of the last event received).")),
    responses(
        (status = 200, description = "An endless `text/event-stream`; its schema is that of each event in it.", content_type = "text/event-stream", body = StreamEvent),
        (status = 400, response = super::components::BadRequest),
        (status = 401, response = super::components::Unauthorized),
        (status = 500, response = super::components::InternalError),
        (status = 503, response = super::components::Overloaded),
    )
)]
async fn stream(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, _: super::body::NoFields| async move {
            let Call { req, state, p, .. } = c;
            let resume = match req.headers().get("last-event-id") {
                None => None,
                Some(v) => Some(
                    v.to_str()
                        .ok()
                        .and_then(|s| s.trim().parse::<u64>().ok())
                        .ok_or_else(|| {
                            ApiError(DomainError::invalid(
                                "Last-Event-ID",
                                "Last-Event-ID is the `id:` of an event from this stream",
                            ))
                        })?,
                ),
            };
            Ok(open(&state.kobo, (p.merchant.id, p.mode), resume)?)
        })
        .await
}

/// The event stream of `scope` (a merchant and mode), resumed after
/// `resume` when given: what `GET /v1/stream` answers, and what the
/// dashboard's live updates read (`/dashboard/live`, a session's merchant
/// and mode).
pub fn open(
    kobo: &Arc<Kobo>,
    scope: (Uuid, Mode),
    resume: Option<u64>,
) -> Result<HttpResponse, DomainError> {
    let slot = Slot::take(kobo, scope)?;
    let live = kobo.webhooks.subscribe();
    let (tx, rx) = mpsc::channel::<Bytes>(CONNECTION_BUFFER);
    // First frame: the connection is open (and tells clients how long to
    // wait before reconnecting).
    let _ = tx.try_send(Bytes::from_static(OPENER));
    actix_web::rt::spawn(pump(kobo.clone(), scope, resume, live, tx, slot));
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    Ok(HttpResponse::Ok()
        .insert_header(("Content-Type", "text/event-stream"))
        .insert_header(("Cache-Control", "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(body))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use chrono::Utc;
    use serde_json::{json, Value};

    use kobo_actors::event::Event;

    use super::*;

    fn doc() -> Value {
        serde_json::from_str(super::super::openapi::document_json()).unwrap()
    }

    /// What an SSE parser hands over for each event of `bytes` (blocks
    /// without `data:` are no events), in the `{id, event, data}` model.
    fn events(bytes: &[u8]) -> Vec<Value> {
        let text = std::str::from_utf8(bytes).unwrap();
        let mut out = Vec::new();
        for block in text.split("\n\n") {
            let mut event = serde_json::Map::new();
            for line in block.lines().filter(|l| !l.starts_with(':')) {
                let (k, v) = line.split_once(": ").unwrap();
                if k != "retry" {
                    event.insert(k.to_string(), json!(v));
                }
            }
            if event.contains_key("data") {
                out.push(Value::Object(event));
            }
        }
        out
    }

    fn keys(v: &Value) -> BTreeSet<String> {
        v.as_object().unwrap().keys().cloned().collect()
    }

    fn strings(v: &Value) -> BTreeSet<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    }

    /// Checks an event against one `oneOf` variant of the document's
    /// StreamEvent: its fields, `id` pattern, `event` enum, and `data`
    /// (JSON text) against the variant's `contentSchema` (its required
    /// fields and properties; a `$ref` is followed).
    fn conforms(doc: &Value, variant: &Value, event: &Value) {
        assert_eq!(variant["additionalProperties"], json!(false));
        assert_eq!(keys(event), keys(&variant["properties"]));
        assert_eq!(keys(event), strings(&variant["required"]));
        let id = event["id"].as_str().unwrap();
        assert_eq!(variant["properties"]["id"]["pattern"], "^[0-9]+$");
        assert!(!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()));
        let types = strings(&variant["properties"]["event"]["enum"]);
        assert!(types.contains(event["event"].as_str().unwrap()));
        let data_schema = &variant["properties"]["data"];
        assert_eq!(data_schema["contentMediaType"], "application/json");
        let mut content = &data_schema["contentSchema"];
        if let Some(r) = content["$ref"].as_str() {
            let name = r.strip_prefix("#/components/schemas/").unwrap();
            content = &doc["components"]["schemas"][name];
        }
        let data: Value = serde_json::from_str(event["data"].as_str().unwrap()).unwrap();
        assert_eq!(keys(&data), keys(&content["properties"]));
        assert!(strings(&content["required"]).is_subset(&keys(&data)));
    }

    /// The 200 of GET /v1/stream documents each event (the schema
    /// schemathesis 4 validates every event of the stream against), and the
    /// frames the stream sends conform to it: the fuzz run (scripts/fuzz.sh)
    /// meets announced events only, never a resync.
    #[test]
    fn the_stream_schema_describes_the_frames_sent() {
        let doc = doc();
        let ok = &doc["paths"]["/v1/stream"]["get"]["responses"]["200"]["content"];
        assert_eq!(keys(ok), BTreeSet::from(["text/event-stream".to_string()]));
        assert_eq!(
            ok["text/event-stream"]["schema"]["$ref"],
            "#/components/schemas/StreamEvent"
        );
        let variants = doc["components"]["schemas"]["StreamEvent"]["oneOf"]
            .as_array()
            .unwrap();
        assert_eq!(variants.len(), 2);
        let (announced, resync) = (&variants[0], &variants[1]);
        assert_eq!(
            strings(&announced["properties"]["event"]["enum"]),
            EVENT_TYPES.iter().map(|t| t.to_string()).collect()
        );
        assert_eq!(
            announced["properties"]["data"]["contentSchema"]["$ref"],
            "#/components/schemas/Event"
        );
        assert!(
            !super::super::openapi::document_json()
                .contains(super::super::components::CONTENT_SCHEMA),
            "every x-contentSchema is renamed"
        );

        let now = Utc::now();
        for event_type in EVENT_TYPES {
            let event = Event {
                id: Uuid::now_v7(),
                merchant: Uuid::now_v7(),
                mode: Mode::Test,
                seq: 1,
                event_type: event_type.to_string(),
                created_at: now,
                object: kobo_actors::event::object_text(&json!({"object": "payment_intent"})),
            };
            let item = StreamItem {
                merchant: event.merchant,
                mode: event.mode,
                pos: 42,
                event_type: event.event_type.clone(),
                data: event.to_api().to_string().into(),
            };
            let sent = events(&frame(&item));
            assert_eq!(sent.len(), 1);
            conforms(&doc, announced, &sent[0]);
        }
        let sent = events(&resync_frame(7));
        assert_eq!(sent.len(), 1);
        conforms(&doc, resync, &sent[0]);
        // The opener and the heartbeats are no events.
        assert!(events(OPENER).is_empty());
        assert!(events(HEARTBEAT_FRAME).is_empty());
    }
}
