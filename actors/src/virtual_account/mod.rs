//! Dedicated virtual accounts: one permanent NUBAN per customer, into
//! which every transfer becomes one successful payment intent.
//!
//! ```text
//! (new) --create--> pending                      (number allocated)
//! pending --a check finds it open--> active      (virtual_account.activated)
//! pending --a check finds it refused--> failed   (virtual_account.failed)
//! pending | active --deactivate--> deactivated   (permanent)
//! failed | deactivated --deactivate--> 409 virtual_account_unexpected_state
//! ```
//! A check is `refresh` or the periodic check (5 minutes of clock time
//! after creation, then every 5 minutes while pending). A number is never
//! given twice (`nuban.rs`). Credits are recorded exactly once per
//! interbank session id by the account's actor (`credit.rs`).
//!
//! Files: this one holds the object, its view and the pure state machine;
//! `nuban.rs` numbers; `bank.rs` the account bank (sandbox and live);
//! `service.rs` create, reads and lists; `actor.rs` the account's actor;
//! `credit.rs` recording credits; `deps.rs` the handles.

pub mod actor;
pub mod bank;
pub mod credit;
pub mod deps;
pub mod nuban;
pub mod service;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event;
use crate::ids::Mode;
use crate::money::Currency;

/// How often the bank is asked about a pending account (clock time).
pub fn check_interval() -> Duration {
    Duration::minutes(5)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AccountStatus {
    Pending,
    Active,
    Failed,
    Deactivated,
}

impl AccountStatus {
    pub const ALL: [AccountStatus; 4] = [
        AccountStatus::Pending,
        AccountStatus::Active,
        AccountStatus::Failed,
        AccountStatus::Deactivated,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            AccountStatus::Pending => "pending",
            AccountStatus::Active => "active",
            AccountStatus::Failed => "failed",
            AccountStatus::Deactivated => "deactivated",
        }
    }
    pub fn parse(s: &str) -> Option<AccountStatus> {
        AccountStatus::ALL.into_iter().find(|x| x.as_str() == s)
    }
    pub fn byte(self) -> u8 {
        self as u8
    }
    /// Pending or active: the customer's one open account.
    pub fn is_open(self) -> bool {
        matches!(self, AccountStatus::Pending | AccountStatus::Active)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VirtualAccount {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    /// Creation order (newest-first lists and cursors).
    pub seq: u64,
    pub customer: Uuid,
    /// The customer's brand when the account was made: its money's brand.
    pub brand: Uuid,
    /// The number's serial (its first nine digits), unique across kobo.
    pub serial: u64,
    pub account_number: String,
    pub account_name: String,
    pub bank_code: String,
    pub bank_name: String,
    pub status: AccountStatus,
    pub failure_reason: Option<String>,
    pub metadata: Map<String, Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub activated_at: Option<DateTime<Utc>>,
    pub deactivated_at: Option<DateTime<Utc>>,
    /// The due time of the periodic check timer, while one is set.
    pub check_due: Option<DateTime<Utc>>,
    /// Bumped on every change.
    pub version: u64,
}

/// The `object` value of a virtual account.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum VirtualAccountObject {
    #[serde(rename = "virtual_account")]
    VirtualAccount,
}

/// The public VirtualAccount object.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = VirtualAccount)]
pub struct VirtualAccountView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: VirtualAccountObject,
    pub livemode: bool,
    pub customer: Uuid,
    /// The brand whose balance the transfers go to.
    pub brand: Uuid,
    /// The NUBAN the customer pays into: 10 digits, never given to anyone
    /// else, also after deactivation.
    #[schema(pattern = "^[0-9]{10}$")]
    pub account_number: String,
    pub account_name: String,
    /// The CBN code of the account's bank.
    pub bank_code: String,
    pub bank_name: String,
    /// Always `NGN`.
    pub currency: Currency,
    /// pending = the bank is opening it; active = transfers become
    /// payments; failed = the bank refused it; deactivated = closed for
    /// good (money that still arrives is recorded and flagged).
    pub status: AccountStatus,
    /// Why the bank refused the account (`bank_rejected`).
    #[schema(required = true)]
    pub failure_reason: Option<String>,
    /// The merchant's keys and values.
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[schema(required = true)]
    pub activated_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub deactivated_at: Option<DateTime<Utc>>,
}

