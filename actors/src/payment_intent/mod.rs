//! Payment intents: the object, its public view, and the pure state machine.
//!
//! [`decide`] is `(state, command, now) -> (new state, effects)`; it never
//! touches the store, the clock or a provider. The actor ([`actor`]) runs it
//! and turns effects into one store batch (through the ledger actor when money
//! moves). [`create`] builds a new intent; creation needs no actor because no
//! other message can reach an object that does not exist yet.

pub mod actor;
pub mod card;
pub mod provider;
pub mod query;
pub mod service;

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
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
    pub created_at: DateTime<Utc>,
    /// The provider's reference for this try (never shown): what it needs
    /// to carry an authentication on.
    #[serde(default)]
    pub provider_reference: Option<String>,
}

/// What is kept of a card: its last four digits and brand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CardSummary {
    pub last4: String,
    pub brand: String,
}

/// The `object` value of a charge attempt.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum ChargeAttemptObject {
    #[serde(rename = "charge_attempt")]
    ChargeAttempt,
}

/// The public ChargeAttempt object: one try at paying a payment intent.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = ChargeAttempt)]
pub struct ChargeAttemptView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: ChargeAttemptObject,
    pub livemode: bool,
    pub payment_intent: Uuid,
    pub channel: Channel,
    pub status: AttemptStatus,
    #[schema(required = true)]
    pub card: Option<CardSummary>,
    #[schema(required = true)]
    pub failure_code: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl ChargeAttempt {
    pub fn view(&self) -> ChargeAttemptView {
        ChargeAttemptView {
            id: self.id,
            object: ChargeAttemptObject::ChargeAttempt,
            livemode: self.mode.livemode(),
            payment_intent: self.payment_intent,
            channel: self.channel,
            status: self.status,
            card: self.card.clone(),
            failure_code: self.failure_code.clone(),
            created_at: self.created_at,
        }
    }

    /// The public ChargeAttempt object, as JSON.
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a charge attempt view serializes")
    }
}

/// The `object` value of a payment intent.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum PaymentIntentObject {
    #[serde(rename = "payment_intent")]
    PaymentIntent,
}

/// `amount_charged`: what the customer pays on the channel they are paying
/// with (the card price until they choose one): the amount, plus fee and VAT
/// when the customer bears the fee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub struct AmountCharged {
    #[schema(minimum = 0)]
    pub amount: i64,
    /// The fee the customer pays (0 when the merchant bears it).
    #[schema(minimum = 0)]
    pub fee: i64,
    /// VAT on that fee.
    #[schema(minimum = 0)]
    pub vat: i64,
    /// `amount + fee + vat`.
    #[schema(minimum = 0)]
    pub total: i64,
}

/// The schema of `metadata`, as the API accepts it: up to 20 keys of 1 to 40
/// characters; values are strings of at most 500 characters, numbers or
/// booleans.
pub fn metadata_schema() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "Up to 20 keys of 1 to 40 characters; values are strings (at most 500 characters), numbers or booleans.",
        ))
        .max_properties(Some(20))
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(40)),
        ))
        .additional_properties(Some(Schema::OneOf(
            OneOfBuilder::new()
                .item(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .max_length(Some(500)),
                )
                .item(ObjectBuilder::new().schema_type(Type::Number))
                .item(ObjectBuilder::new().schema_type(Type::Boolean))
                .build(),
        )))
        .into()
}

