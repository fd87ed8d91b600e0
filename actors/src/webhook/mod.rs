//! Webhooks: endpoints, durable deliveries, signed attempts, and the live
//! event stream.
//!
//! Layout:
//! - this file: the stored records ([`WebhookEndpoint`], [`Delivery`]),
//!   their keys, the retry schedule, and the [`Hub`] through which the
//!   rest of kobo reaches the webhook supervisor.
//! - `rules.rs`: the endpoint URL rules, event-type filters, the signature
//!   and endpoint secrets.
//! - [`supervisor`]: the one owner of endpoints and deliveries. It turns the
//!   event outbox into deliveries, runs endpoint commands, schedules due
//!   attempts per endpoint and records their outcomes.
//! - [`dispatcher`]: the pool of dispatcher actors making the HTTPS attempts
//!   (reqwest + rustls, no redirects, 10 s time-out, public addresses only).
//! - [`query`]: reads for the API (endpoint lists, events with deliveries,
//!   stream replay).
//!
//! The path of an event: the change's batch writes the event and an
//! `event_outbox` row (`Event::add_to`); the writer wakes the supervisor
//! after that commit; the supervisor creates one delivery per matching
//! enabled endpoint and deletes the outbox row in one batch (so a crash
//! either leaves the row, to be fanned out again, or the deliveries), then
//! announces the event on the stream. Attempts are claimed in memory only:
//! a queue row leaves the queue in the batch that records the attempt's
//! outcome, so an attempt cut short by a crash is made again after restart.

pub mod dispatcher;
pub mod query;
mod rules;
pub mod supervisor;

pub use rules::*;

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use tokio::sync::{broadcast, mpsc, oneshot};
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::KeyBuf;

use crate::clock::micros;
use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::event::EVENT_TYPES;
use crate::idempotency::{Answer, IdempotencySave};
use crate::ids::{scope_key, Mode};

/// Endpoints per merchant and mode (spec: Limits).
pub const MAX_ENDPOINTS_PER_MODE: usize = 10;
/// Retry delays after the first, second, ... failed attempt (spec: 1m, 5m,
/// 30m, 2h, 6h, 12h); after the last one fails the delivery is `failed`.
pub const RETRY_DELAYS_SECS: [i64; 6] = [60, 300, 1_800, 7_200, 21_600, 43_200];
/// Reply time-out of one attempt.
pub const ATTEMPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// Longest accepted endpoint URL.
pub const MAX_URL_LEN: usize = 2048;
/// Ports an endpoint URL may use.
pub const ALLOWED_PORTS: [u16; 2] = [443, 8443];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EndpointStatus {
    Enabled,
    Disabled,
}

/// A stored endpoint. `secret` is kept because every attempt is signed with
/// it; it is shown once (create) and wiped when the endpoint is deleted.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebhookEndpoint {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub url: String,
    /// Empty: every type.
    pub events: Vec<String>,
    pub status: EndpointStatus,
    pub secret: String,
    pub created_at: DateTime<Utc>,
    /// Raised by every disable and delete: a delivery queued under an
    /// older generation is dropped, never sent ("enabling does not resend").
    pub generation: u64,
    /// The sequence number taken when it was created or last enabled:
    /// events older than that are not fanned out to it.
    #[serde(default)]
    pub enabled_seq: u64,
    pub deleted_at: Option<DateTime<Utc>>,
}

impl WebhookEndpoint {
    pub fn wants(&self, event_type: &str) -> bool {
        self.events.is_empty() || self.events.iter().any(|e| e == event_type)
    }

    /// Whether a delivery queued under `generation` may still be attempted.
    pub fn accepts(&self, generation: u64) -> bool {
        self.status == EndpointStatus::Enabled
            && self.deleted_at.is_none()
            && self.generation == generation
    }

    pub fn view(&self, with_secret: bool) -> WebhookEndpointView {
        WebhookEndpointView {
            id: self.id,
            object: WebhookEndpointObject::WebhookEndpoint,
            livemode: self.mode.livemode(),
            url: self.url.clone(),
            events: self.events.clone(),
            status: self.status,
            created_at: self.created_at,
            secret: with_secret.then(|| self.secret.clone()),
        }
    }

