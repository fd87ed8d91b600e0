//! Reads and keys of refunds and disputes; resuming refund confirmations.

use std::sync::Arc;

use uuid::Uuid;

use kobo_storage::Table;

use crate::error::{DomainError, DomainResult};
use crate::ids::{scope_key, Mode};
use crate::query::Page;
use crate::refund::{Dispute, Refund, RefundStatus};
use crate::runtime::Kobo;

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

pub fn load_refund(kobo: &Kobo, id: Uuid) -> DomainResult<Option<Refund>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::Refunds, id.as_bytes())?)
}

pub fn load_dispute(kobo: &Kobo, id: Uuid) -> DomainResult<Option<Dispute>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::Disputes, id.as_bytes())?)
}

/// Refunds newest first; all of one payment's when `payment` is given.
pub fn list_refunds(
    kobo: &Kobo,
    merchant: Uuid,
    mode: Mode,
    payment: Option<Uuid>,
    limit: usize,
    starting_after: Option<Uuid>,
) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    let (table, prefix) = match payment {
        Some(p) => (
            Table::RefundByPayment,
            scope_key(merchant, mode).bytes(p.as_bytes()).build(),
        ),
        None => (Table::RefundIndex, scope_key(merchant, mode).build()),
    };
    let before = match starting_after {
        Some(id) => match read.get_decoded::<Refund>(Table::Refunds, id.as_bytes())? {
            Some(r) if r.merchant == merchant && r.mode == mode => {
                let mut k = prefix.clone();
                k.extend_from_slice(&r.seq.to_be_bytes());
                Some(k)
            }
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("no such refund: {id}"),
                ))
            }
        },
        None => None,
    };
    let mut data = Vec::new();
    let mut has_more = false;
    read.scan_prefix_rev(table, &prefix, before.as_deref(), |_, v| {
        let id = Uuid::from_slice(v)
            .map_err(|_| kobo_storage::StoreError::Redb("bad refund index".into()))?;
        if let Some(r) = read.get_decoded::<Refund>(Table::Refunds, id.as_bytes())? {
            if data.len() == limit {
                has_more = true;
                return Ok(false);
            }
            data.push(r.to_api());
        }
        Ok(true)
    })?;
    Ok(Page { data, has_more })
}

pub fn list_disputes(
    kobo: &Kobo,
    merchant: Uuid,
    mode: Mode,
    limit: usize,
    starting_after: Option<Uuid>,
) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    let prefix = scope_key(merchant, mode).build();
    let before = match starting_after {
        Some(id) => match read.get_decoded::<Dispute>(Table::Disputes, id.as_bytes())? {
            Some(d) if d.merchant == merchant && d.mode == mode => {
                Some(dispute_list_key(merchant, mode, d.seq))
            }
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("no such dispute: {id}"),
                ))
            }
        },
        None => None,
    };
    let mut data = Vec::new();
    let mut has_more = false;
    read.scan_prefix_rev(Table::DisputeIndex, &prefix, before.as_deref(), |_, v| {
        let id = Uuid::from_slice(v)
            .map_err(|_| kobo_storage::StoreError::Redb("bad dispute index".into()))?;
        if let Some(d) = read.get_decoded::<Dispute>(Table::Disputes, id.as_bytes())? {
            if data.len() == limit {
                has_more = true;
                return Ok(false);
            }
            data.push(d.to_api());
        }
        Ok(true)
    })?;
    Ok(Page { data, has_more })
}

/// After a restart, asks again about every refund still awaiting its
/// provider's confirmation.
pub fn resume_confirmations(kobo: &Arc<Kobo>) -> DomainResult<usize> {
    let read = kobo.store.read()?;
    let mut n = 0;
    read.scan_prefix(Table::RefundsAwaiting, &[], None, |k, _| {
        let id = Uuid::from_slice(k)
            .map_err(|_| kobo_storage::StoreError::Redb("bad refund key".into()))?;
        if let Some(r) = read.get_decoded::<Refund>(Table::Refunds, id.as_bytes())? {
            if r.status == RefundStatus::Pending {
                super::actor::ask_provider(
                    kobo,
                    r.merchant,
                    r.mode,
                    r.payment_intent,
                    r.id,
                    r.amount,
                );
                n += 1;
            }
        }
        Ok(true)
    })?;
    Ok(n)
}