/// The public PaymentIntent object.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = PaymentIntent)]
pub struct PaymentIntentView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: PaymentIntentObject,
    pub livemode: bool,
    /// Minor units (kobo, cents).
    #[schema(minimum = 0)]
    pub amount: i64,
    pub currency: Currency,
    pub status: Status,
    #[schema(required = true)]
    pub reference: Option<String>,
    #[schema(required = true)]
    pub description: Option<String>,
    #[schema(required = true)]
    pub customer_email: Option<String>,
    /// The brand the money belongs to (the merchant's default brand unless
    /// one was given).
    pub brand: Uuid,
    #[schema(required = true)]
    pub customer: Option<Uuid>,
    #[schema(required = true)]
    pub payment_link: Option<Uuid>,
    #[schema(schema_with = metadata_schema)]
    pub metadata: Map<String, Value>,
    pub fee_bearer: FeeBearer,
    pub amount_charged: AmountCharged,
    /// The card-price estimate until the payment succeeds, then the final fee
    /// at the price of the channel that took it.
    pub fees: Fees,
    #[schema(required = true)]
    pub failure_code: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[schema(required = true)]
    pub paid_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub canceled_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub return_url: Option<String>,
    #[schema(required = true)]
    pub bank_transfer: Option<BankTransferAccount>,
    #[schema(required = true)]
    pub next_action: Option<NextAction>,
    /// Only in the response that creates the payment: a short link to the
    /// hosted checkout for this one payment.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub checkout_url: Option<String>,
    /// Only in the response that creates the payment: acts on this one
    /// payment only (retrieve, bank_transfer, card, authenticate).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub client_secret: Option<String>,
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
    pub metadata: Map<String, Value>,
    pub fee_bearer: FeeBearer,
    /// The merchant's prices for this currency, fixed at creation.
    pub pricing: BTreeMap<Channel, FeeRule>,
    /// The channel the customer is paying with, or that took the payment.
    pub channel: Option<Channel>,
    pub failure_code: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub paid_at: Option<DateTime<Utc>>,
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
    pub next_action: Option<NextAction>,
    /// When the abandonment timer fires, while one is set.
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
    /// Bumped on every change.
    pub version: u64,
}

/// Extra fields shown only in the create response.
pub struct CreatedSecrets<'a> {
    pub checkout_url: &'a str,
    pub client_secret: &'a str,
}

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

    /// `amount_charged`, as JSON.
    pub fn amount_charged(&self) -> Value {
        serde_json::to_value(self.amount_charged_view()).expect("amount_charged serializes")
    }

    pub fn amount_charged_view(&self) -> AmountCharged {
        let (fee, vat, total) = self.charge_on(self.channel.unwrap_or(Channel::Card));
        AmountCharged {
            amount: self.amount,
            fee,
            vat,
            total,
        }
    }

    /// The public PaymentIntent object; `secrets` only in the create
    /// response.
    pub fn view(&self, secrets: Option<CreatedSecrets<'_>>) -> PaymentIntentView {
        PaymentIntentView {
            id: self.id,
            object: PaymentIntentObject::PaymentIntent,
            livemode: self.mode.livemode(),
            amount: self.amount,
            currency: self.currency,
            status: self.status,
            reference: self.reference.clone(),
            description: self.description.clone(),
            customer_email: self.customer_email.clone(),
            brand: self.brand,
            customer: self.customer,
            payment_link: self.payment_link,
            metadata: self.metadata.clone(),
            fee_bearer: self.fee_bearer,
            amount_charged: self.amount_charged_view(),
            fees: self.fees(),
            failure_code: self.failure_code.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            paid_at: self.paid_at,
            canceled_at: self.canceled_at,
            return_url: self.return_url.clone(),
            bank_transfer: self.bank_transfer.clone(),
            next_action: self.next_action.clone(),
            checkout_url: secrets.as_ref().map(|s| s.checkout_url.to_string()),
            client_secret: secrets.as_ref().map(|s| s.client_secret.to_string()),
        }
    }

    /// The public PaymentIntent object, as JSON.
    pub fn to_api(&self, secrets: Option<CreatedSecrets<'_>>) -> Value {
        serde_json::to_value(self.view(secrets)).expect("a payment intent view serializes")
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

/// A command to a payment intent.
#[derive(Debug, Clone)]
pub enum Command {
    Cancel,
    /// The customer asked to pay by transfer; `account` is a freshly issued
    /// account when [`PaymentIntent::needs_transfer_account`] said so.
    StartBankTransfer {
        account: Option<BankTransferAccount>,
    },
    /// Money arrived in the intent's transfer account.
    TransferReceived {
        amount: i64,
    },
    /// Test helper: make it successful.
    TestSucceed,
    /// The abandonment timer fired.
    AbandonDue,
    /// The customer paid with a card: `card` is all that is kept of it, and
    /// `outcome` is the provider's answer to the charge.
    StartCard {
        card: CardSummary,
        reference: Option<String>,
        outcome: CardOutcome,
    },
    /// The customer answered the bank's `next_action` (`input`); `outcome`
    /// is the provider's verdict. The answer itself never reaches here.
    Authenticate {
        input: card::AuthInput,
        outcome: CardOutcome,
    },
    /// `{cancel: true}`: the customer gave up the card attempt waiting for
    /// them.
    CancelAuthentication,
    /// The provider's final word on a pending card attempt (a finished
    /// redirect, or the bank's decision after "processing").
    CardResult {
        attempt: u32,
        outcome: CardFinal,
    },
    /// A mandate charge starts: a fresh intent of a mandate goes to
    /// `processing` with a pending direct-debit attempt, and its debit is
    /// sent at once (by a durable timer). No abandonment: the bank answers.
    StartDirectDebit,
    /// The provider holds the debit (sent now or before a crash): ask it
    /// for the result after the status-query interval.
    DebitSent,
    /// The provider's status query: still processing.
    DebitPending,
    /// The provider's final word on the debit.
    DebitResult(DebitFinal),
}

/// A direct debit's final result.
#[derive(Debug, Clone, PartialEq)]
pub enum DebitFinal {
    Succeeded,
    Failed(String),
}

/// How often the provider is asked about a debit in flight (clock time).
pub fn debit_status_interval() -> Duration {
    Duration::minutes(1)
}

/// The pending direct-debit attempt of a processing mandate charge.
fn pending_debit<'a>(
    intent: &PaymentIntent,
    pending: Option<&'a ChargeAttempt>,
) -> DomainResult<&'a ChargeAttempt> {
    match pending {
        Some(a)
            if intent.status == Status::Processing
                && intent.mandate.is_some()
                && a.channel == Channel::DirectDebit
                && a.status == AttemptStatus::Pending
                && intent.pending_attempt == Some(a.number) =>
        {
            Ok(a)
        }
        _ => Err(unexpected_state(intent, "take a debit result")),
    }
}

