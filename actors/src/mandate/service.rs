//! Creating mandates (through the customer directory, which finds or
//! makes the customer of an email), loads and lists.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use kobo_storage::{Batch, KeyBuf, Table};

use crate::customer::directory::{self, BuildFn, LinkTo};
use crate::customer::Customer;
use crate::direct_debit::MandateProviders;
use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::{new_id, random_base62, scope_key, Mode};
use crate::mandate::{approval_window, check_interval, Mandate, MandateStatus, MandateView};
use crate::paging::{Page, Walk};
use crate::timer::{Timer, TimerKind};

/// A validated create request.
#[derive(Debug, Clone)]
pub struct CreateMandate {
    /// An existing customer, or
    pub customer: Option<Uuid>,
    /// the email of a new one (exactly one of the two).
    pub customer_email: Option<String>,
    pub customer_name: Option<String>,
    pub callback_url: Option<String>,
}

pub fn list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

pub fn status_prefix(merchant: Uuid, mode: Mode, status: MandateStatus) -> KeyBuf {
    scope_key(merchant, mode).u8(status.byte())
}

pub fn customer_prefix(merchant: Uuid, mode: Mode, customer: Uuid) -> KeyBuf {
    scope_key(merchant, mode).bytes(customer.as_bytes())
}

pub fn load(kobo: &Env, id: Uuid) -> DomainResult<Option<Mandate>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::Mandates, id.as_bytes())?)
}

/// The merchant's mandate `id` in `mode` (404 otherwise).
pub fn own(kobo: &Env, merchant: Uuid, mode: Mode, id: Uuid) -> DomainResult<Mandate> {
    match load(kobo, id)? {
        Some(m) if m.merchant == merchant && m.mode == mode => Ok(m),
        _ => Err(DomainError::not_found("mandate", id)),
    }
}

/// The mandate behind a sandbox authorization reference (the mandate id
/// in simple form, then random characters).
pub fn by_authorization_reference(kobo: &Env, reference: &str) -> DomainResult<Option<Mandate>> {
    if reference.len() < 33 || reference.len() > 64 || !reference.is_ascii() {
        return Ok(None);
    }
    let Ok(id) = Uuid::try_parse(&reference[..32]) else {
        return Ok(None);
    };
    Ok(load(kobo, id)?.filter(|m| m.authorization_reference == reference))
}

/// What a new mandate is made of before its customer is known.
struct Draft {
    id: Uuid,
    merchant: Uuid,
    mode: Mode,
    seq: u64,
    now: DateTime<Utc>,
    reference: String,
    customer_name: Option<String>,
    callback_url: Option<String>,
    providers: Arc<MandateProviders>,
    base_url: String,
}

impl Draft {
    /// The mandate of customer `c` (409 `provider_not_configured` in live
    /// mode on this build).
    fn mandate(&self, c: &Customer) -> DomainResult<Mandate> {
        let authorization_url = self
            .providers
            .for_mode(self.mode)
            .authorization_url(&self.base_url, &self.reference)?;
        Ok(Mandate {
            id: self.id,
            merchant: self.merchant,
            mode: self.mode,
            seq: self.seq,
            customer: c.id,
            customer_email: c.email.clone(),
            customer_name: self.customer_name.clone().or(c.name.clone()),
            callback_url: self.callback_url.clone(),
            status: MandateStatus::Pending,
            authorization_url,
            authorization_reference: self.reference.clone(),
            bank_name: None,
            account_name: None,
            account_number_last4: None,
            failure_reason: None,
            created_at: self.now,
            updated_at: self.now,
            activated_at: None,
            canceled_at: None,
            expires_at: self.now + approval_window(),
            check_due: Some(self.now + check_interval()),
            version: 1,
        })
    }
}

