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
use tokio::sync::oneshot;
use uuid::Uuid;

use kobo_storage::{decode, Batch, CommitError, Table};

use crate::error::{DomainError, DomainResult};
use crate::ids::Mode;
use crate::ledger::{
    balance_prefix, balance_store_key, post_all, BalanceKey, BalanceRow, Bucket, EntrySpec,
    EntryType, LedgerLine, LineSpec,
};
use crate::registry::{Activation, Registry, VirtualActor};
use crate::runtime::Kobo;
use crate::settlement::ScheduledRelease;

pub type LedgerKey = (Uuid, Mode);

pub struct LedgerActor {
    activation: Activation<LedgerKey>,
    balances: Option<HashMap<BalanceKey, i64>>,
    pending_commits: usize,
    /// Scheduled releases posted but not yet committed: a second request to
    /// release them (a timer and the test helper racing) must skip them.
    releasing: HashSet<Vec<u8>>,
}

/// Post one entry together with the caller's `with` batch.
#[derive(Clone, Message)]
#[rtype(result = "DomainResult<Vec<LedgerLine>>")]
pub struct PostEntry {
    pub entry: EntrySpec,
    pub with: Batch,
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
    const KIND: &'static str = "ledger";
    fn activate(activation: Activation<LedgerKey>) -> Self {
        LedgerActor {
            activation,
            balances: None,
            pending_commits: 0,
            releasing: HashSet::new(),
        }
    }
    fn activation(&self) -> &Activation<LedgerKey> {
        &self.activation
    }
    fn registry(kobo: &Kobo) -> &Registry<Self> {
        &kobo.ledgers
    }
    fn can_passivate(&self) -> bool {
        self.pending_commits == 0
    }
}

/// Reads a merchant's balances in one mode.
pub fn load_balances(
    kobo: &Kobo,
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
    Ok(out)
}

type Submitted = (Vec<LedgerLine>, oneshot::Receiver<Result<(), CommitError>>);

impl LedgerActor {
    /// Checks and applies `entries` in memory, adds their lines and balances
    /// to `batch` and submits it. All entries or none.
    fn post_and_submit(
        &mut self,
        entries: &[EntrySpec],
        mut batch: Batch,
    ) -> DomainResult<Submitted> {
        let kobo = self.activation.kobo.clone();
        let (merchant, mode) = self.activation.key;
        if self.balances.is_none() {
            self.balances = Some(load_balances(&kobo, merchant, mode)?);
        }
        let balances = self.balances.as_mut().expect("loaded above");
        let now = kobo.clock.now();
        let seq = &kobo.seq;
        let posting = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            post_all(balances, merchant, mode, entries, || seq.next(), now)
        }));
        let posting = match posting {
            Ok(p) => p?,
            Err(_) => {
                // Nothing was applied: the posting works on a copy.
                self.activation.record_restart();
                return Err(DomainError::internal("the ledger failed to post an entry"));
            }
        };
        for line in &posting.lines {
            batch
                .put(Table::LedgerLines, line.store_key(), line)
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
        self.pending_commits += 1;
        Ok((posting.lines, kobo.writer.submit(batch)))
    }
}

/// The end of a pipelined commit: ledger batches carry no preconditions, so
/// a refused batch would leave memory ahead of disk, which must never be.
fn settle(outcome: Result<Result<(), CommitError>, oneshot::error::RecvError>) -> DomainResult<()> {
    match outcome {
        Ok(Ok(())) => Ok(()),
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
        let (lines, ack) = match self.post_and_submit(std::slice::from_ref(&msg.entry), msg.with) {
            Ok(s) => s,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        Box::pin(ack.into_actor(self).map(move |outcome, act, _ctx| {
            act.pending_commits -= 1;
            act.activation.rest();
            settle(outcome).map(|()| lines)
        }))
    }
}

impl Handler<ReleaseScheduled> for LedgerActor {
    type Result = ResponseActFuture<Self, DomainResult<usize>>;

    fn handle(&mut self, msg: ReleaseScheduled, _ctx: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let kobo = self.activation.kobo.clone();
        let mut rows = Vec::new();
        let found: DomainResult<()> = (|| {
            let read = kobo.store.read()?;
            for key in &msg.keys {
                if self.releasing.contains(key) {
                    continue;
                }
                if let Some(row) =
                    read.get_decoded::<ScheduledRelease>(Table::ScheduledReleases, key)?
                {
                    rows.push(row);
                }
            }
            Ok(())
        })();
        if let Err(e) = found {
            return Box::pin(fut::ready(Err(e)));
        }
        if rows.is_empty() {
            return Box::pin(fut::ready(Ok(0)));
        }
        let mut batch = Batch::new();
        let entries: Vec<EntrySpec> = rows
            .iter()
            .map(|row| {
                row.unschedule(&mut batch);
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
                            amount: -row.amount,
                            gross: None,
                            fee: None,
                        },
                        LineSpec {
                            brand: row.brand,
                            currency: row.currency,
                            bucket: Bucket::Available,
                            amount: row.amount,
                            gross: None,
                            fee: None,
                        },
                    ],
                    allow_negative: false,
                }
            })
            .collect();
        let (_, ack) = match self.post_and_submit(&entries, batch) {
            Ok(s) => s,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        let keys: Vec<Vec<u8>> = rows.iter().map(|r| r.key()).collect();
        let released = rows.iter().map(|r| r.payment).collect::<HashSet<_>>().len();
        self.releasing.extend(keys.iter().cloned());
        Box::pin(ack.into_actor(self).map(move |outcome, act, _ctx| {
            act.pending_commits -= 1;
            for k in &keys {
                act.releasing.remove(k);
            }
            act.activation.rest();
            settle(outcome).map(|()| released)
        }))
    }
}