/// A direct debit the bank is working on: no other way of paying may start.
fn debit_in_flight(pending: Option<&ChargeAttempt>) -> bool {
    pending.is_some_and(|a| a.channel == Channel::DirectDebit && a.status == AttemptStatus::Pending)
}

/// The provider's answer to a card charge or to one authentication step.
#[derive(Debug, Clone, PartialEq)]
pub enum CardOutcome {
    Succeeded,
    /// Declined with a `failure_code`.
    Declined(String),
    /// The bank wants something first.
    Action(NextAction),
    /// The bank is still deciding; a [`Command::CardResult`] follows.
    Pending,
}

/// A card attempt's final result.
#[derive(Debug, Clone, PartialEq)]
pub enum CardFinal {
    Succeeded,
    Declined(String),
}

/// Whether a card payment may start now (before the provider is asked).
pub fn check_card_start(
    intent: &PaymentIntent,
    pending: Option<&ChargeAttempt>,
) -> DomainResult<()> {
    if matches!(intent.status, Status::Successful | Status::Canceled) {
        return Err(unexpected_state(intent, "take a card payment"));
    }
    if intent.failed_card_attempts >= MAX_FAILED_CARD_ATTEMPTS {
        return Err(DomainError::state(
            "card_attempts_exceeded",
            format!(
                "this payment has had {MAX_FAILED_CARD_ATTEMPTS} failed card attempts and takes no more cards; pay by bank transfer, or ask the business for a new payment"
            ),
        ));
    }
    if debit_in_flight(pending) {
        return Err(unexpected_state(
            intent,
            "take a card payment while its direct debit is with the bank",
        ));
    }
    // A card attempt pending with nothing asked of the customer is with the
    // bank: its result may still bring money.
    let deciding = pending
        .is_some_and(|a| a.channel == Channel::Card && a.status == AttemptStatus::Pending)
        && intent.next_action.is_none();
    if deciding {
        return Err(DomainError::state(
            "payment_intent_unexpected_state",
            "the bank is still deciding on the last card; wait for the result",
        ));
    }
    Ok(())
}

/// The pending card attempt waiting for the customer, when `input` (or a
/// cancel, `None`) is what it waits for. Checked before the provider is
/// asked, and again by [`decide`].
pub fn check_authenticate<'a>(
    intent: &PaymentIntent,
    pending: Option<&'a ChargeAttempt>,
    input: Option<card::AuthInput>,
) -> DomainResult<&'a ChargeAttempt> {
    let waiting = || {
        DomainError::state(
            "payment_intent_unexpected_state",
            format!(
                "this payment intent is {} with no authentication step waiting",
                intent.status.as_str()
            ),
        )
    };
    let (Some(action), Some(attempt)) = (&intent.next_action, pending) else {
        return Err(waiting());
    };
    if intent.status != Status::Processing
        || attempt.channel != Channel::Card
        || attempt.status != AttemptStatus::Pending
        || intent.pending_attempt != Some(attempt.number)
    {
        return Err(waiting());
    }
    if let Some(input) = input {
        if action.action_type != "otp" {
            return Err(DomainError::state(
                "payment_intent_unexpected_state",
                "the bank waits for the customer at `next_action.url`; there is nothing to send",
            ));
        }
        let asked = action.input.as_deref().unwrap_or("otp");
        if asked != input.as_str() {
            return Err(DomainError::invalid(
                input.as_str(),
                format!("the bank asks for `{asked}`, not `{}`", input.as_str()),
            ));
        }
    }
    Ok(attempt)
}

