//! Customer reads and lists, the customer of a new payment, and the index
//! backfill of customers stored before the indexes existed.

use uuid::Uuid;

use kobo_storage::{Batch, Table};

use super::directory::{self, by_email, CustomerAction, Customers};
use super::{load, phone_prefix, refuse_blocked, Customer, RiskAction};
use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::ids::{scope_key, Mode};
use crate::paging::{Page, Walk};

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
pub fn list(kobo: &Env, merchant: Uuid, mode: Mode, f: &CustomerFilter) -> DomainResult<Page> {
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
        return Ok(Page {
            data: found.iter().map(Customer::to_api).collect(),
            has_more: false,
        });
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
    let walk = Walk {
        objects: Table::Customers,
        index,
        prefix: &prefix,
        before_seq: before,
        limit: f.limit,
    };
    walk.page(kobo, |c: &Customer| f.keeps(c), Customer::to_api)
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
    let (id, risk_action) = match (customer, email) {
        (Some(id), _) => {
            let c = load(kobo, merchant, mode, id).map_err(|e| e.with_param("customer"))?;
            (c.id, c.risk_action)
        }
        (None, Some(email)) => match by_email(kobo, (merchant, mode), email)? {
            // The common case, a returning customer, needs no directory.
            Some(c) => (c.id, c.risk_action),
            None => {
                let action = CustomerAction::FindOrCreate {
                    email: email.to_string(),
                    brand: Some(brand),
                };
                let answer = directory::send(customers, (merchant, mode), action, None).await?;
                let c = answer.view();
                (c.id, c.risk_action)
            }
        },
        (None, None) => return Ok(None),
    };
    refuse_blocked(id, risk_action)?;
    Ok(Some(id))
}

/// The meta key marking the customer index backfill done.
const META_BACKFILL: &[u8] = b"customer_indexes_v1";

/// Once per store: gives the customers stored before these indexes (made
/// by mandates) their rows: risk action and, per email, the oldest
/// customer of that email in its merchant's mode (later duplicates, which
/// mandates used to make, stay readable by id but are not found by email).
/// A cluster node refuses it (see the error).
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
    if !customers.is_empty() && kobo.cluster.get().is_some() {
        // One batch writing every merchant's rows is no node's to commit.
        // Stores made since the indexes (every PostgreSQL store) are
        // marked on their first start, before they hold a customer.
        return Err(DomainError::internal(
            "this store holds customers from before their indexes: start kobo on it once without --cluster to build them, then start the cluster",
        ));
    }
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
    kobo.writer.commit(batch).await.map_err(DomainError::from)?;
    Ok(customers.len())
}
