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

use std::collections::HashMap;

use actix::prelude::*;
use uuid::Uuid;

use kobo_storage::{decode, Batch, Table};

use crate::error::{DomainError, DomainResult};
use crate::ids::Mode;
use crate::ledger::{
    balance_prefix, balance_store_key, post, BalanceKey, BalanceRow, EntrySpec, LedgerLine,
};
use crate::registry::{Activation, Registry, VirtualActor};
use crate::runtime::Kobo;

pub type LedgerKey = (Uuid, Mode);

pub struct LedgerActor {
    activation: Activation<LedgerKey>,
    balances: Option<HashMap<BalanceKey, i64>>,
    pending_commits: usize,
}

/// Post one entry together with the caller's `with` batch.
#[derive(Clone, Message)]
#[rtype(result = "DomainResult<Vec<LedgerLine>>")]
pub struct PostEntry {
    pub entry: EntrySpec,
    pub with: Batch,
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

impl Handler<PostEntry> for LedgerActor {
    type Result = ResponseActFuture<Self, DomainResult<Vec<LedgerLine>>>;

    fn handle(&mut self, msg: PostEntry, _ctx: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let kobo = self.activation.kobo.clone();
        let (merchant, mode) = self.activation.key;
        if self.balances.is_none() {
            match load_balances(&kobo, merchant, mode) {
                Ok(b) => self.balances = Some(b),
                Err(e) => return Box::pin(fut::ready(Err(e))),
            }
        }
        let balances = self.balances.as_mut().expect("loaded above");
        let now = kobo.clock.now();
        let seq = &kobo.seq;
        let posting = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            post(balances, merchant, mode, &msg.entry, || seq.next(), now)
        }));
        let posting = match posting {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => return Box::pin(fut::ready(Err(e))),
            Err(_) => {
                // Nothing was applied: the posting works on a copy.
                self.activation.record_restart();
                return Box::pin(fut::ready(Err(DomainError::internal(
                    "the ledger failed to post an entry",
                ))));
            }
        };
        let mut batch = msg.with;
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
        let ack = kobo.writer.submit(batch);
        let lines = posting.lines;
        Box::pin(ack.into_actor(self).map(move |outcome, act, _ctx| {
            act.pending_commits -= 1;
            act.activation.rest();
            match outcome {
                Ok(Ok(())) => Ok(lines),
                Ok(Err(conflict)) => {
                    // Ledger batches carry no preconditions; memory is
                    // now ahead of disk, which must never be: stop.
                    tracing::error!(%conflict, "ledger batch rejected; stopping");
                    std::process::abort();
                }
                Err(_) => Err(DomainError::internal("the store writer stopped")),
            }
        }))
    }
}