/// The pending card attempt number `attempt`, when a final result for it
/// is still welcome.
pub fn check_card_result<'a>(
    intent: &PaymentIntent,
    pending: Option<&'a ChargeAttempt>,
    attempt: u32,
) -> DomainResult<&'a ChargeAttempt> {
    match pending {
        Some(a)
            if a.number == attempt
                && intent.pending_attempt == Some(attempt)
                && a.channel == Channel::Card
                && a.status == AttemptStatus::Pending
                && matches!(intent.status, Status::Processing | Status::Abandoned) =>
        {
            Ok(a)
        }
        _ => Err(DomainError::state(
            "payment_intent_unexpected_state",
            "this card attempt is no longer waiting for a result",
        )),
    }
}

/// What a transition asks the actor to do besides saving the new state.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Event(&'static str),
    /// Money arrived: post the capture to the ledger.
    Capture {
        gross: i64,
        fee: i64,
        net: i64,
    },
    ScheduleAbandon(DateTime<Utc>),
    CancelAbandon(DateTime<Utc>),
    /// Send the direct debit to the provider at this time.
    ScheduleDebitSend(DateTime<Utc>),
    /// Ask the provider about the direct debit at this time.
    ScheduleDebitStatus(DateTime<Utc>),
    /// Save (insert or update) a charge attempt.
    Attempt(ChargeAttempt),
}

#[derive(Debug, Clone)]
pub struct Decision {
    pub intent: PaymentIntent,
    pub effects: Vec<Effect>,
}

fn unexpected_state(intent: &PaymentIntent, action: &str) -> DomainError {
    DomainError::state(
        "payment_intent_unexpected_state",
        format!(
            "this payment intent is {}; it cannot {action}",
            intent.status.as_str()
        ),
    )
}

fn new_attempt(
    intent: &PaymentIntent,
    channel: Channel,
    status: AttemptStatus,
    failure_code: Option<&str>,
    amount: Option<i64>,
    now: DateTime<Utc>,
) -> ChargeAttempt {
    ChargeAttempt {
        id: Uuid::new_v4(),
        number: intent.attempts + 1,
        payment_intent: intent.id,
        mode: intent.mode,
        channel,
        status,
        card: None,
        failure_code: failure_code.map(str::to_string),
        amount,
        created_at: now,
        provider_reference: None,
    }
}

/// Moves the pending attempt (if any) to `status`; `existing` is the stored
/// attempt, passed by the actor.
fn settle_pending(
    existing: Option<&ChargeAttempt>,
    status: AttemptStatus,
    effects: &mut Vec<Effect>,
) {
    if let Some(a) = existing {
        if a.status == AttemptStatus::Pending {
            let mut a = a.clone();
            a.status = status;
            effects.push(Effect::Attempt(a));
        }
    }
}

