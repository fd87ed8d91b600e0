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

use kobo_actors::webhook::query as webhook_query;
use kobo_actors::webhook::StreamItem;
use kobo_actors::{DomainError, Kobo, Mode};

use super::{authenticate, resource, ApiError, ApiResult, State};

/// Heartbeat interval (real time, whatever the service clock).
pub const HEARTBEAT: Duration = Duration::from_secs(15);
/// Events replayed on resume at most.
pub const REPLAY_MAX: usize = 1000;
/// Open streams in all at most.
pub const STREAMS_MAX: usize = 1024;
/// Open streams per merchant and mode at most.
pub const STREAMS_PER_SCOPE_MAX: usize = 16;
/// Frames buffered per connection before the sender waits.
const CONNECTION_BUFFER: usize = 64;

pub fn configure(cfg: &mut web::ServiceConfig) {
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

fn frame(item: &StreamItem) -> Bytes {
    Bytes::from(format!(
        "id: {}\nevent: {}\ndata: {}\n\n",
        item.pos, item.event_type, item.data
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
        let note =
            format!("id: {head}\nevent: resync\ndata: {{\"reason\":\"too_many_missed\"}}\n\n");
        if out.send(Bytes::from(note)).await.is_err() {
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
                if out.send(Bytes::from_static(b": heartbeat\n\n")).await.is_err() {
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
        (status = 200, description = "An endless `text/event-stream`.", content_type = "text/event-stream", body = String),
        (status = 400, response = super::openapi::BadRequest),
        (status = 401, response = super::openapi::Unauthorized),
        (status = 500, response = super::openapi::InternalError),
        (status = 503, response = super::openapi::Overloaded),
    )
)]
async fn stream(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    super::body::Query::parse(req.query_string(), &[])?;
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
    let scope = (p.merchant.id, p.mode);
    let slot = Slot::take(&state.kobo, scope)?;
    let live = state.kobo.webhooks.subscribe();
    let (tx, rx) = mpsc::channel::<Bytes>(CONNECTION_BUFFER);
    // First frame: the connection is open (and tells clients how long to
    // wait before reconnecting).
    let _ = tx.try_send(Bytes::from_static(b"retry: 3000\n: connected\n\n"));
    actix_web::rt::spawn(pump(state.kobo.clone(), scope, resume, live, tx, slot));
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    Ok(HttpResponse::Ok()
        .insert_header(("Content-Type", "text/event-stream"))
        .insert_header(("Cache-Control", "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(body))
}
