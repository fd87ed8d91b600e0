//! `timers`: every timer is under its key and names an existing target.

use kobo_storage::{decode, StoreError, Table};

use super::{hex, Checker};
use crate::ledger::release::release_key;
use crate::ledger::Bucket;
use crate::timer::{due_of, Timer, TimerKind};

pub(super) fn timers(c: &mut Checker) -> Result<(), StoreError> {
    let mut breaches = Vec::new();
    let mut n = 0;
    c.each(Table::Timers, |k, v| {
        n += 1;
        let Ok(t) = decode::<Timer>(v) else {
            breaches.push(format!("timer {} does not decode", hex(k)));
            return Ok(());
        };
        if k.len() < 8 {
            breaches.push(format!("timer key {} is too short", hex(k)));
            return Ok(());
        }
        let due = due_of(k);
        if Timer::key(due, t.kind, t.target) != k {
            breaches.push(format!(
                "timer {:?} of {} is stored under another key ({})",
                t.kind,
                t.target,
                hex(k)
            ));
        }
        let target = target(&t, due);
        if let Some((table, key)) = target {
            if !c.exists(table, &key)? {
                breaches.push(format!(
                    "timer {:?} due {} names {} {} (merchant {}), which does not exist: an orphan",
                    t.kind,
                    due.to_rfc3339(),
                    table.name(),
                    t.target,
                    t.merchant
                ));
            }
        }
        Ok(())
    })?;
    c.examined("timers", n);
    for b in breaches {
        c.breach("timers", b);
    }
    Ok(())
}

/// The row a timer's target is stored under (none for a settlement run).
fn target(t: &Timer, due: chrono::DateTime<chrono::Utc>) -> Option<(Table, Vec<u8>)> {
    match t.kind {
        TimerKind::PaymentIntentAbandon
        | TimerKind::DirectDebitSend
        | TimerKind::DirectDebitStatus => {
            Some((Table::PaymentIntents, t.target.as_bytes().to_vec()))
        }
        TimerKind::PayoutSend | TimerKind::PayoutStatus => {
            Some((Table::Payouts, t.target.as_bytes().to_vec()))
        }
        TimerKind::CryptoPayoutCheck => Some((Table::CryptoPayouts, t.target.as_bytes().to_vec())),
        TimerKind::MandateCheck | TimerKind::MandateExpire => {
            Some((Table::Mandates, t.target.as_bytes().to_vec()))
        }
        TimerKind::ReleasePending => Some((
            Table::ScheduledReleases,
            release_key(t.merchant, t.mode, Bucket::Pending, due, t.target),
        )),
        TimerKind::ReleaseReserve => Some((
            Table::ScheduledReleases,
            release_key(t.merchant, t.mode, Bucket::Reserve, due, t.target),
        )),
        TimerKind::CustomerIdentityCheck => Some((Table::Customers, t.target.as_bytes().to_vec())),
        TimerKind::VirtualAccountCheck => {
            Some((Table::VirtualAccounts, t.target.as_bytes().to_vec()))
        }
        TimerKind::PaymentLinkExpire => Some((Table::PaymentLinks, t.target.as_bytes().to_vec())),
        TimerKind::InvoiceOverdue => Some((Table::Invoices, t.target.as_bytes().to_vec())),
        TimerKind::SubscriptionDue | TimerKind::SubscriptionWake => {
            Some((Table::Subscriptions, t.target.as_bytes().to_vec()))
        }
        TimerKind::SettlementRun => None,
    }
}
