//! Payouts to Nigerian bank accounts: the object, its public view and the
//! pure state machine.
//!
//! ```text
//! (new) --create, amount >= approval threshold--> awaiting_approval
//! (new) --create--------------------------------> queued
//! awaiting_approval --approve--> queued          --reject--> canceled
//! awaiting_approval | queued --cancel--> canceled
//! queued --rail accepts--> processing            --rail rejects--> failed
//! processing --status query: paid--> paid        --failed--> failed
//! ```
//! Creation moves amount + fee + VAT from `available` to `payout_in_flight`
//! (in the ledger, with the payout record); `paid` takes it out of the
//! business; `failed` and `canceled` return it to `available` and stop it
//! counting toward the day's limit.

pub mod actor;
mod entries;
pub use crate::banks::rail;
pub mod service;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event;
use crate::ids::Mode;
use crate::money::Currency;

/// How often the bank is asked about a payout in flight (clock time).
pub fn status_query_interval() -> Duration {
    Duration::minutes(1)
}

/// The status of a payout: `awaiting_approval` (at or above the merchant's
/// approval threshold) or `queued`, then `processing` (sent to the bank),
/// then `paid` or `failed`; `canceled` (or rejected) before it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PayoutStatus {
    AwaitingApproval,
    Queued,
    Processing,
    Paid,
    Failed,
    Canceled,
}

impl PayoutStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PayoutStatus::AwaitingApproval => "awaiting_approval",
            PayoutStatus::Queued => "queued",
            PayoutStatus::Processing => "processing",
            PayoutStatus::Paid => "paid",
            PayoutStatus::Failed => "failed",
            PayoutStatus::Canceled => "canceled",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Payout {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub amount: i64,
    pub currency: Currency,
    pub fee: i64,
    pub vat: i64,
    pub bank_account: Uuid,
    pub brand: Uuid,
    pub status: PayoutStatus,
    pub failure_code: Option<String>,
    /// Made by automatic settlement rather than by the API.
    pub automatic: bool,
    /// The Lagos day whose limit it counts toward.
    pub day: NaiveDate,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub paid_at: Option<DateTime<Utc>>,
    pub version: u64,
}

impl Payout {
    pub fn total(&self) -> i64 {
        self.amount + self.fee + self.vat
    }

    pub fn view(&self) -> PayoutView {
        PayoutView {
            id: self.id,
            object: PayoutObject::Payout,
            livemode: self.mode.livemode(),
            amount: self.amount,
            currency: self.currency,
            fee: self.fee,
            vat: self.vat,
            total_debited: self.total(),
            bank_account: self.bank_account,
            brand: self.brand,
            status: self.status,
            failure_code: self.failure_code.clone(),
            automatic: self.automatic,
            created_at: self.created_at,
            updated_at: self.updated_at,
            paid_at: self.paid_at,
        }
    }

    /// The public Payout object, as JSON.
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a payout view serializes")
    }
}

/// The `object` value of a payout.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum PayoutObject {
    #[serde(rename = "payout")]
    Payout,
}

/// The public Payout object: naira sent from a brand's available balance to
/// one of the merchant's bank accounts.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Payout)]
pub struct PayoutView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: PayoutObject,
    pub livemode: bool,
    /// Kobo the bank account receives.
    #[schema(minimum = 100)]
    pub amount: i64,
    pub currency: Currency,
    /// The payout fee, kobo.
    #[schema(minimum = 0)]
    pub fee: i64,
    /// VAT on the fee, kobo.
    #[schema(minimum = 0)]
    pub vat: i64,
    /// `amount + fee + vat`: what left the available balance.
    #[schema(minimum = 0)]
    pub total_debited: i64,
    /// The bank account paid.
    pub bank_account: Uuid,
    /// The brand whose balance pays.
    pub brand: Uuid,
    pub status: PayoutStatus,
    /// Why it failed (`provider_rejected`, `transfer_failed`); null unless
    /// `failed`.
    #[schema(required = true)]
    pub failure_code: Option<String>,
    /// Made by automatic settlement rather than by the API.
    pub automatic: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[schema(required = true)]
    pub paid_at: Option<DateTime<Utc>>,
}

