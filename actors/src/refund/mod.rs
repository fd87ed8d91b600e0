//! Refunds and disputes: what happens to a payment's money after capture.
//!
//! All refunds and disputes of one payment go through that payment's
//! aftercare actor ([`actor`]), so two concurrent refunds can never together
//! exceed the payment: the actor keeps [`Aftercare`] (what is refunded or
//! lost, and the open dispute) and checks it before each move. Money moves
//! through the merchant's ledger (`PaymentMoney`): from `pending` while the
//! payment's release is ahead, else from `available`.

pub mod actor;
pub mod machine;
pub mod provider;
pub mod service;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::ids::Mode;
use crate::money::Currency;
use crate::payment_intent::metadata_schema;

/// How long a merchant has to answer a dispute.
pub fn response_window() -> Duration {
    Duration::days(7)
}

/// The status of a refund: `pending` until the provider confirms it, then
/// `succeeded` or `failed` (its money returns to the balance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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
    pub fn view(&self) -> RefundView {
        RefundView {
            id: self.id,
            object: RefundObject::Refund,
            livemode: self.mode.livemode(),
            payment_intent: self.payment_intent,
            amount: self.amount,
            currency: self.currency,
            status: self.status,
            reason: self.reason.clone(),
            failure_reason: self.failure_reason.clone(),
            metadata: self.metadata.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// The public Refund object, as JSON.
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a refund view serializes")
    }
}

/// The `object` value of a refund.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum RefundObject {
    #[serde(rename = "refund")]
    Refund,
}

/// The public Refund object: money of a successful payment sent back to the
/// customer.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Refund)]
pub struct RefundView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: RefundObject,
    pub livemode: bool,
    /// The refunded payment intent.
    pub payment_intent: Uuid,
    /// Minor units (kobo, cents).
    #[schema(minimum = 1)]
    pub amount: i64,
    /// The payment's currency.
    pub currency: Currency,
    pub status: RefundStatus,
    /// As given on create.
    #[schema(required = true)]
    pub reason: Option<String>,
    /// Why it failed (`refund_rejected`); null unless `failed`.
    #[schema(required = true)]
    pub failure_reason: Option<String>,
    #[schema(schema_with = metadata_schema)]
    pub metadata: Map<String, Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The status of a dispute: `open` (its amount held) until it is decided
/// `won` (the hold returns) or `lost` (the hold leaves the business).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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
    pub fn view(&self) -> DisputeView {
        DisputeView {
            id: self.id,
            object: DisputeObject::Dispute,
            livemode: self.mode.livemode(),
            payment_intent: self.payment_intent,
            amount: self.amount,
            currency: self.currency,
            status: self.status,
            reason: self.reason.clone(),
            respond_by: self.respond_by,
            evidence: self.evidence.clone(),
            evidence_submitted_at: self.evidence_submitted_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// The public Dispute object, as JSON.
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a dispute view serializes")
    }
}

/// The `object` value of a dispute.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum DisputeObject {
    #[serde(rename = "dispute")]
    Dispute,
}

/// The schema of a dispute's `evidence`: what the last evidence submission
/// gave, field by field; null before any.
fn evidence_schema() -> Schema {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .description(Some(
            "What the last `POST /v1/disputes/{id}/evidence` gave: each field it set (`text`, `customer_name`, `customer_email`, `service_date`, `receipt_url`, `tracking_number`), as a string; null before any evidence.",
        ))
        .additional_properties(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(Some(5000)),
        ))
        .into()
}