    pub fn to_api(&self, with_secret: bool) -> serde_json::Value {
        serde_json::to_value(self.view(with_secret)).expect("an endpoint view serializes")
    }
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum WebhookEndpointObject {
    #[serde(rename = "webhook_endpoint")]
    WebhookEndpoint,
}

/// The public WebhookEndpoint.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = WebhookEndpoint)]
pub struct WebhookEndpointView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: WebhookEndpointObject,
    pub livemode: bool,
    #[schema(format = "uri")]
    pub url: String,
    /// The event types sent to this endpoint; empty means every type.
    #[schema(schema_with = event_types_schema)]
    pub events: Vec<String>,
    pub status: EndpointStatus,
    pub created_at: DateTime<Utc>,
    /// The signing secret (`whsec_...`); only in the create response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

fn event_types_schema() -> utoipa::openapi::schema::Schema {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(utoipa::openapi::RefOr::T(crate::event::event_type_schema()))
        .into()
}

/// What a webhook command answers.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum WebhookView {
    /// A created or changed endpoint.
    Endpoint(WebhookEndpointView),
    /// A deleted endpoint.
    Deleted(DeletedEndpointView),
    /// A redelivery's count.
    Redelivery(RedeliveryView),
    /// A test event queued to one endpoint.
    Test(WebhookTestView),
}

/// The type of the events `POST /v1/webhook_endpoints/{id}/test` sends:
/// kobo's own, beyond the spec's list (never in `GET /v1/events`, the
/// stream, or an endpoint's `events` filter).
pub const TEST_EVENT_TYPE: &str = "webhook_endpoint.test";

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum WebhookTestObject {
    #[serde(rename = "webhook_endpoint_test")]
    WebhookEndpointTest,
}

/// The answer of a test: the event queued to the endpoint.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = WebhookEndpointTest)]
pub struct WebhookTestView {
    #[schema(inline)]
    pub object: WebhookTestObject,
    pub endpoint_id: Uuid,
    /// The test event's id (its `Service-Event-Id`); its attempts are at
    /// `GET /v1/events/{id}/delivery_attempts`.
    pub event_id: Uuid,
    /// Always `webhook_endpoint.test`.
    #[serde(rename = "type")]
    #[schema(value_type = String, example = "webhook_endpoint.test")]
    pub event_type: &'static str,
    pub livemode: bool,
    pub created_at: DateTime<Utc>,
}

/// The answer of a delete.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = DeletedWebhookEndpoint)]
pub struct DeletedEndpointView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: WebhookEndpointObject,
    /// Always true.
    pub deleted: bool,
    pub livemode: bool,
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum EventRedeliveryObject {
    #[serde(rename = "event_redelivery")]
    EventRedelivery,
}

/// The answer of a redelivery.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = EventRedelivery)]
pub struct RedeliveryView {
    #[schema(inline)]
    pub object: EventRedeliveryObject,
    pub event_id: Uuid,
    /// How many deliveries were queued (one per matching enabled endpoint).
    pub queued: u32,
    pub livemode: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Waiting for its first attempt (also after a redelivery).
    Pending,
    /// A retry is scheduled.
    Retrying,
    Delivered,
    /// The last retry failed, or the endpoint was disabled or deleted while
    /// it waited.
    Failed,
}

/// One event's delivery to one endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Delivery {
    pub event: Uuid,
    pub endpoint: Uuid,
    pub status: DeliveryStatus,
    /// Attempts made, redeliveries included.
    pub attempts: u32,
    pub last_response_status: Option<u16>,
    /// Why the last attempt failed without a status (time-out, refused
    /// address, TLS, ...); for logs and operators.
    pub last_error: Option<String>,
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// The due time of its queue row while it waits.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Failed attempts since it was (re)queued: the next retry delay.
    pub retry_step: u8,
    /// The endpoint generation it was queued under.
    pub generation: u64,
    /// Raised by each redelivery; an attempt's outcome for an older version
    /// counts the attempt but leaves the newer queue row alone.
    pub version: u64,
    pub created_at: DateTime<Utc>,
}

