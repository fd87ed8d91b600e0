//! Durable timers and the timer supervisor.
//!
//! A timer is a row `(due time, kind, id)` in table `timers`, written in the
//! same batch as the change that needs it (and deleted in the batch of the
//! change that makes it moot). The supervisor wakes on a tick (system clock)
//! or when the manual clock is advanced, and sends each due timer to its
//! actor, in due order; timers with the same due time run concurrently.
//! With the manual clock, the clock is set to each due time before its timers
//! run, so what they write carries that time. The supervisor also prunes
//! idempotency keys older than 24 hours on every pass.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use kobo_storage::{decode, Batch, KeyBuf, Table};

use crate::clock::{from_micros, micros};
use crate::error::{DomainError, DomainResult};
use crate::ids::Mode;
use crate::ledger::actor::ReleaseScheduled;
use crate::ledger::Bucket;
use crate::payment_intent::actor::{Action, IntentMessage};
use crate::payout::actor::{PayoutAction, PayoutMessage};
use crate::runtime::Kobo;
use crate::settlement::release_key;

/// How many timers of one due time are dispatched at once.
pub const TIMER_FANOUT_MAX: usize = 512;
/// How many expired idempotency keys one pass prunes.
pub const PRUNE_MAX: usize = 10_000;
/// The meta key holding the manual clock's time.
pub const META_MANUAL_CLOCK: &[u8] = b"manual_clock";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerKind {
    PaymentIntentAbandon,
    /// Release a capture's `pending` money to `available`.
    ReleasePending,
    /// Release a capture's reserved money to `available`.
    ReleaseReserve,
    /// The daily automatic-settlement run (08:00 Lagos, business days).
    SettlementRun,
    /// Send a queued payout to the rail.
    PayoutSend,
    /// Ask the bank about a payout in flight.
    PayoutStatus,
    /// Ask the USDT partner about an unconfirmed crypto payout.
    CryptoPayoutCheck,
    /// Ask the mandate provider whether a pending mandate was approved.
    MandateCheck,
    /// A pending mandate's 7 days are up.
    MandateExpire,
    /// Send a mandate charge's debit to the provider.
    DirectDebitSend,
    /// Ask the provider about a debit in flight.
    DirectDebitStatus,
}

