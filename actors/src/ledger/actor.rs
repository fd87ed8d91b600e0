//! The ledger actor: one per merchant and mode, the only writer of that
//! merchant's balances.
//!
//! It pipelines: for each entry it checks and applies the posting in memory,
//! submits one batch (the caller's object snapshot, event and saved response,
//! plus the lines and balances) to the writer, and goes on to its next message
//! while the commit is pending; the caller is answered when the writer
//! confirms. The writer commits in submission order and stops the process if
//! a commit fails, so memory is never ahead of disk after a restart. The actor
//! does not passivate while commits are pending.
//!
//! It also releases scheduled money (settlement): see [`ReleaseScheduled`].

use std::collections::{HashMap, HashSet};

use actix::prelude::*;
use chrono::NaiveDate;
use tokio::sync::oneshot;
use uuid::Uuid;

use kobo_storage::{decode, Batch, CommitError, ReadLease, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::ids::{scope_key, Mode};
use crate::ledger::post::Posting;
use crate::ledger::release::ScheduledRelease;
use crate::ledger::{
    assert_loaded_balances, balance_prefix, balance_store_key, post_all, BalanceKey, BalanceRow,
    Bucket, EntrySpec, EntryType, LedgerLine, LineSpec, LOAD_CHECK_LINES,
};
use crate::registry::{Activation, Once, Registry, VirtualActor};
use std::sync::Arc;

pub type LedgerKey = (Uuid, Mode);

/// The merchants' ledgers: the handle a resource that moves money is given.
pub type Ledgers = Arc<Registry<LedgerActor>>;

pub struct LedgerActor {
    activation: Activation<Self>,
    balances: Option<HashMap<BalanceKey, i64>>,
    /// The merchant's shard lease this node held when `balances` was read:
    /// every batch built from this memory commits only under that same
    /// lease (cluster mode), so nothing read before a lease lapsed (or
    /// counted from a posting refused then) is ever written under a later
    /// one.
    read_under: ReadLease,
    pending_commits: usize,
    /// Scheduled-release rows this actor changed in batches not yet
    /// committed: the latest version (None: deleted) and how many pending
    /// batches touch it. The ledger is the only writer of these rows once
    /// they exist, so reading through this overlay is always current.
    overlay: HashMap<Vec<u8>, (Option<ScheduledRelease>, usize)>,
    /// Payout amounts counted per Lagos day (the daily limit), as loaded
    /// from the store and changed since.
    usage: HashMap<NaiveDate, i64>,
}

/// A change to the payout amount counted toward a day's limit.
#[derive(Debug, Clone, Copy)]
pub struct UsageChange {
    pub day: NaiveDate,
    pub delta: i64,
    /// Refuse (409 `payout_limit_exceeded`) if the day's total would pass it.
    pub daily_limit: Option<i64>,
}

/// Post one entry together with the caller's `with` batch.
#[derive(Clone, Message)]
#[rtype(result = "DomainResult<Vec<LedgerLine>>")]
pub struct PostEntry {
    pub entry: EntrySpec,
    /// The caller's batch (moved, not copied: see [`Once`]).
    pub with: Once<Batch>,
    pub usage: Option<UsageChange>,
}

pub fn usage_key(merchant: Uuid, mode: Mode, day: NaiveDate) -> Vec<u8> {
    scope_key(merchant, mode).str(&day.to_string()).build()
}

/// The payout amount counted toward `day`'s limit, as stored.
pub fn stored_usage(kobo: &Env, merchant: Uuid, mode: Mode, day: NaiveDate) -> DomainResult<i64> {
    Ok(kobo
        .store
        .read()?
        .get_decoded::<i64>(Table::PayoutUsage, &usage_key(merchant, mode, day))?
        .unwrap_or(0))
}

/// Release these scheduled releases (row keys of `scheduled_releases`) to
/// `available`. Rows already released are skipped. Answers how many
/// payments' money was released.
#[derive(Clone, Message)]
#[rtype(result = "DomainResult<usize>")]
pub struct ReleaseScheduled {
    pub keys: Vec<Vec<u8>>,
}

impl Actor for LedgerActor {
    type Context = Context<Self>;
}

impl VirtualActor for LedgerActor {
    type Key = LedgerKey;
    type Deps = Env;
    const KIND: &'static str = "ledger";
    fn activate(activation: Activation<Self>) -> Self {
        LedgerActor {
            activation,
            balances: None,
            read_under: ReadLease::NotHeld,
            pending_commits: 0,
            overlay: HashMap::new(),
            usage: HashMap::new(),
        }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
    fn can_passivate(&self) -> bool {
        self.pending_commits == 0
    }
}

/// Reads a merchant's balances in one mode.
pub fn load_balances(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
) -> DomainResult<HashMap<BalanceKey, i64>> {
    let read = kobo.store.read()?;
    let mut out = HashMap::new();
    read.scan_prefix(
        Table::Balances,
        &balance_prefix(merchant, mode, None).build(),
        None,
        |_, v| {
            let row: BalanceRow = decode(v)?;
            out.insert((row.brand, row.currency, row.bucket), row.amount);
            Ok(true)
        },
    )?;
    // The newest lines, until every bucket has been seen or the bound.
    let mut newest = Vec::new();
    let mut unseen: HashSet<BalanceKey> = out.keys().copied().collect();
    let mut complete = true;
    read.scan_prefix_rev(
        Table::LedgerLines,
        &scope_key(merchant, mode).build(),
        None,
        |_, v| {
            if newest.len() == LOAD_CHECK_LINES {
                complete = false;
                return Ok(false);
            }
            let line: LedgerLine = decode(v)?;
            unseen.remove(&(line.brand, line.currency, line.bucket));
            newest.push(line);
            Ok(!unseen.is_empty())
        },
    )?;
    // Stopping once every bucket is seen checks each bucket's newest line;
    // a bucket with no line at all is only known after the whole history.
    assert_loaded_balances(&out, &newest, complete);
    Ok(out)
}

type Submitted = (Vec<LedgerLine>, kobo_storage::writer::Ack);

impl LedgerActor {
    /// Checks and applies `entries` in memory, adds their lines and balances
    /// to `batch` and submits it. All entries or none.
    fn post_and_submit(
        &mut self,
        entries: &[EntrySpec],
        mut batch: Batch,
        usage: Option<UsageChange>,
    ) -> DomainResult<Submitted> {
        let kobo = self.activation.deps.clone();
        let (merchant, mode) = self.activation.key;
        batch.owned_by(merchant.as_bytes());
        self.ensure_loaded()?;
        batch.read_under(self.read_under);
        let usage_after = match usage {
            Some(u) => Some(self.usage_after(&u)?),
            None => None,
        };
        let balances = self.balances.as_ref().expect("loaded above");
        let now = kobo.clock.now();
        let seq = &kobo.seq;
        let posting = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            post_all(balances, merchant, mode, entries, || seq.next(), now)
        }));
        let posting = match posting {
            Ok(p) => p?,
            Err(panic) => {
                // A broken ledger invariant (an entry that does not balance,
                // a line that does not follow): nothing was applied, the
                // posting works on a copy.
                self.activation.record_restart(&*panic);
                return Err(DomainError::internal("the ledger failed to post an entry"));
            }
        };
        self.apply(&posting, usage_after, &mut batch);
        self.pending_commits += 1;
        Ok((posting.lines, kobo.writer.submit(batch)))
    }

    /// Loads the balances if they are not in memory. A broken invariant in
    /// the loaded balances panics: the ledger stays unloaded (each message
    /// retries the load) and says so.
    fn ensure_loaded(&mut self) -> DomainResult<()> {
        if self.balances.is_some() {
            return Ok(());
        }
        let (merchant, mode) = self.activation.key;
        let kobo = &self.activation.deps;
        // Noted before the read: what is read is at least as new as the
        // lease.
        let lease = kobo.writer.lease_of(merchant.as_bytes());
        let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            load_balances(kobo, merchant, mode)
        }));
        match loaded {
            Ok(balances) => {
                self.balances = Some(balances?);
                self.read_under = lease;
                Ok(())
            }
            Err(panic) => {
                self.activation.record_restart(&*panic);
                Err(DomainError::internal("the ledger failed to load"))
            }
        }
    }

    /// The day's payout total after `u`, checked against its limit (409
    /// `payout_limit_exceeded`); never below zero.
    fn usage_after(&self, u: &UsageChange) -> DomainResult<(NaiveDate, i64)> {
        let (merchant, mode) = self.activation.key;
        let current = match self.usage.get(&u.day) {
            Some(v) => *v,
            None => stored_usage(&self.activation.deps, merchant, mode, u.day)?,
        };
        let after = current.checked_add(u.delta).ok_or_else(|| {
            DomainError::state(
                ErrorCode::PayoutLimitExceeded,
                format!("this payout would take the day's payouts past {}", i64::MAX),
            )
        })?;
        if let Some(limit) = u.daily_limit {
            if u.delta > 0 && after > limit {
                return Err(DomainError::state(
                    ErrorCode::PayoutLimitExceeded,
                    format!(
                        "this payout would take the day's payouts to {after}, over the daily limit of {limit} ({current} used)"
                    ),
                ));
            }
        }
        Ok((u.day, after.max(0)))
    }

    /// Applies a checked posting (and the day's usage) in memory and adds
    /// its rows to `batch`.
    fn apply(&mut self, posting: &Posting, usage: Option<(NaiveDate, i64)>, batch: &mut Batch) {
        let (merchant, mode) = self.activation.key;
        let balances = self.balances.as_mut().expect("loaded");
        for line in &posting.lines {
            batch
                .put_compact(Table::LedgerLines, line.store_key(), line)
                .note_seq(line.id);
        }
        for (key, amount) in &posting.balances {
            balances.insert(*key, *amount);
            batch.put(
                Table::Balances,
                balance_store_key(merchant, mode, *key),
                &BalanceRow {
                    brand: key.0,
                    currency: key.1,
                    bucket: key.2,
                    amount: *amount,
                },
            );
        }
        if let Some((day, after)) = usage {
            self.usage.insert(day, after);
            batch.put(Table::PayoutUsage, usage_key(merchant, mode, day), &after);
        }
    }
}