impl Delivery {
    /// A first delivery of `event` to `endpoint`, due now.
    pub fn first(event: Uuid, endpoint: Uuid, generation: u64, now: DateTime<Utc>) -> Self {
        Delivery {
            event,
            endpoint,
            status: DeliveryStatus::Pending,
            attempts: 0,
            last_response_status: None,
            last_error: None,
            last_attempt_at: None,
            next_attempt_at: Some(now),
            retry_step: 0,
            generation,
            version: 1,
            created_at: now,
        }
    }

    pub fn view(&self) -> DeliveryView {
        DeliveryView {
            endpoint_id: self.endpoint,
            status: self.status,
            attempts: self.attempts,
            last_response_status: self.last_response_status,
        }
    }
}

/// A delivery as listed on an event.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = EventDelivery)]
pub struct DeliveryView {
    pub endpoint_id: Uuid,
    pub status: DeliveryStatus,
    pub attempts: u32,
    #[schema(required = true)]
    pub last_response_status: Option<u16>,
}

/// Attempts kept per delivery: the newest this many; an older one is
/// deleted in the batch that records the attempt making it the 51st.
/// (One delivery makes at most 7 attempts per (re)delivery, so this keeps
/// the whole history of seven redeliveries.)
pub const ATTEMPTS_KEPT: u32 = 50;

/// One attempt of a delivery, as recorded with its outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeliveryAttempt {
    pub id: Uuid,
    pub event: Uuid,
    pub endpoint: Uuid,
    /// 1 for the delivery's first attempt, counting redeliveries.
    pub number: u32,
    /// When it was signed (the service clock).
    pub at: DateTime<Utc>,
    pub response_status: Option<u16>,
    /// Why it got no HTTP answer (time-out, refused address, TLS, ...).
    pub error: Option<String>,
    /// Wall time from sending to the end of the answer, in milliseconds.
    pub duration_ms: u64,
}

