//! Reads and keys of refunds and disputes.

use uuid::Uuid;

use kobo_storage::Table;

use crate::env::Env;
use crate::error::DomainResult;
use crate::ids::{scope_key, Mode};
use crate::paging::{page_by_index, page_within, Page};
use crate::refund::{Dispute, Refund};

pub fn refund_list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

pub fn refund_by_payment_key(merchant: Uuid, mode: Mode, payment: Uuid, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode)
        .bytes(payment.as_bytes())
        .u64(seq)
        .build()
}

pub fn dispute_list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

pub fn load_refund(kobo: &Env, id: Uuid) -> DomainResult<Option<Refund>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::Refunds, id.as_bytes())?)
}

pub fn load_dispute(kobo: &Env, id: Uuid) -> DomainResult<Option<Dispute>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::Disputes, id.as_bytes())?)
}

/// Refunds newest first; all of one payment's when `payment` is given.
pub fn list_refunds(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    payment: Option<Uuid>,
    limit: usize,
    starting_after: Option<Uuid>,
) -> DomainResult<Page> {
    let within = match payment {
        Some(p) => scope_key(merchant, mode).bytes(p.as_bytes()).build(),
        None => scope_key(merchant, mode).build(),
    };
    let index = match payment {
        Some(_) => Table::RefundByPayment,
        None => Table::RefundIndex,
    };
    page_within::<Refund>(
        kobo,
        Table::Refunds,
        index,
        &within,
        merchant,
        mode,
        limit,
        starting_after,
        |r| (r.merchant, r.mode, r.seq),
        Refund::to_api,
    )
}

/// Disputes newest first.
pub fn list_disputes(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    limit: usize,
    starting_after: Option<Uuid>,
) -> DomainResult<Page> {
    page_by_index::<Dispute>(
        kobo,
        Table::Disputes,
        Table::DisputeIndex,
        merchant,
        mode,
        limit,
        starting_after,
        |d| (d.merchant, d.mode, d.seq),
        Dispute::to_api,
    )
}
