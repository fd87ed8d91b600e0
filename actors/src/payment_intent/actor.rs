//! The payment intent actor: one per intent, activated on demand. It handles
//! one command at a time to completion (the store has confirmed before the
//! next command starts), so two transitions of one intent never race.
//! A panic while handling drops the in-memory copy; the next message reloads
//! the last durable snapshot (counted as a restart).

use std::sync::Arc;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::direct_debit::{Debit, DebitOutcome, DebitStatus};
use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::idempotency::{Answer, IdempotencySave};
use crate::ids::Mode;
use crate::merchant::Settings;
use crate::money::Channel;
use crate::payment_intent::card::{AuthInput, CardDetails, Secret};
use crate::payment_intent::deps::PaymentIntentDeps;
use crate::payment_intent::provider::Provider;
use crate::payment_intent::service::{commit_decision_with, load_attempt, precheck_capture};
use crate::payment_intent::{
    check_authenticate, check_card_result, check_card_start, decide, AttemptStatus, ChargeAttempt,
    Command, DebitFinal, Decision, Effect, NewIds, PaymentIntent, PaymentIntentView, Status,
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
#[rtype(result = "DomainResult<Answer<PaymentIntentView>>")]
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
    type Result = AtomicResponse<Self, DomainResult<Answer<PaymentIntentView>>>;

    fn handle(&mut self, msg: IntentMessage, _ctx: &mut Context<Self>) -> Self::Result {
        let (merchant, mode) = (msg.merchant, msg.mode);
        run_command(self, merchant, mode, move |kobo, object| async move {
            process(&kobo, &object, msg).await
        })
    }
}

/// Runs one action: the provider calls it needs (after their prechecks),
/// then [`decide`], then one commit of the decision with the saved response.
async fn process(
    kobo: &PaymentIntentDeps,
    intent: &PaymentIntent,
    msg: IntentMessage,
) -> DomainResult<(PaymentIntent, Answer<PaymentIntentView>)> {
    let now = kobo.clock.now();
    let pending = match intent.pending_attempt {
        Some(n) => load_attempt(kobo, intent.id, n)?,
        None => None,
    };
    let run = Run {
        kobo,
        intent,
        pending: pending.as_ref(),
        msg: &msg,
        now,
    };
    let mut batch = Batch::new();
    // `checked`: the settings a capture after a provider call must use,
    // checked before the call (see `precheck_capture`).
    let (decision, checked) = match &msg.action {
        Action::Card { card } => run.card(card).await?,
        Action::Authenticate { input, value } => run.authenticate(*input, value).await?,
        Action::RedirectResult {
            attempt,
            reference,
            approved,
        } => run.redirect_result(*attempt, reference, *approved)?,
        Action::CancelAuthentication => (run.decide(&Command::CancelAuthentication)?, None),
        Action::Cancel => (run.decide(&Command::Cancel)?, None),
        Action::TestSucceed => (run.decide(&Command::TestSucceed)?, None),
        Action::BankTransfer => (run.decide(&run.issue(intent)?)?, None),
        Action::AbandonTimer { timer_key } => {
            batch.delete(Table::Timers, timer_key.clone());
            (run.decide(&Command::AbandonDue)?, None)
        }
        Action::DebitSendTimer { timer_key } | Action::DebitStatusTimer { timer_key } => {
            batch.delete(Table::Timers, timer_key.clone());
            let sending = matches!(msg.action, Action::DebitSendTimer { .. });
            match run.debit_command(sending).await? {
                Some(command) => (run.decide(&command)?, None),
                // Stale: the debit already has its result.
                None => (run.unchanged(), None),
            }
        }
        Action::SimulateTransfer { amount } => (run.simulate_transfer(*amount)?, None),
    };
    let idem = msg.idem.as_ref();
    let answer =
        commit_decision_with(kobo, intent, &decision, idem, batch, now, checked.as_ref()).await?;
    Ok((decision.intent, answer))
}

/// One action being run: what it reads.
struct Run<'a> {
    kobo: &'a PaymentIntentDeps,
    intent: &'a PaymentIntent,
    pending: Option<&'a ChargeAttempt>,
    msg: &'a IntentMessage,
    now: DateTime<Utc>,
}