/// Creates a pending mandate for `customer`, or for the customer of
/// `customer_email` (found, or made in the same batch): the mandate, its
/// list indexes, its periodic-check and expiry timers and the saved
/// response in one batch, committed through the customer directory, so
/// the customer cannot be deleted meanwhile.
pub async fn create(
    kobo: &super::deps::MandateDeps,
    merchant: Uuid,
    mode: Mode,
    req: CreateMandate,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<MandateView>> {
    let to = match (req.customer, req.customer_email) {
        (Some(id), None) => LinkTo::Id(id),
        (None, Some(email)) => LinkTo::Email {
            email,
            name: req.customer_name.clone(),
        },
        _ => {
            return Err(DomainError::request(
                ErrorCode::ParameterInvalid,
                Some("customer"),
                "send exactly one of `customer` and `customer_email`",
            ))
        }
    };
    let now = kobo.clock.now();
    let id = new_id(now);
    let draft = Draft {
        id,
        merchant,
        mode,
        seq: kobo.seq.next(),
        now,
        reference: format!("{}{}", id.simple(), random_base62(24)),
        customer_name: req.customer_name,
        callback_url: req.callback_url,
        providers: kobo.mandate_providers.clone(),
        base_url: kobo.config.base_url.clone(),
    };
    let idem = idem.cloned();
    let build: Arc<BuildFn<_>> = Arc::new(move |c: &Customer| {
        let m = draft.mandate(c)?;
        let mut batch = Batch::new();
        batch.owned_by(m.merchant.as_bytes());
        insert(&mut batch, &m);
        let answer = Answer::save(Outcome::Created(m.view()), idem.as_ref(), &mut batch, now);
        Ok((batch, answer))
    });
    let linked = directory::link_to(&kobo.customers, (merchant, mode), to, build).await?;
    match linked.result {
        Ok(()) => Ok(linked.built),
        Err(e) => Err(e.into()),
    }
}

/// Whether `customer` has a pending or active mandate (it may not be
/// deleted then).
pub fn customer_in_use(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    customer: Uuid,
) -> DomainResult<Option<&'static str>> {
    let read = kobo.store.read()?;
    let mut found = false;
    let prefix = customer_prefix(merchant, mode, customer).build();
    read.scan_prefix(Table::MandateCustomerIndex, &prefix, None, |_, v| {
        let Ok(id) = Uuid::from_slice(v) else {
            return Ok(true);
        };
        let m: Option<Mandate> = read.get_decoded(Table::Mandates, id.as_bytes())?;
        found =
            m.is_some_and(|m| matches!(m.status, MandateStatus::Pending | MandateStatus::Active));
        Ok(!found)
    })?;
    Ok(found.then_some("a pending or active mandate"))
}

/// A new mandate's rows: the object, its list indexes, its periodic-check
/// and expiry timers.
fn insert(batch: &mut Batch, m: &Mandate) {
    let (id, merchant, mode) = (m.id, m.merchant, m.mode);
    batch
        .put(Table::Mandates, id.as_bytes().to_vec(), m)
        .put_raw(
            Table::MandateIndex,
            list_key(merchant, mode, m.seq),
            id.as_bytes().to_vec(),
        )
        .put_raw(
            Table::MandateStatusIndex,
            status_prefix(merchant, mode, m.status).u64(m.seq).build(),
            id.as_bytes().to_vec(),
        )
        .put_raw(
            Table::MandateCustomerIndex,
            customer_prefix(merchant, mode, m.customer)
                .u64(m.seq)
                .build(),
            id.as_bytes().to_vec(),
        )
        .note_seq(m.seq);
    let check_due = m.check_due.expect("a new mandate is checked");
    Timer::new(TimerKind::MandateCheck, id, merchant, mode).schedule(batch, check_due);
    Timer::new(TimerKind::MandateExpire, id, merchant, mode).schedule(batch, m.expires_at);
}

pub struct MandateFilter {
    pub limit: usize,
    pub starting_after: Option<Uuid>,
    pub customer: Option<Uuid>,
    pub status: Option<MandateStatus>,
}

/// Newest first, with a cursor. With a customer, that customer's index
/// (filtered by status when asked); else the status index; else all.
pub fn list(kobo: &Env, merchant: Uuid, mode: Mode, f: &MandateFilter) -> DomainResult<Page> {
    let (index, prefix) = match (f.customer, f.status) {
        (Some(c), _) => (
            Table::MandateCustomerIndex,
            customer_prefix(merchant, mode, c).build(),
        ),
        (None, Some(s)) => (
            Table::MandateStatusIndex,
            status_prefix(merchant, mode, s).build(),
        ),
        (None, None) => (Table::MandateIndex, scope_key(merchant, mode).build()),
    };
    let before_seq = match f.starting_after {
        Some(id) => match load(kobo, id)? {
            Some(m) if m.merchant == merchant && m.mode == mode => Some(m.seq),
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("no such mandate: {id}"),
                ))
            }
        },
        None => None,
    };
    let walk = Walk {
        objects: Table::Mandates,
        index,
        prefix: &prefix,
        before_seq,
        limit: f.limit,
    };
    let keep = |m: &Mandate| f.status.is_none_or(|s| m.status == s);
    walk.page(kobo, keep, Mandate::to_api)
}
