//! Payments made by transfers into dedicated virtual accounts. Each credit
//! the bank reports becomes one new payment intent, already `successful`:
//! channel `bank_transfer`, the merchant bears the fee (the bank-transfer
//! price), one successful charge attempt, the capture through the
//! merchant's ledger into `pending` for the account's brand (released like
//! any other payment), and `payment_intent.successful`, all in one batch
//! with the caller's rows (the virtual account's record of the credit, so
//! the credit is recorded exactly once).

use serde_json::Map;
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use super::deps::PaymentIntentDeps;
use super::machine::new_attempt;
use super::service::{
    build_intent, commit_decision_with, customer_prefix, list_key, virtual_account_prefix,
    CreatePaymentIntent,
};
use super::{
    AttemptStatus, BankCredit, Decision, Effect, NewIds, PaymentIntent, PaymentIntentView, Status,
};
use crate::error::DomainResult;
use crate::event;
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::Mode;
use crate::merchant::Merchant;
use crate::money::{Channel, Currency, FeeBearer};

/// A transfer into a virtual account, as the bank reported it, with what
/// its payment belongs to.
#[derive(Debug, Clone)]
pub struct CreditSpec {
    pub virtual_account: Uuid,
    /// The account's brand: the money is captured into its `pending`.
    pub brand: Uuid,
    pub customer: Uuid,
    pub customer_email: Option<String>,
    /// Kobo.
    pub amount: i64,
    pub session_id: String,
    pub sender_name: Option<String>,
    pub sender_account_number: Option<String>,
    pub account_deactivated: bool,
    pub description: String,
    /// Rows of the caller's tables whose value is the new intent's id,
    /// written in its batch (the account's record of the credit).
    pub rows: Vec<(Table, Vec<u8>)>,
}

/// Records a credit as a new successful payment intent, committed through
/// the merchant's ledger with `with` (the caller's rows) and, under
/// `idem`, the saved response, in one batch.
pub async fn record(
    kobo: &PaymentIntentDeps,
    merchant: &Merchant,
    mode: Mode,
    spec: CreditSpec,
    mut with: Batch,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<PaymentIntentView>> {
    let now = kobo.clock.now();
    let params = CreatePaymentIntent {
        amount: spec.amount,
        currency: Currency::NGN,
        reference: None,
        description: Some(spec.description),
        customer_email: spec.customer_email,
        metadata: Map::new(),
        fee_bearer: FeeBearer::Merchant,
        brand: Some(spec.brand),
        customer: Some(spec.customer),
        return_url: None,
    };
    let (before, _) = build_intent(kobo, merchant, mode, params, spec.brand, now)?;
    let attempt = {
        let mut a = new_attempt(
            &before,
            NewIds::draw().attempt,
            Channel::BankTransfer,
            AttemptStatus::Successful,
            None,
            Some(spec.amount),
            now,
        );
        a.provider_reference = Some(spec.session_id.clone());
        a
    };
    let mut after = before.clone();
    after.bank_credit = Some(BankCredit {
        virtual_account: spec.virtual_account,
        session_id: spec.session_id,
        sender_name: spec.sender_name,
        sender_account_number: spec.sender_account_number,
        account_deactivated: spec.account_deactivated,
    });
    after.channel = Some(Channel::BankTransfer);
    after.status = Status::Successful;
    after.paid_at = Some(now);
    after.attempts = 1;
    after.updated_at = now;
    after.version += 1;
    let (gross, fee, net) = after.capture_on(Channel::BankTransfer)?;
    let decision = Decision {
        intent: after,
        effects: vec![
            Effect::Attempt(attempt),
            Effect::Capture { gross, fee, net },
            Effect::Event(event::PAYMENT_INTENT_SUCCESSFUL),
        ],
    };
    add_index_rows(&decision.intent, &mut with);
    for (table, key) in spec.rows {
        with.put_raw(table, key, decision.intent.id.as_bytes().to_vec());
    }
    let created = Outcome::Created(decision.intent.view(None));
    let answer = Answer::save(created, idem, &mut with, now);
    commit_decision_with(kobo, &before, &decision, None, with, now, None).await?;
    Ok(answer)
}

/// The new intent's list rows (the status row comes with the decision):
/// all, its customer's, its virtual account's. No checkout link: nobody
/// pays a credit's payment.
fn add_index_rows(i: &PaymentIntent, batch: &mut Batch) {
    let id = i.id.as_bytes().to_vec();
    batch
        .put_raw(
            Table::PaymentIntentIndex,
            list_key(i.merchant, i.mode, i.seq),
            id.clone(),
        )
        .note_seq(i.seq);
    if let Some(c) = i.customer {
        batch.put_raw(
            Table::PaymentIntentCustomerIndex,
            customer_prefix(i.merchant, i.mode, c).u64(i.seq).build(),
            id.clone(),
        );
    }
    if let Some(credit) = &i.bank_credit {
        let prefix = virtual_account_prefix(i.merchant, i.mode, credit.virtual_account);
        batch.put_raw(
            Table::PaymentIntentVirtualAccountIndex,
            prefix.u64(i.seq).build(),
            id,
        );
    }
}
