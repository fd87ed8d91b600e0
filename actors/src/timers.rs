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
use crate::customer::directory::IdentityTimer;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::invoice::book::OverdueTimer;
use crate::ledger::actor::ReleaseScheduled;
use crate::ledger::release::release_key;
use crate::ledger::Bucket;
use crate::mandate::actor::{MandateAction, MandateMessage};
use crate::payment_intent::actor::{Action, IntentMessage};
use crate::payment_link::actor::{LinkAction, LinkMessage};
use crate::payout::actor::{PayoutAction, PayoutMessage};
use crate::runtime::Kobo;
use crate::subscription::actor::{SubscriptionAction, SubscriptionMessage};
use crate::timer::{due_of, next_due_group, Timer, TimerKind, PRUNE_MAX};
use crate::usdt::actor::{CryptoAction, CryptoPayoutMessage};
use crate::virtual_account::actor::{AccountAction, AccountMessage};

pub use crate::timer::{
    timer_backlog, timers_due, TimerBacklog, META_MANUAL_CLOCK, OVERDUE_AFTER_SECS,
};

/// Runs one due timer: sends it to its actor, then drops it or retries it.
async fn fire(kobo: &Arc<Kobo>, key: Vec<u8>, timer: Timer) {
    let outcome = deliver(kobo, &key, &timer).await;
    settle(kobo, key, timer, outcome).await;
}

/// Sends a due timer to what it belongs to, by kind.
async fn deliver(kobo: &Arc<Kobo>, key: &[u8], timer: &Timer) -> DomainResult<()> {
    let timer_key = key.to_vec();
    match timer.kind {
        TimerKind::ReleasePending => release(kobo, key, timer, Bucket::Pending).await,
        TimerKind::ReleaseReserve => release(kobo, key, timer, Bucket::Reserve).await,
        TimerKind::SettlementRun => {
            crate::settlement::run_daily(&kobo.settlement, timer_key, timer.target).await
        }
        TimerKind::CryptoPayoutCheck => {
            let msg = CryptoPayoutMessage {
                merchant: timer.merchant,
                mode: timer.mode,
                action: CryptoAction::Reconcile {
                    timer_key: Some(timer_key),
                },
            };
            let sent = kobo.crypto_payouts.send(timer.target, msg).await;
            sent.and_then(|r| r.map(|_| ()))
        }
        TimerKind::PayoutSend => payout(kobo, timer, PayoutAction::Dispatch { timer_key }).await,
        TimerKind::PayoutStatus => {
            payout(kobo, timer, PayoutAction::QueryStatus { timer_key }).await
        }
        TimerKind::MandateCheck => {
            mandate(kobo, timer, MandateAction::CheckTimer { timer_key }).await
        }
        TimerKind::MandateExpire => {
            mandate(kobo, timer, MandateAction::ExpireTimer { timer_key }).await
        }
        TimerKind::DirectDebitSend => {
            intent(kobo, timer, Action::DebitSendTimer { timer_key }).await
        }
        TimerKind::DirectDebitStatus => {
            intent(kobo, timer, Action::DebitStatusTimer { timer_key }).await
        }
        TimerKind::CustomerIdentityCheck => {
            let msg = IdentityTimer {
                id: timer.target,
                timer_key,
            };
            let sent = kobo.customers.send((timer.merchant, timer.mode), msg).await;
            sent.and_then(|r| r)
        }
        TimerKind::VirtualAccountCheck => {
            let msg = AccountMessage {
                merchant: timer.merchant,
                mode: timer.mode,
                action: AccountAction::CheckTimer { timer_key },
                idem: None,
            };
            let sent = kobo.virtual_accounts.send(timer.target, msg).await;
            sent.and_then(|r| r.map(|_| ()))
        }
        TimerKind::PaymentLinkExpire => {
            link(kobo, timer, LinkAction::ExpireTimer { timer_key }).await
        }
        TimerKind::InvoiceOverdue => {
            let Some(i) = crate::invoice::service::load_any(kobo, timer.target)? else {
                return Ok(());
            };
            let msg = OverdueTimer {
                invoice: i.id,
                timer_key,
            };
            let sent = kobo.invoices.send(i.customer, msg).await;
            sent.and_then(|r| r)
        }
        TimerKind::PaymentIntentAbandon => {
            intent(kobo, timer, Action::AbandonTimer { timer_key }).await
        }
        TimerKind::SubscriptionDue => {
            subscription(kobo, timer, SubscriptionAction::Due { timer_key }).await
        }
        TimerKind::SubscriptionWake => {
            subscription(kobo, timer, SubscriptionAction::Wake { timer_key }).await
        }
    }
}

async fn subscription(kobo: &Kobo, timer: &Timer, action: SubscriptionAction) -> DomainResult<()> {
    let msg = SubscriptionMessage {
        merchant: timer.merchant,
        mode: timer.mode,
        action,
        idem: None,
    };
    let sent = kobo.subscriptions.send(timer.target, msg).await;
    sent.and_then(|r| r.map(|_| ()))
}

