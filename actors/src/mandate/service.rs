//! Creating mandates (and the customer of a new email), loads and lists.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use kobo_storage::{Batch, KeyBuf, Table};

use crate::customer::{self, Customer};
use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::{new_id, random_base62, scope_key, Mode};
use crate::mandate::{approval_window, check_interval, Mandate, MandateStatus, MandateView};
use crate::paging::Page;
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

/// Creates a pending mandate (and, for `customer_email`, its customer):
/// the mandate, its list indexes, its periodic-check and expiry timers and
/// the saved response in one batch.
pub async fn create(
    kobo: &super::deps::MandateDeps,
    merchant: Uuid,
    mode: Mode,
    req: CreateMandate,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<MandateView>> {
    let now = kobo.clock.now();
    let provider = kobo.mandate_providers.for_mode(mode);
    let mut batch = Batch::new();
    let customer = customer_of(kobo, merchant, mode, &req, &mut batch, now)?;
    let id = new_id(now);
    let reference = format!("{}{}", id.simple(), random_base62(24));
    let authorization_url = provider.authorization_url(&kobo.config.base_url, &reference)?;
    let m = Mandate {
        id,
        merchant,
        mode,
        seq: kobo.seq.next(),
        customer: customer.id,
        customer_email: customer.email,
        customer_name: customer.name,
        callback_url: req.callback_url,
        status: MandateStatus::Pending,
        authorization_url,
        authorization_reference: reference,
        bank_name: None,
        account_name: None,
        account_number_last4: None,
        failure_reason: None,
        created_at: now,
        updated_at: now,
        activated_at: None,
        canceled_at: None,
        expires_at: now + approval_window(),
        check_due: Some(now + check_interval()),
        version: 1,
    };
    insert(&mut batch, &m);
    let answer = Answer::save(Outcome::Created(m.view()), idem, &mut batch, now);
    kobo.writer
        .commit(batch)
        .await
        .map_err(|e| DomainError::internal(e.to_string()))?;
    Ok(answer)
}

/// Whose mandate it is.
struct MandateCustomer {
    id: Uuid,
    email: Option<String>,
    name: Option<String>,
}

/// The customer of a new mandate: the one named (404 when it is not this
/// merchant's in this mode), or a new one for `customer_email` (added to
/// `batch`); exactly one of the two is given (400).
fn customer_of(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    req: &CreateMandate,
    batch: &mut Batch,
    now: DateTime<Utc>,
) -> DomainResult<MandateCustomer> {
    match (req.customer, &req.customer_email) {
        (Some(id), None) => {
            let c =
                customer::load(kobo, merchant, mode, id).map_err(|e| e.with_param("customer"))?;
            let name = req.customer_name.clone().or(c.name.clone());
            Ok(MandateCustomer {
                id: c.id,
                email: c.email,
                name,
            })
        }
        (None, Some(email)) => {
            let c = Customer {
                id: new_id(now),
                merchant,
                mode,
                seq: kobo.seq.next(),
                email: Some(email.clone()),
                name: req.customer_name.clone(),
                created_at: now,
            };
            c.add_to(batch);
            Ok(MandateCustomer {
                id: c.id,
                email: Some(email.clone()),
                name: req.customer_name.clone(),
            })
        }
        _ => Err(DomainError::request(
            ErrorCode::ParameterInvalid,
            Some("customer"),
            "send exactly one of `customer` and `customer_email`",
        )),
    }
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
    let read = kobo.store.read()?;
    let (table, prefix) = match (f.customer, f.status) {
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
    let before = match f.starting_after {
        Some(id) => match read.get_decoded::<Mandate>(Table::Mandates, id.as_bytes())? {
            Some(m) if m.merchant == merchant && m.mode == mode => {
                let mut k = prefix.clone();
                k.extend_from_slice(&m.seq.to_be_bytes());
                Some(k)
            }
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("no such mandate: {id}"),
                ))
            }
        },
        None => None,
    };
    let mut data: Vec<Value> = Vec::new();
    let mut has_more = false;
    read.scan_prefix_rev(table, &prefix, before.as_deref(), |_, v| {
        let id = Uuid::from_slice(v)
            .map_err(|_| kobo_storage::StoreError::Redb("bad mandate index".into()))?;
        let Some(m) = read.get_decoded::<Mandate>(Table::Mandates, id.as_bytes())? else {
            return Ok(true);
        };
        if f.status.is_some_and(|s| m.status != s) {
            return Ok(true);
        }
        if data.len() == f.limit {
            has_more = true;
            return Ok(false);
        }
        data.push(m.to_api());
        Ok(true)
    })?;
    Ok(Page { data, has_more })
}