impl LedgerActor {
    /// The payment's scheduled pending release, as this ledger sees it
    /// (its own uncommitted changes included), if any.
    fn pending_release(&self, payment: Uuid) -> DomainResult<Option<ScheduledRelease>> {
        let (merchant, mode) = self.activation.key;
        let kobo = &self.activation.deps;
        let key = kobo.store.read()?.get(
            Table::ReleasesByPayment,
            &crate::ledger::release::by_payment_key(merchant, mode, payment),
        )?;
        match key {
            Some(k) => self.current_row(kobo, &k),
            None => Ok(None),
        }
    }
}

/// The lines of a payment's money move (and whether they may take a
/// balance below zero), with the payment's pending release `row` after it
/// when the move changes it: a debit takes from `pending` first (what the
/// release still holds), a return goes back to `pending` while the release
/// is ahead.
fn payment_move(
    op: PaymentMoneyOp,
    row: Option<ScheduledRelease>,
    brand: Uuid,
    currency: crate::money::Currency,
) -> (Vec<LineSpec>, bool, Option<ScheduledRelease>) {
    let line = |bucket: Bucket, amount: i64| LineSpec {
        brand,
        currency,
        bucket,
        amount,
        gross: None,
        fee: None,
    };
    match op {
        PaymentMoneyOp::Debit {
            amount,
            into,
            allow_negative,
        } => {
            let from_pending = row.as_ref().map_or(0, |r| r.amount.min(amount));
            let from_available = amount - from_pending;
            // An emptied release stays scheduled: a won dispute or a failed
            // refund may give the money back before its date.
            let row = row.map(|mut r| {
                r.amount -= from_pending;
                r
            });
            let mut lines = Vec::new();
            if from_pending > 0 {
                lines.push(line(Bucket::Pending, -from_pending));
            }
            if from_available > 0 {
                lines.push(line(Bucket::Available, -from_available));
            }
            lines.push(line(into, amount));
            (lines, allow_negative, row)
        }
        PaymentMoneyOp::Return { amount, from } => {
            let to = if row.is_some() {
                Bucket::Pending
            } else {
                Bucket::Available
            };
            let row = row.map(|mut r| {
                r.amount += amount;
                r
            });
            (vec![line(from, -amount), line(to, amount)], false, row)
        }
        PaymentMoneyOp::Leave { amount, from } => (vec![line(from, -amount)], false, None),
    }
}

