//! The payment intent actor: one per intent, activated on demand. It handles
//! one command at a time to completion (the store has confirmed before the
//! next command starts), so two transitions of one intent never race.
//! A panic while handling drops the in-memory copy; the next message reloads
//! the last durable snapshot (counted as a restart).

use actix::prelude::*;
use serde_json::Value;
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::direct_debit::{Debit, DebitOutcome, DebitStatus};
use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::idempotency::IdempotencySave;
use crate::ids::Mode;
use crate::money::Channel;
use crate::payment_intent::card::{AuthInput, CardDetails, Secret};
use crate::payment_intent::deps::PaymentIntentDeps;
use crate::payment_intent::service::{
    commit_decision, commit_decision_with, load_attempt, precheck_capture,
};
use crate::payment_intent::{
    check_authenticate, check_card_result, check_card_start, decide, AttemptStatus, Command,
    DebitFinal, Decision, Effect, PaymentIntent, Status,
};
use crate::registry::{run_command, Activation, ObjectActor, VirtualActor};

pub struct PaymentIntentActor {
    activation: Activation<Self>,
    state: Option<PaymentIntent>,
}

/// What a caller asks of a payment intent.
#[derive(Debug, Clone)]
pub enum Action {
    Cancel,
    BankTransfer,
    /// Test helper: money arrives by transfer (default: the exact amount).
    SimulateTransfer {
        amount: Option<i64>,
    },
    TestSucceed,
    /// The abandonment timer stored under `timer_key` fired.
    AbandonTimer {
        timer_key: Vec<u8>,
    },
    /// Pay with a card. The details go to the provider and no further.
    Card {
        card: CardDetails,
    },
    /// The customer's answer to the bank's `next_action`.
    Authenticate {
        input: AuthInput,
        value: Secret,
    },
    /// `{cancel: true}`: give up the card attempt waiting for the customer.
    CancelAuthentication,
    /// The customer finished the provider's redirect page (sandbox bank
    /// page): `reference` is from its address.
    RedirectResult {
        attempt: u32,
        reference: String,
        approved: bool,
    },
    /// A mandate charge's send timer (stored under `timer_key`) fired.
    DebitSendTimer {
        timer_key: Vec<u8>,
    },
    /// A mandate charge's status-query timer fired.
    DebitStatusTimer {
        timer_key: Vec<u8>,
    },
}

/// `payment_in_progress`: another request is working on the payment.
pub fn payment_in_progress() -> DomainError {
    DomainError::state(
        ErrorCode::PaymentInProgress,
        "another request is working on this payment; wait for it and retrieve the payment intent",
    )
}

fn card_api_unavailable() -> DomainError {
    DomainError::state(
        ErrorCode::CardApiUnavailable,
        "card payments are not offered on this server in this mode; use bank transfer",
    )
}

/// Waits out the provider's latency (the sandbox's is 0 unless configured).
async fn provider_latency(d: std::time::Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Value>")]
pub struct IntentMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub merchant_name: String,
    /// Whether the merchant takes bank transfers (payment settings).
    pub bank_transfer_enabled: bool,
    pub action: Action,
    pub idem: Option<IdempotencySave>,
}

impl Actor for PaymentIntentActor {
    type Context = Context<Self>;
}

impl VirtualActor for PaymentIntentActor {
    type Key = Uuid;
    type Deps = PaymentIntentDeps;
    const KIND: &'static str = "payment_intent";
    fn activate(activation: Activation<Self>) -> Self {
        PaymentIntentActor {
            activation,
            state: None,
        }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

pub fn load(kobo: &Env, id: Uuid) -> DomainResult<Option<PaymentIntent>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::PaymentIntents, id.as_bytes())?)
}

impl ObjectActor for PaymentIntentActor {
    type Object = PaymentIntent;
    fn object(&mut self) -> &mut Option<PaymentIntent> {
        &mut self.state
    }
    fn activation_mut(&mut self) -> &mut Activation<Self> {
        &mut self.activation
    }
    fn load(kobo: &Self::Deps, id: Uuid) -> DomainResult<Option<PaymentIntent>> {
        load(kobo, id)
    }
    fn scope(o: &PaymentIntent) -> (Uuid, Mode) {
        (o.merchant, o.mode)
    }
}

impl Handler<IntentMessage> for PaymentIntentActor {
    type Result = AtomicResponse<Self, DomainResult<Value>>;

    fn handle(&mut self, msg: IntentMessage, _ctx: &mut Context<Self>) -> Self::Result {
        let (merchant, mode) = (msg.merchant, msg.mode);
        run_command(self, merchant, mode, move |kobo, object| async move {
            process(&kobo, &object, msg).await
        })
    }
}

