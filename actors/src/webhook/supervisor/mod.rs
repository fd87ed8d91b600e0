//! The webhook supervisor: the single owner (and single writer) of webhook
//! endpoints, deliveries, the delivery queue, the event outbox and the
//! stream log.
//!
//! It is a task that drains its mailbox the way the store writer does: it
//! takes every queued message, folds all attempt outcomes and the next slice
//! of the outbox into ONE batch, commits it, and only then announces,
//! replies and dispatches. Because it awaits each of its own commits and
//! nothing else writes these tables, what it reads from the store is always
//! current; because many outcomes share a commit, throughput comes from
//! group commit, not from skipping it.
//!
//! Scheduling: the queue is keyed endpoint|due|event, so each endpoint's
//! waiting deliveries are a range in due order. In memory the supervisor
//! keeps, per endpoint, the earliest time it may have something due
//! (`wake`), its claimed attempts, and whether it is at its concurrency
//! bound (`blocked`). A pass takes endpoints in wake order and hands at
//! most [`PER_ENDPOINT_IN_FLIGHT_MAX`] attempts per endpoint (and
//! [`IN_FLIGHT_MAX`] in all) to the dispatchers. An endpoint that never
//! answers holds only its own slots, so the others go on at full speed.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot, Notify};
use uuid::Uuid;

use kobo_storage::{prefix_end, Batch, KeyBuf, ReadTxn, Table};

use crate::clock::{from_micros, micros};
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event::{Event, EventHead};
use crate::idempotency::{Answer, IdempotencySave};
use crate::ids::{new_id, scope_key, Mode};
use crate::webhook::Hub;

mod endpoints;
mod fan_out;
mod pass;

pub use super::dispatcher::PER_ENDPOINT_IN_FLIGHT_MAX;
use super::dispatcher::{self, Attempt, ClientConfig, Dispatcher, Job, Outcome};
use super::{
    attempt_key, attempt_pruned, delivery_key, endpoint_index_key, new_secret, parse_queue_key,
    queue_key, stream_key, validate_url, Command, DeletedEndpointView, Delivery, DeliveryAttempt,
    DeliveryStatus, EndpointChange, EndpointStatus, EventRedeliveryObject, Msg, RedeliveryView,
    WebhookEndpoint, WebhookEndpointObject, WebhookTestObject, WebhookTestView, WebhookView,
    MAX_ENDPOINTS_PER_MODE, RETRY_DELAYS_SECS, TEST_EVENT_TYPE,
};

/// Attempts in flight in all at most.
pub const IN_FLIGHT_MAX: usize = 512;
/// Outbox rows fanned out per batch.
pub const OUTBOX_SLICE: usize = 512;
/// Messages taken per turn.
const MAILBOX_SLICE: usize = 4096;
/// Waiting deliveries dropped per batch when an endpoint is disabled or
/// deleted (a larger backlog takes several batches).
const DROP_SLICE: usize = 2048;
/// Queue rows one endpoint's scan may look at per pass.
const SCAN_MAX: usize = 4096;
/// Scopes whose endpoint lists are cached.
const SCOPE_CACHE_MAX: usize = 10_000;
/// Longest sleep when idle with the system clock (due retries are also
/// pushed by the timer pass every second).
const IDLE_WAKE: Duration = Duration::from_secs(1);

/// How the webhook machinery is set up.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    pub client: ClientConfig,
    /// Dispatcher actors, each on its own thread.
    pub dispatchers: usize,
}

/// Starts the dispatchers and the supervisor (once per process).
pub fn start(hub: &Arc<Hub>, cfg: WebhookConfig) -> Result<(), String> {
    let rx = hub
        .take_receiver()
        .ok_or("the webhook supervisor is already running")?;
    let client = dispatcher::build_client(&cfg.client)?;
    let report = hub.sender();
    let mut dispatchers = Vec::new();
    let mut arbiters = Vec::new();
    for _ in 0..cfg.dispatchers.max(1) {
        let arbiter = Arbiter::new();
        let (client, clock, report) = (client.clone(), hub.env.clock.clone(), report.clone());
        dispatchers.push(Dispatcher::start_in_arbiter(&arbiter.handle(), move |_| {
            Dispatcher::new(client, clock, report)
        }));
        arbiters.push(arbiter);
    }
    let outbox = hub.env.writer.watch(Table::EventOutbox);
    let supervisor = Supervisor {
        hub: hub.clone(),
        rx,
        outbox,
        dispatchers,
        _arbiters: arbiters,
        next_dispatcher: 0,
        sched: Sched::default(),
        claims: HashMap::new(),
        scopes: HashMap::new(),
        waiters: Vec::new(),
    };
    let home = Arbiter::new();
    home.spawn(supervisor.run());
    std::mem::forget(home);
    Ok(())
}

