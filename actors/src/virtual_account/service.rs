//! Creating virtual accounts (through the customer directory), reads and
//! lists, and what keeps a customer in use.

use std::sync::Arc;

use serde_json::{Map, Value};
use uuid::Uuid;

use kobo_storage::{Batch, CommitError, KeyBuf, Table};

use super::deps::VirtualAccountDeps;
use super::nuban::{nuban, serial_key};
use super::{check_interval, AccountStatus, VirtualAccount, VirtualAccountView};
use crate::banks::bank_name;
use crate::customer::directory::{self, BuildFn, LinkTo};
use crate::customer::{check_not_blocked, Customer, IdentityStatus};
use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::{new_id, scope_key, Mode};
use crate::merchant::Merchant;
use crate::paging::{Page, Walk};
use crate::timer::{Timer, TimerKind};

/// The partner banks accounts can be opened at (CBN codes); the first is
/// the default.
pub const ACCOUNT_BANKS: &[&str] = &["035", "101", "102"];

/// How many numbers a create tries when one turns out taken.
const NUMBER_ATTEMPTS: usize = 8;

type Scope = (Uuid, Mode);

/// A validated create request.
#[derive(Debug, Clone)]
pub struct CreateVirtualAccount {
    pub customer: Uuid,
    /// One of [`ACCOUNT_BANKS`] (checked by the caller); none: the first.
    pub preferred_bank: Option<String>,
    pub metadata: Map<String, Value>,
}

pub fn status_prefix(merchant: Uuid, mode: Mode, status: AccountStatus) -> KeyBuf {
    scope_key(merchant, mode).u8(status.byte())
}

pub fn customer_prefix(merchant: Uuid, mode: Mode, customer: Uuid) -> KeyBuf {
    scope_key(merchant, mode).bytes(customer.as_bytes())
}

/// The key of a customer's open (pending or active) account.
pub fn open_key(merchant: Uuid, mode: Mode, customer: Uuid) -> Vec<u8> {
    customer_prefix(merchant, mode, customer).build()
}

pub fn load(kobo: &Env, id: Uuid) -> DomainResult<Option<VirtualAccount>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::VirtualAccounts, id.as_bytes())?)
}

/// The merchant's account `id` in `mode` (404 otherwise).
pub fn own(kobo: &Env, merchant: Uuid, mode: Mode, id: Uuid) -> DomainResult<VirtualAccount> {
    match load(kobo, id)? {
        Some(a) if a.merchant == merchant && a.mode == mode => Ok(a),
        _ => Err(DomainError::not_found("virtual_account", id)),
    }
}

/// The customer's pending or active account, if any.
pub fn open_account(
    kobo: &Env,
    (m, mode): Scope,
    customer: Uuid,
) -> DomainResult<Option<VirtualAccount>> {
    let id = kobo
        .store
        .read()?
        .get(Table::CustomerOpenAccounts, &open_key(m, mode, customer))?;
    match id.and_then(|v| Uuid::from_slice(&v).ok()) {
        Some(id) => load(kobo, id),
        None => Ok(None),
    }
}

/// Whether `customer` has a pending or active account (it may not be
/// deleted then).
pub fn customer_in_use(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    customer: Uuid,
) -> DomainResult<Option<&'static str>> {
    let open = open_account(kobo, (merchant, mode), customer)?;
    Ok(open.map(|_| "a pending or active virtual account"))
}

/// What a new account is made of before its customer is known.
#[derive(Clone)]
struct Draft {
    id: Uuid,
    scope: Scope,
    seq: u64,
    serial: u64,
    bank_code: String,
    merchant_name: String,
    default_brand: Uuid,
    metadata: Map<String, Value>,
    now: chrono::DateTime<chrono::Utc>,
}

/// How the bank names the account: the business, then the customer.
fn holder(c: &Customer) -> String {
    c.name
        .clone()
        .or(c.email.clone())
        .or(c.phone.clone())
        .unwrap_or_default()
}

impl Draft {
    fn account(&self, c: &Customer) -> VirtualAccount {
        let bank = bank_name(&self.bank_code).unwrap_or("Kobo Sandbox Bank");
        VirtualAccount {
            id: self.id,
            merchant: self.scope.0,
            mode: self.scope.1,
            seq: self.seq,
            customer: c.id,
            brand: c.brand.unwrap_or(self.default_brand),
            serial: self.serial,
            account_number: nuban(&self.bank_code, self.serial),
            account_name: format!("{}/{}", self.merchant_name, holder(c)).to_uppercase(),
            bank_code: self.bank_code.clone(),
            bank_name: bank.to_string(),
            status: AccountStatus::Pending,
            failure_reason: None,
            metadata: self.metadata.clone(),
            created_at: self.now,
            updated_at: self.now,
            activated_at: None,
            deactivated_at: None,
            check_due: Some(self.now + check_interval()),
            version: 1,
        }
    }
}