/// A scheduled release: the ledger releases the row (and deletes this
/// timer with it).
async fn release(kobo: &Kobo, key: &[u8], timer: &Timer, bucket: Bucket) -> DomainResult<()> {
    let (merchant, mode) = (timer.merchant, timer.mode);
    let row = release_key(merchant, mode, bucket, due_of(key), timer.target);
    let released = ReleaseScheduled { keys: vec![row] };
    match kobo.ledgers.send((merchant, mode), released).await {
        // Released: the ledger deleted this timer with the row.
        Ok(Ok(n)) if n > 0 => Ok(()),
        // Nothing left to release (done earlier, or in flight with a batch
        // that deletes this timer too): drop the timer.
        Ok(Ok(_)) => Err(DomainError::not_found("scheduled release", timer.target)),
        Ok(Err(e)) | Err(e) => Err(e),
    }
}

async fn payout(kobo: &Kobo, timer: &Timer, action: PayoutAction) -> DomainResult<()> {
    let msg = PayoutMessage {
        merchant: timer.merchant,
        mode: timer.mode,
        action,
        idem: None,
    };
    let sent = kobo.payouts.send(timer.target, msg).await;
    sent.and_then(|r| r.map(|_| ()))
}

async fn mandate(kobo: &Kobo, timer: &Timer, action: MandateAction) -> DomainResult<()> {
    let msg = MandateMessage {
        merchant: timer.merchant,
        mode: timer.mode,
        action,
        idem: None,
    };
    let sent = kobo.mandates.send(timer.target, msg).await;
    sent.and_then(|r| r.map(|_| ()))
}

async fn link(kobo: &Kobo, timer: &Timer, action: LinkAction) -> DomainResult<()> {
    let msg = LinkMessage {
        merchant: timer.merchant,
        mode: timer.mode,
        action,
        idem: None,
    };
    let sent = kobo.payment_links.send(timer.target, msg).await;
    sent.and_then(|r| r.map(|_| ()))
}

async fn intent(kobo: &Kobo, timer: &Timer, action: Action) -> DomainResult<()> {
    let msg = IntentMessage {
        merchant: timer.merchant,
        mode: timer.mode,
        merchant_name: String::new(),
        bank_transfer_enabled: true,
        action,
        idem: None,
    };
    let sent = kobo.payment_intents.send(timer.target, msg).await;
    sent.and_then(|r| r.map(|_| ()))
}

/// After a timer ran: done, dropped (its object is gone, nothing is left to
/// do, or its actor refused it: running it again would give the same
/// answer), or retried a minute later (it failed on our side or a busy
/// mailbox refused it: rather than lose it or stall every later timer).
async fn settle(kobo: &Kobo, key: Vec<u8>, timer: Timer, outcome: DomainResult<()>) {
    let Err(e) = outcome else {
        return;
    };
    let mut b = Batch::new();
    b.owned_by(timer.merchant.as_bytes());
    b.delete(Table::Timers, key);
    if matches!(
        e.kind,
        crate::error::ErrorKind::Internal | crate::error::ErrorKind::Overloaded
    ) {
        let retry_at = kobo.clock.now() + chrono::Duration::seconds(RETRY_AFTER_SECS);
        tracing::warn!(error = %e, kind = ?timer.kind, target = %timer.target, %retry_at, "timer failed; retrying");
        timer.schedule(&mut b, retry_at);
    } else {
        tracing::debug!(error = %e, kind = ?timer.kind, target = %timer.target, "timer dropped");
    }
    let _ = kobo.writer.commit(b).await;
}

/// How long a failed timer waits before it runs again.
pub const RETRY_AFTER_SECS: i64 = 60;

/// Runs every timer due at or before `limit`, in due order. With the manual
/// clock the clock steps to each due time first.
pub async fn run_due(kobo: &Arc<Kobo>, limit: DateTime<Utc>) -> DomainResult<u64> {
    let mut fired = 0u64;
    // Shards acquired since the last pass get their daily runs first.
    crate::settlement::ensure_acquired(&kobo.settlement).await;
    while let Some((due, group)) = next_due_group(kobo, limit)? {
        kobo.clock.set(due);
        fired += group.len() as u64;
        join_all(group.into_iter().map(|(k, t)| fire(kobo, k, t))).await;
    }
    // Webhook deliveries (first attempts and retries) due by `limit`.
    crate::webhook::run_due(&kobo.webhooks, limit).await;
    let read = kobo.store.read()?;
    for prune in crate::idempotency::prune_batches(&read, kobo.clock.now(), PRUNE_MAX)? {
        match kobo.writer.commit(prune).await {
            // Another node's merchant: its owner prunes them.
            Ok(()) | Err(kobo_storage::CommitError::NotOwner { .. }) => {}
            Err(e) => return Err(e.into()),
        }
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
                kobo.writer.commit(b).await.map_err(DomainError::from)?;
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