/// The end of a pipelined commit: ledger batches carry no preconditions, so
/// a refused batch would leave memory ahead of disk, which must never be.
/// The one refusal that is not a bug: in a cluster the merchant's shard
/// left this node (its lease lapsed or went to another node). Nothing of the
/// batch was written; the actor forgets what it held in memory, so its next
/// command reads the store again, and the caller is told to retry
/// (503 `merchant_moving`).
fn settle(
    act: &mut LedgerActor,
    outcome: Result<Result<(), CommitError>, oneshot::error::RecvError>,
) -> DomainResult<()> {
    match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(moved @ CommitError::NotOwner { .. })) => {
            act.balances = None;
            act.usage.clear();
            act.overlay.clear();
            Err(moved.into())
        }
        Ok(Err(conflict)) => {
            tracing::error!(%conflict, "ledger batch rejected; stopping");
            std::process::abort();
        }
        Err(_) => Err(DomainError::internal("the store writer stopped")),
    }
}

impl Handler<PostEntry> for LedgerActor {
    type Result = ResponseActFuture<Self, DomainResult<Vec<LedgerLine>>>;

    fn handle(&mut self, msg: PostEntry, _ctx: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let posted = msg.with.take().and_then(|with| {
            self.post_and_submit(std::slice::from_ref(&msg.entry), with, msg.usage)
        });
        let (lines, ack) = match posted {
            Ok(s) => s,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        Box::pin(ack.into_actor(self).map(move |outcome, act, _ctx| {
            act.pending_commits -= 1;
            act.activation.rest();
            settle(act, outcome).map(|()| lines)
        }))
    }
}

impl LedgerActor {
    /// The current version of a scheduled-release row.
    fn current_row(&self, kobo: &Env, key: &[u8]) -> DomainResult<Option<ScheduledRelease>> {
        if let Some((row, _)) = self.overlay.get(key) {
            return Ok(row.clone());
        }
        Ok(kobo
            .store
            .read()?
            .get_decoded::<ScheduledRelease>(Table::ScheduledReleases, key)?)
    }

