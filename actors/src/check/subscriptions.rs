//! Plans and subscriptions: their object tables and indexes, each
//! unfinished subscription's open claim (and no claim of a finished one),
//! its timer row, and exactly once per period: each period's invoice claim
//! names an invoice of that subscription, each debit claim a mandate
//! payment of that period's invoice, and no period has two successful
//! debits.

use std::collections::BTreeMap;

use kobo_storage::{decode, StoreError, Table};
use uuid::Uuid;

use super::table::{index, list_key, object_table};
use super::{hex, uuid_of, Checker};
use crate::invoice::Invoice;
use crate::payment_intent::{PaymentIntent, Status};
use crate::plan::Plan;
use crate::subscription::service::{customer_prefix, open_key, plan_prefix, status_prefix};
use crate::subscription::Subscription;
use crate::timer::{Timer, TimerKind};

pub(super) fn subscriptions(c: &mut Checker) -> Result<(), StoreError> {
    object_table::<Plan>(
        c,
        Table::Plans,
        "plan",
        |p| p.id,
        |p| Some(p.seq),
        &[index(Table::PlanIndex, |p: &Plan| {
            vec![list_key(p.merchant, p.mode, p.seq)]
        })],
        |_, _| Ok(()),
    )?;
    let mut unfinished = Vec::new();
    object_table::<Subscription>(
        c,
        Table::Subscriptions,
        "subscription",
        |s| s.id,
        |s| Some(s.seq),
        &[
            index(Table::SubscriptionIndex, |s: &Subscription| {
                vec![list_key(s.merchant, s.mode, s.seq)]
            }),
            index(Table::SubscriptionCustomerIndex, |s: &Subscription| {
                vec![customer_prefix(s.merchant, s.mode, s.customer)
                    .u64(s.seq)
                    .build()]
            }),
            index(Table::SubscriptionPlanIndex, |s: &Subscription| {
                vec![plan_prefix(s.merchant, s.mode, s.terms.plan)
                    .u64(s.seq)
                    .build()]
            }),
            index(Table::SubscriptionStatusIndex, |s: &Subscription| {
                vec![status_prefix(s.merchant, s.mode, s.status)
                    .u64(s.seq)
                    .build()]
            }),
        ],
        |_, s| {
            if !s.status.ended() {
                unfinished.push((s.id, open_key(s), s.timer_at));
            }
            Ok(())
        },
    )?;
    open_claims(c, &unfinished)?;
    periods(c)
}

/// An unfinished subscription: its id, open claim key and timer.
type Unfinished = (Uuid, Vec<u8>, Option<chrono::DateTime<chrono::Utc>>);

/// Each unfinished subscription holds its open claim and its timer; each
/// claim names an unfinished subscription.
fn open_claims(c: &mut Checker, unfinished: &[Unfinished]) -> Result<(), StoreError> {
    let mut claims: BTreeMap<Vec<u8>, Uuid> = BTreeMap::new();
    c.each(Table::SubscriptionOpen, |k, v| {
        if let Some(id) = uuid_of(v) {
            claims.insert(k.to_vec(), id);
        }
        Ok(())
    })?;
    c.examined("subscriptions", claims.len() as u64);
    for (id, key, timer_at) in unfinished {
        if claims.remove(key) != Some(*id) {
            c.breach(
                "subscriptions",
                format!("subscription {id} is unfinished without its open claim"),
            );
        }
        let timer = timer_at.map(|t| Timer::key(t, TimerKind::SubscriptionDue, *id));
        if let Some(t) = timer {
            if !c.exists(Table::Timers, &t)? {
                c.breach(
                    "subscriptions",
                    format!("subscription {id}'s timer row is missing"),
                );
            }
        }
    }
    for (key, id) in claims {
        c.breach(
            "subscriptions",
            format!(
                "open claim {} names subscription {id}, which is finished or another's",
                hex(&key)
            ),
        );
    }
    Ok(())
}

/// A period's invoice and debits: claims name what they should, and no
/// period was debited successfully twice.
fn periods(c: &mut Checker) -> Result<(), StoreError> {
    let mut invoice_rows = Vec::new();
    c.each(Table::SubscriptionInvoices, |k, v| {
        invoice_rows.push((k.to_vec(), v.to_vec()));
        Ok(())
    })?;
    c.examined("subscriptions", invoice_rows.len() as u64);
    let mut period_invoice: BTreeMap<Vec<u8>, Uuid> = BTreeMap::new();
    for (k, v) in invoice_rows {
        let sub = uuid_of(&k[..16.min(k.len())]);
        let inv: Option<Invoice> = match c.read.get(Table::Invoices, &v)? {
            Some(raw) => decode(&raw).ok(),
            None => None,
        };
        match (sub, inv) {
            (Some(s), Some(i)) if i.subscription == Some(s) => {
                period_invoice.insert(k.clone(), i.id);
            }
            _ => c.breach(
                "subscriptions",
                format!(
                    "period claim {} names no invoice of its subscription",
                    hex(&k)
                ),
            ),
        }
    }
    let mut charges = Vec::new();
    c.each(Table::SubscriptionCharges, |k, v| {
        charges.push((k.to_vec(), v.to_vec()));
        Ok(())
    })?;
    c.examined("subscriptions", charges.len() as u64);
    let mut successes: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
    for (k, v) in charges {
        let period = k[..20.min(k.len())].to_vec();
        let pi: Option<PaymentIntent> = match c.read.get(Table::PaymentIntents, &v)? {
            Some(raw) => decode(&raw).ok(),
            None => None,
        };
        let Some(pi) = pi else {
            c.breach(
                "subscriptions",
                format!("debit claim {} names no payment intent", hex(&k)),
            );
            continue;
        };
        if pi.mandate.is_none()
            || pi.invoice.is_none()
            || pi.invoice != period_invoice.get(&period).copied()
        {
            c.breach(
                "subscriptions",
                format!(
                    "debit claim {} names payment {}, not a debit of its period's invoice",
                    hex(&k),
                    pi.id
                ),
            );
        }
        if pi.status == Status::Successful {
            *successes.entry(period).or_default() += 1;
        }
    }
    for (period, n) in successes {
        if n > 1 {
            c.breach(
                "subscriptions",
                format!("period {} was debited successfully {n} times", hex(&period)),
            );
        }
    }
    Ok(())
}
