//! The group-commit writer.
//!
//! One dedicated thread owns every write transaction. Callers submit a
//! [`Batch`] and receive an acknowledgement after the transaction holding it is
//! durably committed. The thread takes the first queued batch, then every batch
//! already queued behind it (up to [`MAX_BATCHES_PER_COMMIT`]), applies them in
//! submission order inside one redb write transaction and commits once: the
//! fsync is shared, which is where throughput comes from. (The writes to
//! the tables with a redb tree of their own are applied in key order just
//! before the commit, with the same effect: see [`crate::trees`].)
//!
//! A batch may carry preconditions ([`Precondition`]: "this key must be
//! absent"). They are checked against the transaction as it stands (earlier
//! batches included) before any of the batch's operations apply; a batch
//! whose precondition fails is skipped whole and its caller is told
//! [`CommitError::Conflict`].
//!
//! The thread is the same for both engines; only the transaction differs
//! (`apply_and_commit` here for redb, [`crate::pg`]'s group commit for
//! PostgreSQL).
//!
//! A batch may also add to counters ([`Batch::add`]): a row of big-endian
//! `i64`s to which the writer adds the batch's deltas inside the write
//! transaction, so batches from many callers move one counter exactly,
//! without any caller reading it first.
//!
//! The writer thread is the one core the whole write path waits on, so
//! everything that can be done before a batch reaches it is: the physical
//! keys (table id, then key) are built when an operation is added, the set
//! of tables a batch puts into is noted then too (for the watchers), and a
//! committed batch goes back to its caller with the acknowledgement, so its
//! memory is freed on the caller's thread, not the writer's.
//!
//! A failed commit stops the process (fail-stop): after a restart memory is
//! rebuilt from disk, so no caller is ever told "done" for a change that is not
//! on disk, and no in-memory state runs ahead of it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts};
use redb::{Database, Durability, ReadableTable};

use crate::Engine;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, Notify};

use crate::codec::{encode, encode_compact, Compact};
use crate::fence::{shard_of, Fence, Ownership};
use crate::key_index::KeyIndex;
use crate::tables::Table;
use crate::trees::WriteTrees;

/// The most batches one commit takes.
pub const MAX_BATCHES_PER_COMMIT: usize = 4096;

/// One write. Keys are physical: the table's id byte, then the key
/// ([`Table::physical`]).
#[derive(Debug, Clone)]
pub enum Op {
    Put(Table, Vec<u8>, Vec<u8>),
    Delete(Table, Vec<u8>),
    /// Add each delta to the matching `i64` of the row (a missing row or
    /// a missing position reads 0); saturating, never wrapping.
    Add(Table, Vec<u8>, Vec<i64>),
}

/// A condition the store checks, inside the transaction that would commit
/// the batch, before any of the batch's operations apply; a batch whose
/// condition fails is refused whole and alone (the rest of its group
/// commits). The engines check them against the transaction as it stands,
/// earlier batches of the group included.
///
/// A lease's fencing token is checked the same way, in the same
/// transaction, but travels apart ([`Batch::fence`]): the writer stamps it,
/// not the batch's author (docs/ARCHITECTURE.md, "The storage seam").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    /// The physical key must be absent.
    Absent(Table, Vec<u8>),
}

/// A set of writes that commit together or not at all.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    ops: Vec<Op>,
    preconditions: Vec<Precondition>,
    seq_high_water: u64,
    /// The tables this batch puts into, one bit per table id.
    puts: [u64; 4],
    /// The shard whose merchant's rows the batch writes
    /// ([`Batch::owned_by`]); `None` for rows of no merchant.
    shard: Option<u16>,
    /// The lease token the writer stamped on it (cluster mode only).
    fence: Option<Fence>,
    /// The lease under which the memory this batch was built from was read
    /// ([`Batch::read_under`]).
    read_under: Option<ReadLease>,
}

/// The lease a node held on a merchant's shard when it read the
/// merchant's rows into memory ([`Writer::lease_of`]). A batch built from
/// that memory and marked with it ([`Batch::read_under`]) commits only
/// while the node still holds that same lease: memory read before a lease
/// lapsed, or while another node held the shard, is never written under a
/// later lease, even one this node took back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadLease {
    /// No ownership: one process owns every merchant.
    Unfenced,
    /// This node held the shard's lease with this token.
    Held(i64),
    /// This node did not hold the shard's lease.
    NotHeld,
}

