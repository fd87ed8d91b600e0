//! Invoice numbers: gap-free per brand and mode, given without collisions
//! however many invoices of one brand finalize at once.
//!
//! Every finalize goes through its brand's lane ([`InvoiceNumbers::claim`]),
//! the only writer of that brand's `invoice_numbers` rows. The lane gathers
//! the finalizes that arrive while its previous commit is under way, gives
//! them the next numbers in arrival order, and commits all their batches
//! (each invoice, its number row, events and saved response) as ONE batch.
//! So a number is on disk exactly when its invoice's finalize is: a SIGKILL
//! before the commit loses every number of the round together with its
//! invoices (nothing was answered), after it keeps all of them; numbers
//! never skip. The next number is read from the stored rows (the highest
//! plus one) when the lane first runs, then counted in memory; a lane
//! that finds a number row taken (it never should: nobody else writes
//! them) reads the rows again.
//!
//! A round whose batch is refused (a precondition of one member, e.g. a
//! hosted page code taken) is retried one finalize at a time, each
//! rebuilt with the number then next: the others still commit, in order,
//! and the refused one alone gets the error.
//!
//! A round runs on its own task, so a caller that stops waiting never
//! stalls the lane.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use uuid::Uuid;

use kobo_storage::{Batch, CommitError, Table};

use super::service::next_number;
use super::InvoiceView;
use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::idempotency::Answer;
use crate::ids::Mode;

/// A brand and mode: one sequence of numbers.
pub type NumberKey = (Uuid, Mode);

/// Builds a finalize with number `n`: its batch (the number row claimed
/// absent inside) and the answer it gives once committed. Called again
/// with another number when its round is retried one by one.
pub type Build = Arc<dyn Fn(u64) -> DomainResult<(Batch, Answer<InvoiceView>)> + Send + Sync>;

type Reply = oneshot::Sender<DomainResult<Answer<InvoiceView>>>;

struct Pending {
    build: Build,
    reply: Reply,
}

#[derive(Default)]
struct Lane {
    /// The next number to give, once read from the store.
    next: Option<u64>,
    /// Forgotten while a round ran: read the store again after it.
    forgotten: bool,
    queue: Vec<Pending>,
    /// A round's task is running (it takes the queue when it is done).
    running: bool,
}

/// The lanes, one per brand and mode (held by the invoice books).
#[derive(Default)]
pub struct InvoiceNumbers {
    lanes: Mutex<HashMap<NumberKey, Lane>>,
}

impl InvoiceNumbers {
    /// Drops every cached next number (a cluster node lost a shard: another
    /// node may have numbered invoices meanwhile).
    pub fn forget(&self) {
        for lane in self.lanes.lock().values_mut() {
            lane.next = None;
            lane.forgotten = lane.running;
        }
    }

    /// Finalizes through `key`'s lane: answers once the finalize's batch
    /// committed with the next number of the brand, or the error of its
    /// build or commit (then no number was used).
    pub async fn claim(
        self: &Arc<Self>,
        env: &Arc<Env>,
        key: NumberKey,
        build: Build,
    ) -> DomainResult<Answer<InvoiceView>> {
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut lanes = self.lanes.lock();
            let lane = lanes.entry(key).or_default();
            lane.queue.push(Pending { build, reply });
            !std::mem::replace(&mut lane.running, true)
        };
        if start {
            tokio::spawn(self.clone().drive(env.clone(), key));
        }
        answer
            .await
            .unwrap_or_else(|_| Err(DomainError::internal("the invoice number lane stopped")))
    }

    /// Runs rounds while finalizes wait.
    async fn drive(self: Arc<Self>, env: Arc<Env>, key: NumberKey) {
        loop {
            let (next, pending) = {
                let mut lanes = self.lanes.lock();
                let lane = lanes.entry(key).or_default();
                if lane.queue.is_empty() {
                    lane.running = false;
                    return;
                }
                (lane.next, std::mem::take(&mut lane.queue))
            };
            let next = round(&env, key, next, pending).await;
            let mut lanes = self.lanes.lock();
            let lane = lanes.entry(key).or_default();
            lane.next = next.filter(|_| !std::mem::take(&mut lane.forgotten));
        }
    }
}

/// `build(n)`, a panic answered as an internal error.
fn build(p: &Pending, n: u64) -> DomainResult<(Batch, Answer<InvoiceView>)> {
    std::panic::catch_unwind(AssertUnwindSafe(|| (p.build)(n))).unwrap_or_else(|panic| {
        Err(DomainError::internal(format!(
            "an invoice finalize panicked: {}",
            crate::registry::panic_message(&*panic)
        )))
    })
}

fn stored_next(env: &Env, (brand, mode): NumberKey) -> DomainResult<u64> {
    next_number(env, brand, mode)
}

/// One round: all of `pending` in one batch, numbered in order from
/// `next`. Returns the next number after it (None: read the store again).
async fn round(env: &Env, key: NumberKey, next: Option<u64>, pending: Vec<Pending>) -> Option<u64> {
    let first = match next.map_or_else(|| stored_next(env, key), Ok) {
        Ok(n) => n,
        Err(e) => {
            for p in pending {
                let _ = p.reply.send(Err(e.clone()));
            }
            return None;
        }
    };
    let mut batch = Batch::new();
    let mut members: Vec<(Pending, Answer<InvoiceView>)> = Vec::with_capacity(pending.len());
    for p in pending {
        match build(&p, first + members.len() as u64) {
            Ok((b, answer)) => {
                batch.append(b);
                members.push((p, answer));
            }
            Err(e) => {
                let _ = p.reply.send(Err(e));
            }
        }
    }
    if members.is_empty() {
        return Some(first);
    }
    match env.writer.commit(batch).await {
        Ok(()) => {
            let next = first + members.len() as u64;
            for (p, answer) in members {
                let _ = p.reply.send(Ok(answer));
            }
            Some(next)
        }
        Err(e @ (CommitError::Closed | CommitError::NotOwner { .. })) => {
            let e = DomainError::from(e);
            for (p, _) in members {
                let _ = p.reply.send(Err(e.clone()));
            }
            None
        }
        Err(CommitError::Conflict { .. }) => {
            let mut next = Some(first);
            for (p, _) in members {
                next = one(env, key, next, p).await;
            }
            next
        }
    }
}

/// One finalize alone (a refused round's member).
async fn one(env: &Env, key: NumberKey, mut next: Option<u64>, p: Pending) -> Option<u64> {
    for _ in 0..3 {
        let n = match next.map_or_else(|| stored_next(env, key), Ok) {
            Ok(n) => n,
            Err(e) => {
                let _ = p.reply.send(Err(e));
                return None;
            }
        };
        let (batch, answer) = match build(&p, n) {
            Ok(x) => x,
            Err(e) => {
                let _ = p.reply.send(Err(e));
                return Some(n);
            }
        };
        match env.writer.commit(batch).await {
            Ok(()) => {
                let _ = p.reply.send(Ok(answer));
                return Some(n + 1);
            }
            // The stored rows are ahead of memory: read them again.
            Err(CommitError::Conflict { table, .. }) if table == Table::InvoiceNumbers.name() => {
                next = None;
            }
            Err(e) => {
                let _ = p.reply.send(Err(DomainError::internal(e.to_string())));
                return Some(n);
            }
        }
    }
    let _ = p.reply.send(Err(DomainError::internal(
        "invoice numbers are contended; retry with the same Idempotency-Key",
    )));
    None
}
