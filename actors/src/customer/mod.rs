//! Customers: `{id, object: "customer", livemode, email, phone, name,
//! brand, metadata, risk_action, identity, created_at, updated_at}`.
//!
//! One live customer per email (compared case-insensitively) in a
//! merchant's mode: every change to a merchant's customers in one mode goes
//! through that scope's [`directory::CustomerDirectory`] actor, which holds
//! the email index (`customer_emails`) and so makes find-or-create and
//! email updates race-free. Objects that link to a customer (mandates,
//! virtual accounts) are committed through the same actor
//! ([`directory::CustomerAction::Link`]), so a customer is never deleted
//! while something that uses it is being made.
//!
//! Files: this one holds the stored object, its view and keys;
//! `directory.rs` the actor and its commands; `steps.rs` the directory's
//! writing steps (commits with their saved answers, the identity request
//! and its timer); `identity.rs` BVN checks (the providers, the sandbox);
//! `service.rs` reads, lists and the helpers other resources call;
//! `deps.rs` the actor's handles.

pub mod deps;
pub mod directory;
pub mod identity;
mod patch;
pub mod service;
#[cfg(test)]
mod service_tests;
mod steps;

pub use patch::{CustomerPatch, Field, NewCustomer};

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::{Batch, KeyBuf, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::ids::{scope_key, Mode};

/// What the merchant decided about a customer. `deny` refuses the
/// customer's new payment intents and mandate charges (409
/// `customer_blocked`); money that arrives anyway is recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RiskAction {
    #[default]
    Default,
    Allow,
    Deny,
}

impl RiskAction {
    pub const ALL: [RiskAction; 3] = [RiskAction::Default, RiskAction::Allow, RiskAction::Deny];
    pub fn as_str(self) -> &'static str {
        match self {
            RiskAction::Default => "default",
            RiskAction::Allow => "allow",
            RiskAction::Deny => "deny",
        }
    }
    pub fn parse(s: &str) -> Option<RiskAction> {
        RiskAction::ALL.into_iter().find(|r| r.as_str() == s)
    }
    pub fn byte(self) -> u8 {
        self as u8
    }
}

/// Where a customer's identity check stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum IdentityStatus {
    /// Never asked.
    #[default]
    Unverified,
    /// Asked; the provider has not answered.
    Pending,
    Verified,
    Failed,
}

/// A customer's identity check as stored: never the BVN itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub status: IdentityStatus,
    pub bvn_last4: Option<String>,
    pub bank_code: Option<String>,
    pub account_number_last4: Option<String>,
    pub failure_reason: Option<String>,
    pub requested_at: Option<DateTime<Utc>>,
    pub verified_at: Option<DateTime<Utc>>,
    /// The provider's reference of the current check (never shown).
    pub reference: Option<Uuid>,
    /// The due time of the check timer, while one is set.
    pub check_due: Option<DateTime<Utc>>,
}

/// How often the provider is asked about a pending identity check.
pub fn identity_check_interval() -> Duration {
    Duration::minutes(5)
}

/// A pending check is asked about for this long after the request; then
/// it stays `pending` until a new request.
pub fn identity_check_window() -> Duration {
    Duration::hours(24)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Customer {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub email: Option<String>,
    pub name: Option<String>,
    pub created_at: DateTime<Utc>,
    /// E.164. Customers made before phones were kept: none.
    #[serde(default)]
    pub phone: Option<String>,
    /// Customers made by mandates before brands were kept: none.
    #[serde(default)]
    pub brand: Option<Uuid>,
    #[serde(default)]
    pub metadata: Map<String, Value>,
    #[serde(default)]
    pub risk_action: RiskAction,
    #[serde(default)]
    pub identity: Identity,
    #[serde(default)]
    pub updated_at: Option<DateTime<Utc>>,
    /// Set by delete: the customer leaves every list and index, reads as
    /// missing, and stays stored for the objects that link to it.
    #[serde(default)]
    pub deleted_at: Option<DateTime<Utc>>,
}

/// The `object` value of a customer.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum CustomerObject {
    #[serde(rename = "customer")]
    Customer,
}

