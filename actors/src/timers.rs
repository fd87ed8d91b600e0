//! The timer supervisor: the only place that knows every actor a timer
//! fires. It wakes on a tick (system clock) or when the manual clock is
//! advanced, and sends each due timer ([`crate::timer`]) to its actor, in due
//! order; timers with the same due time run concurrently. With the manual
//! clock, the clock is set to each due time before its timers run, so what
//! they write carries that time. It also prunes idempotency keys older than
//! 24 hours on every pass. Runtime layer: it sits above every resource.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use futures_util::future::join_all;

use kobo_storage::{Batch, Table};

use crate::audit::{Audit, AuditAction, Record};
use crate::clock::micros;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::ledger::actor::ReleaseScheduled;
use crate::ledger::release::release_key;
use crate::ledger::Bucket;
use crate::mandate::actor::{MandateAction, MandateMessage};
use crate::payment_intent::actor::{Action, IntentMessage};
use crate::payout::actor::{PayoutAction, PayoutMessage};
use crate::runtime::Kobo;
use crate::timer::{due_of, next_due_group, Timer, TimerKind, PRUNE_MAX};
use crate::usdt::actor::{CryptoAction, CryptoPayoutMessage};

pub use crate::timer::{timers_due, META_MANUAL_CLOCK};

// Long: one match over timer kinds, an arm per kind (the actor it goes to), then one
// retry policy for all.
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
        TimerKind::SettlementRun => {
            crate::settlement::run_daily(&kobo.settlement, key.clone()).await
        }
        TimerKind::CryptoPayoutCheck => kobo
            .crypto_payouts
            .send(
                timer.target,
                CryptoPayoutMessage {
                    merchant: timer.merchant,
                    mode: timer.mode,
                    action: CryptoAction::Reconcile {
                        timer_key: Some(key.clone()),
                    },
                },
            )
            .await
            .and_then(|r| r.map(|_| ())),
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
            let action = match timer.kind {
                TimerKind::MandateExpire => MandateAction::ExpireTimer {
                    timer_key: key.clone(),
                },
                _ => MandateAction::CheckTimer {
                    timer_key: key.clone(),
                },
            };
            kobo.mandates
                .send(
                    timer.target,
                    MandateMessage {
                        merchant: timer.merchant,
                        mode: timer.mode,
                        action,
                        idem: None,
                    },
                )
                .await
                .and_then(|r| r.map(|_| ()))
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
    crate::webhook::run_due(&kobo.webhooks, limit).await;
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
/// The move's audit entry commits with the stored clock.
#[derive(Message)]
#[rtype(result = "DomainResult<DateTime<Utc>>")]
pub struct Advance {
    pub to: DateTime<Utc>,
    pub audit: Audit,
}

impl Handler<Advance> for TimerSupervisor {
    type Result = AtomicResponse<Self, DomainResult<DateTime<Utc>>>;
    fn handle(&mut self, msg: Advance, _: &mut Context<Self>) -> Self::Result {
        let kobo = self.kobo.clone();
        AtomicResponse::new(Box::pin(
            async move {
                if !kobo.clock.is_manual() {
                    return Err(DomainError::state(
                        ErrorCode::ClockNotManual,
                        "the server runs on the system clock; start it with --clock manual",
                    ));
                }
                if msg.to < kobo.clock.now() {
                    return Err(DomainError::invalid("to", "the clock never moves back"));
                }
                let from = kobo.clock.now();
                run_due(&kobo, msg.to).await?;
                kobo.clock.set(msg.to);
                let now = kobo.clock.now();
                let mut b = Batch::new();
                b.put_raw(
                    Table::Meta,
                    META_MANUAL_CLOCK.to_vec(),
                    micros(now).to_be_bytes().to_vec(),
                );
                msg.audit.add_to(
                    &kobo,
                    &mut b,
                    clock_record(AuditAction::ClockAdvanced, from, now),
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

/// The audit record of a move of the manual clock from `from` to `to`.
pub fn clock_record(action: AuditAction, from: DateTime<Utc>, to: DateTime<Utc>) -> Record {
    Record::new(action, "clock", "manual")
        .before(serde_json::json!({ "now": from }))
        .after(serde_json::json!({ "now": to }))
        .detail(serde_json::json!({ "from": from, "to": to }))
}