/// The state machine. `pending` is the stored pending charge attempt, if any.
pub fn decide(
    intent: &PaymentIntent,
    pending: Option<&ChargeAttempt>,
    command: &Command,
    now: DateTime<Utc>,
) -> DomainResult<Decision> {
    let mut effects = Vec::new();
    let mut next = intent.clone();
    match command {
        Command::Cancel => {
            if !matches!(
                intent.status,
                Status::Created | Status::Failed | Status::Abandoned
            ) {
                return Err(unexpected_state(intent, "be canceled"));
            }
            next.status = Status::Canceled;
            next.canceled_at = Some(now);
            next.next_action = None;
            if let Some(due) = next.abandon_due.take() {
                effects.push(Effect::CancelAbandon(due));
            }
            settle_pending(pending, AttemptStatus::Canceled, &mut effects);
            next.pending_attempt = None;
            effects.push(Effect::Event(event::PAYMENT_INTENT_CANCELED));
        }
        Command::StartBankTransfer { account } => {
            if intent.currency != Currency::NGN {
                return Err(DomainError::request(
                    "payment_method_unavailable",
                    None,
                    "bank transfer takes naira only",
                ));
            }
            if matches!(intent.status, Status::Successful | Status::Canceled) {
                return Err(unexpected_state(intent, "start a bank transfer"));
            }
            if debit_in_flight(pending) {
                return Err(unexpected_state(
                    intent,
                    "start a bank transfer while its direct debit is with the bank",
                ));
            }
            let Some(account) = account else {
                if !intent.needs_transfer_account(now) {
                    // Asking again while the account is open returns it.
                    return Ok(Decision {
                        intent: next,
                        effects,
                    });
                }
                return Err(DomainError::internal("no transfer account was issued"));
            };
            // A previous pending transfer attempt (an expired account) stays
            // as it is: late money to it still counts. A card attempt
            // waiting for the customer ends: they chose to transfer.
            if let Some(p) = pending.filter(|a| a.channel == Channel::Card) {
                settle_pending(Some(p), AttemptStatus::Canceled, &mut effects);
            }
            let attempt = new_attempt(
                intent,
                Channel::BankTransfer,
                AttemptStatus::Pending,
                None,
                Some(account.amount),
                now,
            );
            next.attempts += 1;
            next.pending_attempt = Some(attempt.number);
            effects.push(Effect::Attempt(attempt));
            next.status = Status::Processing;
            next.channel = Some(Channel::BankTransfer);
            next.failure_code = None;
            next.next_action = None;
            next.bank_transfer = Some(account.clone());
            if let Some(due) = next.abandon_due.take() {
                effects.push(Effect::CancelAbandon(due));
            }
            let due = now + abandon_after();
            next.abandon_due = Some(due);
            effects.push(Effect::ScheduleAbandon(due));
        }
        Command::TransferReceived { amount } => {
            let Some(account) = &intent.bank_transfer else {
                return Err(DomainError::state(
                    "bank_transfer_not_started",
                    "no bank-transfer account was issued for this payment intent",
                ));
            };
            if *amount != account.amount {
                // Returned to the sender; the payment is unchanged.
                let attempt = new_attempt(
                    intent,
                    Channel::BankTransfer,
                    AttemptStatus::Failed,
                    Some("amount_mismatch"),
                    Some(*amount),
                    now,
                );
                next.attempts += 1;
                effects.push(Effect::Attempt(attempt));
                return Ok(Decision {
                    intent: next.touched(now),
                    effects,
                });
            }
            if matches!(intent.status, Status::Successful | Status::Canceled) {
                return Err(unexpected_state(intent, "receive money"));
            }
            next.channel = Some(Channel::BankTransfer);
            match pending.filter(|a| a.channel == Channel::BankTransfer) {
                Some(_) => settle_pending(pending, AttemptStatus::Successful, &mut effects),
                None => {
                    // Paid by transfer: a card attempt still open ends.
                    if let Some(p) = pending.filter(|a| a.channel == Channel::Card) {
                        settle_pending(Some(p), AttemptStatus::Canceled, &mut effects);
                    }
                    let attempt = new_attempt(
                        intent,
                        Channel::BankTransfer,
                        AttemptStatus::Successful,
                        None,
                        Some(*amount),
                        now,
                    );
                    next.attempts += 1;
                    effects.push(Effect::Attempt(attempt));
                }
            }
            succeed(&mut next, &mut effects, now)?;
        }
        Command::TestSucceed => {
            if intent.status == Status::Successful {
                return Err(unexpected_state(intent, "succeed again"));
            }
            if next.channel.is_none() {
                next.channel = Some(Channel::Card);
            }
            settle_pending(pending, AttemptStatus::Successful, &mut effects);
            succeed(&mut next, &mut effects, now)?;
        }
        Command::AbandonDue => {
            // A stale or early timer changes nothing (the live due time stays).
            let due_reached = intent.abandon_due.is_some_and(|d| d <= now);
            if intent.status != Status::Processing || !due_reached {
                return Ok(Decision {
                    intent: next,
                    effects,
                });
            }
            next.abandon_due = None;
            next.status = Status::Abandoned;
            // A card attempt waiting for the customer (a code, a redirect)
            // ends with the payment; one the bank is deciding stays pending,
            // since its result may still bring money.
            if intent.next_action.is_some() {
                if let Some(p) = pending.filter(|a| a.channel == Channel::Card) {
                    settle_pending(Some(p), AttemptStatus::Canceled, &mut effects);
                    next.pending_attempt = None;
                }
            }
            next.next_action = None;
            effects.push(Effect::Event(event::PAYMENT_INTENT_ABANDONED));
        }
        Command::StartCard {
            card,
            reference,
            outcome,
        } => {
            check_card_start(intent, pending)?;
            // A card attempt still waiting for the customer is replaced.
            if let Some(p) = pending.filter(|a| a.channel == Channel::Card) {
                settle_pending(Some(p), AttemptStatus::Canceled, &mut effects);
            }
            if let Some(due) = next.abandon_due.take() {
                effects.push(Effect::CancelAbandon(due));
            }
            let mut attempt = new_attempt(
                intent,
                Channel::Card,
                AttemptStatus::Pending,
                None,
                Some(intent.checked_charge_on(Channel::Card)?.2),
                now,
            );
            attempt.card = Some(card.clone());
            attempt.provider_reference = reference.clone();
            next.attempts += 1;
            next.channel = Some(Channel::Card);
            next.failure_code = None;
            next.next_action = None;
            next.pending_attempt = None;
            card_outcome(&mut next, attempt, outcome, true, &mut effects, now)?;
        }
        Command::Authenticate { input, outcome } => {
            let attempt = check_authenticate(intent, pending, Some(*input))?.clone();
            card_outcome(&mut next, attempt, outcome, false, &mut effects, now)?;
        }
        Command::CancelAuthentication => {
            let mut attempt = check_authenticate(intent, pending, None)?.clone();
            attempt.status = AttemptStatus::Canceled;
            effects.push(Effect::Attempt(attempt));
            fail(&mut next, "authentication_canceled", &mut effects);
        }
        Command::CardResult { attempt, outcome } => {
            let attempt = check_card_result(intent, pending, *attempt)?.clone();
            let outcome = match outcome {
                CardFinal::Succeeded => CardOutcome::Succeeded,
                CardFinal::Declined(code) => CardOutcome::Declined(code.clone()),
            };
            card_outcome(&mut next, attempt, &outcome, false, &mut effects, now)?;
        }
        Command::StartDirectDebit => {
            if intent.status != Status::Created || intent.attempts != 0 || intent.mandate.is_none()
            {
                return Err(unexpected_state(intent, "start a direct debit"));
            }
            if intent.currency != Currency::NGN {
                return Err(DomainError::request(
                    "payment_method_unavailable",
                    Some("currency"),
                    "direct debit takes naira only",
                ));
            }
            next.channel = Some(Channel::DirectDebit);
            let mut attempt = new_attempt(
                intent,
                Channel::DirectDebit,
                AttemptStatus::Pending,
                None,
                Some(next.checked_charge_on(Channel::DirectDebit)?.2),
                now,
            );
            // The debit carries the payment id as its reference.
            attempt.provider_reference = Some(intent.id.to_string());
            next.attempts += 1;
            next.pending_attempt = Some(attempt.number);
            next.status = Status::Processing;
            effects.push(Effect::Attempt(attempt));
            effects.push(Effect::ScheduleDebitSend(now));
        }
        Command::DebitSent => {
            pending_debit(intent, pending)?;
            effects.push(Effect::ScheduleDebitStatus(now + debit_status_interval()));
            // Nothing about the intent changes.
            return Ok(Decision {
                intent: next,
                effects,
            });
        }
        Command::DebitPending => {
            pending_debit(intent, pending)?;
            effects.push(Effect::ScheduleDebitStatus(now + debit_status_interval()));
            return Ok(Decision {
                intent: next,
                effects,
            });
        }
        Command::DebitResult(result) => {
            let attempt = pending_debit(intent, pending)?;
            match result {
                DebitFinal::Succeeded => {
                    settle_pending(Some(attempt), AttemptStatus::Successful, &mut effects);
                    succeed(&mut next, &mut effects, now)?;
                }
                DebitFinal::Failed(code) => {
                    let mut a = attempt.clone();
                    a.status = AttemptStatus::Failed;
                    a.failure_code = Some(code.clone());
                    effects.push(Effect::Attempt(a));
                    fail(&mut next, code, &mut effects);
                }
            }
        }
    }
    Ok(Decision {
        intent: next.touched(now),
        effects,
    })
}

