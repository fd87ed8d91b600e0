//! Durable timers: the rows, their keys and `schedule`. A core leaf: it
//! knows no actor; the timer supervisor ([`crate::timers`]) fires them.
//!
//! A timer is a row `(due time, kind, id)` in table `timers`, written in the
//! same batch as the change that needs it (and deleted in the batch of the
//! change that makes it moot).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use kobo_storage::{decode, Batch, KeyBuf, Table};

use crate::clock::{from_micros, micros};
use crate::env::Env;
use crate::error::DomainResult;
use crate::ids::Mode;

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
    /// Ask the identity provider about a customer's pending check.
    CustomerIdentityCheck,
    /// Ask the bank whether a pending virtual account is open.
    VirtualAccountCheck,
    /// A payment link's `expires_at`.
    PaymentLinkExpire,
    /// An open invoice's due date has passed (08:00 Lagos the next day).
    InvoiceOverdue,
    /// A subscription's own next moment: a renewal (08:00 Lagos), a trial's
    /// end or its `trial_will_end`, a retry, a due date passing, the
    /// 23 hours of an incomplete subscription, a scheduled start.
    SubscriptionDue,
    /// News for a subscription: its invoice was paid, or a debit of it
    /// failed (written in that change's batch, due at once).
    SubscriptionWake,
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
            TimerKind::CustomerIdentityCheck => 12,
            TimerKind::VirtualAccountCheck => 13,
            TimerKind::PaymentLinkExpire => 14,
            TimerKind::InvoiceOverdue => 15,
            TimerKind::SubscriptionDue => 16,
            TimerKind::SubscriptionWake => 17,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timer {
    pub kind: TimerKind,
    pub target: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
}

/// Stored in the compact format (kobo_storage::codec); timers written as
/// JSON before it still read. Pinned by
/// `tests::the_stored_layout_of_a_timer_is_pinned`.
impl kobo_storage::Compact for Timer {}

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
        batch.put_compact(Table::Timers, Timer::key(due, self.kind, self.target), self);
    }
}

pub fn due_of(key: &[u8]) -> DateTime<Utc> {
    let mut b = [0u8; 8];
    b.copy_from_slice(&key[..8]);
    from_micros(u64::from_be_bytes(b) as i64)
}

/// Timers sharing one due time and kind, with their store keys.
pub type DueGroup = (DateTime<Utc>, Vec<(Vec<u8>, Timer)>);

/// Timers due at or before `limit`, all sharing the earliest due time and,
/// within it, the first kind.
pub fn next_due_group(env: &Env, limit: DateTime<Utc>) -> DomainResult<Option<DueGroup>> {
    let read = env.store.read()?;
    let mut group: Vec<(Vec<u8>, Timer)> = Vec::new();
    let mut first: Option<[u8; 9]> = None;
    read.scan_prefix(Table::Timers, &[], None, |k, v| {
        let due = due_of(k);
        let head: [u8; 9] = k[..9].try_into().expect("timer keys start with due|kind");
        if due > limit || first.is_some_and(|f| f != head) || group.len() >= TIMER_FANOUT_MAX {
            return Ok(false);
        }
        let timer: Timer = decode(v)?;
        if !env.owns(&timer.merchant) {
            // Another node's merchant (cluster mode): it stays due for its
            // owner. Global timers (no merchant) run on shard 0's owner.
            return Ok(true);
        }
        first = Some(head);
        group.push((k.to_vec(), timer));
        Ok(true)
    })?;
    Ok(first.map(|f| (due_of(&f), group)))
}

/// Timers due at `now` and not yet run, and how many of those were due
/// more than [`OVERDUE_AFTER_SECS`] before `now` (the timer pass is behind).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TimerBacklog {
    pub due: u64,
    pub overdue: u64,
}

/// A due timer not run this long after its due time is overdue.
pub const OVERDUE_AFTER_SECS: i64 = 60;

pub fn timer_backlog(env: &Env, now: DateTime<Utc>) -> DomainResult<TimerBacklog> {
    let overdue_before = now - chrono::Duration::seconds(OVERDUE_AFTER_SECS);
    let read = env.store.read()?;
    let mut b = TimerBacklog::default();
    read.scan_prefix(Table::Timers, &[], None, |k, _| {
        let due = due_of(k);
        if due > now {
            return Ok(false);
        }
        b.due += 1;
        if due < overdue_before {
            b.overdue += 1;
        }
        Ok(true)
    })?;
    Ok(b)
}

pub fn timers_due(env: &Env, limit: DateTime<Utc>) -> DomainResult<u64> {
    let read = env.store.read()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_backlog_counts_timers_due_and_those_past_the_overdue_mark() {
        let dir = tempfile::tempdir().unwrap();
        let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
        let now = kobo.clock.now();
        let mut batch = Batch::new();
        for offset in [-3600, -61, -30, 0, 1, 3600] {
            Timer::new(
                TimerKind::PayoutSend,
                Uuid::new_v4(),
                Uuid::new_v4(),
                Mode::Test,
            )
            .schedule(&mut batch, now + chrono::Duration::seconds(offset));
        }
        kobo.writer.commit(batch).await.unwrap();
        let b = timer_backlog(&kobo, now).unwrap();
        assert_eq!(b, TimerBacklog { due: 4, overdue: 2 });
        assert_eq!(timers_due(&kobo, now).unwrap(), 4);
    }

    /// A stored timer names its kind by the variant's place (postcard):
    /// every kind's place is pinned, so a reordered or inserted variant
    /// fails here (new kinds go at the end).
    #[test]
    fn every_timer_kind_keeps_its_stored_index() {
        use TimerKind::*;
        let kinds = [
            PaymentIntentAbandon,
            ReleasePending,
            ReleaseReserve,
            SettlementRun,
            PayoutSend,
            PayoutStatus,
            CryptoPayoutCheck,
            MandateCheck,
            MandateExpire,
            DirectDebitSend,
            DirectDebitStatus,
            CustomerIdentityCheck,
            VirtualAccountCheck,
            PaymentLinkExpire,
            InvoiceOverdue,
            SubscriptionDue,
            SubscriptionWake,
        ];
        for (index, kind) in kinds.into_iter().enumerate() {
            let t = Timer::new(kind, Uuid::nil(), Uuid::nil(), Mode::Test);
            assert_eq!(
                kobo_storage::encode_compact(&t)[1] as usize,
                index,
                "{kind:?}"
            );
        }
    }

    /// See [`crate::compact_layout`].
    #[test]
    fn a_timer_is_stored_compact_in_its_pinned_layout() {
        let t = Timer::new(
            TimerKind::ReleasePending,
            Uuid::from_u128(1),
            Uuid::from_u128(2),
            Mode::Live,
        );
        crate::compact_layout::assert_stored_compact(
            &t,
            "03011000000000000000000000000000000001100000000000000000000000000000000201",
            "02011000000000000000000000000000000001100000000000000000000000000000000201",
        );
    }
}
