//! The aftercare actor: one per captured payment, serializing its refunds
//! and disputes.

use std::sync::Arc;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use futures_util::future::join_all;
use serde_json::{Map, Value};
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::event::Event;
use crate::idempotency::{render, Answer, IdempotencySave, Outcome};
use crate::ids::{new_id, Mode};
use crate::ledger::actor::{Ledgers, PaymentMoney};
use crate::payment_intent::PaymentIntent;
use crate::refund::machine::{
    decide, AftercareView, Command, Decision, Effect, Money, NewIds, Subject,
};
use crate::refund::provider::{sandbox_answer, RefundAnswer, SANDBOX_CONFIRMATION_DELAY};
use crate::refund::service::{self, dispute_list_key, refund_by_payment_key, refund_list_key};
use crate::refund::{Aftercare, Dispute, Refund, RefundStatus};
use crate::registry::{run_once, Activation, Registry, VirtualActor};
use crate::resumption::{Merchants, Resumption};

/// What the aftercare actor reaches: the merchant's ledger.
pub struct AftercareDeps {
    pub env: Arc<Env>,
    pub ledgers: Ledgers,
    /// This kind's registry: a provider's later answer is delivered to it.
    pub aftercare: std::sync::Weak<Registry<AftercareActor>>,
}

impl std::ops::Deref for AftercareDeps {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}

pub struct AftercareActor {
    activation: Activation<Self>,
}

#[derive(Debug, Clone)]
pub enum AftercareAction {
    CreateRefund {
        amount: Option<i64>,
        reason: Option<String>,
        metadata: Map<String, Value>,
    },
    /// The provider answered about a refund.
    RefundOutcome {
        refund: Uuid,
        succeeded: bool,
        reason: Option<String>,
    },
    OpenDispute {
        amount: Option<i64>,
        reason: Option<String>,
    },
    SubmitEvidence {
        dispute: Uuid,
        evidence: Value,
    },
    ResolveDispute {
        dispute: Uuid,
        won: bool,
    },
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Answer<AftercareView>>")]
pub struct AftercareMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub action: AftercareAction,
    pub idem: Option<IdempotencySave>,
}

impl Actor for AftercareActor {
    type Context = Context<Self>;
}