impl Run<'_> {
    fn decide(&self, command: &Command) -> DomainResult<Decision> {
        decide(self.intent, self.pending, command, NewIds::draw(), self.now)
    }

    /// Nothing changes.
    fn unchanged(&self) -> Decision {
        Decision {
            intent: self.intent.clone(),
            effects: Vec::new(),
        }
    }

    fn provider(&self) -> &Arc<dyn Provider> {
        self.kobo.providers.for_mode(self.msg.mode)
    }

    /// The bank-transfer command, with a fresh account when `intent` needs
    /// one.
    fn issue(&self, intent: &PaymentIntent) -> DomainResult<Command> {
        if !self.msg.bank_transfer_enabled {
            return Err(DomainError::request(
                ErrorCode::PaymentMethodUnavailable,
                None,
                "bank transfer is turned off in this merchant's payment settings",
            ));
        }
        let account = if intent.needs_transfer_account(self.now) {
            let name = &self.msg.merchant_name;
            Some(
                self.provider()
                    .issue_transfer_account(intent, name, self.now)?,
            )
        } else {
            None
        };
        Ok(Command::StartBankTransfer { account })
    }

    /// Pay by card: precheck, charge, decide.
    async fn card(&self, card: &CardDetails) -> DomainResult<(Decision, Option<Settings>)> {
        let (kobo, intent, provider) = (self.kobo, self.intent, self.provider());
        if !provider.takes_cards() {
            return Err(card_api_unavailable());
        }
        check_card_start(intent, self.pending)?;
        let checked = precheck_capture(kobo, intent, Channel::Card, self.now)?;
        provider_latency(provider.card_latency()).await;
        let number = intent.attempts + 1;
        let charge = provider.charge_card(intent, number, card, &kobo.config.base_url)?;
        let command = Command::StartCard {
            card: card.summary(),
            reference: charge.reference,
            outcome: charge.outcome,
        };
        Ok((self.decide(&command)?, Some(checked)))
    }

    /// The customer's answer to the bank: precheck, ask, decide.
    async fn authenticate(
        &self,
        input: AuthInput,
        value: &Secret,
    ) -> DomainResult<(Decision, Option<Settings>)> {
        let (kobo, intent, provider) = (self.kobo, self.intent, self.provider());
        if !provider.takes_cards() {
            return Err(card_api_unavailable());
        }
        let attempt = check_authenticate(intent, self.pending, Some(input))?;
        let checked = precheck_capture(kobo, intent, Channel::Card, self.now)?;
        provider_latency(provider.card_latency()).await;
        let outcome = provider.authenticate_card(attempt, input, value.expose())?;
        let command = Command::Authenticate { input, outcome };
        Ok((self.decide(&command)?, Some(checked)))
    }

    /// The end of the provider's redirect page: precheck, ask, decide.
    fn redirect_result(
        &self,
        attempt: u32,
        reference: &str,
        approved: bool,
    ) -> DomainResult<(Decision, Option<Settings>)> {
        let found = check_card_result(self.intent, self.pending, attempt)?;
        let checked = precheck_capture(self.kobo, self.intent, Channel::Card, self.now)?;
        let outcome = self
            .provider()
            .redirect_result(found, reference, approved)?;
        let command = Command::CardResult { attempt, outcome };
        Ok((self.decide(&command)?, Some(checked)))
    }

    /// A debit timer's command: the provider is asked first, always (a
    /// debit sent before a crash is never sent again: the provider knows it
    /// by the payment id); the send timer sends when it does not. `None`:
    /// the timer is stale.
    async fn debit_command(&self, sending: bool) -> DomainResult<Option<Command>> {
        let (kobo, intent, now) = (self.kobo, self.intent, self.now);
        let waiting = self.pending.is_some_and(|a| {
            a.channel == Channel::DirectDebit && a.status == AttemptStatus::Pending
        }) && intent.status == Status::Processing;
        let Some(mandate) = intent.mandate.filter(|_| waiting) else {
            return Ok(None);
        };
        let debits = kobo.mandate_providers.for_mode(intent.mode);
        Ok(Some(match debits.debit_status(intent.id).await? {
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
                    DebitOutcome::Rejected(code) => Command::DebitResult(DebitFinal::Failed(code)),
                }
            }
            Some(_) if sending => Command::DebitSent,
            None | Some(DebitStatus::Processing) => Command::DebitPending,
            Some(DebitStatus::Successful) => Command::DebitResult(DebitFinal::Succeeded),
            Some(DebitStatus::Failed(code)) => Command::DebitResult(DebitFinal::Failed(code)),
        }))
    }

    /// Test helper: money arrives by transfer (default: the exact amount);
    /// with no account yet, the customer is given one first, as on checkout.
    fn simulate_transfer(&self, amount: Option<i64>) -> DomainResult<Decision> {
        let started = match self.intent.bank_transfer {
            None => Some(self.decide(&self.issue(self.intent)?)?),
            Some(_) => None,
        };
        let base = started.as_ref().map(|d| &d.intent).unwrap_or(self.intent);
        let base_pending = started
            .as_ref()
            .and_then(|d| {
                d.effects.iter().rev().find_map(|e| match e {
                    Effect::Attempt(a) => Some(a.clone()),
                    _ => None,
                })
            })
            .or(self.pending.cloned());
        let amount = amount.unwrap_or_else(|| {
            base.bank_transfer
                .as_ref()
                .map(|b| b.amount)
                .unwrap_or(base.amount)
        });
        let received = Command::TransferReceived { amount };
        let mut received = decide(
            base,
            base_pending.as_ref(),
            &received,
            NewIds::draw(),
            self.now,
        )?;
        if let Some(mut first) = started {
            // Effects of both steps, in order; the later attempt update
            // replaces the earlier insert of the same attempt.
            first.effects.append(&mut received.effects);
            first.intent = received.intent;
            received = first;
        }
        Ok(received)
    }
}
