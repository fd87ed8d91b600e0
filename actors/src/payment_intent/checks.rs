//! The card prechecks: whether a card call may go to the provider now.
//! The actor runs them before it asks the provider (so a refused call
//! never reaches the bank) and [`decide`] checks the same again. Pure.

use super::machine::{debit_in_flight, unexpected_state};
use super::*;

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
            ErrorCode::CardAttemptsExceeded,
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
            ErrorCode::PaymentIntentUnexpectedState,
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
            ErrorCode::PaymentIntentUnexpectedState,
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
                ErrorCode::PaymentIntentUnexpectedState,
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
            ErrorCode::PaymentIntentUnexpectedState,
            "this card attempt is no longer waiting for a result",
        )),
    }
}
