//! Payment-intent reads from store snapshots: one intent, a filtered
//! newest-first list, an intent's charge attempts.

use uuid::Uuid;

use kobo_storage::{decode, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::ids::{scope_key, Mode};
use crate::paging::{Page, Walk};
use crate::payment_intent::link::link_prefix;
use crate::payment_intent::service::{
    attempt_key, customer_prefix, status_prefix, virtual_account_prefix,
};
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

/// The fields a payment intent is stored with first: whose it is. Decodes
/// from either stored format (postcard reads a prefix; JSON skips the
/// rest), without the rest of the intent.
#[derive(Debug, PartialEq, Eq, serde::Deserialize)]
pub(crate) struct IntentScope {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
}

/// 404 unless intent `id` is `merchant`'s in `mode`: the check before an
/// intent's actor is asked (so another merchant's request never reaches,
/// waits in or activates the actor), reading only the head of the row.
pub fn check_payment_intent(kobo: &Env, merchant: Uuid, mode: Mode, id: Uuid) -> DomainResult<()> {
    let read = kobo.store.read()?;
    match read.get_decoded::<IntentScope>(Table::PaymentIntents, id.as_bytes())? {
        Some(s) if s.merchant == merchant && s.mode == mode => Ok(()),
        _ => Err(DomainError::not_found("payment_intent", id)),
    }
}

pub struct IntentFilter {
    pub limit: usize,
    pub starting_after: Option<Uuid>,
    pub status: Option<Status>,
    pub customer: Option<Uuid>,
    /// The payments transfers into this virtual account made.
    pub virtual_account: Option<Uuid>,
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
    let (index, prefix) = match (f.status, f.virtual_account, f.customer) {
        (Some(s), _, _) => (
            Table::PaymentIntentStatusIndex,
            status_prefix(merchant, mode, s).build(),
        ),
        (None, Some(v), _) => (
            Table::PaymentIntentVirtualAccountIndex,
            virtual_account_prefix(merchant, mode, v).build(),
        ),
        (None, None, Some(c)) => (
            Table::PaymentIntentCustomerIndex,
            customer_prefix(merchant, mode, c).build(),
        ),
        (None, None, None) => match f.payment_link {
            Some(l) => (
                Table::PaymentIntentLinkIndex,
                link_prefix(merchant, mode, l).build(),
            ),
            None => (Table::PaymentIntentIndex, scope_key(merchant, mode).build()),
        },
    };
    let before_seq = match f.starting_after {
        Some(id) => {
            let cursor: Option<PaymentIntent> = kobo
                .store
                .read()?
                .get_decoded(Table::PaymentIntents, id.as_bytes())?;
            match cursor {
                Some(c) if c.merchant == merchant && c.mode == mode => Some(c.seq),
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
    let walk = Walk {
        objects: Table::PaymentIntents,
        index,
        prefix: &prefix,
        before_seq,
        limit: f.limit,
    };
    // The index is exact; the other filters apply to what it lists.
    let keep = |intent: &PaymentIntent| {
        let account = intent.bank_credit.as_ref().map(|c| c.virtual_account);
        f.customer.is_none_or(|c| intent.customer == Some(c))
            && f.virtual_account.is_none_or(|v| account == Some(v))
            && f.payment_link
                .is_none_or(|l| intent.payment_link == Some(l))
    };
    walk.page(kobo, keep, |intent| intent.to_api(None))
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

/// Whether a payment for `invoice` (of `customer`) is `processing`: the
/// money may still arrive, so the invoice cannot be voided yet (the
/// invoice books receive this reader at assembly, as they cannot import
/// payment intents).
pub fn invoice_payment_processing(
    kobo: &Env,
    (merchant, mode): (Uuid, Mode),
    customer: Uuid,
    invoice: Uuid,
) -> DomainResult<bool> {
    let read = kobo.store.read()?;
    let prefix = customer_prefix(merchant, mode, customer).build();
    let mut found = false;
    read.scan_prefix_rev(Table::PaymentIntentCustomerIndex, &prefix, None, |_, v| {
        let Ok(id) = Uuid::from_slice(v) else {
            return Ok(true);
        };
        let intent: Option<PaymentIntent> =
            read.get_decoded(Table::PaymentIntents, id.as_bytes())?;
        found =
            intent.is_some_and(|i| i.invoice == Some(invoice) && i.status == Status::Processing);
        Ok(!found)
    })?;
    Ok(found)
}