impl DeliveryAttempt {
    pub fn view(&self, mode: Mode) -> DeliveryAttemptView {
        DeliveryAttemptView {
            id: self.id,
            object: DeliveryAttemptObject::DeliveryAttempt,
            livemode: mode.livemode(),
            event_id: self.event,
            endpoint_id: self.endpoint,
            number: self.number,
            attempted_at: self.at,
            succeeded: self.error.is_none()
                && self
                    .response_status
                    .is_some_and(|s| (200..300).contains(&s)),
            response_status: self.response_status,
            error: self.error.clone(),
            duration_ms: self.duration_ms,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum DeliveryAttemptObject {
    #[serde(rename = "delivery_attempt")]
    DeliveryAttempt,
}

/// The public DeliveryAttempt (`GET /v1/events/{id}/delivery_attempts`).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = DeliveryAttempt)]
pub struct DeliveryAttemptView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: DeliveryAttemptObject,
    pub livemode: bool,
    pub event_id: Uuid,
    pub endpoint_id: Uuid,
    /// 1 for the delivery's first attempt; redeliveries go on counting.
    pub number: u32,
    pub attempted_at: DateTime<Utc>,
    /// A 2xx answer within the time-out.
    pub succeeded: bool,
    /// The endpoint's HTTP status; null when it gave no answer.
    #[schema(required = true)]
    pub response_status: Option<u16>,
    /// Why there was no answer (time-out, connection, TLS, refused
    /// address); null when there was one.
    #[schema(required = true)]
    pub error: Option<String>,
    /// From sending the request to the end of the answer.
    pub duration_ms: u64,
}

// ---- keys ----

pub fn endpoint_index_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

pub fn delivery_key(event: Uuid, endpoint: Uuid) -> Vec<u8> {
    KeyBuf::new()
        .bytes(event.as_bytes())
        .bytes(endpoint.as_bytes())
        .build()
}

pub fn attempt_key(event: Uuid, endpoint: Uuid, number: u32) -> Vec<u8> {
    KeyBuf::new()
        .bytes(event.as_bytes())
        .bytes(endpoint.as_bytes())
        .u32(number)
        .build()
}

/// The attempt number to delete when attempt `number` is recorded (the
/// one leaving the kept window), if any.
pub fn attempt_pruned(number: u32) -> Option<u32> {
    number.checked_sub(ATTEMPTS_KEPT).filter(|n| *n > 0)
}

pub fn queue_key(endpoint: Uuid, due: DateTime<Utc>, event: Uuid) -> Vec<u8> {
    KeyBuf::new()
        .bytes(endpoint.as_bytes())
        .u64(micros(due))
        .bytes(event.as_bytes())
        .build()
}

/// (endpoint, due micros, event) of a queue key.
pub fn parse_queue_key(k: &[u8]) -> Option<(Uuid, u64, Uuid)> {
    if k.len() != 40 {
        return None;
    }
    let endpoint = Uuid::from_slice(&k[..16]).ok()?;
    let due = u64::from_be_bytes(k[16..24].try_into().ok()?);
    let event = Uuid::from_slice(&k[24..]).ok()?;
    Some((endpoint, due, event))
}

pub fn stream_key(merchant: Uuid, mode: Mode, pos: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(pos).build()
}

// ---- the hub ----

/// What the API asks of the supervisor.
#[derive(Debug)]
pub enum Command {
    Create {
        merchant: Uuid,
        mode: Mode,
        url: String,
        events: Vec<String>,
        idem: Option<IdempotencySave>,
    },
    Change {
        merchant: Uuid,
        mode: Mode,
        id: Uuid,
        change: EndpointChange,
        idem: Option<IdempotencySave>,
    },
    Redeliver {
        merchant: Uuid,
        mode: Mode,
        event: Uuid,
        idem: Option<IdempotencySave>,
    },
    /// A `webhook_endpoint.test` event to this one endpoint.
    Test {
        merchant: Uuid,
        mode: Mode,
        id: Uuid,
        idem: Option<IdempotencySave>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointChange {
    Disable,
    Enable,
    Delete,
}

/// An event as announced on the stream.
#[derive(Debug, Clone)]
pub struct StreamItem {
    pub merchant: Uuid,
    pub mode: Mode,
    /// Stream position: increasing in the order events were announced.
    pub pos: u64,
    pub event_type: String,
    /// The public event, as JSON text.
    pub data: Arc<str>,
}

pub(crate) enum Msg {
    Outcome(dispatcher::Outcome),
    Command(Command, oneshot::Sender<DomainResult<Answer<WebhookView>>>),
    /// Fan out the outbox, then dispatch what is due; answer when done.
    Pump(oneshot::Sender<()>),
    /// This node's shards changed (cluster mode): forget the schedule and
    /// the caches, and rebuild them from the store for the merchants it
    /// owns now.
    Reset,
}

/// Counters for operators (`/admin/v1/actors`, `/metrics`).
#[derive(Default, Debug)]
pub struct Stats {
    pub in_flight: AtomicUsize,
    pub attempts: AtomicU64,
    pub delivered: AtomicU64,
    pub failed_attempts: AtomicU64,
    pub dropped: AtomicU64,
    pub streams_open: AtomicUsize,
    /// Attempts in flight per endpoint, as the supervisor last published
    /// them (at most [`supervisor::IN_FLIGHT_MAX`] entries).
    pub endpoints_in_flight: Mutex<std::collections::HashMap<Uuid, usize>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StatsView {
    pub in_flight: usize,
    pub attempts: u64,
    pub delivered: u64,
    pub failed_attempts: u64,
    pub dropped: u64,
    pub streams_open: usize,
}

/// How kobo reaches the webhook supervisor and the event stream.
pub struct Hub {
    pub env: Arc<Env>,
    tx: mpsc::UnboundedSender<Msg>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<Msg>>>,
    stream: broadcast::Sender<Arc<StreamItem>>,
    closing: tokio::sync::watch::Sender<bool>,
    pub stats: Stats,
}

/// Events buffered per stream subscriber before it must catch up from the
/// store.
pub const STREAM_BUFFER: usize = 4096;

impl Hub {
    pub fn new(env: Arc<Env>) -> Hub {
        let (tx, rx) = mpsc::unbounded_channel();
        let (stream, _) = broadcast::channel(STREAM_BUFFER);
        let (closing, _) = tokio::sync::watch::channel(false);
        Hub {
            env,
            tx,
            rx: Mutex::new(Some(rx)),
            stream,
            closing,
            stats: Stats::default(),
        }
    }

    /// Runs an endpoint command or a redelivery; the answer's response is
    /// saved with the change when `idem` is given.
    pub async fn command(&self, cmd: Command) -> DomainResult<Answer<WebhookView>> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Msg::Command(cmd, tx))
            .map_err(|_| DomainError::internal("the webhook supervisor is not running"))?;
        rx.await
            .map_err(|_| DomainError::internal("the webhook supervisor stopped"))?
    }

    /// Every event announced from now on (all merchants: filter by scope).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StreamItem>> {
        self.stream.subscribe()
    }

    /// Turns true when the server shuts down: streams end.
    pub fn closing(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// Ends every open stream (graceful shutdown).
    pub fn close_streams(&self) {
        let _ = self.closing.send(true);
    }

    pub fn stats(&self) -> StatsView {
        let s = &self.stats;
        StatsView {
            in_flight: s.in_flight.load(Ordering::Relaxed),
            attempts: s.attempts.load(Ordering::Relaxed),
            delivered: s.delivered.load(Ordering::Relaxed),
            failed_attempts: s.failed_attempts.load(Ordering::Relaxed),
            dropped: s.dropped.load(Ordering::Relaxed),
            streams_open: s.streams_open.load(Ordering::Relaxed),
        }
    }

    fn take_receiver(&self) -> Option<mpsc::UnboundedReceiver<Msg>> {
        self.rx.lock().take()
    }

    /// Whether any live stream is open.
    pub(crate) fn listening(&self) -> bool {
        self.stream.receiver_count() > 0
    }

    /// Announces committed events (with their stream positions) to the
    /// live streams. With no stream open nothing is read or rendered: a
    /// stream opened after this check reads its start from the store, where
    /// these events already are (they committed before this call). An event
    /// given by id alone (no stream listened when it was fanned out) is read
    /// from the store.
    pub(crate) fn announce_all(&self, events: Vec<(u64, Uuid, Option<crate::event::Event>)>) {
        if events.is_empty() || !self.listening() {
            return;
        }
        let mut read = None;
        for (pos, id, event) in events {
            let event = match event {
                Some(event) => event,
                None => match self.read_event(&mut read, id) {
                    Ok(Some(event)) => event,
                    Ok(None) => continue,
                    Err(e) => {
                        // Only when the store fails right after committing
                        // the event: a listener resuming (Last-Event-ID)
                        // reads it from the store.
                        tracing::error!(event = %id, error = %e, "event not announced on the stream");
                        continue;
                    }
                },
            };
            let item = StreamItem {
                merchant: event.merchant,
                mode: event.mode,
                pos,
                data: event.to_api().to_string().into(),
                event_type: event.event_type,
            };
            // A subscriber gone meanwhile is not an error.
            let _ = self.stream.send(Arc::new(item));
        }
    }

    /// The committed event `id`, from one snapshot begun at the first call.
    fn read_event(
        &self,
        read: &mut Option<kobo_storage::ReadTxn>,
        id: Uuid,
    ) -> DomainResult<Option<crate::event::Event>> {
        if read.is_none() {
            *read = Some(self.env.store.read()?);
        }
        let read = read.as_ref().expect("begun above");
        Ok(read.get_decoded(kobo_storage::Table::Events, id.as_bytes())?)
    }

    /// Cluster mode: this node's shards changed; deliveries follow (see
    /// [`Msg::Reset`]).
    pub fn reset(&self) {
        let _ = self.tx.send(Msg::Reset);
    }

    pub(crate) fn sender(&self) -> mpsc::UnboundedSender<Msg> {
        self.tx.clone()
    }
}

/// Called by the timer pass (`timers::run_due`): fans out the outbox and
/// dispatches every delivery due at or before `limit` (with the manual
/// clock, the clock is moved to `limit` first, so attempts carry that
/// time). Returns once they are dispatched; attempts may still be in
/// flight. Returns at once when the supervisor is not running.
pub async fn run_due(hub: &Hub, limit: DateTime<Utc>) {
    hub.env.clock.set(limit);
    let (tx, rx) = oneshot::channel();
    if hub.tx.send(Msg::Pump(tx)).is_ok() {
        let _ = rx.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_keys_round_trip_and_sort_by_endpoint_then_due() {
        let (ep, ev) = (Uuid::new_v4(), Uuid::new_v4());
        let t = crate::clock::from_micros(1_700_000_000_123_456);
        let k = queue_key(ep, t, ev);
        assert_eq!(parse_queue_key(&k), Some((ep, micros(t), ev)));
        let later = queue_key(ep, t + chrono::Duration::seconds(1), Uuid::nil());
        assert!(k < later);
    }

    #[tokio::test]
    async fn committed_events_are_announced_whether_given_whole_or_by_id() {
        let dir = tempfile::tempdir().unwrap();
        let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
        let hub = &kobo.webhooks;
        let scope = (Uuid::new_v4(), Mode::Test);
        let mut batch = kobo_storage::Batch::new();
        let events: Vec<crate::event::Event> = (0..2)
            .map(|i| {
                let e = crate::event::Event {
                    id: crate::ids::new_id(kobo.clock.now()),
                    merchant: scope.0,
                    mode: scope.1,
                    seq: kobo.seq.next(),
                    event_type: crate::event::PAYMENT_INTENT_SUCCESSFUL.into(),
                    created_at: kobo.clock.now(),
                    object: crate::event::object_text(&serde_json::json!({ "n": i })),
                };
                e.add_to(&mut batch);
                e
            })
            .collect();
        kobo.writer.commit(batch).await.unwrap();
        // Nobody listens: nothing is read, nothing is sent.
        assert!(!hub.listening());
        hub.announce_all(vec![(1, events[0].id, None)]);
        let mut live = hub.subscribe();
        assert!(hub.listening());
        // One read from the store (no stream listened when it was fanned
        // out), one given whole; an id the store lacks is passed over.
        hub.announce_all(vec![
            (2, events[0].id, None),
            (3, Uuid::new_v4(), None),
            (4, events[1].id, Some(events[1].clone())),
        ]);
        for (pos, e) in [(2, &events[0]), (4, &events[1])] {
            let item = live.try_recv().expect("announced");
            assert_eq!((item.pos, item.merchant), (pos, scope.0));
            assert_eq!(*item.data, e.to_api().to_string());
        }
        assert!(live.try_recv().is_err(), "nothing else was announced");
    }

    #[test]
    fn a_delivery_keeps_its_newest_attempts_only() {
        assert_eq!(attempt_pruned(1), None);
        assert_eq!(attempt_pruned(ATTEMPTS_KEPT), None);
        assert_eq!(attempt_pruned(ATTEMPTS_KEPT + 1), Some(1));
        assert_eq!(attempt_pruned(ATTEMPTS_KEPT + 7), Some(7));
        let (ev, ep) = (Uuid::new_v4(), Uuid::new_v4());
        assert!(attempt_key(ev, ep, 2) < attempt_key(ev, ep, 10));
        assert!(attempt_key(ev, ep, 255) < attempt_key(ev, ep, 256));
    }

    #[test]
    fn the_retry_schedule_is_the_spec_s() {
        assert_eq!(
            RETRY_DELAYS_SECS,
            [60, 5 * 60, 30 * 60, 2 * 3600, 6 * 3600, 12 * 3600]
        );
    }
}
