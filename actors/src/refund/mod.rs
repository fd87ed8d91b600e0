//! Refunds and disputes: what happens to a payment's money after capture.
//!
//! All refunds and disputes of one payment go through that payment's
//! aftercare actor ([`actor`]), so two concurrent refunds can never together
//! exceed the payment: the actor keeps [`Aftercare`] (what is refunded or
//! lost, and the open dispute) and checks it before each move. Money moves
//! through the merchant's ledger (`PaymentMoney`): from `pending` while the
//! payment's release is ahead, else from `available`.

pub mod actor;
pub mod provider;
pub mod service;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::ids::Mode;
use crate::money::Currency;

/// How long a merchant has to answer a dispute.
pub fn response_window() -> Duration {
    Duration::days(7)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundStatus {
    Pending,
    Succeeded,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refund {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub payment_intent: Uuid,
    pub brand: Uuid,
    pub amount: i64,
    pub currency: Currency,
    pub status: RefundStatus,
    pub reason: Option<String>,
    pub failure_reason: Option<String>,
    pub metadata: Map<String, Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Refund {
    pub fn to_api(&self) -> Value {
        json!({
            "id": self.id,
            "object": "refund",
            "livemode": self.mode.livemode(),
            "payment_intent": self.payment_intent,
            "amount": self.amount,
            "currency": self.currency,
            "status": self.status,
            "reason": self.reason,
            "failure_reason": self.failure_reason,
            "metadata": self.metadata,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisputeStatus {
    Open,
    Won,
    Lost,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dispute {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub payment_intent: Uuid,
    pub brand: Uuid,
    pub amount: i64,
    pub currency: Currency,
    pub status: DisputeStatus,
    pub reason: String,
    pub respond_by: DateTime<Utc>,
    pub evidence: Option<Value>,
    pub evidence_submitted_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Dispute {
    pub fn to_api(&self) -> Value {
        json!({
            "id": self.id,
            "object": "dispute",
            "livemode": self.mode.livemode(),
            "payment_intent": self.payment_intent,
            "amount": self.amount,
            "currency": self.currency,
            "status": self.status,
            "reason": self.reason,
            "respond_by": self.respond_by,
            "evidence": self.evidence,
            "evidence_submitted_at": self.evidence_submitted_at,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        })
    }
}

/// A payment's money after capture.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Aftercare {
    /// Refunds pending or succeeded.
    pub refunded: i64,
    /// Taken by lost disputes (counts as refunded).
    pub lost: i64,
    pub open_dispute: Option<Uuid>,
}

impl Aftercare {
    /// What is left to refund (or dispute) of a payment of `amount`.
    pub fn left(&self, amount: i64) -> i64 {
        (amount - self.refunded - self.lost).max(0)
    }

    /// The amount a new refund takes: checks the rules of the spec. Pure.
    pub fn refund_amount(&self, payment_amount: i64, requested: Option<i64>) -> DomainResult<i64> {
        if self.open_dispute.is_some() {
            return Err(DomainError::state(
                "payment_disputed",
                "this payment has an open dispute; it cannot be refunded until the dispute is decided",
            ));
        }
        let left = self.left(payment_amount);
        let amount = requested.unwrap_or(left);
        if amount > left || amount == 0 {
            return Err(DomainError::request(
                "amount_too_large",
                Some("amount"),
                format!("{left} is left to refund on this payment"),
            ));
        }
        Ok(amount)
    }

    /// The amount a new dispute holds. Pure.
    pub fn dispute_amount(&self, payment_amount: i64, requested: Option<i64>) -> DomainResult<i64> {
        if self.open_dispute.is_some() {
            return Err(DomainError::state(
                "dispute_already_open",
                "this payment already has an open dispute",
            ));
        }
        let left = self.left(payment_amount);
        let amount = requested.unwrap_or(left);
        if amount > left || amount == 0 {
            return Err(DomainError::request(
                "amount_too_large",
                Some("amount"),
                format!("{left} of this payment can still be disputed"),
            ));
        }
        Ok(amount)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refunds_take_what_is_left_and_never_more() {
        let mut a = Aftercare::default();
        assert_eq!(a.refund_amount(10_000, None).unwrap(), 10_000);
        a.refunded = 4_000;
        assert_eq!(a.refund_amount(10_000, Some(6_000)).unwrap(), 6_000);
        assert_eq!(
            a.refund_amount(10_000, Some(6_001)).unwrap_err().code,
            "amount_too_large"
        );
        a.lost = 6_000;
        assert_eq!(
            a.refund_amount(10_000, None).unwrap_err().code,
            "amount_too_large"
        );
    }

    #[test]
    fn an_open_dispute_blocks_refunds_and_a_second_dispute() {
        let a = Aftercare {
            open_dispute: Some(Uuid::nil()),
            ..Aftercare::default()
        };
        assert_eq!(
            a.refund_amount(10_000, None).unwrap_err().code,
            "payment_disputed"
        );
        assert_eq!(
            a.dispute_amount(10_000, None).unwrap_err().code,
            "dispute_already_open"
        );
    }
}