/// Applies the provider's answer to card attempt `attempt`; `fresh` when
/// the attempt was just created (it is saved whatever the answer, and a
/// wait starts the abandonment clock).
fn card_outcome(
    next: &mut PaymentIntent,
    mut attempt: ChargeAttempt,
    outcome: &CardOutcome,
    fresh: bool,
    effects: &mut Vec<Effect>,
    now: DateTime<Utc>,
) -> DomainResult<()> {
    match outcome {
        CardOutcome::Succeeded => {
            attempt.status = AttemptStatus::Successful;
            effects.push(Effect::Attempt(attempt));
            next.channel = Some(Channel::Card);
            succeed(next, effects, now)?;
        }
        CardOutcome::Declined(code) => {
            attempt.status = AttemptStatus::Failed;
            attempt.failure_code = Some(code.clone());
            effects.push(Effect::Attempt(attempt));
            next.failed_card_attempts += 1;
            fail(next, code, effects);
        }
        CardOutcome::Action(_) | CardOutcome::Pending => {
            next.status = Status::Processing;
            next.next_action = match outcome {
                CardOutcome::Action(a) => Some(a.clone()),
                _ => None,
            };
            next.pending_attempt = Some(attempt.number);
            if fresh {
                effects.push(Effect::Attempt(attempt));
                let due = now + abandon_after();
                next.abandon_due = Some(due);
                effects.push(Effect::ScheduleAbandon(due));
            }
        }
    }
    Ok(())
}