impl Batch {
    pub fn new() -> Self {
        Batch::default()
    }
    pub fn put_raw(&mut self, table: Table, key: Vec<u8>, value: Vec<u8>) -> &mut Self {
        let id = table.id() as usize;
        self.puts[id / 64] |= 1 << (id % 64);
        self.ops.push(Op::Put(table, table.physical(&key), value));
        self
    }
    /// Whether the batch puts a key into `table`.
    pub fn puts_into(&self, table: Table) -> bool {
        let id = table.id() as usize;
        self.puts[id / 64] & (1 << (id % 64)) != 0
    }
    pub fn put<T: Serialize + ?Sized>(
        &mut self,
        table: Table,
        key: Vec<u8>,
        value: &T,
    ) -> &mut Self {
        self.put_raw(table, key, encode(value))
    }
    /// `value` in the compact format ([`crate::codec::encode_compact`]).
    pub fn put_compact<T: Compact>(&mut self, table: Table, key: Vec<u8>, value: &T) -> &mut Self {
        self.put_raw(table, key, encode_compact(value))
    }
    pub fn delete(&mut self, table: Table, key: Vec<u8>) -> &mut Self {
        self.ops.push(Op::Delete(table, table.physical(&key)));
        self
    }
    /// Adds `deltas` to the counters row `key` (see [`Op::Add`]), applied
    /// by the writer in commit order: concurrent batches never lose an
    /// update. Read it with [`counters`].
    pub fn add(&mut self, table: Table, key: Vec<u8>, deltas: &[i64]) -> &mut Self {
        self.ops
            .push(Op::Add(table, table.physical(&key), deltas.to_vec()));
        self
    }
    /// The whole batch is skipped (and its caller told `Conflict`) when `key`
    /// exists in `table` at the moment the batch would apply.
    pub fn require_absent(&mut self, table: Table, key: Vec<u8>) -> &mut Self {
        self.preconditions
            .push(Precondition::Absent(table, table.physical(&key)));
        self
    }
    /// Records that this batch used sequence numbers up to `seq`; the writer
    /// persists the highest one so sequences never repeat after a restart.
    pub fn note_seq(&mut self, seq: u64) -> &mut Self {
        self.seq_high_water = self.seq_high_water.max(seq);
        self
    }
    /// Marks the batch as writing the rows of merchant `owner`: in cluster
    /// mode it commits only under this node's lease on the merchant's shard
    /// (see [`crate::fence`]). A batch writes one merchant's rows, or rows
    /// of no merchant at all.
    pub fn owned_by(&mut self, owner: &[u8; 16]) -> &mut Self {
        let shard = shard_of(owner);
        debug_assert!(
            self.shard.is_none_or(|s| s == shard),
            "a batch writes one merchant's rows"
        );
        self.shard = Some(shard);
        self
    }
    /// Marks the batch as built from memory read under `lease` (see
    /// [`ReadLease`]); in cluster mode it is refused with
    /// [`CommitError::NotOwner`] unless this node still holds that lease.
    pub fn read_under(&mut self, lease: ReadLease) -> &mut Self {
        self.read_under = Some(lease);
        self
    }
    /// The shard named by [`Batch::owned_by`].
    pub fn shard(&self) -> Option<u16> {
        self.shard
    }
    /// The fence the writer stamped on the batch, checked by the engine in
    /// the committing transaction.
    pub fn fence(&self) -> Option<Fence> {
        self.fence
    }
    /// Stamps a fence as the writer would (the engines' tests, which
    /// commit groups without a writer).
    #[cfg(test)]
    pub(crate) fn set_fence(&mut self, fence: Fence) -> &mut Self {
        self.shard = Some(fence.shard);
        self.fence = Some(fence);
        self
    }
    pub fn append(&mut self, mut other: Batch) -> &mut Self {
        if let Some(shard) = other.shard {
            debug_assert!(
                self.shard.is_none_or(|s| s == shard),
                "a batch writes one merchant's rows"
            );
            self.shard = Some(shard);
        }
        self.ops.append(&mut other.ops);
        self.preconditions.append(&mut other.preconditions);
        self.seq_high_water = self.seq_high_water.max(other.seq_high_water);
        for (a, b) in self.puts.iter_mut().zip(other.puts) {
            *a |= b;
        }
        self
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
    /// The non-global tables ([`Table::is_global`]) the batch writes or
    /// checks, each once: what it must name an owner for.
    pub fn merchant_tables(&self) -> Vec<Table> {
        let mut tables: Vec<Table> = Vec::new();
        let ops = self.ops.iter().map(|op| match op {
            Op::Put(t, ..) | Op::Delete(t, _) | Op::Add(t, ..) => *t,
        });
        let pre = self.preconditions.iter().map(|p| match p {
            Precondition::Absent(t, _) => *t,
        });
        for t in ops.chain(pre) {
            if !t.is_global() && !tables.contains(&t) {
                tables.push(t);
            }
        }
        tables
    }
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }
    pub fn preconditions(&self) -> &[Precondition] {
        &self.preconditions
    }
    /// The highest sequence number the batch noted ([`Batch::note_seq`]).
    pub fn seq_high_water(&self) -> u64 {
        self.seq_high_water
    }
}