/// An attempt handed to a dispatcher, by (endpoint, event).
struct Claim {
    version: u64,
    queue_key: Vec<u8>,
}

/// Per-endpoint scheduling state.
#[derive(Default)]
struct Sched {
    /// (earliest possible due, endpoint): endpoints to look at.
    wake: BTreeSet<(u64, Uuid)>,
    /// endpoint -> its entry in `wake`.
    next: HashMap<Uuid, u64>,
    /// endpoint -> claimed attempts.
    in_flight: HashMap<Uuid, usize>,
    total: usize,
    /// Endpoints with due work and no free slot.
    blocked: HashSet<Uuid>,
}

impl Sched {
    /// The endpoint may have a delivery due at `due`.
    fn note(&mut self, endpoint: Uuid, due: u64) {
        match self.next.get(&endpoint) {
            Some(d) if *d <= due => {}
            Some(d) => {
                self.wake.remove(&(*d, endpoint));
                self.wake.insert((due, endpoint));
                self.next.insert(endpoint, due);
            }
            None => {
                self.wake.insert((due, endpoint));
                self.next.insert(endpoint, due);
            }
        }
    }
    fn claimed(&mut self, endpoint: Uuid) {
        *self.in_flight.entry(endpoint).or_default() += 1;
        self.total += 1;
    }
    fn released(&mut self, endpoint: Uuid) {
        if let Some(n) = self.in_flight.get_mut(&endpoint) {
            *n -= 1;
            if *n == 0 {
                self.in_flight.remove(&endpoint);
            }
            self.total -= 1;
        }
        self.blocked.remove(&endpoint);
        // Look again: a slot is free, and a redelivery may have queued a
        // row behind the claim.
        self.note(endpoint, 0);
    }
    fn free(&self, endpoint: Uuid) -> usize {
        PER_ENDPOINT_IN_FLIGHT_MAX - self.in_flight.get(&endpoint).copied().unwrap_or(0)
    }
}

/// Writes `d` (due now) with its queue row, and notes the endpoint for the
/// dispatchers once the batch commits: the one way a delivery is queued.
fn queue_now(batch: &mut Batch, after: &mut After, d: &Delivery, now: DateTime<Utc>) {
    batch
        .put(Table::Deliveries, delivery_key(d.event, d.endpoint), d)
        .put_raw(
            Table::DeliveryQueue,
            queue_key(d.endpoint, now, d.event),
            Vec::new(),
        );
    after.notes.push((d.endpoint, micros(now)));
}

/// A turn's writes, one batch per merchant: each names its merchant
/// ([`Batch::owned_by`]), so on a cluster each commits under its own
/// shard's lease. They are submitted together (one group commit).
#[derive(Default)]
struct Batches(BTreeMap<Uuid, Batch>);

impl Batches {
    /// The batch of `merchant`'s rows.
    fn of(&mut self, merchant: Uuid) -> &mut Batch {
        self.0.entry(merchant).or_insert_with(|| {
            let mut b = Batch::new();
            b.owned_by(merchant.as_bytes());
            b
        })
    }
}

/// What to do once a batch has committed.
#[derive(Default)]
struct After {
    notes: Vec<(Uuid, u64)>,
    /// Events to announce on the live stream, at their stream positions:
    /// by id, with the event itself when someone listened as it was read
    /// (see [`Hub::announce_all`]).
    announce: Vec<(u64, Uuid, Option<Event>)>,
    released: Vec<Uuid>,
    delivered: u64,
    failed_attempts: u64,
    dropped: u64,
    touched_scopes: Vec<(Uuid, Mode)>,
}

