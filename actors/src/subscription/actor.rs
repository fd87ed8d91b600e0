//! The subscription actor: one per subscription, one command at a time to
//! completion. A command (a timer, news of its invoices, the merchant's
//! change) is decided by the pure machine and committed; then the actor
//! carries out the work the new state asks for, each step with a durable
//! identity and its own commit:
//!
//! - a period's invoice: created through the customer's invoice book,
//!   claimed under `(subscription, period)` (a second create finds it);
//! - a debit: the mandate's charge, claimed under `(subscription, period,
//!   attempt)` in the payment's own batch (the claim is read first: an
//!   attempt asked for before a crash is never asked for again, and its
//!   payment id is the provider's reference);
//! - closing an invoice (void, uncollectible).
//!
//! While work is pending the subscription's timer is due at once, so a
//! crash between two steps resumes at the next timer pass and the
//! identities make every step happen once.

use std::sync::Arc;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use serde_json::{json, Map};
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use super::deps::SubscriptionDeps;
use super::machine::{decide, work, Command, Work};
use super::service::{charge_key, charge_of, commit, load_any, Kind};
use super::{Bill, Close, CollectionMethod, Subscription, SubscriptionView};
use crate::error::{DomainError, DomainResult, ErrorKind};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::Mode;
use crate::invoice::book::{self, InvoiceAction, NewInvoice};
use crate::invoice::{InvoiceStatus, LineItem};
use crate::mandate::actor::ChargeMandate;
use crate::money::FeeBearer;
use crate::payment_intent::service::CreatePaymentIntent;
use crate::payment_intent::{PaymentIntent, Status};
use crate::registry::{run_command, Activation, ObjectActor, Registry, VirtualActor};

pub type Subscriptions = Arc<Registry<SubscriptionActor>>;

pub struct SubscriptionActor {
    activation: Activation<Self>,
    state: Option<Subscription>,
}

#[derive(Debug, Clone)]
pub enum SubscriptionAction {
    /// Its own timer fired.
    Due { timer_key: Vec<u8> },
    /// News of its invoices (a payment, a failed debit).
    Wake { timer_key: Vec<u8> },
    /// Carry out pending work (right after a create).
    Work,
    /// The merchant's (or the manage page's) change.
    Command(Command),
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Answer<SubscriptionView>>")]
pub struct SubscriptionMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub action: SubscriptionAction,
    pub idem: Option<IdempotencySave>,
}

impl Actor for SubscriptionActor {
    type Context = Context<Self>;
}

