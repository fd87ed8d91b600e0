//! The state machine: commands, effects and [`decide`], with the card
//! prechecks the actor runs before it asks the provider. Pure: no store,
//! clock or provider.

use super::*;

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
pub(super) fn debit_in_flight(pending: Option<&ChargeAttempt>) -> bool {
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

pub(super) fn unexpected_state(intent: &PaymentIntent, action: &str) -> DomainError {
    DomainError::state(
        ErrorCode::PaymentIntentUnexpectedState,
        format!(
            "this payment intent is {}; it cannot {action}",
            intent.status.as_str()
        ),
    )
}

pub(super) fn new_attempt(
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
// Long on purpose: one match over (status, command), an arm per transition,
// read as the table of the state machine; the arms share helpers below.
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
                    ErrorCode::PaymentMethodUnavailable,
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
                    ErrorCode::BankTransferNotStarted,
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
            // A payment link's visit that never started paying is
            // abandoned too (its slot frees): see `link::create_for_link`.
            let waiting = intent.status == Status::Processing
                || (intent.status == Status::Created && intent.payment_link.is_some());
            if !waiting || !due_reached {
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
                    ErrorCode::PaymentMethodUnavailable,
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