impl TimerKind {
    /// Part of the timer's key: timers due at the same instant run by kind,
    /// in this order (releases before anything that spends what they free).
    fn byte(self) -> u8 {
        match self {
            TimerKind::PaymentIntentAbandon => 1,
            TimerKind::ReleasePending => 2,
            TimerKind::ReleaseReserve => 3,
            TimerKind::SettlementRun => 4,
            TimerKind::PayoutSend => 5,
            TimerKind::PayoutStatus => 6,
            TimerKind::CryptoPayoutCheck => 7,
            TimerKind::MandateCheck => 8,
            TimerKind::MandateExpire => 9,
            TimerKind::DirectDebitSend => 10,
            TimerKind::DirectDebitStatus => 11,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timer {
    pub kind: TimerKind,
    pub target: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
}

impl Timer {
    pub fn new(kind: TimerKind, target: Uuid, merchant: Uuid, mode: Mode) -> Self {
        Timer {
            kind,
            target,
            merchant,
            mode,
        }
    }
    pub fn key(due: DateTime<Utc>, kind: TimerKind, target: Uuid) -> Vec<u8> {
        KeyBuf::new()
            .u64(micros(due))
            .u8(kind.byte())
            .bytes(target.as_bytes())
            .build()
    }
    pub fn schedule(&self, batch: &mut Batch, due: DateTime<Utc>) {
        batch.put(Table::Timers, Timer::key(due, self.kind, self.target), self);
    }
}

fn due_of(key: &[u8]) -> DateTime<Utc> {
    let mut b = [0u8; 8];
    b.copy_from_slice(&key[..8]);
    from_micros(u64::from_be_bytes(b) as i64)
}

/// Timers sharing one due time and kind, with their store keys.
type DueGroup = (DateTime<Utc>, Vec<(Vec<u8>, Timer)>);

/// Timers due at or before `limit`, all sharing the earliest due time and,
/// within it, the first kind.
fn next_due_group(kobo: &Kobo, limit: DateTime<Utc>) -> DomainResult<Option<DueGroup>> {
    let read = kobo.store.read()?;
    let mut group: Vec<(Vec<u8>, Timer)> = Vec::new();
    let mut first: Option<[u8; 9]> = None;
    read.scan_prefix(Table::Timers, &[], None, |k, v| {
        let due = due_of(k);
        let head: [u8; 9] = k[..9].try_into().expect("timer keys start with due|kind");
        if due > limit || first.is_some_and(|f| f != head) || group.len() >= TIMER_FANOUT_MAX {
            return Ok(false);
        }
        first = Some(head);
        group.push((k.to_vec(), decode(v)?));
        Ok(true)
    })?;
    Ok(first.map(|f| (due_of(&f), group)))
}

pub fn timers_due(kobo: &Kobo, limit: DateTime<Utc>) -> DomainResult<u64> {
    let read = kobo.store.read()?;
    let mut n = 0;
    read.scan_prefix(Table::Timers, &[], None, |k, _| {
        if due_of(k) > limit {
            return Ok(false);
        }
        n += 1;
        Ok(true)
    })?;
    Ok(n)
}

async fn fire(kobo: &Arc<Kobo>, key: Vec<u8>, timer: Timer) {
    let outcome: DomainResult<()> = match timer.kind {
        TimerKind::ReleasePending | TimerKind::ReleaseReserve => {
            let bucket = match timer.kind {
                TimerKind::ReleaseReserve => Bucket::Reserve,
                _ => Bucket::Pending,
            };
            let row = release_key(
                timer.merchant,
                timer.mode,
                bucket,
                due_of(&key),
                timer.target,
            );
            match kobo
                .ledgers
                .send(
                    kobo,
                    (timer.merchant, timer.mode),
                    ReleaseScheduled { keys: vec![row] },
                )
                .await
            {
                // Released: the ledger deleted this timer with the row.
                Ok(Ok(n)) if n > 0 => Ok(()),
                // Nothing left to release (done earlier, or in flight with
                // a batch that deletes this timer too): drop the timer.
                Ok(Ok(_)) => Err(DomainError::not_found("scheduled release", timer.target)),
                Ok(Err(e)) | Err(e) => Err(e),
            }
        }
        TimerKind::SettlementRun => crate::settlement::run_daily(kobo, key.clone()).await,
        TimerKind::CryptoPayoutCheck => {
            crate::usdt::actor::on_check_timer(kobo, key.clone(), &timer).await
        }
        TimerKind::PayoutSend | TimerKind::PayoutStatus => {
            let action = match timer.kind {
                TimerKind::PayoutSend => PayoutAction::Dispatch {
                    timer_key: key.clone(),
                },
                _ => PayoutAction::QueryStatus {
                    timer_key: key.clone(),
                },
            };
            kobo.payouts
                .send(
                    kobo,
                    timer.target,
                    PayoutMessage {
                        merchant: timer.merchant,
                        mode: timer.mode,
                        action,
                        idem: None,
                    },
                )
                .await
                .and_then(|r| r.map(|_| ()))
        }
        TimerKind::MandateCheck | TimerKind::MandateExpire => {
            crate::mandate::actor::on_timer(kobo, key.clone(), &timer).await
        }
        TimerKind::DirectDebitSend | TimerKind::DirectDebitStatus => {
            let action = match timer.kind {
                TimerKind::DirectDebitSend => Action::DebitSendTimer {
                    timer_key: key.clone(),
                },
                _ => Action::DebitStatusTimer {
                    timer_key: key.clone(),
                },
            };
            kobo.payment_intents
                .send(
                    kobo,
                    timer.target,
                    IntentMessage {
                        merchant: timer.merchant,
                        mode: timer.mode,
                        merchant_name: String::new(),
                        bank_transfer_enabled: true,
                        action,
                        idem: None,
                    },
                )
                .await
                .and_then(|r| r.map(|_| ()))
        }
        TimerKind::PaymentIntentAbandon => {
            let merchant_name = String::new();
            kobo.payment_intents
                .send(
                    kobo,
                    timer.target,
                    IntentMessage {
                        merchant: timer.merchant,
                        mode: timer.mode,
                        merchant_name,
                        bank_transfer_enabled: true,
                        action: Action::AbandonTimer {
                            timer_key: key.clone(),
                        },
                        idem: None,
                    },
                )
                .await
                .and_then(|r| r.map(|_| ()))
        }
    };
    match outcome {
        Ok(()) => {}
        // Its object is gone, nothing is left to do, or its actor refused
        // it: drop it (running it again would give the same answer).
        Err(e)
            if !matches!(
                e.kind,
                crate::error::ErrorKind::Internal | crate::error::ErrorKind::Overloaded
            ) =>
        {
            tracing::debug!(error = %e, kind = ?timer.kind, target = %timer.target, "timer dropped");
            let mut b = Batch::new();
            b.delete(Table::Timers, key);
            let _ = kobo.writer.commit(b).await;
        }
        // It failed on our side or a busy mailbox refused it: try again a
        // minute later rather than lose it (or stall every later timer).
        Err(e) => {
            let retry_at = kobo.clock.now() + chrono::Duration::seconds(RETRY_AFTER_SECS);
            tracing::warn!(error = %e, kind = ?timer.kind, target = %timer.target, %retry_at, "timer failed; retrying");
            let mut b = Batch::new();
            b.delete(Table::Timers, key);
            timer.schedule(&mut b, retry_at);
            let _ = kobo.writer.commit(b).await;
        }
    }
}

/// How long a failed timer waits before it runs again.
pub const RETRY_AFTER_SECS: i64 = 60;

/// Runs every timer due at or before `limit`, in due order. With the manual
/// clock the clock steps to each due time first.
pub async fn run_due(kobo: &Arc<Kobo>, limit: DateTime<Utc>) -> DomainResult<u64> {
    let mut fired = 0u64;
    while let Some((due, group)) = next_due_group(kobo, limit)? {
        kobo.clock.set(due);
        fired += group.len() as u64;
        join_all(group.into_iter().map(|(k, t)| fire(kobo, k, t))).await;
    }
    // Webhook deliveries (first attempts and retries) due by `limit`.
    crate::webhook::run_due(kobo, limit).await;
    let read = kobo.store.read()?;
    let prune = crate::idempotency::prune_batch(&read, kobo.clock.now(), PRUNE_MAX)?;
    if !prune.is_empty() {
        kobo.writer
            .commit(prune)
            .await
            .map_err(|e| DomainError::internal(e.to_string()))?;
    }
    Ok(fired)
}

/// Owns the timers: ticks with the system clock, and serializes manual
/// advances so timers run one pass at a time.
pub struct TimerSupervisor {
    kobo: Arc<Kobo>,
}

impl TimerSupervisor {
    pub fn new(kobo: Arc<Kobo>) -> Self {
        TimerSupervisor { kobo }
    }
}

impl Actor for TimerSupervisor {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Context<Self>) {
        // Catch up on whatever came due while the server was down.
        ctx.notify(Tick);
        if !self.kobo.clock.is_manual() {
            ctx.run_interval(Duration::from_secs(1), |_, ctx| ctx.notify(Tick));
        }
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct Tick;

impl Handler<Tick> for TimerSupervisor {
    type Result = AtomicResponse<Self, ()>;
    fn handle(&mut self, _: Tick, _: &mut Context<Self>) -> Self::Result {
        let kobo = self.kobo.clone();
        AtomicResponse::new(Box::pin(
            async move {
                let now = kobo.clock.now();
                if let Err(e) = run_due(&kobo, now).await {
                    tracing::error!(error = %e, "timer pass failed");
                }
            }
            .into_actor(self),
        ))
    }
}

/// Advance the manual clock to `to`, running every timer due on the way.
#[derive(Message)]
#[rtype(result = "DomainResult<DateTime<Utc>>")]
pub struct Advance {
    pub to: DateTime<Utc>,
}

impl Handler<Advance> for TimerSupervisor {
    type Result = AtomicResponse<Self, DomainResult<DateTime<Utc>>>;
    fn handle(&mut self, msg: Advance, _: &mut Context<Self>) -> Self::Result {
        let kobo = self.kobo.clone();
        AtomicResponse::new(Box::pin(
            async move {
                if !kobo.clock.is_manual() {
                    return Err(DomainError::state(
                        "clock_not_manual",
                        "the server runs on the system clock; start it with --clock manual",
                    ));
                }
                if msg.to < kobo.clock.now() {
                    return Err(DomainError::invalid("to", "the clock never moves back"));
                }
                run_due(&kobo, msg.to).await?;
                kobo.clock.set(msg.to);
                let now = kobo.clock.now();
                let mut b = Batch::new();
                b.put_raw(
                    Table::Meta,
                    META_MANUAL_CLOCK.to_vec(),
                    micros(now).to_be_bytes().to_vec(),
                );
                kobo.writer
                    .commit(b)
                    .await
                    .map_err(|e| DomainError::internal(e.to_string()))?;
                Ok(now)
            }
            .into_actor(self),
        ))
    }
}