impl VirtualActor for AftercareActor {
    type Key = Uuid;
    type Deps = AftercareDeps;
    const KIND: &'static str = "payment_aftercare";
    fn activate(activation: Activation<Self>) -> Self {
        AftercareActor { activation }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

impl Handler<AftercareMessage> for AftercareActor {
    type Result = AtomicResponse<Self, DomainResult<Answer<AftercareView>>>;

    fn handle(&mut self, msg: AftercareMessage, _ctx: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let kobo = self.activation.deps.clone();
        let payment = self.activation.key;
        // State is read from the store each time: this actor is its only
        // writer and waits for each commit, so the store is always current.
        run_once(self, process(kobo, payment, msg))
    }
}

/// Runs one action: loads the payment, its aftercare and what the action
/// names, [`decide`]s, and commits the decision with the saved response
/// (through the ledger when money moves); then asks the provider about a
/// new refund.
async fn process(
    kobo: Arc<AftercareDeps>,
    payment: Uuid,
    msg: AftercareMessage,
) -> DomainResult<Answer<AftercareView>> {
    let read = kobo.store.read()?;
    let intent: PaymentIntent =
        match read.get_decoded::<PaymentIntent>(Table::PaymentIntents, payment.as_bytes())? {
            Some(i) if i.merchant == msg.merchant && i.mode == msg.mode => i,
            _ => {
                return Err(
                    DomainError::not_found("payment_intent", payment).with_param("payment_intent")
                )
            }
        };
    let care: Aftercare = read
        .get_decoded(Table::PaymentAftercare, payment.as_bytes())?
        .unwrap_or_default();
    drop(read);
    let now = kobo.clock.now();
    let command = command_of(&kobo, &intent, msg.action, now)?;
    let decision = decide(&intent, &care, command, now)?;
    commit(&kobo, &intent, decision, msg.idem.as_ref(), now).await
}

/// The action as a command: with the refund or dispute it names (loaded;
/// a dispute must be this payment's), or the ids of the one it makes.
fn command_of(
    kobo: &Env,
    intent: &PaymentIntent,
    action: AftercareAction,
    now: DateTime<Utc>,
) -> DomainResult<Command> {
    let new = || NewIds {
        id: new_id(now),
        seq: kobo.seq.next(),
    };
    Ok(match action {
        AftercareAction::CreateRefund {
            amount,
            reason,
            metadata,
        } => Command::CreateRefund {
            new: new(),
            amount,
            reason,
            metadata,
        },
        AftercareAction::RefundOutcome {
            refund,
            succeeded,
            reason,
        } => Command::RefundOutcome {
            refund: service::load_refund(kobo, refund)?
                .ok_or_else(|| DomainError::not_found("refund", refund))?,
            succeeded,
            reason,
        },
        AftercareAction::OpenDispute { amount, reason } => Command::OpenDispute {
            new: new(),
            amount,
            reason,
        },
        AftercareAction::SubmitEvidence { dispute, evidence } => Command::SubmitEvidence {
            dispute: own_dispute(kobo, dispute, intent)?,
            evidence,
        },
        AftercareAction::ResolveDispute { dispute, won } => Command::ResolveDispute {
            dispute: own_dispute(kobo, dispute, intent)?,
            won,
        },
    })
}

/// Carries a decision out: its rows, event and saved response in one
/// batch, through the ledger when money moves; then the provider call.
async fn commit(
    kobo: &AftercareDeps,
    intent: &PaymentIntent,
    decision: Decision,
    idem: Option<&IdempotencySave>,
    now: DateTime<Utc>,
) -> DomainResult<Answer<AftercareView>> {
    let Decision {
        care,
        subject,
        kind,
        effects,
    } = decision;
    let view = subject.view();
    let body = render(&view);
    let mut batch = Batch::new();
    batch.owned_by(intent.merchant.as_bytes());
    let mut money = None;
    let mut ask = false;
    for effect in effects {
        match effect {
            Effect::Save => {
                match &subject {
                    Subject::Refund(r) => batch.put(Table::Refunds, r.id.as_bytes().to_vec(), r),
                    Subject::Dispute(d) => batch.put(Table::Disputes, d.id.as_bytes().to_vec(), d),
                };
                batch.put(
                    Table::PaymentAftercare,
                    intent.id.as_bytes().to_vec(),
                    &care,
                );
            }
            Effect::Index => index(&mut batch, &subject),
            Effect::Answered => {
                batch.delete(Table::RefundsAwaiting, subject.id().as_bytes().to_vec());
            }
            Effect::Event(t) => {
                Event::record(kobo, subject.scope(), t, body.clone(), now, &mut batch);
            }
            Effect::Money(m) => money = Some(m),
            Effect::AskProvider => ask = true,
        }
    }
    let answer = Answer::save_rendered(Outcome::new(kind, view), &body, idem, &mut batch, now);
    submit(kobo, intent, subject.id(), money, batch).await?;
    if let (true, Subject::Refund(r)) = (ask, &subject) {
        ask_provider(kobo, r);
    }
    Ok(answer)
}

/// Commits `batch`: through the merchant's ledger with the payment's money
/// move (`source`: the refund or dispute) when there is one.
async fn submit(
    kobo: &AftercareDeps,
    intent: &PaymentIntent,
    source: Uuid,
    money: Option<Money>,
    batch: Batch,
) -> DomainResult<()> {
    let Some(m) = money else {
        return kobo.writer.commit(batch).await.map_err(DomainError::from);
    };
    let move_money = PaymentMoney {
        payment: intent.id,
        brand: intent.brand,
        currency: intent.currency,
        entry_type: m.entry_type,
        source,
        description: m.description,
        op: m.op,
        with: crate::registry::Once::new(batch),
    };
    kobo.ledgers
        .send((intent.merchant, intent.mode), move_money)
        .await??;
    Ok(())
}

/// A new refund's or dispute's list rows (a refund's also its row among
/// those awaiting the provider).
fn index(batch: &mut Batch, subject: &Subject) {
    match subject {
        Subject::Refund(refund) => {
            batch
                .put_raw(
                    Table::RefundIndex,
                    refund_list_key(refund.merchant, refund.mode, refund.seq),
                    refund.id.as_bytes().to_vec(),
                )
                .put_raw(
                    Table::RefundByPayment,
                    refund_by_payment_key(
                        refund.merchant,
                        refund.mode,
                        refund.payment_intent,
                        refund.seq,
                    ),
                    refund.id.as_bytes().to_vec(),
                )
                .put_raw(
                    Table::RefundsAwaiting,
                    refund.id.as_bytes().to_vec(),
                    Vec::new(),
                )
                .note_seq(refund.seq);
        }
        Subject::Dispute(d) => {
            batch
                .put_raw(
                    Table::DisputeIndex,
                    dispute_list_key(d.merchant, d.mode, d.seq),
                    d.id.as_bytes().to_vec(),
                )
                .note_seq(d.seq);
        }
    }
}

fn own_dispute(kobo: &Env, id: Uuid, intent: &PaymentIntent) -> DomainResult<Dispute> {
    match service::load_dispute(kobo, id)? {
        Some(d) if d.payment_intent == intent.id => Ok(d),
        _ => Err(DomainError::not_found("dispute", id)),
    }
}

/// `merchants`' refunds still awaiting their provider's confirmation (the
/// previous run's, or a dead cluster node's): the work asks the provider
/// again about each and applies its answers.
pub fn resume_confirmations(
    kobo: &AftercareDeps,
    merchants: &Merchants,
) -> DomainResult<Resumption> {
    let read = kobo.store.read()?;
    let mut asks = Vec::new();
    let mut n = 0;
    read.scan_prefix(Table::RefundsAwaiting, &[], None, |k, _| {
        let id = Uuid::from_slice(k)
            .map_err(|_| kobo_storage::StoreError::Redb("bad refund key".into()))?;
        if let Some(r) = read.get_decoded::<Refund>(Table::Refunds, id.as_bytes())? {
            if r.status == RefundStatus::Pending && merchants.include(&r.merchant) {
                n += 1;
                asks.extend(confirmation(kobo, &r));
            }
        }
        Ok(true)
    })?;
    Ok(Resumption::new(n, async move {
        join_all(asks).await;
    }))
}

/// Asks the provider to send a refund; its confirmation arrives later, as
/// a message to the payment's aftercare actor. Test mode: the sandbox.
pub fn ask_provider(kobo: &AftercareDeps, refund: &Refund) {
    if let Some(ask) = confirmation(kobo, refund) {
        actix::spawn(ask);
    }
}

/// The provider's confirmation of a refund, delivered to the payment's
/// aftercare actor when it arrives; `None` when none will (live mode has
/// no refund provider configured, or the provider leaves it pending).
fn confirmation(
    kobo: &AftercareDeps,
    refund: &Refund,
) -> Option<impl std::future::Future<Output = ()> + 'static> {
    let (merchant, mode, payment, amount) = (
        refund.merchant,
        refund.mode,
        refund.payment_intent,
        refund.amount,
    );
    let refund = refund.id;
    if mode == Mode::Live {
        // No live refund provider is configured: the refund stays pending
        // until one confirms it.
        return None;
    }
    let (succeeded, reason) = match sandbox_answer(amount) {
        RefundAnswer::Succeeded => (true, None),
        RefundAnswer::Failed(r) => (false, Some(r)),
        RefundAnswer::StaysPending => return None,
    };
    let aftercare = kobo.aftercare.clone();
    Some(async move {
        tokio::time::sleep(SANDBOX_CONFIRMATION_DELAY).await;
        let Some(aftercare) = aftercare.upgrade() else {
            return;
        };
        let msg = AftercareMessage {
            merchant,
            mode,
            action: AftercareAction::RefundOutcome {
                refund,
                succeeded,
                reason,
            },
            idem: None,
        };
        if let Err(e) = aftercare.send(payment, msg).await.and_then(|r| r) {
            tracing::warn!(%refund, error = %e, "refund confirmation not applied; it is asked again when its merchant is next resumed");
        }
    })
}
