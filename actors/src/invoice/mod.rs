//! Invoices: `{id, object: "invoice", number, status, customer, currency,
//! line_items, subtotal, tax, total, amount_paid, amount_remaining,
//! payments, hosted_url, payment_instructions, ...}`.
//!
//! Every change to a customer's invoices, and to the customer's credit
//! balance, goes through that customer's [`book::InvoiceBook`] actor (one
//! per customer), so money applied to invoices is decided under one
//! serialization: a payment for an invoice and a transfer into the
//! customer's virtual account are applied there, inside the payment's own
//! capture batch (see `book.rs`).
//!
//! Files: this one holds the stored object, its pure rules and view;
//! `book.rs` the actor and its commands; `numbers.rs` the brands' number
//! lanes (every finalize commits there); `service.rs` reads, lists,
//! numbers and keys.

pub mod book;
pub mod numbers;
pub mod service;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event;
use crate::ids::Mode;
use crate::money::{Currency, FeeBearer, MAX_AMOUNT};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InvoiceStatus {
    Draft,
    Open,
    Paid,
    Uncollectible,
    Void,
}

impl InvoiceStatus {
    pub const ALL: [InvoiceStatus; 5] = [
        InvoiceStatus::Draft,
        InvoiceStatus::Open,
        InvoiceStatus::Paid,
        InvoiceStatus::Uncollectible,
        InvoiceStatus::Void,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            InvoiceStatus::Draft => "draft",
            InvoiceStatus::Open => "open",
            InvoiceStatus::Paid => "paid",
            InvoiceStatus::Uncollectible => "uncollectible",
            InvoiceStatus::Void => "void",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }
    pub fn byte(self) -> u8 {
        self as u8
    }
    /// Money may still be applied (open or uncollectible).
    pub fn payable(self) -> bool {
        matches!(self, InvoiceStatus::Open | InvoiceStatus::Uncollectible)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LineItem {
    pub description: String,
    pub quantity: i64,
    /// Minor units.
    pub unit_amount: i64,
    /// `quantity * unit_amount`.
    pub amount: i64,
}

/// How a payment reached the invoice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PaymentMethod {
    /// A kobo payment intent (hosted page, mandate charge, virtual account).
    Kobo,
    /// Cash or POS recorded by the merchant (`record_payment`); no ledger lines.
    OutOfBand,
    /// The customer's credit balance, applied at finalize.
    CreditBalance,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InvoicePayment {
    #[schema(required = true)]
    pub payment_intent: Option<Uuid>,
    pub amount: i64,
    pub method: PaymentMethod,
    #[schema(required = true)]
    pub note: Option<String>,
    pub paid_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invoice {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub customer: Uuid,
    pub brand: Uuid,
    pub currency: Currency,
    pub line_items: Vec<LineItem>,
    pub tax_rate_bps: u32,
    pub subtotal: i64,
    pub tax: i64,
    pub total: i64,
    pub due_date: NaiveDate,
    pub allow_partial_payments: bool,
    pub minimum_payment: Option<i64>,
    pub fee_bearer: FeeBearer,
    pub memo: Option<String>,
    pub metadata: Map<String, Value>,
    pub number: Option<String>,
    pub status: InvoiceStatus,
    pub amount_paid: i64,
    pub payments: Vec<InvoicePayment>,
    /// `invoice.overdue` was sent.
    pub overdue: bool,
    /// The hosted page's code (`/i/<code>`), from finalize.
    pub hosted_code: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finalized_at: Option<DateTime<Utc>>,
    pub sent_at: Option<DateTime<Utc>>,
    pub paid_at: Option<DateTime<Utc>>,
    pub voided_at: Option<DateTime<Utc>>,
    pub marked_uncollectible_at: Option<DateTime<Utc>>,
    /// The subscription whose period this invoice bills.
    #[serde(default)]
    pub subscription: Option<Uuid>,
}

/// Subtotal, tax (half up, as VAT is rounded) and total of `lines`.
pub fn totals(lines: &[LineItem], tax_rate_bps: u32) -> DomainResult<(i64, i64, i64)> {
    let sub: i128 = lines
        .iter()
        .map(|l| l.quantity as i128 * l.unit_amount as i128)
        .sum();
    let tax = (sub * tax_rate_bps as i128 + 5000).div_euclid(10000);
    if sub + tax > MAX_AMOUNT as i128 {
        return Err(DomainError::invalid(
            "line_items",
            format!("the invoice's total must be at most {MAX_AMOUNT}"),
        ));
    }
    Ok((sub as i64, tax as i64, (sub + tax) as i64))
}

impl Invoice {
    pub fn remaining(&self) -> i64 {
        self.total - self.amount_paid
    }

    /// How much of `offered` this invoice takes: all that remains or a
    /// part of it when partial payments are allowed, else nothing unless
    /// `offered` covers it in full.
    pub fn takes(&self, offered: i64) -> i64 {
        let rem = self.remaining();
        if !self.status.payable() || rem <= 0 || offered <= 0 {
            return 0;
        }
        if offered >= rem {
            rem
        } else if self.allow_partial_payments {
            offered
        } else {
            0
        }
    }

    /// Applies a payment of `amount` (> 0, at most what remains): the
    /// event it raises (`invoice.paid` when nothing remains, else
    /// `invoice.partially_paid`).
    pub fn apply(&mut self, p: InvoicePayment) -> &'static str {
        debug_assert!(p.amount > 0 && p.amount <= self.remaining());
        self.amount_paid += p.amount;
        self.updated_at = p.paid_at;
        let at = p.paid_at;
        self.payments.push(p);
        if self.remaining() == 0 {
            self.status = InvoiceStatus::Paid;
            self.paid_at = Some(at);
            event::INVOICE_PAID
        } else {
            event::INVOICE_PARTIALLY_PAID
        }
    }

    pub fn require_draft(&self) -> DomainResult<()> {
        match self.status {
            InvoiceStatus::Draft => Ok(()),
            s => Err(DomainError::state(
                ErrorCode::InvoiceNotDraft,
                format!("this invoice is {}; only a draft can change", s.as_str()),
            )),
        }
    }

    pub fn require_payable(&self) -> DomainResult<()> {
        match self.status.payable() {
            true => Ok(()),
            false => Err(DomainError::state(
                ErrorCode::InvoiceNotPayable,
                format!(
                    "this invoice is {}; it takes no payments",
                    self.status.as_str()
                ),
            )),
        }
    }

    pub fn hosted_url(&self, base_url: &str) -> Option<String> {
        self.hosted_code
            .as_ref()
            .map(|c| format!("{base_url}/i/{c}"))
    }

    /// The view (`payment_instructions`: the customer's open virtual
    /// account, read by the caller).
    pub fn view(&self, base_url: &str, payment_instructions: Option<Value>) -> InvoiceView {
        InvoiceView {
            id: self.id,
            object: "invoice",
            livemode: self.mode.livemode(),
            number: self.number.clone(),
            status: self.status,
            customer: self.customer,
            brand: self.brand,
            currency: self.currency,
            line_items: self.line_items.clone(),
            tax_rate_bps: self.tax_rate_bps,
            subtotal: self.subtotal,
            tax: self.tax,
            total: self.total,
            amount_paid: self.amount_paid,
            amount_remaining: self.remaining(),
            due_date: self.due_date,
            overdue: self.overdue,
            allow_partial_payments: self.allow_partial_payments,
            minimum_payment: self.minimum_payment,
            fee_bearer: self.fee_bearer,
            memo: self.memo.clone(),
            metadata: self.metadata.clone(),
            subscription: self.subscription,
            hosted_url: self.hosted_url(base_url),
            payment_instructions,
            payments: self.payments.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            finalized_at: self.finalized_at,
            sent_at: self.sent_at,
            paid_at: self.paid_at,
            voided_at: self.voided_at,
            marked_uncollectible_at: self.marked_uncollectible_at,
        }
    }
}

/// The public Invoice object.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Invoice)]
pub struct InvoiceView {
    pub id: Uuid,
    /// `invoice`.
    #[schema(value_type = String)]
    pub object: &'static str,
    pub livemode: bool,
    /// `INV-000001`: given at finalize, gap-free per brand and mode.
    #[schema(required = true)]
    pub number: Option<String>,
    pub status: InvoiceStatus,
    pub customer: Uuid,
    pub brand: Uuid,
    #[schema(value_type = String)]
    pub currency: Currency,
    pub line_items: Vec<LineItem>,
    pub tax_rate_bps: u32,
    pub subtotal: i64,
    pub tax: i64,
    pub total: i64,
    pub amount_paid: i64,
    pub amount_remaining: i64,
    /// A Lagos date.
    pub due_date: NaiveDate,
    /// `invoice.overdue` was sent (open past its due date).
    pub overdue: bool,
    pub allow_partial_payments: bool,
    #[schema(required = true)]
    pub minimum_payment: Option<i64>,
    #[schema(value_type = String)]
    pub fee_bearer: FeeBearer,
    #[schema(required = true)]
    pub memo: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    /// The subscription whose period this invoice bills, if any.
    #[schema(required = true, value_type = Option<String>)]
    pub subscription: Option<Uuid>,
    /// The hosted invoice page; null until finalized.
    #[schema(required = true)]
    pub hosted_url: Option<String>,
    /// The customer's open virtual account (`bank_name`,
    /// `account_number`, `account_name`), when there is one.
    #[schema(required = true, value_type = Option<Object>)]
    pub payment_instructions: Option<Value>,
    pub payments: Vec<InvoicePayment>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[schema(required = true)]
    pub finalized_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub sent_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub paid_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub voided_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub marked_uncollectible_at: Option<DateTime<Utc>>,
}

/// A deleted draft.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = DeletedInvoice)]
pub struct DeletedInvoiceView {
    pub id: Uuid,
    #[schema(value_type = String)]
    pub object: &'static str,
    pub livemode: bool,
    pub deleted: bool,
}

/// The instructions of an open virtual account (its stored JSON).
pub fn instructions_of(account: &Value) -> Value {
    json!({
        "type": "virtual_account",
        "bank_name": account["bank_name"],
        "bank_code": account["bank_code"],
        "account_number": account["account_number"],
        "account_name": account["account_name"],
    })
}