    /// Records row changes made by a submitted batch.
    fn overlay_rows(&mut self, rows: &[(Vec<u8>, Option<ScheduledRelease>)]) {
        for (key, row) in rows {
            let e = self.overlay.entry(key.clone()).or_insert((None, 0));
            e.0 = row.clone();
            e.1 += 1;
        }
    }

    /// Forgets row changes once their batch committed.
    fn settle_rows(&mut self, keys: &[Vec<u8>]) {
        for key in keys {
            if let Some(e) = self.overlay.get_mut(key) {
                e.1 -= 1;
                if e.1 == 0 {
                    self.overlay.remove(key);
                }
            }
        }
    }
}

/// Runs after a pipelined commit: the actor's bookkeeping, then the answer.
fn finish_commit<T: 'static>(
    act: &mut LedgerActor,
    outcome: Result<Result<(), CommitError>, oneshot::error::RecvError>,
    rows: &[Vec<u8>],
    value: T,
) -> DomainResult<T> {
    act.pending_commits -= 1;
    act.settle_rows(rows);
    act.activation.rest();
    settle(act, outcome).map(|()| value)
}

impl Handler<ReleaseScheduled> for LedgerActor {
    type Result = ResponseActFuture<Self, DomainResult<usize>>;

    fn handle(&mut self, msg: ReleaseScheduled, _ctx: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let kobo = self.activation.deps.clone();
        let mut rows = Vec::new();
        for key in &msg.keys {
            match self.current_row(&kobo, key) {
                Ok(Some(row)) => rows.push(row),
                Ok(None) => {}
                Err(e) => return Box::pin(fut::ready(Err(e))),
            }
        }
        if rows.is_empty() {
            return Box::pin(fut::ready(Ok(0)));
        }
        let mut batch = Batch::new();
        let entries: Vec<EntrySpec> = rows
            .iter()
            .filter_map(|row| {
                row.unschedule(&mut batch);
                // A release emptied by refunds or disputes moves nothing.
                (row.amount > 0).then(|| release_entry(row, row.amount))
            })
            .collect();
        let (_, ack) = match self.post_and_submit(&entries, batch, None) {
            Ok(s) => s,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        let changes: Vec<(Vec<u8>, Option<ScheduledRelease>)> =
            rows.iter().map(|r| (r.key(), None)).collect();
        self.overlay_rows(&changes);
        let keys: Vec<Vec<u8>> = changes.into_iter().map(|(k, _)| k).collect();
        let released = rows
            .iter()
            .filter(|r| r.amount > 0)
            .map(|r| r.payment)
            .collect::<HashSet<_>>()
            .len();
        Box::pin(
            ack.into_actor(self)
                .map(move |outcome, act, _ctx| finish_commit(act, outcome, &keys, released)),
        )
    }
}

fn release_entry(row: &ScheduledRelease, amount: i64) -> EntrySpec {
    EntrySpec {
        entry_type: EntryType::Release,
        source: row.payment,
        description: format!(
            "release of payment {} from {}",
            row.payment,
            row.bucket.as_str()
        ),
        lines: vec![
            LineSpec {
                brand: row.brand,
                currency: row.currency,
                bucket: row.bucket,
                amount: -amount,
                gross: None,
                fee: None,
            },
            LineSpec {
                brand: row.brand,
                currency: row.currency,
                bucket: Bucket::Available,
                amount,
                gross: None,
                fee: None,
            },
        ],
        allow_negative: false,
    }
}

/// Money of one payment moving after capture (refunds, disputes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaymentMoneyOp {
    /// Take `amount` from the payment's money: from `pending` up to what of
    /// it is still waiting for release, the rest from `available`, into
    /// `into` (`refund_in_flight`, `dispute_hold`). The payment's scheduled
    /// release shrinks by what came from `pending`.
    Debit {
        amount: i64,
        into: Bucket,
        allow_negative: bool,
    },
    /// Give `amount` back from `from`: to `pending` (growing its scheduled
    /// release) while the payment's release is still ahead, else to
    /// `available`.
    Return { amount: i64, from: Bucket },
    /// `amount` leaves the business from `from` (a refund reached the
    /// customer, a dispute was lost).
    Leave { amount: i64, from: Bucket },
}