/// The last attempt failed: the customer may try again.
fn fail(next: &mut PaymentIntent, code: &str, effects: &mut Vec<Effect>) {
    next.status = Status::Failed;
    next.failure_code = Some(code.to_string());
    next.next_action = None;
    next.pending_attempt = None;
    if let Some(due) = next.abandon_due.take() {
        effects.push(Effect::CancelAbandon(due));
    }
    effects.push(Effect::Event(event::PAYMENT_INTENT_FAILED));
}

fn succeed(
    next: &mut PaymentIntent,
    effects: &mut Vec<Effect>,
    now: DateTime<Utc>,
) -> DomainResult<()> {
    next.status = Status::Successful;
    next.paid_at = Some(now);
    next.failure_code = None;
    next.next_action = None;
    next.pending_attempt = None;
    next.canceled_at = None;
    if let Some(due) = next.abandon_due.take() {
        effects.push(Effect::CancelAbandon(due));
    }
    let channel = next.channel.unwrap_or(Channel::Card);
    let (gross, fee, net) = next.capture_on(channel)?;
    effects.push(Effect::Capture { gross, fee, net });
    effects.push(Effect::Event(event::PAYMENT_INTENT_SUCCESSFUL));
    Ok(())
}

#[cfg(test)]
mod tests;

/// The typed views render exactly what the `json!` renderings they replaced
/// did.
#[cfg(test)]
mod view_tests {
    use super::*;

    use chrono::TimeZone;
    use serde_json::json;

    use crate::money::default_pricing;

    fn old_intent_json(i: &PaymentIntent, secrets: Option<CreatedSecrets<'_>>) -> Value {
        let (fee, vat, total) = i.charge_on(i.channel.unwrap_or(Channel::Card));
        let mut v = json!({
            "id": i.id,
            "object": "payment_intent",
            "livemode": i.mode.livemode(),
            "amount": i.amount,
            "currency": i.currency,
            "status": i.status,
            "reference": i.reference,
            "description": i.description,
            "customer_email": i.customer_email,
            "brand": i.brand,
            "customer": i.customer,
            "payment_link": i.payment_link,
            "metadata": i.metadata,
            "fee_bearer": i.fee_bearer,
            "amount_charged": {"amount": i.amount, "fee": fee, "vat": vat, "total": total},
            "fees": i.fees(),
            "failure_code": i.failure_code,
            "created_at": i.created_at,
            "updated_at": i.updated_at,
            "paid_at": i.paid_at,
            "canceled_at": i.canceled_at,
            "return_url": i.return_url,
            "bank_transfer": i.bank_transfer,
            "next_action": i.next_action,
        });
        if let Some(s) = secrets {
            let o = v.as_object_mut().expect("object");
            o.insert("checkout_url".into(), Value::from(s.checkout_url));
            o.insert("client_secret".into(), Value::from(s.client_secret));
        }
        v
    }

