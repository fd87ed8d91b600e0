//! Payment intents: the object, its public view, and the pure state machine.
//!
//! [`decide`] is `(state, command, ids, now) -> (new state, effects)`; it
//! never touches the store, the clock, a random source or a provider. The actor ([`actor`]) runs it
//! and turns effects into one store batch (through the ledger actor when money
//! moves). [`create`] builds a new intent; creation needs no actor because no
//! other message can reach an object that does not exist yet.
//!
//! Files: this one holds the stored object and its pricing; `machine.rs`
//! the commands and effects; `steps.rs` [`decide`] and its step per
//! command; `checks.rs` the card prechecks; `views.rs` the public views;
//! `query.rs` the reads; `credit.rs` the payments made by transfers into
//! dedicated virtual accounts; `link.rs` what a payment link's intents
//! write for their link (slots, counters).

pub mod actor;
pub mod card;
pub mod checkout_code;
mod checks;
pub mod credit;
pub mod deps;
pub mod link;
mod machine;
pub mod provider;
pub mod query;
pub mod service;
mod steps;
mod views;

pub use checks::*;
pub use machine::*;
pub use steps::decide;
pub use views::*;

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event;
use crate::ids::Mode;
use crate::money::{
    checked_total, fees, fees_for_display, Channel, Currency, FeeBearer, FeeRule, Fees,
};

/// A payment left in `processing` this long with no money is abandoned.
pub fn abandon_after() -> Duration {
    Duration::minutes(30)
}

/// Failed card attempts one payment intent accepts; the next card call
/// answers 409 `card_attempts_exceeded` (card testing: trying stolen card
/// numbers one after another on one payment).
pub const MAX_FAILED_CARD_ATTEMPTS: u32 = 5;

/// A bank-transfer account is open this long after it is issued.
pub fn transfer_account_lifetime() -> Duration {
    Duration::minutes(30)
}

/// The status of a payment intent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Created,
    Processing,
    Successful,
    Failed,
    Abandoned,
    Canceled,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Created,
        Status::Processing,
        Status::Successful,
        Status::Failed,
        Status::Abandoned,
        Status::Canceled,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Created => "created",
            Status::Processing => "processing",
            Status::Successful => "successful",
            Status::Failed => "failed",
            Status::Abandoned => "abandoned",
            Status::Canceled => "canceled",
        }
    }
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|x| x.as_str() == s)
    }
    pub fn byte(self) -> u8 {
        self as u8
    }
}

/// The account a customer pays one payment intent into by bank transfer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BankTransferAccount {
    /// The account the customer pays into.
    pub account_number: String,
    pub bank_name: String,
    pub account_name: String,
    /// The exact amount to send, in minor units; includes the fee when the
    /// customer bears it.
    pub amount: i64,
    #[serde(with = "kobo_storage::codec::timestamp")]
    pub expires_at: DateTime<Utc>,
}

/// What the customer's bank wants before the payment can go on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NextAction {
    /// `otp` or `redirect`.
    #[serde(rename = "type")]
    pub action_type: String,
    /// For type `otp`: shown to the customer.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub message: Option<String>,
    /// For type `otp`: what the bank wants (`otp`, `pin`, `phone`, `birthday`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub input: Option<String>,
    /// For type `redirect`: opened in the customer's browser.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub url: Option<String>,
}

/// The status of a charge attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AttemptStatus {
    Pending,
    Successful,
    Failed,
    Canceled,
}

/// One try at paying (CONTRACT section 6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChargeAttempt {
    pub id: Uuid,
    pub number: u32,
    pub payment_intent: Uuid,
    pub mode: Mode,
    pub channel: Channel,
    pub status: AttemptStatus,
    pub card: Option<CardSummary>,
    pub failure_code: Option<String>,
    pub amount: Option<i64>,
    #[serde(with = "kobo_storage::codec::timestamp")]
    pub created_at: DateTime<Utc>,
    /// The provider's reference for this try (never shown): what it needs
    /// to carry an authentication on.
    #[serde(default)]
    pub provider_reference: Option<String>,
}

