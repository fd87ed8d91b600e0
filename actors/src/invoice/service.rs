//! Invoice reads and keys: one invoice, lists and their filters, the
//! hosted page's code, the next number of a brand, a customer's credit
//! balance and payment instructions.

use chrono::NaiveDate;
use serde_json::Value;
use uuid::Uuid;

use kobo_storage::{KeyBuf, Table};

use super::{instructions_of, Invoice, InvoiceStatus, InvoiceView};
use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::ids::{scope_key, Mode};
use crate::paging::{Page, Walk};

pub fn list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

pub fn status_prefix(merchant: Uuid, mode: Mode, status: InvoiceStatus) -> KeyBuf {
    scope_key(merchant, mode).u8(status.byte())
}

pub fn customer_prefix(merchant: Uuid, mode: Mode, customer: Uuid) -> KeyBuf {
    scope_key(merchant, mode).bytes(customer.as_bytes())
}

pub fn subscription_prefix(merchant: Uuid, mode: Mode, subscription: Uuid) -> KeyBuf {
    scope_key(merchant, mode).bytes(subscription.as_bytes())
}

/// The key of a subscription's period's invoice claim.
pub fn period_key((subscription, period): (Uuid, u32)) -> Vec<u8> {
    KeyBuf::new()
        .bytes(subscription.as_bytes())
        .u32(period)
        .build()
}

/// The invoice of a subscription's period, if made.
pub fn of_period(kobo: &Env, period: (Uuid, u32)) -> DomainResult<Option<Invoice>> {
    let read = kobo.store.read()?;
    let Some(id) = read.get(Table::SubscriptionInvoices, &period_key(period))? else {
        return Ok(None);
    };
    Ok(read.get_decoded(Table::Invoices, &id)?)
}

pub fn number_prefix(brand: Uuid, mode: Mode) -> KeyBuf {
    KeyBuf::new().bytes(brand.as_bytes()).u8(mode.byte())
}

/// The number after the highest stored for `brand` (read by its number
/// lane when it starts; see `numbers.rs`).
pub fn next_number(kobo: &Env, brand: Uuid, mode: Mode) -> DomainResult<u64> {
    let prefix = number_prefix(brand, mode).build();
    let mut last = 0;
    kobo.store
        .read()?
        .scan_prefix_rev(Table::InvoiceNumbers, &prefix, None, |k, _| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&k[prefix.len()..prefix.len() + 8]);
            last = u64::from_be_bytes(b);
            Ok(false)
        })?;
    Ok(last + 1)
}

pub fn format_number(n: u64) -> String {
    format!("INV-{n:06}")
}

/// An invoice as stored, whoever's.
pub fn load_any(kobo: &Env, id: Uuid) -> DomainResult<Option<Invoice>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::Invoices, id.as_bytes())?)
}

/// The merchant's invoice in this mode, else 404.
pub fn load(kobo: &Env, merchant: Uuid, mode: Mode, id: Uuid) -> DomainResult<Invoice> {
    match load_any(kobo, id)? {
        Some(i) if i.merchant == merchant && i.mode == mode => Ok(i),
        _ => Err(DomainError::not_found("invoice", id)),
    }
}

/// The invoice of a hosted page code.
pub fn by_code(kobo: &Env, code: &str) -> DomainResult<Option<Invoice>> {
    let read = kobo.store.read()?;
    let Some(id) = read.get(Table::InvoiceLinks, code.as_bytes())? else {
        return Ok(None);
    };
    Ok(read.get_decoded(Table::Invoices, &id)?)
}

/// The customer's credit balance (kobo, naira).
pub fn credit_balance(kobo: &Env, customer: Uuid) -> DomainResult<i64> {
    Ok(kobo
        .store
        .read()?
        .get_decoded::<i64>(Table::CustomerCredits, customer.as_bytes())?
        .unwrap_or(0))
}

