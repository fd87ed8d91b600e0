//! The steps of [`decide`](super::decide), one per command: each takes the
//! intent before, changes a copy and lists the effects. Pure, like
//! `decide`.

use super::machine::{
    card_outcome, fail, new_attempt, pending_debit, settle_pending, succeed, unexpected_state,
};
use super::*;

/// The state machine: one step per command (below). `pending` is the
/// stored pending charge attempt, if any; `ids` and `now` are drawn by the
/// caller.
pub fn decide(
    intent: &PaymentIntent,
    pending: Option<&ChargeAttempt>,
    command: &Command,
    ids: NewIds,
    now: DateTime<Utc>,
) -> DomainResult<Decision> {
    let step = Step {
        intent,
        pending,
        next: intent.clone(),
        effects: Vec::new(),
        ids,
        now,
    };
    match command {
        Command::Cancel => step.cancel(),
        Command::StartBankTransfer { account } => step.start_bank_transfer(account.as_ref()),
        Command::TransferReceived { amount } => step.transfer_received(*amount),
        Command::TestSucceed => step.test_succeed(),
        Command::AbandonDue => step.abandon_due(),
        Command::StartCard {
            card,
            reference,
            outcome,
        } => step.start_card(card, reference, outcome),
        Command::Authenticate { input, outcome } => step.authenticate(*input, outcome),
        Command::CancelAuthentication => step.cancel_authentication(),
        Command::CardResult { attempt, outcome } => step.card_result(*attempt, outcome),
        Command::StartDirectDebit => step.start_direct_debit(),
        // The provider holds the debit, or is still working on it: ask
        // again after the interval. Nothing about the intent changes.
        Command::DebitSent | Command::DebitPending => step.ask_about_debit(),
        Command::DebitResult(result) => step.debit_result(result),
    }
}

/// One decision being made: the intent before (`intent`), the intent after
/// (`next`) and the effects so far.
pub(super) struct Step<'a> {
    pub(super) intent: &'a PaymentIntent,
    pub(super) pending: Option<&'a ChargeAttempt>,
    pub(super) next: PaymentIntent,
    pub(super) effects: Vec<Effect>,
    pub(super) ids: NewIds,
    pub(super) now: DateTime<Utc>,
}

