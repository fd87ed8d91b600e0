//! Subscription reads, keys and commits: create (nothing can name a
//! subscription before it exists), one subscription, the list and its
//! filters, and `commit`, the one batch of a decision (the object, its
//! index rows, the open-subscription claim, events, its timer, the saved
//! response).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use kobo_storage::{Batch, CommitError, KeyBuf, Table};

use super::machine::{begin, next_moment, work};
use super::{CollectionMethod, Subscription, SubscriptionStatus, SubscriptionView, Terms};
use crate::calendar::lagos_date;
use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event::{self, Event};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::{new_id, scope_key, Mode};
use crate::paging::{Page, Walk};
use crate::timer::{Timer, TimerKind};

pub fn list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

pub fn customer_prefix(merchant: Uuid, mode: Mode, customer: Uuid) -> KeyBuf {
    scope_key(merchant, mode).bytes(customer.as_bytes())
}

pub fn plan_prefix(merchant: Uuid, mode: Mode, plan: Uuid) -> KeyBuf {
    scope_key(merchant, mode).bytes(plan.as_bytes())
}

pub fn status_prefix(merchant: Uuid, mode: Mode, status: SubscriptionStatus) -> KeyBuf {
    scope_key(merchant, mode).u8(status.byte())
}

/// The claim of a customer's one unfinished subscription to a plan.
pub fn open_key(s: &Subscription) -> Vec<u8> {
    scope_key(s.merchant, s.mode)
        .bytes(s.customer.as_bytes())
        .bytes(s.terms.plan.as_bytes())
        .build()
}

/// The claim of debit `attempt` of `period`.
pub fn charge_key(subscription: Uuid, period: u32, attempt: u32) -> Vec<u8> {
    KeyBuf::new()
        .bytes(subscription.as_bytes())
        .u32(period)
        .u32(attempt)
        .build()
}

/// The payment intent of a claimed debit attempt.
pub fn charge_of(kobo: &Env, key: &[u8]) -> DomainResult<Option<Uuid>> {
    let row = kobo.store.read()?.get(Table::SubscriptionCharges, key)?;
    Ok(row.and_then(|v| Uuid::from_slice(&v).ok()))
}

pub fn load_any(kobo: &Env, id: Uuid) -> DomainResult<Option<Subscription>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::Subscriptions, id.as_bytes())?)
}

/// The merchant's subscription in this mode, else 404.
pub fn load(kobo: &Env, merchant: Uuid, mode: Mode, id: Uuid) -> DomainResult<Subscription> {
    match load_any(kobo, id)? {
        Some(s) if s.merchant == merchant && s.mode == mode => Ok(s),
        _ => Err(DomainError::not_found("subscription", id)),
    }
}

/// A new subscription's inputs, checked by the caller (customer, plan
/// active, mandate active and the customer's).
#[derive(Debug, Clone)]
pub struct NewSubscription {
    pub customer: Uuid,
    pub brand: Uuid,
    pub terms: Terms,
    pub collection_method: CollectionMethod,
    pub mandate: Option<Uuid>,
    pub start_at: Option<DateTime<Utc>>,
    pub trial_days: u32,
    pub days_until_due: u32,
    pub metadata: Map<String, Value>,
}

pub fn subscription_exists() -> DomainError {
    DomainError::state(
        ErrorCode::SubscriptionExists,
        "this customer already has an unfinished subscription to this plan",
    )
}