/// The customer's open virtual account, as payment instructions. (Read
/// from the accounts' tables as stored data: virtual accounts sit above
/// invoices in the layers.)
pub fn payment_instructions(kobo: &Env, i: &Invoice) -> DomainResult<Option<Value>> {
    let read = kobo.store.read()?;
    let key = scope_key(i.merchant, i.mode)
        .bytes(i.customer.as_bytes())
        .build();
    let Some(id) = read.get(Table::CustomerOpenAccounts, &key)? else {
        return Ok(None);
    };
    let account: Option<Value> = read.get_decoded(Table::VirtualAccounts, &id)?;
    Ok(account
        .filter(|a| a["status"] == "active")
        .map(|a| instructions_of(&a)))
}

/// The invoice's public view.
pub fn view(kobo: &Env, i: &Invoice) -> DomainResult<InvoiceView> {
    Ok(i.view(&kobo.config.base_url, payment_instructions(kobo, i)?))
}

pub fn to_api(kobo: &Env, i: &Invoice) -> DomainResult<Value> {
    Ok(serde_json::to_value(view(kobo, i)?).expect("an invoice view serializes"))
}

/// The customer's invoices (any status), oldest first.
pub fn of_customer(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    customer: Uuid,
) -> DomainResult<Vec<Invoice>> {
    let read = kobo.store.read()?;
    let prefix = customer_prefix(merchant, mode, customer).build();
    let mut ids = Vec::new();
    read.scan_prefix(Table::InvoiceCustomerIndex, &prefix, None, |_, v| {
        ids.push(v.to_vec());
        Ok(true)
    })?;
    let mut out = Vec::new();
    for id in ids {
        if let Some(i) = read.get_decoded::<Invoice>(Table::Invoices, &id)? {
            out.push(i);
        }
    }
    Ok(out)
}

pub struct InvoiceFilter {
    pub limit: usize,
    pub starting_after: Option<Uuid>,
    pub customer: Option<Uuid>,
    pub status: Option<InvoiceStatus>,
    pub subscription: Option<Uuid>,
    pub overdue: Option<bool>,
}

/// Newest first, with a cursor (an invoice of this merchant and mode,
/// else 400 on `starting_after`).
pub fn list(kobo: &Env, merchant: Uuid, mode: Mode, f: &InvoiceFilter) -> DomainResult<Page> {
    let before = match f.starting_after {
        Some(id) => match load_any(kobo, id)? {
            Some(i) if i.merchant == merchant && i.mode == mode => Some(i.seq),
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("no such invoice: {id}"),
                ))
            }
        },
        None => None,
    };
    let (index, prefix) = match (f.customer, f.status) {
        _ if f.subscription.is_some() => (
            Table::InvoiceSubscriptionIndex,
            subscription_prefix(merchant, mode, f.subscription.unwrap_or_default()).build(),
        ),
        (Some(c), _) => (
            Table::InvoiceCustomerIndex,
            customer_prefix(merchant, mode, c).build(),
        ),
        (None, Some(s)) => (
            Table::InvoiceStatusIndex,
            status_prefix(merchant, mode, s).build(),
        ),
        (None, None) => (Table::InvoiceIndex, scope_key(merchant, mode).build()),
    };
    let walk = Walk {
        objects: Table::Invoices,
        index,
        prefix: &prefix,
        before_seq: before,
        limit: f.limit,
    };
    let keeps = |i: &Invoice| {
        f.status.is_none_or(|s| i.status == s)
            && f.customer.is_none_or(|c| i.customer == c)
            && f.subscription.is_none_or(|s| i.subscription == Some(s))
            && f.overdue
                .is_none_or(|o| (i.overdue && i.status == InvoiceStatus::Open) == o)
    };
    walk.page(kobo, keeps, |i: &Invoice| {
        to_api(kobo, i).unwrap_or(Value::Null)
    })
}

/// The Lagos date `d` is due: overdue from 08:00 Lagos the day after.
pub fn overdue_instant(d: NaiveDate) -> chrono::DateTime<chrono::Utc> {
    crate::calendar::settlement_instant(d.succ_opt().unwrap_or(d))
}