/// The meta key under which the highest used sequence number is kept.
pub const META_SEQ_HIGH_WATER: &[u8] = b"seq_high_water";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    #[error("a key that had to be absent exists in table {table}")]
    Conflict { table: &'static str, key: Vec<u8> },
    #[error("the store writer has stopped")]
    Closed,
    /// The batch writes rows of a shard this node holds no current lease
    /// on: refused by the writer (no lease here) or by the database (the
    /// token went stale). Nothing of it was written; a retry reaches the
    /// owner.
    #[error("this node does not own shard {shard}")]
    NotOwner { shard: u16 },
}

/// The writer's instruments, registered by the binary.
#[derive(Clone)]
pub struct WriterMetrics {
    pub commits: IntCounter,
    pub batches: IntCounter,
    pub batches_per_commit: Histogram,
    pub commit_seconds: Histogram,
    pub queue_depth: IntGauge,
    /// Batches refused for want of the merchant's shard (cluster mode),
    /// `by`: `node` (this node holds no lease on it) or `database` (the
    /// lease's token had gone stale when the commit reached the database).
    pub fenced: IntCounterVec,
    /// The durations of the latest commits, for percentiles over a short
    /// window (the health sampler takes them every second).
    pub recent: Arc<RecentCommits>,
}

/// The durations (microseconds) of the commits since the last
/// [`RecentCommits::take`], keeping the latest [`RecentCommits::CAPACITY`]
/// (older ones are overwritten): bounded memory at any commit rate.
#[derive(Default)]
pub struct RecentCommits {
    inner: Mutex<(Vec<u32>, usize)>,
}

impl RecentCommits {
    pub const CAPACITY: usize = 4096;

    pub fn record(&self, micros: u32) {
        let mut g = self.inner.lock().expect("recent commits");
        let (samples, next) = &mut *g;
        if samples.len() < Self::CAPACITY {
            samples.push(micros);
        } else {
            samples[*next] = micros;
        }
        *next = (*next + 1) % Self::CAPACITY;
    }

    /// The durations recorded since the last take (at most `CAPACITY`).
    pub fn take(&self) -> Vec<u32> {
        let mut g = self.inner.lock().expect("recent commits");
        g.1 = 0;
        std::mem::take(&mut g.0)
    }
}