/// The public Dispute object: a customer's chargeback on a successful
/// payment, its amount held until it is decided.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Dispute)]
pub struct DisputeView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: DisputeObject,
    pub livemode: bool,
    /// The disputed payment intent.
    pub payment_intent: Uuid,
    /// Minor units held (kobo, cents).
    #[schema(minimum = 1)]
    pub amount: i64,
    /// The payment's currency.
    pub currency: Currency,
    pub status: DisputeStatus,
    /// Why the customer disputed the payment; `general` when no reason was
    /// given.
    pub reason: String,
    /// Evidence is accepted until then (7 days after the dispute opened).
    pub respond_by: DateTime<Utc>,
    #[schema(required = true, schema_with = evidence_schema)]
    pub evidence: Option<Value>,
    #[schema(required = true)]
    pub evidence_submitted_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
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
                ErrorCode::PaymentDisputed,
                "this payment has an open dispute; it cannot be refunded until the dispute is decided",
            ));
        }
        let left = self.left(payment_amount);
        let amount = requested.unwrap_or(left);
        if amount > left || amount == 0 {
            return Err(DomainError::request(
                ErrorCode::AmountTooLarge,
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
                ErrorCode::DisputeAlreadyOpen,
                "this payment already has an open dispute",
            ));
        }
        let left = self.left(payment_amount);
        let amount = requested.unwrap_or(left);
        if amount > left || amount == 0 {
            return Err(DomainError::request(
                ErrorCode::AmountTooLarge,
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
    use serde_json::json;

    /// The views render exactly what the `json!` renderings they replaced
    /// did.
    #[test]
    fn refund_and_dispute_json_is_unchanged() {
        let now = Utc::now();
        for (mode, status, reason, failure, metadata) in [
            (Mode::Test, RefundStatus::Pending, None, None, Map::new()),
            (
                Mode::Live,
                RefundStatus::Failed,
                Some("damaged".to_string()),
                Some("refund_rejected".to_string()),
                json!({"order": "A-1", "n": 3, "gift": true})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
            (Mode::Test, RefundStatus::Succeeded, None, None, Map::new()),
        ] {
            let r = Refund {
                id: Uuid::new_v4(),
                merchant: Uuid::new_v4(),
                mode,
                seq: 4,
                payment_intent: Uuid::new_v4(),
                brand: Uuid::new_v4(),
                amount: 2_500,
                currency: Currency::USD,
                status,
                reason,
                failure_reason: failure,
                metadata,
                created_at: now,
                updated_at: now + Duration::seconds(1),
            };
            let old = json!({
                "id": r.id,
                "object": "refund",
                "livemode": r.mode.livemode(),
                "payment_intent": r.payment_intent,
                "amount": r.amount,
                "currency": r.currency,
                "status": r.status,
                "reason": r.reason,
                "failure_reason": r.failure_reason,
                "metadata": r.metadata,
                "created_at": r.created_at,
                "updated_at": r.updated_at,
            });
            assert_eq!(r.to_api(), old);
        }
        for (mode, status, evidence) in [
            (Mode::Test, DisputeStatus::Open, None),
            (
                Mode::Live,
                DisputeStatus::Won,
                Some(json!({"text": "delivered", "tracking_number": "TRK-1"})),
            ),
            (Mode::Test, DisputeStatus::Lost, Some(json!({"text": "x"}))),
        ] {
            let d = Dispute {
                id: Uuid::new_v4(),
                merchant: Uuid::new_v4(),
                mode,
                seq: 9,
                payment_intent: Uuid::new_v4(),
                brand: Uuid::new_v4(),
                amount: 10_000,
                currency: Currency::NGN,
                status,
                reason: "general".into(),
                respond_by: now + response_window(),
                evidence_submitted_at: evidence.as_ref().map(|_| now + Duration::hours(2)),
                evidence,
                created_at: now,
                updated_at: now + Duration::hours(2),
            };
            let old = json!({
                "id": d.id,
                "object": "dispute",
                "livemode": d.mode.livemode(),
                "payment_intent": d.payment_intent,
                "amount": d.amount,
                "currency": d.currency,
                "status": d.status,
                "reason": d.reason,
                "respond_by": d.respond_by,
                "evidence": d.evidence,
                "evidence_submitted_at": d.evidence_submitted_at,
                "created_at": d.created_at,
                "updated_at": d.updated_at,
            });
            assert_eq!(d.to_api(), old);
        }
    }

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