struct Supervisor {
    hub: Arc<Hub>,
    rx: mpsc::UnboundedReceiver<Msg>,
    outbox: Arc<Notify>,
    dispatchers: Vec<Addr<Dispatcher>>,
    _arbiters: Vec<Arbiter>,
    next_dispatcher: usize,
    sched: Sched,
    claims: HashMap<(Uuid, Uuid), Claim>,
    /// Non-deleted endpoints per scope (merchant, mode), newest first.
    scopes: HashMap<(Uuid, Mode), Arc<Vec<WebhookEndpoint>>>,
    waiters: Vec<oneshot::Sender<()>>,
}

/// Command answers, sent after the turn's commit.
type Replies = Vec<(
    oneshot::Sender<DomainResult<Answer<WebhookView>>>,
    DomainResult<Answer<WebhookView>>,
)>;

impl Supervisor {
    async fn run(mut self) {
        if let Err(e) = self.rebuild() {
            tracing::error!(error = %e, "webhook queue scan failed");
        }
        let mut outbox_dirty = true;
        loop {
            let mut msgs = Vec::new();
            if !outbox_dirty && self.waiters.is_empty() && !self.due_now() {
                let sleep = self.idle_sleep();
                tokio::select! {
                    m = self.rx.recv() => match m {
                        Some(m) => msgs.push(m),
                        None => return,
                    },
                    _ = self.outbox.notified() => outbox_dirty = true,
                    _ = tokio::time::sleep(sleep) => {}
                }
            }
            while msgs.len() < MAILBOX_SLICE {
                match self.rx.try_recv() {
                    Ok(m) => msgs.push(m),
                    Err(_) => break,
                }
            }
            match self.turn(msgs, outbox_dirty).await {
                Ok(more) => outbox_dirty = more,
                Err(e) => {
                    tracing::error!(error = %e, "webhook supervisor turn failed; retrying");
                    outbox_dirty = true;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    // What this turn did in memory may not be on disk:
                    // start over from the store. Attempts still in flight
                    // report to no claim and are made again (at least once).
                    self.claims.clear();
                    self.sched = Sched::default();
                    self.publish_in_flight();
                    if let Err(e) = self.rebuild() {
                        tracing::error!(error = %e, "webhook queue scan failed");
                    }
                }
            }
        }
    }

    /// Tells operators how many attempts are in flight, in all and per
    /// endpoint (`/admin/v1/actors`).
    fn publish_in_flight(&self) {
        let stats = &self.hub.stats;
        stats.in_flight.store(self.sched.total, Ordering::Relaxed);
        *stats.endpoints_in_flight.lock() = self.sched.in_flight.clone();
    }

    /// Whether a pass could dispatch something right now.
    fn due_now(&self) -> bool {
        let now = micros(self.hub.env.clock.now());
        self.sched.total < IN_FLIGHT_MAX && self.sched.wake.first().is_some_and(|(d, _)| *d <= now)
    }

    fn idle_sleep(&self) -> Duration {
        if self.hub.env.clock.is_manual() {
            return Duration::from_secs(3600);
        }
        let now = micros(self.hub.env.clock.now());
        match self.sched.wake.first() {
            Some((d, _)) => Duration::from_micros(d.saturating_sub(now)).min(IDLE_WAKE),
            None => IDLE_WAKE,
        }
    }

    /// One turn: outcomes and the outbox in one batch, then commands, then
    /// a dispatch pass. Returns whether outbox rows are left.
    async fn turn(&mut self, msgs: Vec<Msg>, outbox_dirty: bool) -> DomainResult<bool> {
        let mut outcomes = Vec::new();
        let mut commands = Vec::new();
        let mut outbox_dirty = outbox_dirty;
        let mut reset = false;
        for m in msgs {
            match m {
                Msg::Reset => reset = true,
                Msg::Outcome(o) => outcomes.push(o),
                Msg::Command(c, reply) => commands.push((c, reply)),
                Msg::Pump(w) => {
                    self.waiters.push(w);
                    outbox_dirty = true;
                }
            }
        }
        if reset {
            // Attempts in flight report to no claim and are made again by
            // whichever node owns their merchant (at least once).
            self.claims.clear();
            self.sched = Sched::default();
            self.scopes.clear();
            self.publish_in_flight();
            self.rebuild()?;
            outbox_dirty = true;
        }
        let mut batches = Batches::default();
        let mut after = After::default();
        let read = self.hub.env.store.read()?;
        self.record_outcomes(&read, &mut batches, outcomes, &mut after)?;
        let more = if outbox_dirty {
            self.fan_out(&read, &mut batches, &mut after)?
        } else {
            false
        };
        drop(read);
        self.commit_all(batches.0.into_values(), after).await?;

        let mut replies: Replies = Vec::new();
        for (cmd, reply) in commands {
            let r = self.command(cmd).await;
            replies.push((reply, r));
        }
        for (reply, r) in replies {
            let _ = reply.send(r);
        }

        self.pass().await?;
        if !more {
            for w in self.waiters.drain(..) {
                let _ = w.send(());
            }
        }
        Ok(more)
    }