impl WriterMetrics {
    pub fn new() -> Self {
        WriterMetrics {
            commits: IntCounter::new("kobo_store_commits_total", "Durable store commits").unwrap(),
            batches: IntCounter::new(
                "kobo_store_batches_total",
                "Batches committed (one per acknowledged change)",
            )
            .unwrap(),
            batches_per_commit: Histogram::with_opts(
                HistogramOpts::new(
                    "kobo_store_batches_per_commit",
                    "How many batches shared one commit (group commit)",
                )
                .buckets(vec![
                    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0,
                ]),
            )
            .unwrap(),
            commit_seconds: Histogram::with_opts(
                HistogramOpts::new("kobo_store_commit_seconds", "Time to apply and commit")
                    .buckets(vec![
                        0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5,
                    ]),
            )
            .unwrap(),
            queue_depth: IntGauge::new("kobo_store_queue_depth", "Batches waiting for the writer")
                .unwrap(),
            fenced: IntCounterVec::new(
                Opts::new(
                    "kobo_cluster_batches_fenced_total",
                    "Batches refused because this node did not hold the merchant's shard",
                ),
                &["by"],
            )
            .unwrap(),
            recent: Arc::default(),
        }
    }
    pub fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.commits.clone()),
            Box::new(self.batches.clone()),
            Box::new(self.batches_per_commit.clone()),
            Box::new(self.commit_seconds.clone()),
            Box::new(self.queue_depth.clone()),
            Box::new(self.fenced.clone()),
        ]
    }
}

impl Default for WriterMetrics {
    fn default() -> Self {
        Self::new()
    }
}

pub(crate) struct Submission {
    pub(crate) batch: Batch,
    /// The outcome, and the batch handed back (freed by its caller).
    ack: oneshot::Sender<(Result<(), CommitError>, Batch)>,
}

/// The acknowledgement of a submitted batch: resolves after the commit that
/// holds it (an error when the writer stopped). The batch comes back with
/// it and is dropped here, on the caller's thread.
pub struct Ack(oneshot::Receiver<(Result<(), CommitError>, Batch)>);

impl Future for Ack {
    type Output = Result<Result<(), CommitError>, oneshot::error::RecvError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.map(|(outcome, _batch)| outcome))
    }
}

/// Tables whose writes wake someone: (table, who).
type Watches = Arc<Mutex<Vec<(Table, Arc<Notify>)>>>;

/// Handle to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::UnboundedSender<Submission>,
    depth: Arc<AtomicI64>,
    metrics: WriterMetrics,
    commits_done: Arc<AtomicU64>,
    watches: Watches,
    ownership: Arc<std::sync::OnceLock<Arc<dyn Ownership>>>,
}

impl Writer {
    /// Makes every batch that names its merchant ([`Batch::owned_by`])
    /// commit only under this node's lease on the merchant's shard (cluster
    /// mode; see [`crate::fence`]). Set once, before the first such batch.
    /// The PostgreSQL engine checks the stamped fences in the committing
    /// transaction; the embedded redb engine ignores them (one process owns
    /// a redb file, so there is nobody to fence off: a cluster on redb is a
    /// misconfiguration the server refuses at start).
    pub fn set_ownership(&self, ownership: Arc<dyn Ownership>) {
        if self.ownership.set(ownership).is_err() {
            panic!("the writer's ownership is set once");
        }
    }

    /// Whether batches of `shard` may commit here now: always without an
    /// ownership (one process), else while this node holds its lease.
    pub fn holds(&self, shard: u16) -> bool {
        self.ownership
            .get()
            .is_none_or(|o| o.token(shard).is_some())
    }

    /// The lease this node holds now on the shard of merchant `owner`, to
    /// note before reading the merchant's rows into memory (see
    /// [`ReadLease`]).
    pub fn lease_of(&self, owner: &[u8; 16]) -> ReadLease {
        match self.ownership.get() {
            None => ReadLease::Unfenced,
            Some(o) => o
                .token(shard_of(owner))
                .map_or(ReadLease::NotHeld, ReadLease::Held),
        }
    }

    /// Queues a batch; the receiver resolves after the commit that holds it.
    /// Batches submitted from one caller commit in submission order.
    pub fn submit(&self, mut batch: Batch) -> Ack {
        let (ack, rx) = oneshot::channel();
        if batch.shard.is_none() && self.ownership.get().is_some() {
            untagged(&batch);
        }
        if let (Some(shard), Some(ownership)) = (batch.shard, self.ownership.get()) {
            let read_under = batch.read_under;
            let token = ownership
                .token(shard)
                .filter(|t| read_under.is_none_or(|l| l == ReadLease::Held(*t)));
            match token {
                Some(token) => batch.fence = Some(Fence { shard, token }),
                None => {
                    self.metrics.fenced.with_label_values(&["node"]).inc();
                    let _ = ack.send((Err(CommitError::NotOwner { shard }), batch));
                    return Ack(rx);
                }
            }
        }
        self.depth.fetch_add(1, Ordering::Relaxed);
        self.metrics.queue_depth.inc();
        if self.tx.send(Submission { batch, ack }).is_err() {
            // Receiver gone: the dropped ack makes the caller see Closed.
            self.depth.fetch_sub(1, Ordering::Relaxed);
            self.metrics.queue_depth.dec();
        }
        Ack(rx)
    }

