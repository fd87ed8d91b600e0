//! Payment intents: the object, its public view, and the pure state machine.
//!
//! [`decide`] is `(state, command, now) -> (new state, effects)`; it never
//! touches the store, the clock or a provider. The actor ([`actor`]) runs it
//! and turns effects into one store batch (through the ledger actor when money
//! moves). [`create`] builds a new intent; creation needs no actor because no
//! other message can reach an object that does not exist yet.

pub mod actor;
pub mod service;

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::event;
use crate::ids::Mode;
use crate::money::{fees, Channel, Currency, FeeBearer, FeeRule, Fees};

/// A payment left in `processing` this long with no money is abandoned.
pub fn abandon_after() -> Duration {
    Duration::minutes(30)
}

/// A bank-transfer account is open this long after it is issued.
pub fn transfer_account_lifetime() -> Duration {
    Duration::minutes(30)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BankTransferAccount {
    pub account_number: String,
    pub bank_name: String,
    pub account_name: String,
    pub amount: i64,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextAction {
    #[serde(rename = "type")]
    pub action_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardSummary {
    pub last4: String,
    pub brand: String,
}

impl ChargeAttempt {
    pub fn to_api(&self) -> Value {
        json!({
            "id": self.id,
            "object": "charge_attempt",
            "livemode": self.mode.livemode(),
            "payment_intent": self.payment_intent,
            "channel": self.channel.as_str(),
            "status": self.status,
            "card": self.card,
            "failure_code": self.failure_code,
            "created_at": self.created_at,
        })
    }
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
    pub checkout_code: String,
    pub bank_transfer: Option<BankTransferAccount>,
    pub next_action: Option<NextAction>,
    /// When the abandonment timer fires, while one is set.
    pub abandon_due: Option<DateTime<Utc>>,
    /// Charge attempts so far; the current one is `pending_attempt`.
    pub attempts: u32,
    pub pending_attempt: Option<u32>,
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

    /// `fees`: the card-price estimate until paid, then the final fee at the
    /// price of the channel that took the payment.
    pub fn fees(&self) -> Fees {
        let channel = match self.status {
            Status::Successful => self.channel.unwrap_or(Channel::Card),
            _ => Channel::Card,
        };
        fees(self.amount, &self.rule(channel), self.fee_bearer)
    }

    /// What the customer pays on `channel`.
    pub fn charge_on(&self, channel: Channel) -> (i64, i64, i64) {
        match self.fee_bearer {
            FeeBearer::Merchant => (0, 0, self.amount),
            FeeBearer::Customer => {
                let (fee, vat) = self.rule(channel).fee_and_vat(self.amount);
                (fee, vat, self.amount + fee + vat)
            }
        }
    }

    pub fn amount_charged(&self) -> Value {
        let (fee, vat, total) = self.charge_on(self.channel.unwrap_or(Channel::Card));
        json!({"amount": self.amount, "fee": fee, "vat": vat, "total": total})
    }

    /// The public PaymentIntent object.
    pub fn to_api(&self, secrets: Option<CreatedSecrets<'_>>) -> Value {
        let mut v = json!({
            "id": self.id,
            "object": "payment_intent",
            "livemode": self.mode.livemode(),
            "amount": self.amount,
            "currency": self.currency,
            "status": self.status,
            "reference": self.reference,
            "description": self.description,
            "customer_email": self.customer_email,
            "brand": self.brand,
            "customer": self.customer,
            "payment_link": self.payment_link,
            "metadata": self.metadata,
            "fee_bearer": self.fee_bearer,
            "amount_charged": self.amount_charged(),
            "fees": self.fees(),
            "failure_code": self.failure_code,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "paid_at": self.paid_at,
            "canceled_at": self.canceled_at,
            "return_url": self.return_url,
            "bank_transfer": self.bank_transfer,
            "next_action": self.next_action,
        });
        if let Some(s) = secrets {
            let o = v.as_object_mut().expect("object");
            o.insert("checkout_url".into(), Value::from(s.checkout_url));
            o.insert("client_secret".into(), Value::from(s.client_secret));
        }
        v
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
            // A previous pending attempt (another channel, or an expired
            // account) stays as it is: late money to it still counts.
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
            succeed(&mut next, &mut effects, now);
        }
        Command::TestSucceed => {
            if intent.status == Status::Successful {
                return Err(unexpected_state(intent, "succeed again"));
            }
            if next.channel.is_none() {
                next.channel = Some(Channel::Card);
            }
            settle_pending(pending, AttemptStatus::Successful, &mut effects);
            succeed(&mut next, &mut effects, now);
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
            next.next_action = None;
            effects.push(Effect::Event(event::PAYMENT_INTENT_ABANDONED));
        }
    }
    Ok(Decision {
        intent: next.touched(now),
        effects,
    })
}

fn succeed(next: &mut PaymentIntent, effects: &mut Vec<Effect>, now: DateTime<Utc>) {
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
    let f = next.fees();
    let (_, _, gross) = next.charge_on(channel);
    effects.push(Effect::Capture {
        gross,
        fee: f.fee + f.vat,
        net: f.net,
    });
    effects.push(Effect::Event(event::PAYMENT_INTENT_SUCCESSFUL));
}

#[cfg(test)]
mod tests;