/// A command to a payout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Approve,
    Reject,
    Cancel,
    /// The rail accepted the transfer.
    Sent,
    /// The rail refused it before sending.
    RailRejected(String),
    /// The bank's status query answered.
    StatusPaid,
    StatusFailed(String),
    StatusProcessing,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Event(&'static str),
    /// Money back from `payout_in_flight` to `available`; the payout stops
    /// counting toward its day's limit.
    ReturnMoney,
    /// Money leaves `payout_in_flight` (and the business).
    PayOut,
    ScheduleSend(DateTime<Utc>),
    ScheduleStatusQuery(DateTime<Utc>),
}

fn refuse(p: &Payout, action: &str) -> DomainError {
    DomainError::state(
        ErrorCode::PayoutUnexpectedState,
        format!("this payout is {}; it cannot {action}", p.status.as_str()),
    )
}

/// The state machine.
pub fn decide(
    p: &Payout,
    command: &Command,
    now: DateTime<Utc>,
) -> DomainResult<(Payout, Vec<Effect>)> {
    use PayoutStatus::*;
    let mut next = p.clone();
    let mut effects = Vec::new();
    match (p.status, command) {
        (AwaitingApproval, Command::Approve) => {
            next.status = Queued;
            effects.push(Effect::ScheduleSend(now));
        }
        (AwaitingApproval, Command::Reject) | (AwaitingApproval | Queued, Command::Cancel) => {
            next.status = Canceled;
            effects.push(Effect::ReturnMoney);
            effects.push(Effect::Event(event::PAYOUT_CANCELED));
        }
        (Queued, Command::Sent) => {
            next.status = Processing;
            effects.push(Effect::ScheduleStatusQuery(now + status_query_interval()));
        }
        (Queued, Command::RailRejected(code)) | (Processing, Command::StatusFailed(code)) => {
            next.status = Failed;
            next.failure_code = Some(code.clone());
            effects.push(Effect::ReturnMoney);
            effects.push(Effect::Event(event::PAYOUT_FAILED));
        }
        (Processing, Command::StatusPaid) => {
            next.status = Paid;
            next.paid_at = Some(now);
            effects.push(Effect::PayOut);
            effects.push(Effect::Event(event::PAYOUT_PAID));
        }
        (Processing, Command::StatusProcessing) => {
            effects.push(Effect::ScheduleStatusQuery(now + status_query_interval()));
            return Ok((next, effects));
        }
        (_, Command::Approve) => return Err(refuse(p, "be approved")),
        (_, Command::Reject) => return Err(refuse(p, "be rejected")),
        (_, Command::Cancel) => return Err(refuse(p, "be canceled")),
        (_, _) => return Err(refuse(p, "take this bank update")),
    }
    next.updated_at = now;
    next.version += 1;
    Ok((next, effects))
}

#[cfg(test)]
mod tests {
    use super::*;
    use PayoutStatus::*;

    fn payout(status: PayoutStatus) -> Payout {
        let now = Utc::now();
        Payout {
            id: Uuid::nil(),
            merchant: Uuid::nil(),
            mode: Mode::Test,
            seq: 1,
            amount: 100_000,
            currency: Currency::NGN,
            fee: 1_000,
            vat: 75,
            bank_account: Uuid::nil(),
            brand: Uuid::nil(),
            status,
            failure_code: None,
            automatic: false,
            day: now.date_naive(),
            created_at: now,
            updated_at: now,
            paid_at: None,
            version: 1,
        }
    }