    /// Submits and waits for the durable commit.
    pub async fn commit(&self, batch: Batch) -> Result<(), CommitError> {
        match self.submit(batch).await {
            Ok(r) => r,
            Err(_) => Err(CommitError::Closed),
        }
    }

    pub fn queue_depth(&self) -> i64 {
        self.depth.load(Ordering::Relaxed)
    }

    pub fn commits(&self) -> u64 {
        self.commits_done.load(Ordering::Relaxed)
    }

    /// A notification raised after every commit that put a key into
    /// `table` (a permit is kept when nobody waits, so no wake-up is lost).
    /// Lets a consumer of an outbox table sleep until there is work.
    pub fn watch(&self, table: Table) -> Arc<Notify> {
        let notify = Arc::new(Notify::new());
        self.watches
            .lock()
            .expect("watch list")
            .push((table, notify.clone()));
        notify
    }
}

/// An untagged batch under an ownership: a bug when it touches a
/// merchant's rows (it would commit unfenced, from any node). Logged in
/// every build, fatal to the caller in debug builds.
fn untagged(batch: &Batch) {
    let tables = batch.merchant_tables();
    if tables.is_empty() {
        return;
    }
    let names: Vec<&str> = tables.iter().map(|t| t.name()).collect();
    tracing::error!(
        tables = ?names,
        "untagged batch writes merchants' rows (Batch::owned_by missing)"
    );
    debug_assert!(
        false,
        "untagged batch writes merchants' rows (Batch::owned_by missing): {names:?}"
    );
}

pub(crate) fn start(engine: Engine, metrics: WriterMetrics) -> Writer {
    let (tx, rx) = mpsc::unbounded_channel();
    let depth = Arc::new(AtomicI64::new(0));
    let commits_done = Arc::new(AtomicU64::new(0));
    let watches: Watches = Arc::default();
    let writer = Writer {
        tx,
        depth: depth.clone(),
        metrics: metrics.clone(),
        commits_done: commits_done.clone(),
        watches: watches.clone(),
        ownership: Arc::default(),
    };
    std::thread::Builder::new()
        .name("kobo-store-writer".into())
        .spawn(move || run(engine, rx, depth, metrics, commits_done, watches))
        .expect("spawn the store writer thread");
    writer
}

fn run(
    engine: Engine,
    mut rx: mpsc::UnboundedReceiver<Submission>,
    depth: Arc<AtomicI64>,
    metrics: WriterMetrics,
    commits_done: Arc<AtomicU64>,
    watches: Watches,
) {
    let pg_writer = match &engine {
        Engine::Postgres(pg) => Some(pg.writer()),
        Engine::Redb { .. } => None,
    };
    let mut group: Vec<Submission> = Vec::with_capacity(256);
    while let Some(first) = rx.blocking_recv() {
        group.push(first);
        while group.len() < MAX_BATCHES_PER_COMMIT {
            match rx.try_recv() {
                Ok(s) => group.push(s),
                Err(_) => break,
            }
        }
        let taken = group.len() as i64;
        depth.fetch_sub(taken, Ordering::Relaxed);
        metrics.queue_depth.sub(taken);

        let started = Instant::now();
        let committed = match (&engine, &pg_writer) {
            (
                Engine::Redb {
                    db, keys, snapshot, ..
                },
                _,
            ) => {
                let committed = apply_and_commit(db, keys, &group);
                snapshot.release_unread(keys.commits());
                committed
            }
            (Engine::Postgres(_), Some(w)) => w.commit_group(&group),
            (Engine::Postgres(_), None) => unreachable!("a PostgreSQL store has its writer"),
        };
        let outcomes = match committed {
            Ok(outcomes) => outcomes,
            Err(e) => {
                // Fail-stop: nothing in this group was acknowledged, and no
                // later group may commit on top of an unknown state.
                tracing::error!(error = %e, "store commit failed; stopping the process");
                eprintln!("kobo: store commit failed: {e}; stopping");
                std::process::abort();
            }
        };
        let took = started.elapsed();
        metrics.commit_seconds.observe(took.as_secs_f64());
        metrics
            .recent
            .record(took.as_micros().min(u32::MAX as u128) as u32);
        metrics.commits.inc();
        metrics.batches.inc_by(group.len() as u64);
        metrics.batches_per_commit.observe(group.len() as f64);
        commits_done.fetch_add(1, Ordering::Relaxed);
        // A batch refused here was stamped with a token the database no
        // longer had (the node's own refusals never reach this thread).
        let stale = outcomes
            .iter()
            .filter(|o| matches!(o, Err(CommitError::NotOwner { .. })))
            .count();
        if stale > 0 {
            metrics
                .fenced
                .with_label_values(&["database"])
                .inc_by(stale as u64);
        }
        wake_watchers(&watches, &group, &outcomes);
        for (sub, outcome) in group.drain(..).zip(outcomes) {
            let _ = sub.ack.send((outcome, sub.batch));
        }
    }
}

