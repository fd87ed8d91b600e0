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

/// How long after a status query the provider is asked again about a
/// debit in flight for `age` (clock time): a minute at first, then half
/// the debit's age, at most six hours; so a debit that stays
/// `processing` is asked about ever more rarely (about 40 times in its
/// first week, then four times a day) instead of every minute.
pub fn debit_status_interval(age: Duration) -> Duration {
    (age / 2).clamp(Duration::minutes(1), Duration::hours(6))
}

/// The pending direct-debit attempt of a processing mandate charge.
pub(super) fn pending_debit<'a>(
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

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub intent: PaymentIntent,
    pub effects: Vec<Effect>,
}

/// The ids a decision may give to what it makes, drawn by the caller:
/// [`decide`] draws nothing and reads no clock, so the same inputs always
/// give the same decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewIds {
    /// The id of a charge attempt the decision starts (at most one).
    pub attempt: Uuid,
}

impl NewIds {
    /// Fresh random ids.
    pub fn draw() -> Self {
        NewIds {
            attempt: Uuid::new_v4(),
        }
    }
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
    id: Uuid,
    channel: Channel,
    status: AttemptStatus,
    failure_code: Option<&str>,
    amount: Option<i64>,
    now: DateTime<Utc>,
) -> ChargeAttempt {
    ChargeAttempt {
        id,
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
pub(super) fn settle_pending(
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

/// Applies the provider's answer to card attempt `attempt`; `fresh` when
/// the attempt was just created (it is saved whatever the answer, and a
/// wait starts the abandonment clock).
pub(super) fn card_outcome(
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
pub(super) fn fail(next: &mut PaymentIntent, code: &str, effects: &mut Vec<Effect>) {
    next.status = Status::Failed;
    next.failure_code = Some(code.to_string());
    next.next_action = None;
    next.pending_attempt = None;
    if let Some(due) = next.abandon_due.take() {
        effects.push(Effect::CancelAbandon(due));
    }
    effects.push(Effect::Event(event::PAYMENT_INTENT_FAILED));
}

pub(super) fn succeed(
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
