//! Customer reads and lists, identity checks (run by the directory), the
//! customer of a new payment, and the index backfill of customers stored
//! before the indexes existed.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use super::deps::CustomerDeps;
use super::directory::{self, by_email, commit, CustomerAction, Customers, Outcome};
use super::identity::{IdentityAnswer, IdentityRequest};
use super::{
    check_not_blocked, identity_check_interval, identity_check_window, load, phone_prefix,
    Customer, IdentityStatus, RiskAction,
};
use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::event::{self, Event};
use crate::idempotency::IdempotencySave;
use crate::ids::{scope_key, Mode};
use crate::paging::{scan_typed, ListView};
use crate::timer::{Timer, TimerKind};

type Scope = (Uuid, Mode);

pub struct CustomerFilter {
    pub limit: usize,
    pub starting_after: Option<Uuid>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub brand: Option<Uuid>,
    pub risk_action: Option<RiskAction>,
}

impl CustomerFilter {
    fn keeps(&self, c: &Customer) -> bool {
        c.deleted_at.is_none()
            && self
                .email
                .as_ref()
                .is_none_or(|e| c.email.as_ref().is_some_and(|x| x.eq_ignore_ascii_case(e)))
            && self
                .phone
                .as_ref()
                .is_none_or(|p| c.phone.as_ref() == Some(p))
            && self.brand.is_none_or(|b| c.brand == Some(b))
            && self.risk_action.is_none_or(|r| c.risk_action == r)
    }
}

/// Newest first, with a cursor (a customer of this merchant and mode, else
/// 400 on `starting_after`). The most selective filter picks the index
/// (email, then phone, brand, risk action); the others filter.
pub fn list(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    f: &CustomerFilter,
) -> DomainResult<ListView<super::CustomerView>> {
    let before = match f.starting_after {
        Some(id) => {
            let c: Option<Customer> = kobo
                .store
                .read()?
                .get_decoded(Table::Customers, id.as_bytes())?;
            match c {
                Some(c) if c.merchant == merchant && c.mode == mode => Some(c.seq),
                _ => {
                    return Err(DomainError::invalid(
                        "starting_after",
                        format!("no such customer: {id}"),
                    ))
                }
            }
        }
        None => None,
    };
    if let Some(email) = &f.email {
        // One live customer per email: the page is it, or nothing.
        let found = by_email(kobo, (merchant, mode), email)?
            .filter(|c| f.keeps(c) && before.is_none_or(|s| c.seq < s));
        let data = found.iter().map(Customer::view).collect();
        return Ok(ListView::page(data, false));
    }
    let scope = || scope_key(merchant, mode);
    let (index, prefix) = match (&f.phone, f.brand, f.risk_action) {
        (Some(p), _, _) => (Table::CustomerPhoneIndex, phone_prefix(scope(), p).build()),
        (None, Some(b), _) => (
            Table::CustomerBrandIndex,
            scope().bytes(b.as_bytes()).build(),
        ),
        (None, None, Some(r)) => (Table::CustomerRiskIndex, scope().u8(r.byte()).build()),
        (None, None, None) => (Table::CustomerIndex, scope().build()),
    };
    let (data, has_more) = scan_typed(
        kobo,
        (Table::Customers, index),
        &prefix,
        before,
        f.limit,
        |c: &Customer| f.keeps(c),
    )?;
    Ok(ListView::page(
        data.iter().map(Customer::view).collect(),
        has_more,
    ))
}

/// The customer a new payment belongs to: `customer` (a live customer of
/// this merchant and mode, else 404 with `param: customer`), else the
/// customer of `email`, found or made (under `brand`). A denied customer:
/// 409 `customer_blocked`.
pub async fn for_payment(
    kobo: &Env,
    customers: &Customers,
    (merchant, mode): Scope,
    brand: Uuid,
    customer: Option<Uuid>,
    email: Option<&str>,
) -> DomainResult<Option<Uuid>> {
    let c = match (customer, email) {
        (Some(id), _) => load(kobo, merchant, mode, id).map_err(|e| e.with_param("customer"))?,
        (None, Some(email)) => match by_email(kobo, (merchant, mode), email)? {
            // The common case, a returning customer, needs no directory.
            Some(c) => c,
            None => {
                let action = CustomerAction::FindOrCreate {
                    email: email.to_string(),
                    brand: Some(brand),
                };
                match directory::send(customers, (merchant, mode), action, None).await? {
                    Outcome::Created(c) | Outcome::Existing(c) => c,
                    other => return Err(DomainError::internal(format!("{other:?}"))),
                }
            }
        },
        (None, None) => return Ok(None),
    };
    check_not_blocked(&c)?;
    Ok(Some(c.id))
}

fn last4(s: &str) -> String {
    s[s.len().saturating_sub(4)..].to_string()
}