/// Wakes the watchers of every table a committed batch put a key into.
fn wake_watchers(watches: &Watches, group: &[Submission], outcomes: &[Result<(), CommitError>]) {
    let watches = watches.lock().expect("watch list");
    if watches.is_empty() {
        return;
    }
    for (table, notify) in watches.iter() {
        let touched = group
            .iter()
            .zip(outcomes)
            .any(|(sub, outcome)| outcome.is_ok() && sub.batch.puts_into(*table));
        if touched {
            notify.notify_one();
        }
    }
}

fn apply_and_commit(
    db: &Database,
    keys: &Arc<KeyIndex>,
    group: &[Submission],
) -> Result<Vec<Result<(), CommitError>>, String> {
    let mut txn = db.begin_write().map_err(|e| e.to_string())?;
    txn.set_durability(Durability::Immediate)
        .map_err(|e| e.to_string())?;
    let mut outcomes = Vec::with_capacity(group.len());
    let published = {
        let mut trees = WriteTrees::new(&txn, keys.clone()).map_err(|e| e.to_string())?;
        trees.reserve(group.iter().map(|sub| sub.batch.ops.len()).sum());
        let mut high_water = 0u64;
        for sub in group {
            let outcome = apply_batch(&mut trees, &sub.batch)?;
            if outcome.is_ok() {
                high_water = high_water.max(sub.batch.seq_high_water);
            }
            outcomes.push(outcome);
        }
        raise_high_water(&mut trees, high_water)?;
        trees.finish()?;
        trees.published()?
    };
    txn.commit().map_err(|e| e.to_string())?;
    published.done();
    Ok(outcomes)
}

