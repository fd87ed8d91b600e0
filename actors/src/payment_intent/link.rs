//! The payment intent's side of payment links: the rows a link's intents
//! write in their own batches, so a link's slots and counters move in the
//! same commit as the payment's state (see `crate::payment_link`).
//!
//! A link's counters are one row of `i64`s (`payment_link_counters`):
//! `[held, payments, amount]`, moved with [`Batch::add`] (the writer adds
//! inside the write transaction, so concurrent payments of one link never
//! lose an update and nobody reads the row first). They follow the
//! intent's status, in every batch that changes it:
//!
//! - `held`: intents of the link in `created` or `processing` (a started
//!   payment holds a slot until it fails, is abandoned or canceled; a
//!   retry takes one again);
//! - `payments`, `amount`: successful intents and the sum of their
//!   `amount` (a success is final), moved in the success's own batch,
//!   which is the capture's ledger batch;
//! - a success also writes an outbox row (`payment_link_outbox`): the
//!   link's actor then checks `max_payments` (and deletes the row).
//!
//! `service.rs` calls [`on_create`] and [`on_transition`]; a visit's
//! intent is made by `service::create_for_link`.

use uuid::Uuid;

use kobo_storage::{Batch, KeyBuf, Table};

use crate::error::DomainResult;
use crate::ids::{scope_key, Mode};
use crate::payment_intent::{PaymentIntent, Status};

/// Positions in a link's counters row.
pub const HELD: usize = 0;
pub const PAYMENTS: usize = 1;
pub const AMOUNT: usize = 2;

/// The key of link `link`'s counters row.
pub fn counters_key(link: Uuid) -> Vec<u8> {
    link.as_bytes().to_vec()
}

/// The key of a success's outbox row.
pub fn outbox_key(link: Uuid, intent: Uuid) -> Vec<u8> {
    KeyBuf::new()
        .bytes(link.as_bytes())
        .bytes(intent.as_bytes())
        .build()
}

/// The prefix of a link's intents in `payment_intent_link_index`.
pub fn link_prefix(merchant: Uuid, mode: Mode, link: Uuid) -> KeyBuf {
    scope_key(merchant, mode).bytes(link.as_bytes())
}

/// Whether an intent in `status` holds one of its link's slots.
pub fn holds_slot(status: Status) -> bool {
    matches!(status, Status::Created | Status::Processing)
}

/// A new intent of a link: its list index row and its slot.
pub fn on_create(batch: &mut Batch, intent: &PaymentIntent) {
    let Some(link) = intent.payment_link else {
        return;
    };
    batch.put_raw(
        Table::PaymentIntentLinkIndex,
        link_prefix(intent.merchant, intent.mode, link)
            .u64(intent.seq)
            .build(),
        intent.id.as_bytes().to_vec(),
    );
    if holds_slot(intent.status) {
        batch.add(Table::PaymentLinkCounters, counters_key(link), &[1, 0, 0]);
    }
}

/// A change of a link's intent from `before` to `after`: its slot and,
/// on success, the link's payments and amount (with the outbox row).
pub fn on_transition(batch: &mut Batch, before: &PaymentIntent, after: &PaymentIntent) {
    let Some(link) = after.payment_link else {
        return;
    };
    if before.status == after.status {
        return;
    }
    let held = holds_slot(after.status) as i64 - holds_slot(before.status) as i64;
    let paid = after.status == Status::Successful && before.status != Status::Successful;
    let (payments, amount) = if paid { (1, after.amount) } else { (0, 0) };
    batch.add(
        Table::PaymentLinkCounters,
        counters_key(link),
        &[held, payments, amount],
    );
    if paid {
        batch.put_raw(
            Table::PaymentLinkOutbox,
            outbox_key(link, after.id),
            Vec::new(),
        );
    }
}

/// A link's counters as stored: `[held, payments, amount]`.
pub fn read_counters(read: &kobo_storage::ReadTxn, link: Uuid) -> DomainResult<[i64; 3]> {
    let row = read.get(Table::PaymentLinkCounters, &counters_key(link))?;
    let values = row.map(|r| kobo_storage::counters(&r)).unwrap_or_default();
    let at = |i: usize| values.get(i).copied().unwrap_or(0);
    Ok([at(HELD), at(PAYMENTS), at(AMOUNT)])
}