/// Move a payment's money after capture, with the caller's batch.
#[derive(Clone, Message)]
#[rtype(result = "DomainResult<Vec<LedgerLine>>")]
pub struct PaymentMoney {
    pub payment: Uuid,
    pub brand: Uuid,
    pub currency: crate::money::Currency,
    pub entry_type: EntryType,
    pub source: Uuid,
    pub description: String,
    pub op: PaymentMoneyOp,
    /// The caller's batch (moved, not copied: see [`Once`]).
    pub with: Once<Batch>,
}

impl Handler<PaymentMoney> for LedgerActor {
    type Result = ResponseActFuture<Self, DomainResult<Vec<LedgerLine>>>;

    /// The payment's pending release is read, then the entry and the
    /// release row change that must commit together are built and posted.
    fn handle(&mut self, msg: PaymentMoney, _ctx: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let (row, mut batch) = match self
            .pending_release(msg.payment)
            .and_then(|row| Ok((row, msg.with.take()?)))
        {
            Ok(r) => r,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        let mut changes = Vec::new();
        let (lines, allow_negative, row) = payment_move(msg.op, row, msg.brand, msg.currency);
        if let Some(r) = row {
            batch.put_compact(Table::ScheduledReleases, r.key(), &r);
            changes.push((r.key(), Some(r)));
        }
        let entry = EntrySpec {
            entry_type: msg.entry_type,
            source: msg.source,
            description: msg.description,
            lines,
            allow_negative,
        };
        let (lines, ack) = match self.post_and_submit(std::slice::from_ref(&entry), batch, None) {
            Ok(s) => s,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        self.overlay_rows(&changes);
        let keys: Vec<Vec<u8>> = changes.into_iter().map(|(k, _)| k).collect();
        Box::pin(
            ack.into_actor(self)
                .map(move |outcome, act, _ctx| finish_commit(act, outcome, &keys, lines)),
        )
    }
}