    fn old_attempt_json(a: &ChargeAttempt) -> Value {
        json!({
            "id": a.id,
            "object": "charge_attempt",
            "livemode": a.mode.livemode(),
            "payment_intent": a.payment_intent,
            "channel": a.channel.as_str(),
            "status": a.status,
            "card": a.card,
            "failure_code": a.failure_code,
            "created_at": a.created_at,
        })
    }

    fn at(min: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 3, 9, 0, 0).unwrap()
            + Duration::minutes(min)
            + Duration::microseconds(123_456)
    }

    fn bare(currency: Currency, bearer: FeeBearer) -> PaymentIntent {
        PaymentIntent {
            id: Uuid::new_v4(),
            merchant: Uuid::new_v4(),
            mode: Mode::Test,
            seq: 1,
            amount: 1_000_000,
            currency,
            status: Status::Created,
            reference: None,
            description: None,
            customer_email: None,
            brand: Uuid::new_v4(),
            customer: None,
            payment_link: None,
            metadata: Map::new(),
            fee_bearer: bearer,
            pricing: default_pricing()[&currency].clone(),
            channel: None,
            failure_code: None,
            created_at: at(0),
            updated_at: at(0),
            paid_at: None,
            canceled_at: None,
            return_url: None,
            client_secret_hash: "h".into(),
            client_secret: None,
            checkout_code: "c".into(),
            bank_transfer: None,
            next_action: None,
            abandon_due: None,
            attempts: 0,
            pending_attempt: None,
            failed_card_attempts: 0,
            mandate: None,
            version: 1,
        }
    }

    fn full() -> PaymentIntent {
        let mut i = bare(Currency::NGN, FeeBearer::Customer);
        i.mode = Mode::Live;
        i.status = Status::Successful;
        i.reference = Some("order-1".into());
        i.description = Some("two chairs".into());
        i.customer_email = Some("ada@example.com".into());
        i.customer = Some(Uuid::new_v4());
        i.payment_link = Some(Uuid::new_v4());
        i.metadata = json!({"order": "A-1", "n": 3, "gift": true})
            .as_object()
            .unwrap()
            .clone();
        i.channel = Some(Channel::BankTransfer);
        i.failure_code = Some("card_declined".into());
        i.updated_at = at(5);
        i.paid_at = Some(at(5));
        i.canceled_at = Some(at(6));
        i.return_url = Some("https://shop.example/done".into());
        i.bank_transfer = Some(BankTransferAccount {
            account_number: "9000000001".into(),
            bank_name: "Kobo Sandbox Bank".into(),
            account_name: "KOBO / SHOP".into(),
            amount: 1_010_750,
            expires_at: at(30),
        });
        i.next_action = Some(NextAction {
            action_type: "otp".into(),
            message: Some("Enter your PIN".into()),
            input: Some("pin".into()),
            url: None,
        });
        i
    }

    #[test]
    fn payment_intent_json_is_unchanged() {
        let mut intents = vec![full()];
        for c in Currency::ALL {
            for b in [FeeBearer::Merchant, FeeBearer::Customer] {
                intents.push(bare(c, b));
            }
        }
        for s in Status::ALL {
            let mut i = full();
            i.status = s;
            intents.push(i);
        }
        for i in &intents {
            assert_eq!(i.to_api(None), old_intent_json(i, None));
            let secrets = || CreatedSecrets {
                checkout_url: "http://127.0.0.1:8080/c/abc",
                client_secret: "pi_x_secret_y",
            };
            assert_eq!(
                i.to_api(Some(secrets())),
                old_intent_json(i, Some(secrets()))
            );
        }
        assert_eq!(
            full().amount_charged(),
            old_intent_json(&full(), None)["amount_charged"]
        );
    }

    #[test]
    fn charge_attempt_json_is_unchanged() {
        let intent = full();
        let statuses = [
            AttemptStatus::Pending,
            AttemptStatus::Successful,
            AttemptStatus::Failed,
            AttemptStatus::Canceled,
        ];
        for channel in [Channel::Card, Channel::BankTransfer, Channel::DirectDebit] {
            for status in statuses {
                let mut a = new_attempt(&intent, channel, status, None, Some(5), at(1));
                assert_eq!(a.to_api(), old_attempt_json(&a));
                a.card = Some(CardSummary {
                    last4: "0409".into(),
                    brand: "visa".into(),
                });
                a.failure_code = Some("incorrect_otp".into());
                a.mode = Mode::Live;
                assert_eq!(a.to_api(), old_attempt_json(&a));
            }
        }
    }
}