impl Step<'_> {
    /// The decision: the intent changed (a new version, `updated_at` now).
    fn changed(self) -> DomainResult<Decision> {
        Ok(Decision {
            intent: self.next.touched(self.now),
            effects: self.effects,
        })
    }

    /// The decision: the intent as it was (effects only).
    fn unchanged(self) -> DomainResult<Decision> {
        Ok(Decision {
            intent: self.next,
            effects: self.effects,
        })
    }

    /// A new attempt (numbered after the intent's last), with the id drawn
    /// for it.
    fn new_attempt(
        &self,
        channel: Channel,
        status: AttemptStatus,
        failure_code: Option<&str>,
        amount: Option<i64>,
    ) -> ChargeAttempt {
        let (intent, id, now) = (self.intent, self.ids.attempt, self.now);
        new_attempt(intent, id, channel, status, failure_code, amount, now)
    }

    /// Ends a card attempt still waiting for the customer.
    fn cancel_waiting_card(&mut self) {
        if let Some(p) = self.pending.filter(|a| a.channel == Channel::Card) {
            settle_pending(Some(p), AttemptStatus::Canceled, &mut self.effects);
        }
    }

    fn cancel_abandon_timer(&mut self) {
        if let Some(due) = self.next.abandon_due.take() {
            self.effects.push(Effect::CancelAbandon(due));
        }
    }

    pub(super) fn cancel(mut self) -> DomainResult<Decision> {
        if !matches!(
            self.intent.status,
            Status::Created | Status::Failed | Status::Abandoned
        ) {
            return Err(unexpected_state(self.intent, "be canceled"));
        }
        self.next.status = Status::Canceled;
        self.next.canceled_at = Some(self.now);
        self.next.next_action = None;
        self.cancel_abandon_timer();
        settle_pending(self.pending, AttemptStatus::Canceled, &mut self.effects);
        self.next.pending_attempt = None;
        self.effects
            .push(Effect::Event(event::PAYMENT_INTENT_CANCELED));
        self.changed()
    }

    pub(super) fn start_bank_transfer(
        mut self,
        account: Option<&BankTransferAccount>,
    ) -> DomainResult<Decision> {
        let intent = self.intent;
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
        if debit_in_flight(self.pending) {
            return Err(unexpected_state(
                intent,
                "start a bank transfer while its direct debit is with the bank",
            ));
        }
        let Some(account) = account else {
            if !intent.needs_transfer_account(self.now) {
                // Asking again while the account is open returns it.
                return self.unchanged();
            }
            return Err(DomainError::internal("no transfer account was issued"));
        };
        // A previous pending transfer attempt (an expired account) stays
        // as it is: late money to it still counts. A card attempt
        // waiting for the customer ends: they chose to transfer.
        self.cancel_waiting_card();
        let attempt = self.new_attempt(
            Channel::BankTransfer,
            AttemptStatus::Pending,
            None,
            Some(account.amount),
        );
        let next = &mut self.next;
        next.attempts += 1;
        next.pending_attempt = Some(attempt.number);
        self.effects.push(Effect::Attempt(attempt));
        next.status = Status::Processing;
        next.channel = Some(Channel::BankTransfer);
        next.failure_code = None;
        next.next_action = None;
        next.bank_transfer = Some(account.clone());
        self.cancel_abandon_timer();
        let due = self.now + abandon_after();
        self.next.abandon_due = Some(due);
        self.effects.push(Effect::ScheduleAbandon(due));
        self.changed()
    }

    pub(super) fn transfer_received(mut self, amount: i64) -> DomainResult<Decision> {
        let intent = self.intent;
        let Some(account) = &intent.bank_transfer else {
            return Err(DomainError::state(
                ErrorCode::BankTransferNotStarted,
                "no bank-transfer account was issued for this payment intent",
            ));
        };
        if amount != account.amount {
            // Returned to the sender; the payment is unchanged.
            let attempt = self.new_attempt(
                Channel::BankTransfer,
                AttemptStatus::Failed,
                Some("amount_mismatch"),
                Some(amount),
            );
            self.next.attempts += 1;
            self.effects.push(Effect::Attempt(attempt));
            return self.changed();
        }
        if matches!(intent.status, Status::Successful | Status::Canceled) {
            return Err(unexpected_state(intent, "receive money"));
        }
        self.next.channel = Some(Channel::BankTransfer);
        match self.pending.filter(|a| a.channel == Channel::BankTransfer) {
            Some(_) => settle_pending(self.pending, AttemptStatus::Successful, &mut self.effects),
            None => {
                // Paid by transfer: a card attempt still open ends.
                self.cancel_waiting_card();
                let attempt = self.new_attempt(
                    Channel::BankTransfer,
                    AttemptStatus::Successful,
                    None,
                    Some(amount),
                );
                self.next.attempts += 1;
                self.effects.push(Effect::Attempt(attempt));
            }
        }
        succeed(&mut self.next, &mut self.effects, self.now)?;
        self.changed()
    }

    pub(super) fn test_succeed(mut self) -> DomainResult<Decision> {
        if self.intent.status == Status::Successful {
            return Err(unexpected_state(self.intent, "succeed again"));
        }
        if self.next.channel.is_none() {
            self.next.channel = Some(Channel::Card);
        }
        settle_pending(self.pending, AttemptStatus::Successful, &mut self.effects);
        succeed(&mut self.next, &mut self.effects, self.now)?;
        self.changed()
    }

    pub(super) fn abandon_due(mut self) -> DomainResult<Decision> {
        let intent = self.intent;
        // A stale or early timer changes nothing (the live due time stays).
        let due_reached = intent.abandon_due.is_some_and(|d| d <= self.now);
        // A payment link's visit that never started paying is abandoned
        // too (its slot frees): see `service::create_for_link`.
        let waiting = intent.status == Status::Processing
            || (intent.status == Status::Created && intent.payment_link.is_some());
        if !waiting || !due_reached {
            return self.unchanged();
        }
        self.next.abandon_due = None;
        self.next.status = Status::Abandoned;
        // A card attempt waiting for the customer (a code, a redirect)
        // ends with the payment; one the bank is deciding stays pending,
        // since its result may still bring money.
        if intent.next_action.is_some() {
            if let Some(p) = self.pending.filter(|a| a.channel == Channel::Card) {
                settle_pending(Some(p), AttemptStatus::Canceled, &mut self.effects);
                self.next.pending_attempt = None;
            }
        }
        self.next.next_action = None;
        self.effects
            .push(Effect::Event(event::PAYMENT_INTENT_ABANDONED));
        self.changed()
    }

    pub(super) fn start_card(
        mut self,
        card: &CardSummary,
        reference: &Option<String>,
        outcome: &CardOutcome,
    ) -> DomainResult<Decision> {
        let intent = self.intent;
        check_card_start(intent, self.pending)?;
        // A card attempt still waiting for the customer is replaced.
        self.cancel_waiting_card();
        self.cancel_abandon_timer();
        let amount = intent.checked_charge_on(Channel::Card)?.2;
        let mut attempt =
            self.new_attempt(Channel::Card, AttemptStatus::Pending, None, Some(amount));
        attempt.card = Some(card.clone());
        attempt.provider_reference = reference.clone();
        let next = &mut self.next;
        next.attempts += 1;
        next.channel = Some(Channel::Card);
        next.failure_code = None;
        next.next_action = None;
        next.pending_attempt = None;
        card_outcome(next, attempt, outcome, true, &mut self.effects, self.now)?;
        self.changed()
    }

    pub(super) fn authenticate(
        mut self,
        input: card::AuthInput,
        outcome: &CardOutcome,
    ) -> DomainResult<Decision> {
        let attempt = check_authenticate(self.intent, self.pending, Some(input))?.clone();
        card_outcome(
            &mut self.next,
            attempt,
            outcome,
            false,
            &mut self.effects,
            self.now,
        )?;
        self.changed()
    }

    pub(super) fn cancel_authentication(mut self) -> DomainResult<Decision> {
        let mut attempt = check_authenticate(self.intent, self.pending, None)?.clone();
        attempt.status = AttemptStatus::Canceled;
        self.effects.push(Effect::Attempt(attempt));
        fail(&mut self.next, "authentication_canceled", &mut self.effects);
        self.changed()
    }

    pub(super) fn card_result(
        mut self,
        attempt: u32,
        outcome: &CardFinal,
    ) -> DomainResult<Decision> {
        let attempt = check_card_result(self.intent, self.pending, attempt)?.clone();
        let outcome = match outcome {
            CardFinal::Succeeded => CardOutcome::Succeeded,
            CardFinal::Declined(code) => CardOutcome::Declined(code.clone()),
        };
        card_outcome(
            &mut self.next,
            attempt,
            &outcome,
            false,
            &mut self.effects,
            self.now,
        )?;
        self.changed()
    }

    pub(super) fn start_direct_debit(mut self) -> DomainResult<Decision> {
        let intent = self.intent;
        if intent.status != Status::Created || intent.attempts != 0 || intent.mandate.is_none() {
            return Err(unexpected_state(intent, "start a direct debit"));
        }
        if intent.currency != Currency::NGN {
            return Err(DomainError::request(
                ErrorCode::PaymentMethodUnavailable,
                Some("currency"),
                "direct debit takes naira only",
            ));
        }
        self.next.channel = Some(Channel::DirectDebit);
        let amount = self.next.checked_charge_on(Channel::DirectDebit)?.2;
        let mut attempt = self.new_attempt(
            Channel::DirectDebit,
            AttemptStatus::Pending,
            None,
            Some(amount),
        );
        // The debit carries the payment id as its reference.
        attempt.provider_reference = Some(intent.id.to_string());
        self.next.attempts += 1;
        self.next.pending_attempt = Some(attempt.number);
        self.next.status = Status::Processing;
        self.effects.push(Effect::Attempt(attempt));
        self.effects.push(Effect::ScheduleDebitSend(self.now));
        self.changed()
    }

    pub(super) fn ask_about_debit(mut self) -> DomainResult<Decision> {
        let attempt = pending_debit(self.intent, self.pending)?;
        let due = self.now + debit_status_interval(self.now - attempt.created_at);
        self.effects.push(Effect::ScheduleDebitStatus(due));
        self.unchanged()
    }

    pub(super) fn debit_result(mut self, result: &DebitFinal) -> DomainResult<Decision> {
        let attempt = pending_debit(self.intent, self.pending)?;
        match result {
            DebitFinal::Succeeded => {
                settle_pending(Some(attempt), AttemptStatus::Successful, &mut self.effects);
                succeed(&mut self.next, &mut self.effects, self.now)?;
            }
            DebitFinal::Failed(code) => {
                let mut a = attempt.clone();
                a.status = AttemptStatus::Failed;
                a.failure_code = Some(code.clone());
                self.effects.push(Effect::Attempt(a));
                fail(&mut self.next, code, &mut self.effects);
            }
        }
        self.changed()
    }
}