    async fn commit(&mut self, batch: Batch, after: After) -> DomainResult<()> {
        self.commit_all([batch], after).await
    }

    /// Commits `batches` (submitted together, so they share a commit),
    /// then does `after` once all of them are on disk.
    async fn commit_all(
        &mut self,
        batches: impl IntoIterator<Item = Batch>,
        after: After,
    ) -> DomainResult<()> {
        let acks: Vec<_> = batches
            .into_iter()
            .filter(|b| !b.is_empty())
            .map(|b| self.hub.env.writer.submit(b))
            .collect();
        for ack in acks {
            match ack.await {
                Ok(Ok(())) => {}
                // Webhook batches carry no preconditions.
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => return Err(kobo_storage::CommitError::Closed.into()),
            }
        }
        for scope in after.touched_scopes {
            self.scopes.remove(&scope);
        }
        for ep in after.released {
            self.sched.released(ep);
        }
        for (ep, due) in after.notes {
            self.sched.note(ep, due);
        }
        self.publish_in_flight();
        let stats = &self.hub.stats;
        stats
            .delivered
            .fetch_add(after.delivered, Ordering::Relaxed);
        stats
            .failed_attempts
            .fetch_add(after.failed_attempts, Ordering::Relaxed);
        stats.dropped.fetch_add(after.dropped, Ordering::Relaxed);
        self.hub.announce_all(after.announce);
        Ok(())
    }

    /// Rebuilds the schedule from the durable queue (start-up): the first
    /// row of each endpoint's range.
    fn rebuild(&mut self) -> DomainResult<()> {
        let read = self.hub.env.store.read()?;
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            let mut first = None;
            read.scan_prefix(Table::DeliveryQueue, &[], cursor.as_deref(), |k, _| {
                first = parse_queue_key(k);
                Ok(false)
            })?;
            let Some((endpoint, due, _)) = first else {
                break;
            };
            // Another node's merchant's deliveries stay queued for it.
            let owned =
                Self::endpoint(&read, endpoint)?.is_none_or(|e| self.hub.env.owns(&e.merchant));
            if owned {
                self.sched.note(endpoint, due);
            }
            let end = prefix_end(endpoint.as_bytes());
            if end.is_empty() {
                break;
            }
            cursor = Some(end);
        }
        Ok(())
    }

    fn endpoint(read: &ReadTxn, id: Uuid) -> DomainResult<Option<WebhookEndpoint>> {
        Ok(read.get_decoded(Table::WebhookEndpoints, id.as_bytes())?)
    }

    /// The scope's non-deleted endpoints, newest first (cached; the cache
    /// is dropped for a scope whenever one of its endpoints changes).
    fn scope(
        &mut self,
        read: &ReadTxn,
        merchant: Uuid,
        mode: Mode,
    ) -> DomainResult<Arc<Vec<WebhookEndpoint>>> {
        if let Some(s) = self.scopes.get(&(merchant, mode)) {
            return Ok(s.clone());
        }
        let list = Arc::new(super::query::scope_endpoints(read, merchant, mode)?);
        if self.scopes.len() >= SCOPE_CACHE_MAX {
            self.scopes.clear();
        }
        self.scopes.insert((merchant, mode), list.clone());
        Ok(list)
    }
}

/// The due time of a queue row, as a time.
pub fn due_time(due_micros: u64) -> DateTime<Utc> {
    from_micros(due_micros as i64)
}

/// The scope prefix of a merchant's endpoints (used by queries).
pub fn scope_prefix(merchant: Uuid, mode: Mode) -> KeyBuf {
    scope_key(merchant, mode)
}