// Long: one match over the actor's actions, an arm each (provider call, then decide); the
// commit after it is shared.
async fn process(
    kobo: &PaymentIntentDeps,
    intent: &PaymentIntent,
    msg: IntentMessage,
) -> DomainResult<(PaymentIntent, Value)> {
    let now = kobo.clock.now();
    let pending = match intent.pending_attempt {
        Some(n) => load_attempt(kobo, intent.id, n)?,
        None => None,
    };
    let mut batch = Batch::new();
    // The settings a capture after a provider call must use: checked
    // before the call (see `precheck_capture`).
    let mut checked = None;
    let provider = kobo.providers.for_mode(msg.mode);
    let issue = |intent: &PaymentIntent| -> DomainResult<Command> {
        if !msg.bank_transfer_enabled {
            return Err(DomainError::request(
                ErrorCode::PaymentMethodUnavailable,
                None,
                "bank transfer is turned off in this merchant's payment settings",
            ));
        }
        let account = if intent.needs_transfer_account(now) {
            Some(provider.issue_transfer_account(intent, &msg.merchant_name, now)?)
        } else {
            None
        };
        Ok(Command::StartBankTransfer { account })
    };
    let decision = match &msg.action {
        Action::Card { card } => {
            if !provider.takes_cards() {
                return Err(card_api_unavailable());
            }
            check_card_start(intent, pending.as_ref())?;
            checked = Some(precheck_capture(kobo, intent, Channel::Card, now)?);
            provider_latency(provider.card_latency()).await;
            let charge =
                provider.charge_card(intent, intent.attempts + 1, card, &kobo.config.base_url)?;
            let command = Command::StartCard {
                card: card.summary(),
                reference: charge.reference,
                outcome: charge.outcome,
            };
            decide(intent, pending.as_ref(), &command, now)?
        }
        Action::Authenticate { input, value } => {
            if !provider.takes_cards() {
                return Err(card_api_unavailable());
            }
            let attempt = check_authenticate(intent, pending.as_ref(), Some(*input))?;
            checked = Some(precheck_capture(kobo, intent, Channel::Card, now)?);
            provider_latency(provider.card_latency()).await;
            let outcome = provider.authenticate_card(attempt, *input, value.expose())?;
            let command = Command::Authenticate {
                input: *input,
                outcome,
            };
            decide(intent, pending.as_ref(), &command, now)?
        }
        Action::CancelAuthentication => decide(
            intent,
            pending.as_ref(),
            &Command::CancelAuthentication,
            now,
        )?,
        Action::RedirectResult {
            attempt,
            reference,
            approved,
        } => {
            let found = check_card_result(intent, pending.as_ref(), *attempt)?;
            checked = Some(precheck_capture(kobo, intent, Channel::Card, now)?);
            let outcome = provider.redirect_result(found, reference, *approved)?;
            let command = Command::CardResult {
                attempt: *attempt,
                outcome,
            };
            decide(intent, pending.as_ref(), &command, now)?
        }
        Action::Cancel => decide(intent, pending.as_ref(), &Command::Cancel, now)?,
        Action::TestSucceed => decide(intent, pending.as_ref(), &Command::TestSucceed, now)?,
        Action::BankTransfer => decide(intent, pending.as_ref(), &issue(intent)?, now)?,
        Action::AbandonTimer { timer_key } => {
            batch.delete(Table::Timers, timer_key.clone());
            decide(intent, pending.as_ref(), &Command::AbandonDue, now)?
        }
        Action::DebitSendTimer { timer_key } | Action::DebitStatusTimer { timer_key } => {
            batch.delete(Table::Timers, timer_key.clone());
            let waiting = pending.as_ref().is_some_and(|a| {
                a.channel == Channel::DirectDebit && a.status == AttemptStatus::Pending
            }) && intent.status == Status::Processing;
            let Some(mandate) = intent.mandate.filter(|_| waiting) else {
                // Stale: the debit already has its result.
                let d = Decision {
                    intent: intent.clone(),
                    effects: Vec::new(),
                };
                let view = commit_decision(kobo, intent, &d, None, batch, now).await?;
                return Ok((d.intent, view));
            };
            let debits = kobo.mandate_providers.for_mode(intent.mode);
            let sending = matches!(msg.action, Action::DebitSendTimer { .. });
            // Asked first, always: a debit sent before a crash is never sent
            // again (the provider knows it by the payment id).
            let command = match debits.debit_status(intent.id).await? {
                None if sending => {
                    // The debit's money is checked before it is sent.
                    precheck_capture(kobo, intent, Channel::DirectDebit, now)?;
                    let debit = Debit {
                        reference: intent.id,
                        mandate,
                        amount: intent.checked_charge_on(Channel::DirectDebit)?.2,
                    };
                    match debits.debit(&debit, now).await? {
                        DebitOutcome::Accepted | DebitOutcome::AlreadySent => Command::DebitSent,
                        DebitOutcome::Rejected(code) => {
                            Command::DebitResult(DebitFinal::Failed(code))
                        }
                    }
                }
                Some(_) if sending => Command::DebitSent,
                None | Some(DebitStatus::Processing) => Command::DebitPending,
                Some(DebitStatus::Successful) => Command::DebitResult(DebitFinal::Succeeded),
                Some(DebitStatus::Failed(code)) => Command::DebitResult(DebitFinal::Failed(code)),
            };
            decide(intent, pending.as_ref(), &command, now)?
        }
        Action::SimulateTransfer { amount } => {
            // No account yet: the customer is given one first, as on checkout.
            let mut started = None;
            if intent.bank_transfer.is_none() {
                started = Some(decide(intent, pending.as_ref(), &issue(intent)?, now)?);
            }
            let base = started.as_ref().map(|d| &d.intent).unwrap_or(intent);
            let base_pending = started
                .as_ref()
                .and_then(|d| {
                    d.effects.iter().rev().find_map(|e| match e {
                        Effect::Attempt(a) => Some(a.clone()),
                        _ => None,
                    })
                })
                .or(pending.clone());
            let amount = amount.unwrap_or_else(|| {
                base.bank_transfer
                    .as_ref()
                    .map(|b| b.amount)
                    .unwrap_or(base.amount)
            });
            let mut received = decide(
                base,
                base_pending.as_ref(),
                &Command::TransferReceived { amount },
                now,
            )?;
            if let Some(mut first) = started {
                // Effects of both steps, in order; the later attempt update
                // replaces the earlier insert of the same attempt.
                first.effects.append(&mut received.effects);
                first.intent = received.intent;
                received = first;
            }
            received
        }
    };
    let view = commit_decision_with(
        kobo,
        intent,
        &decision,
        msg.idem.as_ref(),
        batch,
        now,
        checked.as_ref(),
    )
    .await?;
    Ok((decision.intent, view))
}