/// A new account's batch: the object, its indexes, the claims on its
/// number, its serial and its customer's one open account (each
/// `require_absent`), its check timer and the saved response; with the
/// answer as saved.
fn account_batch(
    a: &VirtualAccount,
    idem: Option<&IdempotencySave>,
) -> (Batch, Answer<VirtualAccountView>) {
    let (id, m, mode) = (a.id.as_bytes().to_vec(), a.merchant, a.mode);
    let mut b = Batch::new();
    b.owned_by(m.as_bytes());
    let claims = [
        (
            Table::VirtualAccountNumbers,
            a.account_number.as_bytes().to_vec(),
        ),
        (Table::VirtualAccountSerials, serial_key(a.serial)),
        (Table::CustomerOpenAccounts, open_key(m, mode, a.customer)),
    ];
    for (table, key) in claims {
        b.require_absent(table, key.clone())
            .put_raw(table, key, id.clone());
    }
    b.put(Table::VirtualAccounts, id.clone(), a)
        .put_raw(
            Table::VirtualAccountIndex,
            scope_key(m, mode).u64(a.seq).build(),
            id.clone(),
        )
        .put_raw(
            Table::VirtualAccountStatusIndex,
            status_prefix(m, mode, a.status).u64(a.seq).build(),
            id.clone(),
        )
        .put_raw(
            Table::VirtualAccountCustomerIndex,
            customer_prefix(m, mode, a.customer).u64(a.seq).build(),
            id,
        )
        .note_seq(a.seq);
    if let Some(due) = a.check_due {
        Timer::new(TimerKind::VirtualAccountCheck, a.id, m, mode).schedule(&mut b, due);
    }
    let answer = Answer::save(Outcome::Created(a.view()), idem, &mut b, a.created_at);
    (b, answer)
}

/// The checks a new account's customer must pass (in the directory, with
/// the customer as committed): not denied; in live mode, identity
/// verified; a bank in this mode.
fn admit(k: &VirtualAccountDeps, mode: Mode, c: &Customer) -> DomainResult<()> {
    check_not_blocked(c)?;
    if mode == Mode::Live && c.identity.status != IdentityStatus::Verified {
        return Err(DomainError::state(
            ErrorCode::CustomerIdentityUnverified,
            "a live virtual account needs the customer's verified identity (verify_identity)",
        ));
    }
    k.banks.for_mode(mode).available()
}

/// Creates a pending account for the customer (`Created`, its response
/// saved with it), or answers the customer's pending or active one
/// (`Existing`, unsaved: nothing changed). Committed through the customer
/// directory (the customer cannot be deleted meanwhile); a taken number is
/// replaced by the next.
pub async fn create(
    k: &Arc<VirtualAccountDeps>,
    merchant: &Merchant,
    mode: Mode,
    req: CreateVirtualAccount,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<VirtualAccountView>> {
    let scope = (merchant.id, mode);
    let existing = |a: VirtualAccount| Answer::unsaved(Outcome::Existing(a.view()));
    if let Some(a) = open_account(k, scope, req.customer)? {
        return Ok(existing(a));
    }
    let bank_code = req.preferred_bank.unwrap_or(ACCOUNT_BANKS[0].to_string());
    for _ in 0..NUMBER_ATTEMPTS {
        let now = k.clock.now();
        let draft = Draft {
            id: new_id(now),
            scope,
            seq: k.seq.next(),
            serial: k.serials.take(k)?,
            bank_code: bank_code.clone(),
            merchant_name: merchant.name.clone(),
            default_brand: merchant.default_brand(mode),
            metadata: req.metadata.clone(),
            now,
        };
        let (kk, idem) = (k.clone(), idem.cloned());
        let build: Arc<BuildFn<_>> = Arc::new(move |c: &Customer| {
            admit(&kk, mode, c)?;
            Ok(account_batch(&draft.account(c), idem.as_ref()))
        });
        let to = LinkTo::Id(req.customer);
        let linked = directory::link_to(&k.customers, scope, to, build).await?;
        match linked.result {
            Ok(()) => return Ok(linked.built),
            Err(CommitError::Conflict { table, .. })
                if table == Table::CustomerOpenAccounts.name() =>
            {
                let open = open_account(k, scope, req.customer)?;
                return open
                    .map(existing)
                    .ok_or_else(|| DomainError::internal("an open account vanished"));
            }
            // A number or serial someone already has: take the next.
            Err(CommitError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(DomainError::internal("no free account number was found"))
}

pub struct AccountFilter {
    pub limit: usize,
    pub starting_after: Option<Uuid>,
    pub customer: Option<Uuid>,
    pub status: Option<AccountStatus>,
    pub account_number: Option<String>,
}

/// Newest first, with a cursor (an account of this merchant and mode, else
/// 400 on `starting_after`).
pub fn list(kobo: &Env, merchant: Uuid, mode: Mode, f: &AccountFilter) -> DomainResult<Page> {
    let before = match f.starting_after {
        Some(id) => match load(kobo, id)? {
            Some(a) if a.merchant == merchant && a.mode == mode => Some(a.seq),
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("no such virtual_account: {id}"),
                ))
            }
        },
        None => None,
    };
    let keep = |a: &VirtualAccount| {
        a.merchant == merchant
            && a.mode == mode
            && f.customer.is_none_or(|c| a.customer == c)
            && f.status.is_none_or(|s| a.status == s)
            && f.account_number
                .as_ref()
                .is_none_or(|n| &a.account_number == n)
            && before.is_none_or(|s| a.seq < s)
    };
    if let Some(number) = &f.account_number {
        let id = kobo
            .store
            .read()?
            .get(Table::VirtualAccountNumbers, number.as_bytes())?;
        let found = match id.and_then(|v| Uuid::from_slice(&v).ok()) {
            Some(id) => load(kobo, id)?.filter(keep),
            None => None,
        };
        return Ok(Page {
            data: found.iter().map(VirtualAccount::to_api).collect(),
            has_more: false,
        });
    }
    let (index, prefix) = match (f.customer, f.status) {
        (Some(c), _) => (
            Table::VirtualAccountCustomerIndex,
            customer_prefix(merchant, mode, c),
        ),
        (None, Some(s)) => (
            Table::VirtualAccountStatusIndex,
            status_prefix(merchant, mode, s),
        ),
        (None, None) => (Table::VirtualAccountIndex, scope_key(merchant, mode)),
    };
    let walk = Walk {
        objects: Table::VirtualAccounts,
        index,
        prefix: &prefix.build(),
        before_seq: before,
        limit: f.limit,
    };
    walk.page(kobo, keep, VirtualAccount::to_api)
}