/// A customer's identity check, as shown: never the BVN, only its last
/// four digits.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct IdentityView {
    /// `unverified` (never asked), `pending`, `verified` or `failed`.
    pub status: IdentityStatus,
    #[schema(required = true)]
    pub bvn_last4: Option<String>,
    /// The CBN code of the bank account given with the BVN.
    #[schema(required = true)]
    pub bank_code: Option<String>,
    #[schema(required = true)]
    pub account_number_last4: Option<String>,
    /// Why the last check failed (`bvn_mismatch` in the sandbox).
    #[schema(required = true)]
    pub failure_reason: Option<String>,
    #[schema(required = true)]
    pub requested_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub verified_at: Option<DateTime<Utc>>,
}

/// The public Customer object.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Customer)]
pub struct CustomerView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: CustomerObject,
    pub livemode: bool,
    /// Unique (case-insensitively) among the merchant's customers in this
    /// mode.
    #[schema(required = true)]
    pub email: Option<String>,
    /// E.164, e.g. `+2348031234567`.
    #[schema(required = true)]
    pub phone: Option<String>,
    #[schema(required = true)]
    pub name: Option<String>,
    /// The brand the customer belongs to (null only for customers made by
    /// mandates before brands were kept).
    #[schema(required = true)]
    pub brand: Option<Uuid>,
    /// The merchant's keys and values (see `metadata` on create).
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    /// `deny` refuses the customer's new payments (409 `customer_blocked`).
    pub risk_action: RiskAction,
    pub identity: IdentityView,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Naira (kobo) left over from the customer's payments, applied to
    /// their next finalized invoice (docs/api.md, "Invoices"). Shown by
    /// `GET /v1/customers/{id}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credit_balance: Option<i64>,
}

/// The `object` value of a deleted customer.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = DeletedCustomer)]
pub struct DeletedCustomerView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: CustomerObject,
    pub livemode: bool,
    /// Always `true`.
    pub deleted: bool,
}

impl Customer {
    pub fn view(&self) -> CustomerView {
        let i = &self.identity;
        CustomerView {
            id: self.id,
            object: CustomerObject::Customer,
            livemode: self.mode.livemode(),
            email: self.email.clone(),
            phone: self.phone.clone(),
            name: self.name.clone(),
            brand: self.brand,
            metadata: self.metadata.clone(),
            risk_action: self.risk_action,
            identity: IdentityView {
                status: i.status,
                bvn_last4: i.bvn_last4.clone(),
                bank_code: i.bank_code.clone(),
                account_number_last4: i.account_number_last4.clone(),
                failure_reason: i.failure_reason.clone(),
                requested_at: i.requested_at,
                verified_at: i.verified_at,
            },
            created_at: self.created_at,
            updated_at: self.updated_at.unwrap_or(self.created_at),
            credit_balance: None,
        }
    }

    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a customer view serializes")
    }

    pub fn deleted_view(&self) -> DeletedCustomerView {
        DeletedCustomerView {
            id: self.id,
            object: CustomerObject::Customer,
            livemode: self.mode.livemode(),
            deleted: true,
        }
    }

    /// The key of this customer's row in the email index, if it has an
    /// email.
    pub fn email_key(&self) -> Option<Vec<u8>> {
        self.email
            .as_deref()
            .map(|e| email_key(self.merchant, self.mode, e))
    }

    /// The customer's index rows (list, email, phone, brand, risk action),
    /// each with its key.
    pub fn index_rows(&self) -> Vec<(Table, Vec<u8>)> {
        let scope = || scope_key(self.merchant, self.mode);
        let mut rows = vec![
            (Table::CustomerIndex, scope().u64(self.seq).build()),
            (
                Table::CustomerRiskIndex,
                scope().u8(self.risk_action.byte()).u64(self.seq).build(),
            ),
        ];
        if let Some(k) = self.email_key() {
            rows.push((Table::CustomerEmails, k));
        }
        if let Some(p) = &self.phone {
            rows.push((
                Table::CustomerPhoneIndex,
                phone_prefix(scope(), p).u64(self.seq).build(),
            ));
        }
        if let Some(b) = self.brand {
            rows.push((
                Table::CustomerBrandIndex,
                scope().bytes(b.as_bytes()).u64(self.seq).build(),
            ));
        }
        rows
    }

    /// Adds the customer and its index rows to `batch`; the email row must
    /// be absent (one live customer per email).
    pub fn add_to(&self, batch: &mut Batch) {
        batch
            .put(Table::Customers, self.id.as_bytes().to_vec(), self)
            .note_seq(self.seq);
        for (table, key) in self.index_rows() {
            if table == Table::CustomerEmails {
                batch.require_absent(table, key.clone());
            }
            batch.put_raw(table, key, self.id.as_bytes().to_vec());
        }
    }

    /// Saves `after` (a later version of `self`) and moves the index rows
    /// that changed. A new email row must be absent.
    pub fn update_in(&self, after: &Customer, batch: &mut Batch) {
        batch.put(Table::Customers, after.id.as_bytes().to_vec(), after);
        let (before, now) = (self.index_rows(), after.index_rows());
        for (table, key) in &before {
            if !now.contains(&(*table, key.clone())) {
                batch.delete(*table, key.clone());
            }
        }
        for (table, key) in now {
            if !before.contains(&(table, key.clone())) {
                if table == Table::CustomerEmails {
                    batch.require_absent(table, key.clone());
                }
                batch.put_raw(table, key, after.id.as_bytes().to_vec());
            }
        }
    }

    /// Marks `self` deleted (as `after`) and removes every index row.
    pub fn delete_in(&self, after: &Customer, batch: &mut Batch) {
        batch.put(Table::Customers, after.id.as_bytes().to_vec(), after);
        for (table, key) in self.index_rows() {
            batch.delete(table, key);
        }
    }
}