impl VirtualActor for SubscriptionActor {
    type Key = Uuid;
    type Deps = SubscriptionDeps;
    const KIND: &'static str = "subscription";
    fn activate(activation: Activation<Self>) -> Self {
        SubscriptionActor {
            activation,
            state: None,
        }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

impl ObjectActor for SubscriptionActor {
    type Object = Subscription;
    fn object(&mut self) -> &mut Option<Subscription> {
        &mut self.state
    }
    fn activation_mut(&mut self) -> &mut Activation<Self> {
        &mut self.activation
    }
    fn load(kobo: &SubscriptionDeps, id: Uuid) -> DomainResult<Option<Subscription>> {
        load_any(kobo, id)
    }
    fn scope(o: &Subscription) -> (Uuid, Mode) {
        (o.merchant, o.mode)
    }
}

impl Handler<SubscriptionMessage> for SubscriptionActor {
    type Result = AtomicResponse<Self, DomainResult<Answer<SubscriptionView>>>;

    fn handle(&mut self, msg: SubscriptionMessage, _: &mut Context<Self>) -> Self::Result {
        let (merchant, mode) = (msg.merchant, msg.mode);
        run_command(self, merchant, mode, move |k, s| async move {
            process(&k, s, msg).await
        })
    }
}

async fn process(
    k: &SubscriptionDeps,
    s: Subscription,
    msg: SubscriptionMessage,
) -> DomainResult<(Subscription, Answer<SubscriptionView>)> {
    let now = k.clock.now();
    let (command, fired) = match msg.action {
        SubscriptionAction::Due { timer_key } => (Some(Command::Due), Some(timer_key)),
        SubscriptionAction::Wake { timer_key } => (Some(news(k, &s)?), Some(timer_key)),
        SubscriptionAction::Work => (None, None),
        SubscriptionAction::Command(c) => (Some(c), None),
    };
    let mut cur = s;
    let mut answer = None;
    if let Some(c) = command {
        let d = decide(&cur, &c, now)?;
        let mut after = d.after;
        let idem = msg.idem.as_ref();
        let batch = Batch::new();
        let a = commit(
            k,
            Some(&cur),
            &mut after,
            &d.events,
            fired,
            batch,
            idem,
            Kind::Updated,
            now,
        )
        .await?;
        cur = after;
        answer = Some(a);
    }
    cur = match perform(k, cur.clone(), now).await {
        Ok(s) => s,
        Err((s, e)) if matches!(e.kind, ErrorKind::Internal | ErrorKind::Overloaded) => {
            // The state is committed: answer it (the actor must not fall
            // back to the state before the command) and retry the work in
            // a minute.
            tracing::warn!(error = %e, subscription = %s.id, "subscription work failed; retrying");
            retry_later(k, s, now + chrono::Duration::seconds(60)).await?
        }
        Err((s, e)) => {
            // Refused for good (not our failure): retried in an hour
            // rather than at once, so the timer pass never spins on it.
            tracing::warn!(error = %e, subscription = %s.id, "subscription work refused");
            retry_later(k, s, now + chrono::Duration::hours(1)).await?
        }
    };
    let answer = answer.unwrap_or_else(|| Answer::unsaved(Outcome::Updated(cur.view())));
    Ok((cur, answer))
}

/// What the actor reads of its bills: invoices paid, debits failed.
fn news(k: &SubscriptionDeps, s: &Subscription) -> DomainResult<Command> {
    let read = k.store.read()?;
    let (mut paid, mut failed) = (Vec::new(), Vec::new());
    for b in &s.bills {
        if let Some(id) = b.invoice {
            let inv: Option<crate::invoice::Invoice> =
                read.get_decoded(Table::Invoices, id.as_bytes())?;
            if inv.is_some_and(|i| i.status == InvoiceStatus::Paid) {
                paid.push(b.period);
                continue;
            }
        }
        if let Some(pi) = b.charging {
            let intent: Option<PaymentIntent> =
                read.get_decoded(Table::PaymentIntents, pi.as_bytes())?;
            if intent.is_some_and(|i| i.status == Status::Failed) {
                failed.push(b.period);
            }
        }
    }
    Ok(Command::News { paid, failed })
}

/// Carries out the state's work, step by step, each committed.
async fn perform(
    k: &SubscriptionDeps,
    mut cur: Subscription,
    now: DateTime<Utc>,
) -> Result<Subscription, (Subscription, DomainError)> {
    while let Some(w) = work(&cur, now) {
        let step = match step(k, &cur, w).await {
            Ok(c) => c,
            Err(e) => return Err((cur, e)),
        };
        let d = match decide(&cur, &step, now) {
            Ok(d) => d,
            Err(e) => return Err((cur, e)),
        };
        let mut after = d.after;
        let batch = Batch::new();
        if let Err(e) = commit(
            k,
            Some(&cur),
            &mut after,
            &d.events,
            None,
            batch,
            None,
            Kind::Updated,
            now,
        )
        .await
        {
            return Err((cur, e));
        }
        cur = after;
    }
    Ok(cur)
}

async fn retry_later(
    k: &SubscriptionDeps,
    mut s: Subscription,
    at: DateTime<Utc>,
) -> DomainResult<Subscription> {
    let mut batch = Batch::new();
    batch.owned_by(s.merchant.as_bytes());
    if let Some(old) = s.timer_at {
        batch.delete(
            Table::Timers,
            crate::timer::Timer::key(old, crate::timer::TimerKind::SubscriptionDue, s.id),
        );
    }
    crate::timer::Timer::new(
        crate::timer::TimerKind::SubscriptionDue,
        s.id,
        s.merchant,
        s.mode,
    )
    .schedule(&mut batch, at);
    s.timer_at = Some(at);
    batch.put(Table::Subscriptions, s.id.as_bytes().to_vec(), &s);
    k.writer.commit(batch).await.map_err(DomainError::from)?;
    Ok(s)
}

fn bill_of(s: &Subscription, period: u32) -> DomainResult<&Bill> {
    s.bills
        .iter()
        .find(|b| b.period == period)
        .ok_or_else(|| DomainError::internal("a subscription's work names a bill it has not"))
}

/// One piece of work, done (idempotently): the bookkeeping it results in.
async fn step(k: &SubscriptionDeps, s: &Subscription, w: Work) -> DomainResult<Command> {
    let scope = (s.merchant, s.mode);
    match w {
        Work::Invoice(period) => {
            let b = bill_of(s, period)?;
            let mut lines = vec![LineItem {
                description: b.description.clone(),
                quantity: 1,
                unit_amount: b.amount,
                amount: b.amount,
            }];
            if b.credit > 0 {
                lines.push(LineItem {
                    description: "Unused time on the previous plan".into(),
                    quantity: 1,
                    unit_amount: -b.credit,
                    amount: -b.credit,
                });
            }
            let mut metadata = Map::new();
            metadata.insert("subscription".into(), json!(s.id));
            metadata.insert("period".into(), json!(period));
            let new = NewInvoice {
                brand: s.brand,
                currency: b.currency,
                line_items: lines,
                tax_rate_bps: 0,
                due_date: b.due_date,
                allow_partial_payments: false,
                minimum_payment: None,
                fee_bearer: FeeBearer::Merchant,
                memo: None,
                metadata,
                finalize: true,
                subscription: Some((s.id, period)),
            };
            let action = InvoiceAction::Create(Box::new(new));
            let answer = book::send(&k.invoices, scope, s.customer, action, None).await?;
            let invoice = answer.view().id;
            if s.collection_method == CollectionMethod::SendInvoice
                && matches!(answer.outcome, Outcome::Created(_))
                && answer.view().status == InvoiceStatus::Open
            {
                let send = InvoiceAction::Send { id: invoice };
                book::send(&k.invoices, scope, s.customer, send, None).await?;
            }
            Ok(Command::Invoiced { period, invoice })
        }
        Work::Charge { period, attempt } => charge(k, s, period, attempt).await,
        Work::Close(period, how) => {
            if let Some(id) = bill_of(s, period)?.invoice {
                let action = match how {
                    Close::Void => InvoiceAction::Void { id },
                    Close::Uncollectible => InvoiceAction::MarkUncollectible { id },
                };
                match book::send(&k.invoices, scope, s.customer, action, None).await {
                    Ok(_) => {}
                    // Paid, already closed, or a payment still processing:
                    // the invoice stays as it is.
                    Err(e) if e.kind != ErrorKind::Internal => {
                        tracing::info!(error = %e, invoice = %id, "subscription invoice left as it is")
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(Command::Closed { period })
        }
    }
}

/// Debit `attempt` of `period`'s invoice through the mandate, once.
async fn charge(
    k: &SubscriptionDeps,
    s: &Subscription,
    period: u32,
    attempt: u32,
) -> DomainResult<Command> {
    let key = charge_key(s.id, period, attempt);
    if let Some(payment) = charge_of(k, &key)? {
        return Ok(Command::Charged { period, payment });
    }
    let b = bill_of(s, period)?;
    let invoice = b
        .invoice
        .and_then(|id| crate::invoice::service::load_any(k, id).transpose())
        .transpose()?
        .ok_or_else(|| DomainError::internal("a debit before its invoice"))?;
    if invoice.status == InvoiceStatus::Paid {
        return Ok(Command::News {
            paid: vec![period],
            failed: vec![],
        });
    }
    let merchant = crate::admin::load_merchant(k, s.merchant)?
        .ok_or_else(|| DomainError::internal("the subscription's merchant is gone"))?;
    let Some(mandate) = s
        .mandate
        .filter(|_| merchant.settings.payment_methods.direct_debit)
    else {
        return Ok(Command::ChargeRefused { period });
    };
    let params = CreatePaymentIntent {
        amount: invoice.remaining(),
        currency: invoice.currency,
        reference: None,
        description: Some(format!(
            "Invoice {} ({}, period {period})",
            invoice.number.as_deref().unwrap_or_default(),
            s.terms.name
        )),
        customer_email: None,
        metadata: Map::new(),
        fee_bearer: FeeBearer::Merchant,
        brand: Some(s.brand),
        customer: Some(s.customer),
        return_url: None,
    };
    let msg = ChargeMandate {
        merchant: Box::new(merchant),
        mode: s.mode,
        params,
        invoice: Some(invoice.id),
        idem: None,
        claim: Some((Table::SubscriptionCharges, key.clone())),
    };
    match k.mandates.send(mandate, msg).await? {
        Ok(answer) => Ok(Command::Charged {
            period,
            payment: answer.view().id,
        }),
        Err(e) if matches!(e.kind, ErrorKind::Internal | ErrorKind::Overloaded) => {
            match charge_of(k, &key)? {
                Some(payment) => Ok(Command::Charged { period, payment }),
                None => Err(e),
            }
        }
        Err(e) => {
            tracing::info!(error = %e, subscription = %s.id, period, "subscription debit refused");
            Ok(Command::ChargeRefused { period })
        }
    }
}
