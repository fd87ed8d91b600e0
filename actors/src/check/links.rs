//! Payment links: their list, status and slug rows (generic), their
//! counters, visits and outbox rows (`links`).
//!
//! A link's counters row is `[held, payments, amount]`, moved by
//! `payment_intent::link` in the very batch that creates an intent or
//! changes its status (`on_create`, `on_transition`, both in the intent's
//! commit): `held` counts intents in `created` or `processing`,
//! `payments` successful intents, `amount` the sum of their `amount` as
//! it was at the success. A success is final and an intent's amount and
//! link never change after it, so all three are exactly verifiable
//! against the intents stored now: they must be equal.

use std::collections::HashMap;

use uuid::Uuid;

use kobo_storage::{counters, decode, StoreError, Table};

use super::table::{index, list_key, object_table};
use super::{hex, uuid_of, Checker};
use crate::payment_intent::link::{counters_key, holds_slot, AMOUNT, HELD, PAYMENTS};
use crate::payment_intent::{PaymentIntent, Status};
use crate::payment_link::service::{slug_key, status_prefix};
use crate::payment_link::PaymentLink;

/// What each link's counters should hold, from its intents.
#[derive(Default)]
pub(super) struct LinkTally(HashMap<Uuid, [i64; 3]>);

impl LinkTally {
    pub fn new() -> LinkTally {
        LinkTally::default()
    }
    /// Counts intent `p` of link `link`.
    pub fn add(&mut self, link: Uuid, p: &PaymentIntent) {
        let t = self.0.entry(link).or_default();
        t[HELD] += i64::from(holds_slot(p.status));
        if p.status == Status::Successful {
            t[PAYMENTS] += 1;
            t[AMOUNT] += p.amount;
        }
    }
}

pub(super) fn links(c: &mut Checker, tally: LinkTally) -> Result<(), StoreError> {
    let LinkTally(mut tally) = tally;
    object_table::<PaymentLink>(
        c,
        Table::PaymentLinks,
        "payment_link",
        |l| l.id,
        |l| Some(l.seq),
        &[
            index(Table::PaymentLinkIndex, |l: &PaymentLink| {
                vec![list_key(l.merchant, l.mode, l.seq)]
            }),
            index(Table::PaymentLinkStatusIndex, |l: &PaymentLink| {
                vec![status_prefix(l.merchant, l.mode, l.status)
                    .u64(l.seq)
                    .build()]
            }),
            index(Table::PaymentLinkSlugs, |l: &PaymentLink| {
                vec![slug_key(&l.slug)]
            }),
        ],
        |c, l| counters_of(c, l, tally.remove(&l.id).unwrap_or_default()),
    )?;
    for (link, [held, payments, _]) in tally {
        c.breach(
            "links",
            format!("payment_link {link}, which does not exist, has {payments} successful and {held} open payment intents"),
        );
    }
    orphan_counters(c)?;
    rows_of_intents(c, Table::PaymentLinkVisits, false)?;
    rows_of_intents(c, Table::PaymentLinkOutbox, true)
}

/// Link `l`'s stored counters equal `want`, its intents' tally.
fn counters_of(c: &mut Checker, l: &PaymentLink, want: [i64; 3]) -> Result<(), StoreError> {
    c.examined("links", 1);
    let row = c
        .read
        .get(Table::PaymentLinkCounters, &counters_key(l.id))?;
    let row = row.unwrap_or_default();
    if row.len() % 8 != 0 {
        return Ok(()); // a `decode` breach already
    }
    let values = counters(&row);
    let have = [HELD, PAYMENTS, AMOUNT].map(|i| values.get(i).copied().unwrap_or(0));
    for (i, what) in [(HELD, "held"), (PAYMENTS, "payments"), (AMOUNT, "amount")] {
        if have[i] != want[i] {
            c.breach(
                "links",
                format!(
                    "payment_link {} (merchant {} {}, slug {:?}): counter {what} is {} but its payment intents give {}",
                    l.id,
                    l.merchant,
                    l.mode.as_str(),
                    l.slug,
                    have[i],
                    want[i]
                ),
            );
        }
    }
    Ok(())
}

/// Every counters row is a stored link's.
fn orphan_counters(c: &mut Checker) -> Result<(), StoreError> {
    let mut bad = Vec::new();
    c.each(Table::PaymentLinkCounters, |k, _| {
        if !c.exists(Table::PaymentLinks, k)? {
            bad.push(format!(
                "payment_link_counters row {} names no payment_link",
                hex(k)
            ));
        }
        Ok(())
    })?;
    for b in bad {
        c.breach("links", b);
    }
    Ok(())
}

/// Rows keyed `link id|...` that name a payment intent of that link: a
/// visit's (its value) or an outbox row's (the key's second id, a
/// success's).
fn rows_of_intents(c: &mut Checker, table: Table, outbox: bool) -> Result<(), StoreError> {
    let mut bad = Vec::new();
    let mut n = 0;
    c.each(table, |k, v| {
        n += 1;
        let link = k.get(..16).and_then(uuid_of);
        let id = if outbox { k.get(16..) } else { Some(v) }.and_then(uuid_of);
        let p: Option<PaymentIntent> = match id {
            Some(id) => c
                .read
                .get(Table::PaymentIntents, id.as_bytes())?
                .and_then(|v| decode(&v).ok()),
            None => None,
        };
        let ok = p.is_some_and(|p| {
            link.is_some() && p.payment_link == link && (!outbox || p.status == Status::Successful)
        });
        if !ok {
            bad.push(format!(
                "{} row {} names payment_intent {}, which is not {} of payment_link {}",
                table.name(),
                hex(k),
                id.map(|i| i.to_string())
                    .unwrap_or_else(|| "(no id)".into()),
                if outbox { "a success" } else { "an intent" },
                link.map(|l| l.to_string()).unwrap_or_default()
            ));
        }
        Ok(())
    })?;
    c.examined("links", n);
    for b in bad {
        c.breach("links", b);
    }
    Ok(())
}