    #[test]
    fn every_allowed_move_and_its_effects() {
        let now = Utc::now();
        let table: Vec<(PayoutStatus, Command, PayoutStatus, Vec<Effect>)> = vec![
            (
                AwaitingApproval,
                Command::Approve,
                Queued,
                vec![Effect::ScheduleSend(now)],
            ),
            (
                AwaitingApproval,
                Command::Reject,
                Canceled,
                vec![Effect::ReturnMoney, Effect::Event(event::PAYOUT_CANCELED)],
            ),
            (
                AwaitingApproval,
                Command::Cancel,
                Canceled,
                vec![Effect::ReturnMoney, Effect::Event(event::PAYOUT_CANCELED)],
            ),
            (
                Queued,
                Command::Cancel,
                Canceled,
                vec![Effect::ReturnMoney, Effect::Event(event::PAYOUT_CANCELED)],
            ),
            (
                Queued,
                Command::Sent,
                Processing,
                vec![Effect::ScheduleStatusQuery(now + status_query_interval())],
            ),
            (
                Queued,
                Command::RailRejected("provider_rejected".into()),
                Failed,
                vec![Effect::ReturnMoney, Effect::Event(event::PAYOUT_FAILED)],
            ),
            (
                Processing,
                Command::StatusPaid,
                Paid,
                vec![Effect::PayOut, Effect::Event(event::PAYOUT_PAID)],
            ),
            (
                Processing,
                Command::StatusFailed("transfer_failed".into()),
                Failed,
                vec![Effect::ReturnMoney, Effect::Event(event::PAYOUT_FAILED)],
            ),
            (
                Processing,
                Command::StatusProcessing,
                Processing,
                vec![Effect::ScheduleStatusQuery(now + status_query_interval())],
            ),
        ];
        for (from, cmd, to, effects) in table {
            let (next, got) = decide(&payout(from), &cmd, now).unwrap();
            assert_eq!(next.status, to, "{from:?} {cmd:?}");
            assert_eq!(got, effects, "{from:?} {cmd:?}");
        }
    }

    #[test]
    fn every_other_move_is_refused_with_a_state_error() {
        let commands = [
            Command::Approve,
            Command::Reject,
            Command::Cancel,
            Command::Sent,
            Command::RailRejected("x".into()),
            Command::StatusPaid,
            Command::StatusFailed("x".into()),
            Command::StatusProcessing,
        ];
        let allowed = |s: PayoutStatus, c: &Command| {
            matches!(
                (s, c),
                (
                    AwaitingApproval,
                    Command::Approve | Command::Reject | Command::Cancel
                ) | (
                    Queued,
                    Command::Cancel | Command::Sent | Command::RailRejected(_)
                ) | (
                    Processing,
                    Command::StatusPaid | Command::StatusFailed(_) | Command::StatusProcessing
                )
            )
        };
        for s in [AwaitingApproval, Queued, Processing, Paid, Failed, Canceled] {
            for c in &commands {
                let r = decide(&payout(s), c, Utc::now());
                assert_eq!(r.is_ok(), allowed(s, c), "{s:?} {c:?}");
                if let Err(e) = r {
                    assert_eq!(e.code, "payout_unexpected_state");
                }
            }
        }
    }

    #[test]
    fn a_failure_records_its_code_and_paid_sets_paid_at() {
        let now = Utc::now();
        let (f, _) = decide(
            &payout(Processing),
            &Command::StatusFailed("transfer_failed".into()),
            now,
        )
        .unwrap();
        assert_eq!(f.failure_code.as_deref(), Some("transfer_failed"));
        let (p, _) = decide(&payout(Processing), &Command::StatusPaid, now).unwrap();
        assert_eq!(p.paid_at, Some(now));
        assert_eq!(p.version, 2);
    }

    /// The view renders exactly what the `json!` rendering it replaced did.
    #[test]
    fn payout_json_is_unchanged() {
        let old = |p: &Payout| {
            serde_json::json!({
                "id": p.id,
                "object": "payout",
                "livemode": p.mode.livemode(),
                "amount": p.amount,
                "currency": p.currency,
                "fee": p.fee,
                "vat": p.vat,
                "total_debited": p.total(),
                "bank_account": p.bank_account,
                "brand": p.brand,
                "status": p.status.as_str(),
                "failure_code": p.failure_code,
                "automatic": p.automatic,
                "created_at": p.created_at,
                "updated_at": p.updated_at,
                "paid_at": p.paid_at,
            })
        };
        for status in [AwaitingApproval, Queued, Processing, Paid, Failed, Canceled] {
            let mut p = payout(status);
            assert_eq!(p.to_api(), old(&p));
            p.id = Uuid::new_v4();
            p.bank_account = Uuid::new_v4();
            p.brand = Uuid::new_v4();
            p.mode = Mode::Live;
            p.automatic = true;
            p.failure_code = Some("transfer_failed".into());
            p.paid_at = Some(p.created_at + Duration::minutes(3));
            assert_eq!(p.to_api(), old(&p));
        }
    }
}
