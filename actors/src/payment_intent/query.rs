//! Payment-intent reads from store snapshots: one intent, a filtered
//! newest-first list, an intent's charge attempts.

use uuid::Uuid;

use kobo_storage::{decode, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::ids::{scope_key, Mode};
use crate::paging::Page;
use crate::payment_intent::link::link_prefix;
use crate::payment_intent::service::{attempt_key, customer_prefix, status_prefix};
use crate::payment_intent::{ChargeAttempt, PaymentIntent, Status};

pub fn payment_intent(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    id: Uuid,
) -> DomainResult<PaymentIntent> {
    let read = kobo.store.read()?;
    let found: Option<PaymentIntent> = read.get_decoded(Table::PaymentIntents, id.as_bytes())?;
    match found {
        Some(i) if i.merchant == merchant && i.mode == mode => Ok(i),
        _ => Err(DomainError::not_found("payment_intent", id)),
    }
}

pub struct IntentFilter {
    pub limit: usize,
    pub starting_after: Option<Uuid>,
    pub status: Option<Status>,
    pub customer: Option<Uuid>,
    /// Only the intents of this payment link.
    pub payment_link: Option<Uuid>,
}

/// Newest first. The cursor is the last id of the previous page; its place
/// (creation sequence) is fixed, so pages never skip or repeat an item even
/// while new intents are created.
pub fn list_payment_intents(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    f: &IntentFilter,
) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    let (table, prefix) = match (f.status, f.customer) {
        (Some(s), _) => (
            Table::PaymentIntentStatusIndex,
            status_prefix(merchant, mode, s).build(),
        ),
        (None, Some(c)) => (
            Table::PaymentIntentCustomerIndex,
            customer_prefix(merchant, mode, c).build(),
        ),
        (None, None) => match f.payment_link {
            Some(l) => (
                Table::PaymentIntentLinkIndex,
                link_prefix(merchant, mode, l).build(),
            ),
            None => (Table::PaymentIntentIndex, scope_key(merchant, mode).build()),
        },
    };
    let before = match f.starting_after {
        Some(id) => {
            let cursor: Option<PaymentIntent> =
                read.get_decoded(Table::PaymentIntents, id.as_bytes())?;
            match cursor {
                Some(c) if c.merchant == merchant && c.mode == mode => {
                    let mut k = prefix.clone();
                    k.extend_from_slice(&c.seq.to_be_bytes());
                    Some(k)
                }
                _ => {
                    return Err(DomainError::invalid(
                        "starting_after",
                        format!("no such payment_intent: {id}"),
                    ))
                }
            }
        }
        None => None,
    };
    let mut data = Vec::new();
    let mut has_more = false;
    read.scan_prefix_rev(table, &prefix, before.as_deref(), |_, v| {
        let id =
            Uuid::from_slice(v).map_err(|_| kobo_storage::StoreError::Redb("bad index".into()))?;
        let intent: PaymentIntent = match read.get_decoded(Table::PaymentIntents, id.as_bytes())? {
            Some(i) => i,
            None => return Ok(true),
        };
        // The status index is exact; the customer filter also applies when
        // listing by status.
        if f.customer.is_some_and(|c| intent.customer != Some(c))
            || f.payment_link
                .is_some_and(|l| intent.payment_link != Some(l))
        {
            return Ok(true);
        }
        if data.len() == f.limit {
            has_more = true;
            return Ok(false);
        }
        data.push(intent.to_api(None));
        Ok(true)
    })?;
    Ok(Page { data, has_more })
}

pub fn charge_attempts(kobo: &Env, intent: &PaymentIntent) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    let mut data = Vec::new();
    read.scan_prefix(
        Table::ChargeAttempts,
        &attempt_key(intent.id, 0)[..16],
        None,
        |_, v| {
            let a: ChargeAttempt = decode(v)?;
            data.push(a.to_api());
            Ok(true)
        },
    )?;
    Ok(Page {
        data,
        has_more: false,
    })
}