/// Stored in the compact format (kobo_storage::codec); attempts written as
/// JSON before it still read. Pinned by
/// `tests::the_stored_layout_of_a_charge_attempt_is_pinned`.
impl kobo_storage::Compact for ChargeAttempt {}

/// A transfer into a dedicated virtual account, as the bank reported it:
/// the payment it made is this one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BankCredit {
    pub virtual_account: Uuid,
    /// The interbank session id: one payment per session id and account.
    pub session_id: String,
    pub sender_name: Option<String>,
    pub sender_account_number: Option<String>,
    /// The money arrived after the account was deactivated (recorded
    /// anyway: a bank credit cannot be refused).
    pub account_deactivated: bool,
}

/// What is kept of a card: its last four digits and brand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CardSummary {
    pub last4: String,
    pub brand: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaymentIntent {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    /// Creation order (newest-first lists and cursors).
    pub seq: u64,
    pub amount: i64,
    pub currency: Currency,
    pub status: Status,
    pub reference: Option<String>,
    pub description: Option<String>,
    pub customer_email: Option<String>,
    pub brand: Uuid,
    pub customer: Option<Uuid>,
    pub payment_link: Option<Uuid>,
    #[serde(with = "kobo_storage::codec::json_field")]
    pub metadata: Map<String, Value>,
    pub fee_bearer: FeeBearer,
    /// The merchant's prices for this currency, fixed at creation.
    pub pricing: BTreeMap<Channel, FeeRule>,
    /// The channel the customer is paying with, or that took the payment.
    pub channel: Option<Channel>,
    pub failure_code: Option<String>,
    #[serde(with = "kobo_storage::codec::timestamp")]
    pub created_at: DateTime<Utc>,
    #[serde(with = "kobo_storage::codec::timestamp")]
    pub updated_at: DateTime<Utc>,
    #[serde(default, with = "kobo_storage::codec::timestamp::optional")]
    pub paid_at: Option<DateTime<Utc>>,
    #[serde(default, with = "kobo_storage::codec::timestamp::optional")]
    pub canceled_at: Option<DateTime<Utc>>,
    pub return_url: Option<String>,
    pub client_secret_hash: String,
    /// The client secret itself, as intents created before the hosted
    /// checkout had its own credential ([`crate::credential`]) stored it.
    /// No longer written (new intents keep only the hash) and never read:
    /// kept so older records still decode.
    #[serde(default)]
    pub client_secret: Option<String>,
    pub checkout_code: String,
    pub bank_transfer: Option<BankTransferAccount>,
    #[serde(with = "kobo_storage::codec::json_field")]
    pub next_action: Option<NextAction>,
    /// When the abandonment timer fires, while one is set.
    #[serde(default, with = "kobo_storage::codec::timestamp::optional")]
    pub abandon_due: Option<DateTime<Utc>>,
    /// Charge attempts so far; the current one is `pending_attempt`.
    pub attempts: u32,
    pub pending_attempt: Option<u32>,
    /// Card attempts that ended `failed` (declined, or a wrong PIN or
    /// code); at [`MAX_FAILED_CARD_ATTEMPTS`] no more cards are taken.
    /// Counted here, in the state the intent's actor serializes, so
    /// concurrent requests can never go past it. Older records: 0.
    #[serde(default)]
    pub failed_card_attempts: u32,
    /// The mandate a direct-debit charge debits (set at creation by
    /// `POST /v1/mandates/{id}/charge`).
    #[serde(default)]
    pub mandate: Option<Uuid>,
    /// The transfer into a dedicated virtual account that made this
    /// payment (see `credit.rs`).
    #[serde(default)]
    pub bank_credit: Option<BankCredit>,
    /// The invoice this payment pays (hosted invoice page, invoice
    /// mandate charge, test helper): applied by the customer's invoice
    /// book in the capture's batch.
    #[serde(default)]
    pub invoice: Option<Uuid>,
    /// Bumped on every change.
    pub version: u64,
}

/// Stored in the compact format (kobo_storage::codec): `metadata` and
/// `next_action` (a `Value`; `skip_serializing_if`) as JSON text inside.
/// Its field layout is pinned by `tests::the_stored_layout_of_a_payment_intent_is_pinned`.
impl kobo_storage::Compact for PaymentIntent {}