impl VirtualAccount {
    pub fn view(&self) -> VirtualAccountView {
        VirtualAccountView {
            id: self.id,
            object: VirtualAccountObject::VirtualAccount,
            livemode: self.mode.livemode(),
            customer: self.customer,
            brand: self.brand,
            account_number: self.account_number.clone(),
            account_name: self.account_name.clone(),
            bank_code: self.bank_code.clone(),
            bank_name: self.bank_name.clone(),
            currency: Currency::NGN,
            status: self.status,
            failure_reason: self.failure_reason.clone(),
            metadata: self.metadata.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            activated_at: self.activated_at,
            deactivated_at: self.deactivated_at,
        }
    }

    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a virtual account view serializes")
    }
}

/// The bank's answer about a pending account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BankAnswer {
    Pending,
    Opened,
    /// Refused, with the bank's reason.
    Rejected(String),
}

/// A command to a virtual account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// The bank answered a check; `periodic` when the check timer asked.
    Checked {
        answer: BankAnswer,
        periodic: bool,
    },
    Deactivate,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    ScheduleCheck(DateTime<Utc>),
    CancelCheck(DateTime<Utc>),
    Event(&'static str),
    /// The account is no longer the customer's open one.
    Close,
}

fn refuse(a: &VirtualAccount, action: &str) -> DomainError {
    DomainError::state(
        ErrorCode::VirtualAccountUnexpectedState,
        format!(
            "this virtual account is {}; it cannot {action}",
            a.status.as_str()
        ),
    )
}

/// Leaving `pending` or `active`: the check timer goes, and the account
/// stops being the customer's open one.
fn close(next: &mut VirtualAccount, effects: &mut Vec<Effect>) {
    if let Some(due) = next.check_due.take() {
        effects.push(Effect::CancelCheck(due));
    }
    effects.push(Effect::Close);
}

/// The state machine. Returns the new state (unchanged, same version, when
/// nothing changed) and its effects.
pub fn decide(
    a: &VirtualAccount,
    command: &Command,
    now: DateTime<Utc>,
) -> DomainResult<(VirtualAccount, Vec<Effect>)> {
    use AccountStatus::*;
    let mut next = a.clone();
    let mut effects = Vec::new();
    match (a.status, command) {
        (Pending, Command::Checked { answer, periodic }) => match answer {
            BankAnswer::Opened => {
                next.check_due = None;
                if let Some(due) = a.check_due {
                    effects.push(Effect::CancelCheck(due));
                }
                next.status = Active;
                next.activated_at = Some(now);
                effects.push(Effect::Event(event::VIRTUAL_ACCOUNT_ACTIVATED));
            }
            BankAnswer::Rejected(reason) => {
                close(&mut next, &mut effects);
                next.status = Failed;
                next.failure_reason = Some(reason.clone());
                effects.push(Effect::Event(event::VIRTUAL_ACCOUNT_FAILED));
            }
            BankAnswer::Pending if !periodic => return Ok((next, effects)),
            BankAnswer::Pending => {
                let due = now + check_interval();
                next.check_due = Some(due);
                effects.push(Effect::ScheduleCheck(due));
            }
        },
        // A stale timer or a refresh of a settled account: nothing to do.
        (_, Command::Checked { .. }) => return Ok((next, effects)),
        (Pending | Active, Command::Deactivate) => {
            close(&mut next, &mut effects);
            next.status = Deactivated;
            next.deactivated_at = Some(now);
        }
        (_, Command::Deactivate) => return Err(refuse(a, "be deactivated")),
    }
    next.updated_at = now;
    next.version += 1;
    Ok((next, effects))
}

#[cfg(test)]
mod tests;
