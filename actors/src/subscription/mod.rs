//! Subscriptions: a customer billed a plan's amount each period, through
//! an invoice per period, collected by direct debit on an active mandate
//! (`collection_method: mandate`) or by sending the invoice
//! (`send_invoice`).
//!
//! Files: this one holds the stored object and its view; `machine.rs` the
//! pure state machine (`decide`) and the billing dates; `actor.rs` the
//! subscription's actor, which carries out a decision's bills (the
//! period's invoice, its debits) with durable identities; `service.rs`
//! create, reads, lists and keys; `deps.rs` what the actor reaches.

pub mod actor;
pub mod deps;
pub mod machine;
pub mod service;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::ids::Mode;
use crate::money::Currency;
use crate::plan::{Interval, Plan};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionStatus {
    Scheduled,
    Trialing,
    Incomplete,
    Active,
    PastDue,
    Canceled,
    Completed,
}

impl SubscriptionStatus {
    pub const ALL: [SubscriptionStatus; 7] = [
        SubscriptionStatus::Scheduled,
        SubscriptionStatus::Trialing,
        SubscriptionStatus::Incomplete,
        SubscriptionStatus::Active,
        SubscriptionStatus::PastDue,
        SubscriptionStatus::Canceled,
        SubscriptionStatus::Completed,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            SubscriptionStatus::Scheduled => "scheduled",
            SubscriptionStatus::Trialing => "trialing",
            SubscriptionStatus::Incomplete => "incomplete",
            SubscriptionStatus::Active => "active",
            SubscriptionStatus::PastDue => "past_due",
            SubscriptionStatus::Canceled => "canceled",
            SubscriptionStatus::Completed => "completed",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }
    pub fn byte(self) -> u8 {
        self as u8
    }
    /// Canceled or completed: nothing changes any more.
    pub fn ended(self) -> bool {
        matches!(
            self,
            SubscriptionStatus::Canceled | SubscriptionStatus::Completed
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CollectionMethod {
    /// Each period's invoice is debited through the subscription's mandate.
    Mandate,
    /// Each period's invoice is finalized for the customer to pay.
    SendInvoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CancellationReason {
    /// The merchant (or the customer on the manage page) canceled.
    CancellationRequested,
    /// The first invoice was not paid within 23 hours.
    FirstPaymentNotMade,
    /// A period's invoice stayed unpaid after its retries (or 7 days past due).
    PaymentFailed,
}

/// The plan terms a subscription bills: copied from the plan (whose price
/// never changes), so a period bills what the subscription was sold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Terms {
    pub plan: Uuid,
    pub name: String,
    pub amount: i64,
    pub currency: Currency,
    pub interval: Interval,
    pub interval_count: u32,
    pub invoice_limit: Option<u32>,
}

impl Terms {
    pub fn of(p: &Plan) -> Terms {
        Terms {
            plan: p.id,
            name: p.name.clone(),
            amount: p.amount,
            currency: p.currency,
            interval: p.interval,
            interval_count: p.interval_count,
            invoice_limit: p.invoice_limit,
        }
    }
}

/// How a bill is closed when the subscription gives up on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Close {
    Void,
    Uncollectible,
}

/// A period's invoice still to be made or collected. Its identity is
/// `(subscription, period)`: the invoice is claimed under it, each debit
/// under `(subscription, period, attempt)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bill {
    pub period: u32,
    /// Set once the invoice exists.
    pub invoice: Option<Uuid>,
    /// The period's price.
    pub amount: i64,
    /// Proration credit taken off `amount` (plan change `now`).
    pub credit: i64,
    pub description: String,
    pub currency: Currency,
    /// The invoice's due date (Lagos).
    pub due_date: NaiveDate,
    /// Mandate: when the next debit is asked for (none while one is in
    /// flight, or for `send_invoice`).
    pub charge_at: Option<DateTime<Utc>>,
    /// Debit attempts asked for so far (the next attempt's number).
    pub attempts: u32,
    /// The debit in flight.
    pub charging: Option<Uuid>,
    /// Failed debits.
    pub failures: u32,
    pub first_failure_at: Option<DateTime<Utc>>,
    /// `send_invoice`: past due from then.
    pub past_due_at: Option<DateTime<Utc>>,
    /// When the subscription gives up on this bill (`payment_failed`).
    pub give_up_at: Option<DateTime<Utc>>,
    /// A failed debit or a passed due date.
    pub late: bool,
    /// Set when the subscription gives up on the bill: the invoice is
    /// closed so (then the bill is dropped).
    pub close: Option<Close>,
}

/// A plan change waiting for the period's end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingChange {
    pub terms: Terms,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subscription {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub customer: Uuid,
    pub brand: Uuid,
    pub terms: Terms,
    pub collection_method: CollectionMethod,
    pub mandate: Option<Uuid>,
    pub days_until_due: u32,
    pub status: SubscriptionStatus,
    pub start_at: DateTime<Utc>,
    /// The trial asked for (days; 0: none).
    pub trial_days: u32,
    pub trial_start: Option<DateTime<Utc>>,
    pub trial_end: Option<DateTime<Utc>>,
    pub trial_will_end_at: Option<DateTime<Utc>>,
    /// The current period's number: 0 is the trial (never billed), 1 the
    /// first billed period.
    pub period: u32,
    pub current_period_start: DateTime<Utc>,
    pub current_period_end: DateTime<Utc>,
    /// Billing dates are counted from this Lagos date: period
    /// `anchor_period + k - 1` ends at 08:00 Lagos `k` intervals after it.
    pub anchor: NaiveDate,
    pub anchor_period: u32,
    /// Periods billed (for `invoice_limit`).
    pub billed: u32,
    /// Some bill was paid (the first payment was made).
    pub ever_paid: bool,
    /// An incomplete subscription is canceled then (23 hours after start).
    pub incomplete_expires_at: Option<DateTime<Utc>>,
    pub bills: Vec<Bill>,
    pub pending_change: Option<PendingChange>,
    pub cancel_at_period_end: bool,
    pub canceled_at: Option<DateTime<Utc>>,
    pub cancellation_reason: Option<CancellationReason>,
    pub ended_at: Option<DateTime<Utc>>,
    /// The period the test helper `renew` last started (it renews once
    /// per period).
    pub renewed_period: Option<u32>,
    pub latest_invoice: Option<Uuid>,
    pub metadata: Map<String, Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The due time of the subscription's timer row (`SubscriptionDue`).
    #[serde(default)]
    pub timer_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PendingChangeView {
    pub plan: Uuid,
    /// Applied at this period's end.
    pub effective_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = Subscription)]
pub struct SubscriptionView {
    pub id: Uuid,
    /// Always `subscription`.
    #[schema(pattern = "^subscription$")]
    pub object: &'static str,
    pub livemode: bool,
    pub status: SubscriptionStatus,
    pub customer: Uuid,
    pub plan: Uuid,
    /// The plan's amount billed each period (minor units).
    pub amount: i64,
    pub currency: Currency,
    pub interval: Interval,
    pub interval_count: u32,
    pub collection_method: CollectionMethod,
    #[schema(required = true)]
    pub mandate: Option<Uuid>,
    pub days_until_due: u32,
    pub start_at: DateTime<Utc>,
    #[schema(required = true)]
    pub trial_start: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub trial_end: Option<DateTime<Utc>>,
    /// 0 during a trial; 1 for the first billed period.
    pub current_period: u32,
    pub current_period_start: DateTime<Utc>,
    pub current_period_end: DateTime<Utc>,
    /// The next renewal's amount and time (null once ended or canceling).
    #[schema(required = true)]
    pub next_charge_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub next_charge_amount: Option<i64>,
    /// Periods billed so far.
    pub invoices_count: u32,
    #[schema(required = true)]
    pub invoice_limit: Option<u32>,
    #[schema(required = true)]
    pub latest_invoice: Option<Uuid>,
    #[schema(required = true)]
    pub pending_change: Option<PendingChangeView>,
    pub cancel_at_period_end: bool,
    #[schema(required = true)]
    pub canceled_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub cancellation_reason: Option<CancellationReason>,
    #[schema(required = true)]
    pub ended_at: Option<DateTime<Utc>>,
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Subscription {
    /// The terms of the next renewal.
    pub fn next_terms(&self) -> &Terms {
        self.pending_change
            .as_ref()
            .map(|c| &c.terms)
            .unwrap_or(&self.terms)
    }

    /// When the next renewal bills, and what (none once ended, canceling
    /// at the period's end, or with every period of `invoice_limit` billed).
    pub fn next_charge(&self) -> Option<(DateTime<Utc>, i64)> {
        let limit_reached = self.terms.invoice_limit.is_some_and(|l| self.billed >= l);
        if self.status.ended() || self.cancel_at_period_end || limit_reached {
            return None;
        }
        let at = match self.status {
            SubscriptionStatus::Scheduled if self.trial_days > 0 => {
                crate::calendar::settlement_instant(
                    crate::calendar::lagos_date(self.start_at)
                        + chrono::Days::new(self.trial_days as u64),
                )
            }
            SubscriptionStatus::Scheduled => self.start_at,
            _ => self.current_period_end,
        };
        Some((at, self.next_terms().amount))
    }

    pub fn view(&self) -> SubscriptionView {
        let next = self.next_charge();
        SubscriptionView {
            id: self.id,
            object: "subscription",
            livemode: self.mode.livemode(),
            status: self.status,
            customer: self.customer,
            plan: self.terms.plan,
            amount: self.terms.amount,
            currency: self.terms.currency,
            interval: self.terms.interval,
            interval_count: self.terms.interval_count,
            collection_method: self.collection_method,
            mandate: self.mandate,
            days_until_due: self.days_until_due,
            start_at: self.start_at,
            trial_start: self.trial_start,
            trial_end: self.trial_end,
            current_period: self.period,
            current_period_start: self.current_period_start,
            current_period_end: self.current_period_end,
            next_charge_at: next.map(|n| n.0),
            next_charge_amount: next.map(|n| n.1),
            invoices_count: self.billed,
            invoice_limit: self.terms.invoice_limit,
            latest_invoice: self.latest_invoice,
            pending_change: self.pending_change.as_ref().map(|c| PendingChangeView {
                plan: c.terms.plan,
                effective_at: self.current_period_end,
            }),
            cancel_at_period_end: self.cancel_at_period_end,
            canceled_at: self.canceled_at,
            cancellation_reason: self.cancellation_reason,
            ended_at: self.ended_at,
            metadata: self.metadata.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a subscription view serializes")
    }
}