/// Creates a subscription: scheduled, trialing, or incomplete with its
/// first period's bill (made by its actor right after: its timer is due
/// at once). The open-subscription claim is taken absent in the batch.
pub async fn create(
    kobo: &Env,
    (merchant, mode): (Uuid, Mode),
    n: NewSubscription,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<SubscriptionView>> {
    let now = kobo.clock.now();
    let at = n.start_at.filter(|t| *t > now);
    let mut s = Subscription {
        id: new_id(now),
        merchant,
        mode,
        seq: kobo.seq.next(),
        customer: n.customer,
        brand: n.brand,
        terms: n.terms,
        collection_method: n.collection_method,
        mandate: n.mandate,
        days_until_due: n.days_until_due,
        status: SubscriptionStatus::Scheduled,
        start_at: at.unwrap_or(now),
        trial_days: n.trial_days,
        trial_start: None,
        trial_end: None,
        trial_will_end_at: None,
        period: 0,
        current_period_start: at.unwrap_or(now),
        current_period_end: at.unwrap_or(now),
        anchor: lagos_date(at.unwrap_or(now)),
        anchor_period: 1,
        billed: 0,
        ever_paid: false,
        incomplete_expires_at: None,
        bills: Vec::new(),
        pending_change: None,
        cancel_at_period_end: false,
        canceled_at: None,
        cancellation_reason: None,
        ended_at: None,
        renewed_period: None,
        latest_invoice: None,
        metadata: n.metadata,
        created_at: now,
        updated_at: now,
        timer_at: None,
    };
    if at.is_none() {
        begin(&mut s, now, n.trial_days);
    }
    let mut batch = Batch::new();
    let open = open_key(&s);
    batch
        .require_absent(Table::SubscriptionOpen, open.clone())
        .put_raw(Table::SubscriptionOpen, open, s.id.as_bytes().to_vec());
    let events = [event::SUBSCRIPTION_CREATED];
    let kind = Kind::Created;
    match commit(kobo, None, &mut s, &events, None, batch, idem, kind, now).await {
        Err(e) if e.code == ErrorCode::SubscriptionExists => Err(e.with_param("plan")),
        r => r,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Created,
    Updated,
}

/// Commits `after` (the decision on `before`; none for a create): the
/// object, its index rows, the open claim released when it ends (or moved
/// with a plan change), events, its timer (now while work is pending,
/// else its next moment; `fired` deleted), and the saved response.
#[allow(clippy::too_many_arguments)]
pub async fn commit(
    kobo: &Env,
    before: Option<&Subscription>,
    after: &mut Subscription,
    events: &[&str],
    fired: Option<Vec<u8>>,
    mut batch: Batch,
    idem: Option<&IdempotencySave>,
    kind: Kind,
    now: DateTime<Utc>,
) -> DomainResult<Answer<SubscriptionView>> {
    let (m, mode, seq) = (after.merchant, after.mode, after.seq);
    batch.owned_by(m.as_bytes());
    let id = after.id.as_bytes().to_vec();
    if let Some(key) = fired {
        batch.delete(Table::Timers, key);
    }
    let wanted = match work(after, now) {
        Some(_) => Some(now),
        None => next_moment(after),
    };
    let timer = Timer::new(TimerKind::SubscriptionDue, after.id, m, mode);
    if wanted != after.timer_at {
        if let Some(old) = after.timer_at {
            batch.delete(
                Table::Timers,
                Timer::key(old, TimerKind::SubscriptionDue, after.id),
            );
        }
        after.timer_at = wanted;
    }
    if let Some(due) = wanted {
        timer.schedule(&mut batch, due);
    }
    match before {
        None => {
            batch
                .put_raw(Table::SubscriptionIndex, list_key(m, mode, seq), id.clone())
                .put_raw(
                    Table::SubscriptionCustomerIndex,
                    customer_prefix(m, mode, after.customer).u64(seq).build(),
                    id.clone(),
                )
                .put_raw(
                    Table::SubscriptionPlanIndex,
                    plan_prefix(m, mode, after.terms.plan).u64(seq).build(),
                    id.clone(),
                )
                .put_raw(
                    Table::SubscriptionStatusIndex,
                    status_prefix(m, mode, after.status).u64(seq).build(),
                    id.clone(),
                )
                .note_seq(seq);
        }
        Some(b) => {
            if b.status != after.status {
                batch
                    .delete(
                        Table::SubscriptionStatusIndex,
                        status_prefix(m, mode, b.status).u64(seq).build(),
                    )
                    .put_raw(
                        Table::SubscriptionStatusIndex,
                        status_prefix(m, mode, after.status).u64(seq).build(),
                        id.clone(),
                    );
            }
            if b.terms.plan != after.terms.plan {
                batch
                    .delete(
                        Table::SubscriptionPlanIndex,
                        plan_prefix(m, mode, b.terms.plan).u64(seq).build(),
                    )
                    .put_raw(
                        Table::SubscriptionPlanIndex,
                        plan_prefix(m, mode, after.terms.plan).u64(seq).build(),
                        id.clone(),
                    );
                if !b.status.ended() {
                    let new = open_key(after);
                    batch
                        .delete(Table::SubscriptionOpen, open_key(b))
                        .require_absent(Table::SubscriptionOpen, new.clone())
                        .put_raw(Table::SubscriptionOpen, new, id.clone());
                }
            }
            if after.status.ended() && !b.status.ended() {
                batch.delete(Table::SubscriptionOpen, open_key(after));
            }
        }
    }
    batch.put(Table::Subscriptions, id, &*after);
    let object = after.to_api();
    for t in events {
        Event::record(kobo, (m, mode), t, object.clone(), now, &mut batch);
    }
    let view = after.view();
    let outcome = match kind {
        Kind::Created => Outcome::Created(view),
        Kind::Updated => Outcome::Updated(view),
    };
    let answer = Answer::save(outcome, idem, &mut batch, now);
    match kobo.writer.commit(batch).await {
        Ok(()) => Ok(answer),
        Err(CommitError::Conflict { .. }) => Err(subscription_exists()),
        Err(e) => Err(DomainError::from(e)),
    }
}

pub struct SubscriptionFilter {
    pub limit: usize,
    pub starting_after: Option<Uuid>,
    pub customer: Option<Uuid>,
    pub plan: Option<Uuid>,
    pub status: Option<SubscriptionStatus>,
}

/// Newest first, with a cursor (a subscription of this merchant and mode,
/// else 400 on `starting_after`); the narrowest index the filters name.
pub fn list(kobo: &Env, merchant: Uuid, mode: Mode, f: &SubscriptionFilter) -> DomainResult<Page> {
    let before = match f.starting_after {
        Some(id) => match load_any(kobo, id)? {
            Some(s) if s.merchant == merchant && s.mode == mode => Some(s.seq),
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("no such subscription: {id}"),
                ))
            }
        },
        None => None,
    };
    let (index, prefix) = match (f.customer, f.plan, f.status) {
        (Some(c), _, _) => (
            Table::SubscriptionCustomerIndex,
            customer_prefix(merchant, mode, c).build(),
        ),
        (None, Some(p), _) => (
            Table::SubscriptionPlanIndex,
            plan_prefix(merchant, mode, p).build(),
        ),
        (None, None, Some(s)) => (
            Table::SubscriptionStatusIndex,
            status_prefix(merchant, mode, s).build(),
        ),
        (None, None, None) => (Table::SubscriptionIndex, scope_key(merchant, mode).build()),
    };
    let walk = Walk {
        objects: Table::Subscriptions,
        index,
        prefix: &prefix,
        before_seq: before,
        limit: f.limit,
    };
    let keeps = |s: &Subscription| {
        f.customer.is_none_or(|c| s.customer == c)
            && f.plan.is_none_or(|p| s.terms.plan == p)
            && f.status.is_none_or(|st| s.status == st)
    };
    walk.page(kobo, keeps, |s: &Subscription| s.to_api())
}