/// `verify_identity` (in the directory): hands the check to the provider
/// and makes the identity `pending` with a check timer. A verified
/// customer is answered unchanged.
pub(super) async fn verify_identity(
    k: &CustomerDeps,
    scope: Scope,
    id: Uuid,
    request: IdentityRequest,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Outcome> {
    let c = load(k, scope.0, scope.1, id)?;
    if c.identity.status == IdentityStatus::Verified {
        commit(k, Batch::new(), idem, 200, &c.to_api()).await?;
        return Ok(Outcome::Changed(c));
    }
    let reference = Uuid::new_v4();
    k.identity
        .for_mode(scope.1)
        .submit(reference, &request)
        .await?;
    let now = k.clock.now();
    let mut batch = Batch::new();
    if let Some(due) = c.identity.check_due {
        batch.delete(Table::Timers, timer_key(due, id));
    }
    let due = now + identity_check_interval();
    let mut after = c.clone();
    after.identity = super::Identity {
        status: IdentityStatus::Pending,
        bvn_last4: Some(request.bvn.last4()),
        bank_code: Some(request.bank_code.clone()),
        account_number_last4: Some(last4(&request.account_number)),
        failure_reason: None,
        requested_at: Some(now),
        verified_at: None,
        reference: Some(reference),
        check_due: Some(due),
    };
    after.updated_at = Some(now);
    Timer::new(TimerKind::CustomerIdentityCheck, id, scope.0, scope.1).schedule(&mut batch, due);
    c.update_in(&after, &mut batch);
    commit(k, batch, idem, 200, &after.to_api()).await?;
    Ok(Outcome::Changed(after))
}

fn timer_key(due: DateTime<Utc>, id: Uuid) -> Vec<u8> {
    Timer::key(due, TimerKind::CustomerIdentityCheck, id)
}

/// The identity check timer (in the directory): asks the provider; a
/// verdict moves the identity and records its event; still pending, the
/// next check is set while the check window lasts.
pub(super) async fn identity_timer(
    k: &CustomerDeps,
    scope: Scope,
    id: Uuid,
    fired: Vec<u8>,
) -> DomainResult<Outcome> {
    let mut batch = Batch::new();
    batch.delete(Table::Timers, fired.clone());
    let c = match load(k, scope.0, scope.1, id) {
        Ok(c) => Some(c),
        Err(e) if e.code == crate::error::ErrorCode::ResourceMissing => None,
        Err(e) => return Err(e),
    };
    let live = c.as_ref().filter(|c| {
        c.identity.status == IdentityStatus::Pending
            && c.identity.check_due.map(|d| timer_key(d, id)) == Some(fired.clone())
    });
    let (Some(c), Some(reference)) = (live, live.and_then(|c| c.identity.reference)) else {
        commit(k, batch, None, 200, &serde_json::Value::Null).await?;
        return Ok(Outcome::Done);
    };
    let answer = k.identity.for_mode(scope.1).status(reference).await?;
    let now = k.clock.now();
    let mut after = c.clone();
    after.identity.check_due = None;
    let event = match answer {
        IdentityAnswer::Verified => {
            after.identity.status = IdentityStatus::Verified;
            after.identity.verified_at = Some(now);
            Some(event::CUSTOMER_IDENTITY_VERIFIED)
        }
        IdentityAnswer::Failed(reason) => {
            after.identity.status = IdentityStatus::Failed;
            after.identity.failure_reason = Some(reason);
            Some(event::CUSTOMER_IDENTITY_FAILED)
        }
        IdentityAnswer::Pending => {
            let requested = c.identity.requested_at.unwrap_or(now);
            if now < requested + identity_check_window() {
                let due = now + identity_check_interval();
                after.identity.check_due = Some(due);
                Timer::new(TimerKind::CustomerIdentityCheck, id, scope.0, scope.1)
                    .schedule(&mut batch, due);
            }
            None
        }
    };
    if let Some(t) = event {
        after.updated_at = Some(now);
        Event::record(k, scope, t, after.to_api(), now, &mut batch);
    }
    c.update_in(&after, &mut batch);
    commit(k, batch, None, 200, &serde_json::Value::Null).await?;
    Ok(Outcome::Done)
}

/// The meta key marking the customer index backfill done.
const META_BACKFILL: &[u8] = b"customer_indexes_v1";

/// Once per store: gives the customers stored before these indexes (made
/// by mandates) their rows: risk action and, per email, the oldest
/// customer of that email in its merchant's mode (later duplicates, which
/// mandates used to make, stay readable by id but are not found by email).
pub async fn backfill_indexes(kobo: &Env) -> DomainResult<usize> {
    let read = kobo.store.read()?;
    if read.get(Table::Meta, META_BACKFILL)?.is_some() {
        return Ok(0);
    }
    let mut customers: Vec<Customer> = Vec::new();
    read.scan_prefix(Table::Customers, &[], None, |_, v| {
        customers.push(kobo_storage::decode(v)?);
        Ok(true)
    })?;
    customers.sort_by_key(|c| c.seq);
    let mut batch = Batch::new();
    let mut seen = std::collections::HashSet::new();
    for c in customers.iter().filter(|c| c.deleted_at.is_none()) {
        let id = c.id.as_bytes().to_vec();
        let risk = scope_key(c.merchant, c.mode)
            .u8(c.risk_action.byte())
            .u64(c.seq);
        batch.put_raw(Table::CustomerRiskIndex, risk.build(), id.clone());
        if let Some(key) = c.email_key() {
            if read.get(Table::CustomerEmails, &key)?.is_none() && seen.insert(key.clone()) {
                batch.put_raw(Table::CustomerEmails, key, id);
            }
        }
    }
    batch.put_raw(Table::Meta, META_BACKFILL.to_vec(), vec![1]);
    drop(read);
    kobo.writer
        .commit(batch)
        .await
        .map_err(|e| DomainError::internal(e.to_string()))?;
    Ok(customers.len())
}