impl PaymentIntent {
    fn rule(&self, channel: Channel) -> FeeRule {
        self.pricing
            .get(&channel)
            .or_else(|| self.pricing.get(&Channel::Card))
            .copied()
            .unwrap_or(FeeRule::percent(0, None))
    }

    /// The channel whose price `fees` shows: the card-price estimate until
    /// paid, then the channel that took the payment.
    fn fees_channel(&self) -> Channel {
        match self.status {
            Status::Successful => self.channel.unwrap_or(Channel::Card),
            // A mandate charge can only be paid by its debit.
            _ if self.mandate.is_some() && self.channel == Some(Channel::DirectDebit) => {
                Channel::DirectDebit
            }
            _ => Channel::Card,
        }
    }

    /// `fees` as shown (see [`money::fees_for_display`]; every intent made
    /// since pricing is checked at creation shows exactly
    /// [`PaymentIntent::fees_on`]).
    pub fn fees(&self) -> Fees {
        fees_for_display(
            self.amount,
            &self.rule(self.fees_channel()),
            self.fee_bearer,
        )
    }

    /// The fees of a payment by `channel`, checked: what a capture books.
    pub fn fees_on(&self, channel: Channel) -> DomainResult<Fees> {
        fees(self.amount, &self.rule(channel), self.fee_bearer)
    }

    /// What the customer pays on `channel`, as shown (never negative; see
    /// [`PaymentIntent::checked_charge_on`] for what money paths use).
    pub fn charge_on(&self, channel: Channel) -> (i64, i64, i64) {
        match self.fee_bearer {
            FeeBearer::Merchant => (0, 0, self.amount),
            FeeBearer::Customer => {
                let (fee, vat) = self.rule(channel).fee_and_vat_for_display(self.amount);
                (
                    fee,
                    vat,
                    self.amount.saturating_add(fee).saturating_add(vat),
                )
            }
        }
    }

    /// What the customer pays on `channel`: `(fee, vat, total)`, checked
    /// (409 `pricing_out_of_range` rather than a wrapped or negative fee).
    pub fn checked_charge_on(&self, channel: Channel) -> DomainResult<(i64, i64, i64)> {
        match self.fee_bearer {
            FeeBearer::Merchant => Ok((0, 0, self.amount)),
            FeeBearer::Customer => {
                let (fee, vat) = self.rule(channel).fee_and_vat(self.amount)?;
                Ok((fee, vat, checked_total(self.amount, fee, vat)?))
            }
        }
    }

    /// What a successful payment by `channel` captures: `(gross, fee + VAT,
    /// net)`, checked.
    pub fn capture_on(&self, channel: Channel) -> DomainResult<(i64, i64, i64)> {
        let f = self.fees_on(channel)?;
        let (_, _, gross) = self.checked_charge_on(channel)?;
        let fee = checked_total(f.fee, f.vat, 0)?;
        Ok((gross, fee, f.net))
    }

    /// Checks that every channel's price can price this payment (at
    /// creation: so a bad price is refused before anyone pays).
    pub fn check_pricing(&self) -> DomainResult<()> {
        for channel in [Channel::Card, Channel::BankTransfer, Channel::DirectDebit] {
            self.capture_on(channel)?;
        }
        Ok(())
    }

    fn touched(mut self, now: DateTime<Utc>) -> Self {
        self.updated_at = now;
        self.version += 1;
        self
    }

    fn transfer_account_open(&self, now: DateTime<Utc>) -> bool {
        self.bank_transfer
            .as_ref()
            .is_some_and(|b| b.expires_at > now)
    }

    /// Whether a bank-transfer request must issue a new account.
    pub fn needs_transfer_account(&self, now: DateTime<Utc>) -> bool {
        !(self.status == Status::Processing
            && self.channel == Some(Channel::BankTransfer)
            && self.transfer_account_open(now))
    }

    /// The exact amount a bank transfer must carry.
    pub fn transfer_amount(&self) -> i64 {
        self.charge_on(Channel::BankTransfer).2
    }
}

#[cfg(test)]
mod tests;