/// The email index key: the address lowercased (addresses are compared
/// case-insensitively; the customer keeps the casing it was given).
pub fn email_key(merchant: Uuid, mode: Mode, email: &str) -> Vec<u8> {
    scope_key(merchant, mode).str(&email.to_lowercase()).build()
}

pub fn phone_prefix(scope: KeyBuf, phone: &str) -> KeyBuf {
    scope.str(phone)
}

/// The merchant's live customer `id` in `mode` (404 otherwise: unknown,
/// deleted, another merchant's or the other mode's).
pub fn load(kobo: &Env, merchant: Uuid, mode: Mode, id: Uuid) -> DomainResult<Customer> {
    let c: Option<Customer> = kobo
        .store
        .read()?
        .get_decoded(Table::Customers, id.as_bytes())?;
    match c {
        Some(c) if c.merchant == merchant && c.mode == mode && c.deleted_at.is_none() => Ok(c),
        _ => Err(DomainError::not_found("customer", id)),
    }
}

/// 409 `customer_blocked` for a customer whose `risk_action` is `deny`.
pub fn check_not_blocked(c: &Customer) -> DomainResult<()> {
    refuse_blocked(c.id, c.risk_action)
}

/// 409 `customer_blocked` when customer `id`'s `risk_action` is `deny`.
pub fn refuse_blocked(id: Uuid, risk_action: RiskAction) -> DomainResult<()> {
    if risk_action == RiskAction::Deny {
        return Err(DomainError::state(
            ErrorCode::CustomerBlocked,
            format!("customer {id} is blocked (risk_action: deny)"),
        ));
    }
    Ok(())
}

/// For a charge on a customer's mandate: 409 `customer_blocked` when the
/// customer is denied (a customer no longer stored blocks nothing).
pub fn check_charge_allowed(kobo: &Env, merchant: Uuid, mode: Mode, id: Uuid) -> DomainResult<()> {
    match load(kobo, merchant, mode, id) {
        Ok(c) => check_not_blocked(&c),
        Err(e) if e.code == ErrorCode::ResourceMissing => Ok(()),
        Err(e) => Err(e),
    }
}
