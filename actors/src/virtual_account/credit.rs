//! Recording a transfer into a virtual account: exactly once per
//! (account, interbank session id).
//!
//! The record is the row `virtual_account_credits: account|session id ->
//! payment intent`, written in the same batch as the payment intent, its
//! charge attempt, its ledger capture, its event and the removal of the
//! bank's notification (one commit, through the merchant's ledger). Only
//! the account's actor records credits, one at a time, and it reads the
//! row before recording: a credit notified twice, found again by a
//! refresh, or delivered again after a restart finds the row and answers
//! the same payment intent, writing nothing. A crash before the commit
//! leaves nothing of the credit but the bank's notification, delivered
//! again at start-up. (The row is not a `require_absent` precondition:
//! ledger batches carry none, since a refused one would leave the
//! ledger's memory ahead of the store.)

use uuid::Uuid;

use kobo_storage::{Batch, Table};

use super::bank::{transfer_key, ReceivedTransfer};
use super::deps::VirtualAccountDeps;
use super::{AccountStatus, VirtualAccount};
use crate::customer::Customer;
use crate::error::{DomainError, DomainResult};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::payment_intent::credit::{record, CreditSpec};
use crate::payment_intent::{PaymentIntent, PaymentIntentView};

/// The payment intent a credit already made, if any.
pub fn recorded(
    k: &VirtualAccountDeps,
    account: Uuid,
    session_id: &str,
) -> DomainResult<Option<PaymentIntent>> {
    let read = k.store.read()?;
    let Some(id) = read.get(
        Table::VirtualAccountCredits,
        &transfer_key(account, session_id),
    )?
    else {
        return Ok(None);
    };
    let intent = read.get_decoded(Table::PaymentIntents, &id)?;
    intent
        .map(Some)
        .ok_or_else(|| DomainError::internal("a credit's payment intent is missing"))
}

/// Records `t` into account `a` (in its actor): the payment intent it
/// made (`Existing`, nothing written), or a new one (`Created`, its
/// response saved with it under `idem`).
pub async fn record_credit(
    k: &VirtualAccountDeps,
    a: &VirtualAccount,
    t: &ReceivedTransfer,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<PaymentIntentView>> {
    if let Some(intent) = recorded(k, a.id, &t.session_id)? {
        return Ok(Answer::unsaved(Outcome::Existing(intent.view(None))));
    }
    let merchant = crate::admin::load_merchant(k, a.merchant)?
        .ok_or_else(|| DomainError::internal("an account of an unknown merchant"))?;
    // The customer as stored, deleted or not: money is recorded anyway.
    let customer: Option<Customer> = k
        .store
        .read()?
        .get_decoded(Table::Customers, a.customer.as_bytes())?;
    let key = transfer_key(a.id, &t.session_id);
    let deactivated = a.status == AccountStatus::Deactivated
        && a.deactivated_at.is_some_and(|d| d <= t.received_at);
    let spec = CreditSpec {
        virtual_account: a.id,
        brand: a.brand,
        customer: a.customer,
        customer_email: customer.and_then(|c| c.email),
        amount: t.amount,
        session_id: t.session_id.clone(),
        sender_name: t.sender_name.clone(),
        sender_account_number: t.sender_account_number.clone(),
        account_deactivated: deactivated,
        description: format!("Transfer into {} {}", a.bank_name, a.account_number),
        rows: vec![(Table::VirtualAccountCredits, key.clone())],
    };
    let mut with = Batch::new();
    with.owned_by(merchant.id.as_bytes());
    with.delete(Table::SandboxAccountInbox, key);
    record(&k.intents, &merchant, a.mode, spec, with, idem).await
}