/// Applies one batch inside an open write transaction: its preconditions
/// against the transaction as it stands, then (when they hold) its
/// operations. The outer error is a storage failure (fail-stop); the inner
/// one a refused precondition (nothing of the batch applied).
pub(crate) fn apply_batch<'b>(
    trees: &mut WriteTrees<'_, 'b>,
    batch: &'b Batch,
) -> Result<Result<(), CommitError>, String> {
    for precondition in &batch.preconditions {
        let Precondition::Absent(table, key) = precondition;
        if trees.contains(*table, key)? {
            return Ok(Err(CommitError::Conflict {
                table: table.name(),
                key: key[1..].to_vec(),
            }));
        }
    }
    for op in &batch.ops {
        match op {
            Op::Put(table, k, v) => trees.put(*table, k, v)?,
            Op::Delete(table, k) => trees.delete(*table, k)?,
            Op::Add(table, key, deltas) => {
                let t = trees.of(*table)?;
                let mut values = t
                    .get(key.as_slice())
                    .map_err(|e| e.to_string())?
                    .map(|v| counters(v.value()))
                    .unwrap_or_default();
                if values.len() < deltas.len() {
                    values.resize(deltas.len(), 0);
                }
                for (v, d) in values.iter_mut().zip(deltas) {
                    *v = v.saturating_add(*d);
                }
                let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
                t.insert(key.as_slice(), bytes.as_slice())
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(Ok(()))
}

/// Raises the persisted sequence high-water mark to `high_water` (never
/// lowers it).
pub(crate) fn raise_high_water(trees: &mut WriteTrees, high_water: u64) -> Result<(), String> {
    if high_water == 0 {
        return Ok(());
    }
    let t = trees.of(Table::Meta)?;
    let key = Table::Meta.physical(META_SEQ_HIGH_WATER);
    let current = t
        .get(key.as_slice())
        .map_err(|e| e.to_string())?
        .map(|v| u64_from(v.value()))
        .unwrap_or(0);
    if high_water > current {
        t.insert(key.as_slice(), high_water.to_be_bytes().as_slice())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The `i64`s of a counters row written by [`Batch::add`].
pub fn counters(bytes: &[u8]) -> Vec<i64> {
    bytes
        .chunks_exact(8)
        .map(|c| i64::from_be_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

pub fn u64_from(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b[8 - n..].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    fn key(n: u64) -> Vec<u8> {
        n.to_be_bytes().to_vec()
    }

    #[test]
    fn a_batch_names_the_merchant_tables_it_touches_and_no_global_one() {
        let mut b = Batch::new();
        b.put_raw(Table::Meta, key(1), Vec::new())
            .delete(Table::Timers, key(2))
            .add(Table::PaymentLinkCounters, key(3), &[1])
            .require_absent(Table::PaymentIntentReferences, key(4))
            .put_raw(Table::Timers, key(5), Vec::new())
            .put_raw(Table::PaymentLinkSlugs, key(6), Vec::new());
        assert_eq!(
            b.merchant_tables(),
            vec![
                Table::Timers,
                Table::PaymentLinkCounters,
                Table::PaymentIntentReferences
            ]
        );
    }

    #[tokio::test]
    async fn under_an_ownership_tagged_and_global_batches_commit_with_their_fence() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let writer = store.start_writer(WriterMetrics::new());
        writer.set_ownership(Arc::new(crate::fence::OwnsEveryShard));
        let mut global = Batch::new();
        global.put_raw(Table::FxRates, key(1), b"r".to_vec());
        writer.commit(global).await.unwrap();
        let mut mine = Batch::new();
        mine.owned_by(&[7; 16])
            .put_raw(Table::PaymentIntents, key(2), b"pi".to_vec());
        writer.commit(mine).await.unwrap();
        let read = store.read().unwrap();
        assert!(read.get(Table::PaymentIntents, &key(2)).unwrap().is_some());
    }

    /// Holds every shard under the token it is set to (0: none).
    struct Token(std::sync::atomic::AtomicI64);

    impl crate::fence::Ownership for Token {
        fn token(&self, _shard: u16) -> Option<i64> {
            Some(self.0.load(Ordering::SeqCst)).filter(|t| *t > 0)
        }
    }

    #[tokio::test]
    async fn a_batch_read_under_one_lease_commits_only_under_that_lease() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let writer = store.start_writer(WriterMetrics::new());
        let lease = Arc::new(Token(AtomicI64::new(1)));
        writer.set_ownership(lease.clone());
        let owner = [7; 16];
        let read_under = writer.lease_of(&owner);
        assert_eq!(read_under, ReadLease::Held(1));
        let batch = |k: u64, under: ReadLease| {
            let mut b = Batch::new();
            b.owned_by(&owner).read_under(under).put_raw(
                Table::PaymentIntents,
                key(k),
                b"pi".to_vec(),
            );
            b
        };
        writer.commit(batch(1, read_under)).await.unwrap();
        // The lease lapsed and came back under a new token.
        lease.0.store(2, Ordering::SeqCst);
        let refused = writer.commit(batch(2, read_under)).await;
        assert!(
            matches!(refused, Err(CommitError::NotOwner { .. })),
            "{refused:?}"
        );
        let not_held = writer.commit(batch(3, ReadLease::NotHeld)).await;
        assert!(
            matches!(not_held, Err(CommitError::NotOwner { .. })),
            "{not_held:?}"
        );
        writer
            .commit(batch(4, writer.lease_of(&owner)))
            .await
            .unwrap();
        let read = store.read().unwrap();
        let present: Vec<bool> = (1..=4)
            .map(|k| read.get(Table::PaymentIntents, &key(k)).unwrap().is_some())
            .collect();
        assert_eq!(present, [true, false, false, true]);
    }

    #[cfg(debug_assertions)]
    #[tokio::test]
    #[should_panic(expected = "untagged batch writes merchants' rows")]
    async fn under_an_ownership_an_untagged_batch_of_a_merchants_rows_is_a_bug() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let writer = store.start_writer(WriterMetrics::new());
        writer.set_ownership(Arc::new(crate::fence::OwnsEveryShard));
        let mut b = Batch::new();
        b.put_raw(Table::Meta, key(1), Vec::new())
            .delete(Table::DeliveryQueue, key(2));
        let _ = writer.commit(b).await;
    }

    #[tokio::test]
    async fn without_an_ownership_untagged_batches_commit_as_before() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let writer = store.start_writer(WriterMetrics::new());
        let mut b = Batch::new();
        b.put_raw(Table::PaymentIntents, key(1), b"pi".to_vec());
        writer.commit(b).await.unwrap();
    }

    #[test]
    fn recent_commits_keep_the_latest_capacity_and_a_take_empties_them() {
        let r = RecentCommits::default();
        for n in 0..(RecentCommits::CAPACITY as u32 + 10) {
            r.record(n);
        }
        let mut got = r.take();
        assert_eq!(got.len(), RecentCommits::CAPACITY);
        got.sort_unstable();
        assert_eq!(got[0], 10, "the ten oldest were overwritten");
        assert_eq!(*got.last().unwrap(), RecentCommits::CAPACITY as u32 + 9);
        assert!(r.take().is_empty());
        r.record(7);
        assert_eq!(r.take(), vec![7]);
    }

    #[tokio::test]
    async fn every_commit_leaves_its_duration_in_the_recent_window() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let metrics = WriterMetrics::new();
        let writer = store.start_writer(metrics.clone());
        for n in 0..3 {
            let mut b = Batch::new();
            b.put_raw(Table::Meta, key(n), b"x".to_vec());
            writer.commit(b).await.unwrap();
        }
        assert_eq!(metrics.recent.take().len(), 3);
    }

    #[tokio::test]
    async fn committed_batches_are_readable_and_conflicts_skip_the_whole_batch() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let writer = store.start_writer(WriterMetrics::new());

        let mut a = Batch::new();
        a.require_absent(Table::Meta, key(1))
            .put_raw(Table::Meta, key(1), b"a".to_vec());
        writer.commit(a).await.unwrap();

        let mut b = Batch::new();
        b.require_absent(Table::Meta, key(1))
            .put_raw(Table::Meta, key(2), b"b".to_vec())
            .put_raw(Table::Meta, key(1), b"b".to_vec());
        assert!(matches!(
            writer.commit(b).await,
            Err(CommitError::Conflict { .. })
        ));

        let r = store.read().unwrap();
        assert_eq!(r.get(Table::Meta, &key(1)).unwrap(), Some(b"a".to_vec()));
        assert_eq!(r.get(Table::Meta, &key(2)).unwrap(), None);
    }

    #[tokio::test]
    async fn many_concurrent_batches_share_commits_and_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let writer = store.start_writer(WriterMetrics::new());
        let mut waits = Vec::new();
        for n in 0..500u64 {
            let mut b = Batch::new();
            b.put_raw(Table::Meta, key(1000 + n), vec![1]).note_seq(n);
            waits.push(writer.submit(b));
        }
        for w in waits {
            w.await.unwrap().unwrap();
        }
        assert!(writer.commits() <= 500);
        let r = store.read().unwrap();
        for n in 0..500u64 {
            assert!(r.get(Table::Meta, &key(1000 + n)).unwrap().is_some());
        }
        let hw = r.get(Table::Meta, META_SEQ_HIGH_WATER).unwrap().unwrap();
        assert_eq!(u64_from(&hw), 499);
    }
}
