//! The invoice book: one actor per customer, the only writer of that
//! customer's invoices and of their credit balance. It takes one command
//! at a time to completion ([`run_once`]: nothing kept in memory, every
//! command reads the store, which it alone writes for this customer), so:
//!
//! - money is applied under one serialization per customer: a payment
//!   for an invoice, a transfer into the customer's virtual account, a
//!   payment recorded out of band and the credit balance taken at
//!   finalize never race; two payments for the last naira of an invoice:
//!   the first applies, the second becomes credit;
//! - a payment's application ([`ApplyPayment`]) is added to the payment's
//!   own capture batch, which this actor hands to the merchant's ledger
//!   and awaits: the capture, its ledger lines, the payment's event, the
//!   invoice payments, their events and the credit balance commit
//!   together, or not at all, exactly once (the capture's own
//!   exactly-once).

use std::sync::Arc;

use actix::prelude::*;
use chrono::{DateTime, NaiveDate, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use super::numbers::{Build, InvoiceNumbers};
use super::service::{
    customer_prefix, format_number, list_key, load_any, number_prefix, of_customer,
    overdue_instant, status_prefix, subscription_prefix, to_api, view,
};
use super::{
    totals, DeletedInvoiceView, Invoice, InvoicePayment, InvoiceStatus, InvoiceView, LineItem,
    PaymentMethod,
};
use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event::{self, Event};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::{new_id, time_ordered_code, Mode};
use crate::ledger::actor::{Ledgers, PostEntry};
use crate::money::{Currency, FeeBearer};
use crate::registry::{run_once, Activation, Registry, VirtualActor};
use crate::timer::{Timer, TimerKind};

/// What an invoice book reaches: the merchants' ledgers (a payment's
/// capture batch is posted from here).
pub struct InvoiceDeps {
    pub env: Arc<Env>,
    pub ledgers: Ledgers,
    /// Whether a payment for an invoice (merchant and mode, customer,
    /// invoice) is still `processing` (payment intents' reader, given at
    /// assembly: payment intents import the books, not the other way).
    pub payment_processing: PaymentProcessing,
    /// The brands' number lanes (every finalize takes its number there).
    pub numbers: Arc<InvoiceNumbers>,
}

/// See [`InvoiceDeps::payment_processing`].
pub type PaymentProcessing = fn(&Env, (Uuid, Mode), Uuid, Uuid) -> DomainResult<bool>;

impl std::ops::Deref for InvoiceDeps {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}

/// The books, keyed by customer id.
pub type Invoices = Arc<Registry<InvoiceBook>>;

pub struct InvoiceBook {
    activation: Activation<Self>,
}

impl Actor for InvoiceBook {
    type Context = Context<Self>;
}

impl VirtualActor for InvoiceBook {
    type Key = Uuid;
    type Deps = InvoiceDeps;
    const KIND: &'static str = "invoice_book";
    fn activate(activation: Activation<Self>) -> Self {
        InvoiceBook { activation }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

/// A new invoice's inputs (checked by the HTTP layer; the customer is
/// the book's).
#[derive(Debug, Clone)]
pub struct NewInvoice {
    pub brand: Uuid,
    pub currency: Currency,
    pub line_items: Vec<LineItem>,
    pub tax_rate_bps: u32,
    pub due_date: NaiveDate,
    pub allow_partial_payments: bool,
    pub minimum_payment: Option<i64>,
    pub fee_bearer: FeeBearer,
    pub memo: Option<String>,
    pub metadata: Map<String, Value>,
    pub finalize: bool,
    /// A subscription's period `(subscription, period)`: the invoice is
    /// claimed under it (`subscription_invoices`, absent in the create's
    /// batch), so a period makes one invoice; a second create of the same
    /// period answers the first (`Existing`).
    pub subscription: Option<(Uuid, u32)>,
}

/// A draft's update: only what is given changes (`memo: ""` clears;
/// `metadata` merges, a key set to `""` is removed).
#[derive(Debug, Clone, Default)]
pub struct InvoicePatch {
    pub line_items: Option<Vec<LineItem>>,
    pub tax_rate_bps: Option<u32>,
    pub due_date: Option<NaiveDate>,
    pub allow_partial_payments: Option<bool>,
    pub minimum_payment: Option<i64>,
    pub fee_bearer: Option<FeeBearer>,
    pub memo: Option<String>,
    pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Clone)]
pub enum InvoiceAction {
    Create(Box<NewInvoice>),
    Update {
        id: Uuid,
        patch: Box<InvoicePatch>,
    },
    Finalize {
        id: Uuid,
    },
    Send {
        id: Uuid,
    },
    Void {
        id: Uuid,
    },
    MarkUncollectible {
        id: Uuid,
    },
    RecordPayment {
        id: Uuid,
        amount: i64,
        note: Option<String>,
    },
}

/// A command on the customer's invoices; it answers the invoice.
#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Answer<InvoiceView>>")]
pub struct InvoiceMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub action: InvoiceAction,
    pub idem: Option<IdempotencySave>,
}

/// Deletes a draft.
#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Answer<DeletedInvoiceView>>")]
pub struct DeleteInvoice {
    pub merchant: Uuid,
    pub mode: Mode,
    pub id: Uuid,
    pub idem: Option<IdempotencySave>,
}

/// A payment of the customer succeeded: `post` is its capture (the
/// payment's batch inside). The book adds the application (to
/// `invoice`, else to the customer's open invoices, oldest due first;
/// the rest to the credit balance) to that batch and posts it.
#[derive(Clone, Message)]
#[rtype(result = "DomainResult<()>")]
pub struct ApplyPayment {
    pub merchant: Uuid,
    pub mode: Mode,
    pub payment_intent: Uuid,
    pub invoice: Option<Uuid>,
    pub currency: Currency,
    pub amount: i64,
    pub post: PostEntry,
}

/// The overdue timer of an invoice fired.
#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<()>")]
pub struct OverdueTimer {
    pub invoice: Uuid,
    pub timer_key: Vec<u8>,
}

impl InvoiceBook {
    fn run<T, F, Fut>(&mut self, work: F) -> AtomicResponse<Self, DomainResult<T>>
    where
        T: 'static,
        F: FnOnce(Arc<InvoiceDeps>, Uuid) -> Fut,
        Fut: std::future::Future<Output = DomainResult<T>> + 'static,
    {
        self.activation.touch();
        let work = work(self.activation.deps.clone(), self.activation.key);
        run_once(self, work)
    }
}

impl Handler<InvoiceMessage> for InvoiceBook {
    type Result = AtomicResponse<Self, DomainResult<Answer<InvoiceView>>>;
    fn handle(&mut self, msg: InvoiceMessage, _: &mut Context<Self>) -> Self::Result {
        self.run(|k, customer| async move { process(k, customer, msg).await })
    }
}

impl Handler<DeleteInvoice> for InvoiceBook {
    type Result = AtomicResponse<Self, DomainResult<Answer<DeletedInvoiceView>>>;
    fn handle(&mut self, msg: DeleteInvoice, _: &mut Context<Self>) -> Self::Result {
        self.run(|k, customer| async move { delete(&k, customer, msg).await })
    }
}

impl Handler<ApplyPayment> for InvoiceBook {
    type Result = AtomicResponse<Self, DomainResult<()>>;
    fn handle(&mut self, msg: ApplyPayment, _: &mut Context<Self>) -> Self::Result {
        self.run(|k, customer| async move { apply_payment(&k, customer, msg).await })
    }
}

impl Handler<OverdueTimer> for InvoiceBook {
    type Result = AtomicResponse<Self, DomainResult<()>>;
    fn handle(&mut self, msg: OverdueTimer, _: &mut Context<Self>) -> Self::Result {
        self.run(|k, customer| async move { overdue(&k, customer, msg).await })
    }
}

/// Sends `action` to the customer's book.
pub async fn send(
    invoices: &Invoices,
    (merchant, mode): (Uuid, Mode),
    customer: Uuid,
    action: InvoiceAction,
    idem: Option<IdempotencySave>,
) -> DomainResult<Answer<InvoiceView>> {
    let msg = InvoiceMessage {
        merchant,
        mode,
        action,
        idem,
    };
    invoices.send(customer, msg).await?
}

/// The changes of one command: the invoices after it (with the invoice
/// before, to move its index rows), events, the credit balance.
struct Change {
    batch: Batch,
    credit: Option<i64>,
}

fn load_own(
    k: &Env,
    customer: Uuid,
    merchant: Uuid,
    mode: Mode,
    id: Uuid,
) -> DomainResult<Invoice> {
    match load_any(k, id)? {
        Some(i) if i.merchant == merchant && i.mode == mode && i.customer == customer => Ok(i),
        _ => Err(DomainError::not_found("invoice", id)),
    }
}

async fn process(
    k: Arc<InvoiceDeps>,
    customer: Uuid,
    msg: InvoiceMessage,
) -> DomainResult<Answer<InvoiceView>> {
    let (m, mode) = (msg.merchant, msg.mode);
    let now = k.clock.now();
    let id = match &msg.action {
        InvoiceAction::Create(_) => None,
        InvoiceAction::Update { id, .. }
        | InvoiceAction::Finalize { id }
        | InvoiceAction::Send { id }
        | InvoiceAction::Void { id }
        | InvoiceAction::MarkUncollectible { id }
        | InvoiceAction::RecordPayment { id, .. } => Some(*id),
    };
    let before = match id {
        Some(id) => Some(load_own(&k, customer, m, mode, id)?),
        None => None,
    };
    if let InvoiceAction::Create(new) = &msg.action {
        if let Some(period) = new.subscription {
            if let Some(inv) = super::service::of_period(&k, period)? {
                return Ok(Answer::unsaved(Outcome::Existing(view(&k, &inv)?)));
            }
        }
    }
    // A finalize takes its number in its brand's lane, which commits it.
    let brand = match (&msg.action, &before) {
        (InvoiceAction::Create(new), _) if new.finalize => Some(new.brand),
        (InvoiceAction::Finalize { .. }, Some(b)) => Some(b.brand),
        _ => None,
    };
    if let Some(brand) = brand {
        let numbers = k.numbers.clone();
        let env = k.env.clone();
        let build: Build =
            Arc::new(move |n| change(&k, customer, &msg, before.as_ref(), Some(n), now));
        return numbers.claim(&env, (brand, mode), build).await;
    }
    let (batch, answer) = change(&k, customer, &msg, before.as_ref(), None, now)?;
    match k.writer.commit(batch).await {
        Ok(()) => Ok(answer),
        Err(e) => Err(DomainError::from(e)),
    }
}

/// A command's batch and answer (`number`: a finalize's, from its lane).
fn change(
    k: &InvoiceDeps,
    customer: Uuid,
    msg: &InvoiceMessage,
    before: Option<&Invoice>,
    number: Option<u64>,
    now: DateTime<Utc>,
) -> DomainResult<(Batch, Answer<InvoiceView>)> {
    let (m, mode) = (msg.merchant, msg.mode);
    let mut change = Change {
        batch: Batch::new(),
        credit: None,
    };
    change.batch.owned_by(m.as_bytes());
    let mut events = Vec::new();
    let (after, created) = match (&msg.action, before) {
        (InvoiceAction::Create(new), _) => {
            let mut inv = create(k, customer, m, mode, new, now)?;
            if let Some(period) = new.subscription {
                let key = super::service::period_key(period);
                change
                    .batch
                    .require_absent(Table::SubscriptionInvoices, key.clone())
                    .put_raw(Table::SubscriptionInvoices, key, inv.id.as_bytes().to_vec());
            }
            if let (true, Some(n)) = (new.finalize, number) {
                finalize(k, &mut inv, n, &mut change, &mut events, now)?;
            }
            (inv, true)
        }
        (InvoiceAction::Update { patch, .. }, Some(b)) => (update(b, patch, now)?, false),
        (InvoiceAction::Finalize { .. }, Some(b)) => {
            b.require_draft()?;
            let mut inv = b.clone();
            let n = number.ok_or_else(|| DomainError::internal("a finalize without a number"))?;
            finalize(k, &mut inv, n, &mut change, &mut events, now)?;
            (inv, false)
        }
        (InvoiceAction::Send { .. }, Some(b)) => {
            b.require_payable()?;
            let mut inv = b.clone();
            inv.sent_at = Some(now);
            inv.updated_at = now;
            (inv, false)
        }
        (InvoiceAction::Void { .. }, Some(b)) => {
            b.require_payable()?;
            if b.amount_paid > 0 {
                return Err(DomainError::state(
                    ErrorCode::InvoiceHasPayments,
                    "this invoice has payments; it cannot be voided",
                ));
            }
            if (k.payment_processing)(k, (m, mode), customer, b.id)? {
                return Err(DomainError::state(
                    ErrorCode::InvoiceHasPayments,
                    "a payment for this invoice is processing; it cannot be voided until it ends",
                ));
            }
            let mut inv = b.clone();
            inv.status = InvoiceStatus::Void;
            inv.voided_at = Some(now);
            inv.updated_at = now;
            events.push(event::INVOICE_VOIDED);
            (inv, false)
        }
        (InvoiceAction::MarkUncollectible { .. }, Some(b)) => {
            if b.status != InvoiceStatus::Open {
                return Err(DomainError::state(
                    ErrorCode::InvoiceNotPayable,
                    format!(
                        "this invoice is {}; only an open invoice can be marked uncollectible",
                        b.status.as_str()
                    ),
                ));
            }
            let mut inv = b.clone();
            inv.status = InvoiceStatus::Uncollectible;
            inv.marked_uncollectible_at = Some(now);
            inv.updated_at = now;
            events.push(event::INVOICE_MARKED_UNCOLLECTIBLE);
            (inv, false)
        }
        (InvoiceAction::RecordPayment { amount, note, .. }, Some(b)) => {
            check_amount(b, Some(*amount))?;
            let mut inv = b.clone();
            events.push(inv.apply(InvoicePayment {
                payment_intent: None,
                amount: *amount,
                method: PaymentMethod::OutOfBand,
                note: note.clone(),
                paid_at: now,
            }));
            (inv, false)
        }
        _ => unreachable!("an action on an invoice loads it"),
    };
    put_invoice(k, before.filter(|_| !created), &after, &mut change.batch);
    for t in events {
        Event::record(k, (m, mode), t, to_api(k, &after)?, now, &mut change.batch);
    }
    if let Some(c) = change.credit {
        change
            .batch
            .put(Table::CustomerCredits, customer.as_bytes().to_vec(), &c);
    }
    let outcome = match created {
        true => Outcome::Created(view(k, &after)?),
        false => Outcome::Updated(view(k, &after)?),
    };
    let answer = Answer::save(outcome, msg.idem.as_ref(), &mut change.batch, now);
    Ok((change.batch, answer))
}

fn check_terms(i: &Invoice) -> DomainResult<()> {
    if let Some(min) = i.minimum_payment {
        if !i.allow_partial_payments {
            return Err(DomainError::invalid(
                "minimum_payment",
                "`minimum_payment` needs `allow_partial_payments: true`",
            ));
        }
        if min > i.total.max(1) {
            return Err(DomainError::invalid(
                "minimum_payment",
                "`minimum_payment` must be at most the invoice's total",
            ));
        }
    }
    Ok(())
}

/// A payment of `amount` (default: what remains) for `i`, checked: at
/// most what remains (409 `amount_exceeds_remaining`), all of it unless
/// partial payments are allowed, at least `minimum_payment` unless it is
/// all that remains.
pub fn check_amount(i: &Invoice, amount: Option<i64>) -> DomainResult<i64> {
    i.require_payable()?;
    let rem = i.remaining();
    let amount = amount.unwrap_or(rem);
    if amount > rem {
        return Err(DomainError::state(
            ErrorCode::AmountExceedsRemaining,
            format!("the amount is more than the {rem} that remains"),
        ));
    }
    if amount < rem && !i.allow_partial_payments {
        return Err(DomainError::invalid(
            "amount",
            format!("this invoice takes no partial payments: pay {rem}"),
        ));
    }
    if let Some(min) = i.minimum_payment {
        if amount < rem && amount < min {
            return Err(DomainError::invalid(
                "amount",
                format!("a part payment must be at least {min}"),
            ));
        }
    }
    if amount <= 0 {
        return Err(DomainError::invalid("amount", "`amount` must be positive"));
    }
    Ok(amount)
}

fn create(
    k: &InvoiceDeps,
    customer: Uuid,
    merchant: Uuid,
    mode: Mode,
    n: &NewInvoice,
    now: DateTime<Utc>,
) -> DomainResult<Invoice> {
    let (subtotal, tax, total) = totals(&n.line_items, n.tax_rate_bps)?;
    let inv = Invoice {
        id: new_id(now),
        merchant,
        mode,
        seq: k.seq.next(),
        customer,
        brand: n.brand,
        currency: n.currency,
        line_items: n.line_items.clone(),
        tax_rate_bps: n.tax_rate_bps,
        subtotal,
        tax,
        total,
        due_date: n.due_date,
        allow_partial_payments: n.allow_partial_payments,
        minimum_payment: n.minimum_payment,
        fee_bearer: n.fee_bearer,
        memo: n.memo.clone(),
        metadata: n.metadata.clone(),
        number: None,
        status: InvoiceStatus::Draft,
        amount_paid: 0,
        payments: Vec::new(),
        overdue: false,
        hosted_code: None,
        created_at: now,
        updated_at: now,
        finalized_at: None,
        sent_at: None,
        paid_at: None,
        voided_at: None,
        marked_uncollectible_at: None,
        subscription: n.subscription.map(|(s, _)| s),
    };
    check_terms(&inv)?;
    Ok(inv)
}

fn update(b: &Invoice, p: &InvoicePatch, now: DateTime<Utc>) -> DomainResult<Invoice> {
    b.require_draft()?;
    let mut i = b.clone();
    if let Some(l) = &p.line_items {
        i.line_items = l.clone();
    }
    if let Some(t) = p.tax_rate_bps {
        i.tax_rate_bps = t;
    }
    if let Some(d) = p.due_date {
        i.due_date = d;
    }
    if let Some(a) = p.allow_partial_payments {
        i.allow_partial_payments = a;
        if !a {
            i.minimum_payment = None;
        }
    }
    if let Some(m) = p.minimum_payment {
        i.minimum_payment = Some(m);
    }
    if let Some(f) = p.fee_bearer {
        i.fee_bearer = f;
    }
    if let Some(m) = &p.memo {
        i.memo = (!m.is_empty()).then(|| m.clone());
    }
    if let Some(md) = &p.metadata {
        for (key, v) in md {
            match v {
                Value::String(s) if s.is_empty() => {
                    i.metadata.remove(key);
                }
                v => {
                    i.metadata.insert(key.clone(), v.clone());
                }
            }
        }
    }
    let (s, t, tot) = totals(&i.line_items, i.tax_rate_bps)?;
    (i.subtotal, i.tax, i.total) = (s, t, tot);
    check_terms(&i)?;
    i.updated_at = now;
    Ok(i)
}

/// draft -> open: the number `n` (its lane's; claimed absent), the hosted page's code,
/// the overdue timer, and the customer's credit balance applied.
fn finalize(
    k: &InvoiceDeps,
    inv: &mut Invoice,
    n: u64,
    change: &mut Change,
    events: &mut Vec<&'static str>,
    now: DateTime<Utc>,
) -> DomainResult<()> {
    check_terms(inv)?;
    let key = number_prefix(inv.brand, inv.mode).u64(n).build();
    change
        .batch
        .require_absent(Table::InvoiceNumbers, key.clone())
        .put_raw(Table::InvoiceNumbers, key, inv.id.as_bytes().to_vec());
    let code = time_ordered_code(now, 22);
    change
        .batch
        .require_absent(Table::InvoiceLinks, code.as_bytes().to_vec())
        .put_raw(
            Table::InvoiceLinks,
            code.as_bytes().to_vec(),
            inv.id.as_bytes().to_vec(),
        );
    inv.number = Some(format_number(n));
    inv.hosted_code = Some(code);
    inv.status = InvoiceStatus::Open;
    inv.finalized_at = Some(now);
    inv.updated_at = now;
    events.push(event::INVOICE_FINALIZED);
    if inv.total == 0 {
        inv.status = InvoiceStatus::Paid;
        inv.paid_at = Some(now);
        events.push(event::INVOICE_PAID);
        return Ok(());
    }
    Timer::new(TimerKind::InvoiceOverdue, inv.id, inv.merchant, inv.mode)
        .schedule(&mut change.batch, overdue_instant(inv.due_date));
    if inv.currency == Currency::NGN {
        let credit = super::service::credit_balance(k, inv.customer)?;
        let take = inv.takes(credit);
        if take > 0 {
            events.push(inv.apply(InvoicePayment {
                payment_intent: None,
                amount: take,
                method: PaymentMethod::CreditBalance,
                note: None,
                paid_at: now,
            }));
            change.credit = Some(credit - take);
        }
    }
    Ok(())
}

/// The invoice's rows: the object, and its index rows (all on create,
/// the status row moved on a change of status).
fn put_invoice(k: &Env, before: Option<&Invoice>, after: &Invoice, batch: &mut Batch) {
    let _ = k;
    let (m, mode, seq) = (after.merchant, after.mode, after.seq);
    let id = after.id.as_bytes().to_vec();
    batch.put(Table::Invoices, id.clone(), after);
    if let Some(s) = after.subscription {
        if before.is_none() {
            batch.put_raw(
                Table::InvoiceSubscriptionIndex,
                subscription_prefix(m, mode, s).u64(seq).build(),
                id.clone(),
            );
        }
        // The subscription hears of its invoice's payment at once (its
        // wake timer, in the payment's own batch).
        let was_paid = before.is_some_and(|b| b.status == InvoiceStatus::Paid);
        if after.status == InvoiceStatus::Paid && !was_paid {
            Timer::new(TimerKind::SubscriptionWake, s, m, mode)
                .schedule(batch, after.paid_at.unwrap_or(after.updated_at));
        }
    }
    match before {
        None => {
            batch
                .put_raw(Table::InvoiceIndex, list_key(m, mode, seq), id.clone())
                .put_raw(
                    Table::InvoiceCustomerIndex,
                    customer_prefix(m, mode, after.customer).u64(seq).build(),
                    id.clone(),
                )
                .put_raw(
                    Table::InvoiceStatusIndex,
                    status_prefix(m, mode, after.status).u64(seq).build(),
                    id,
                )
                .note_seq(seq);
        }
        Some(b) if b.status != after.status => {
            batch
                .delete(
                    Table::InvoiceStatusIndex,
                    status_prefix(m, mode, b.status).u64(seq).build(),
                )
                .put_raw(
                    Table::InvoiceStatusIndex,
                    status_prefix(m, mode, after.status).u64(seq).build(),
                    id,
                );
        }
        Some(_) => {}
    }
}

async fn delete(
    k: &InvoiceDeps,
    customer: Uuid,
    msg: DeleteInvoice,
) -> DomainResult<Answer<DeletedInvoiceView>> {
    let i = load_own(k, customer, msg.merchant, msg.mode, msg.id)?;
    i.require_draft()?;
    let now = k.clock.now();
    let (m, mode, seq) = (i.merchant, i.mode, i.seq);
    let mut batch = Batch::new();
    batch.owned_by(m.as_bytes());
    batch
        .delete(Table::Invoices, i.id.as_bytes().to_vec())
        .delete(Table::InvoiceIndex, list_key(m, mode, seq))
        .delete(
            Table::InvoiceCustomerIndex,
            customer_prefix(m, mode, i.customer).u64(seq).build(),
        )
        .delete(
            Table::InvoiceStatusIndex,
            status_prefix(m, mode, i.status).u64(seq).build(),
        );
    let view = DeletedInvoiceView {
        id: i.id,
        object: "invoice",
        livemode: mode.livemode(),
        deleted: true,
    };
    let answer = Answer::save(Outcome::Updated(view), msg.idem.as_ref(), &mut batch, now);
    k.writer.commit(batch).await.map_err(DomainError::from)?;
    Ok(answer)
}

/// Applies a succeeded payment of the customer, in its capture batch.
async fn apply_payment(k: &InvoiceDeps, customer: Uuid, msg: ApplyPayment) -> DomainResult<()> {
    let now = k.clock.now();
    let (m, mode) = (msg.merchant, msg.mode);
    let mut post = msg.post;
    let mut money = msg.amount;
    let mut touched: Vec<(Invoice, Invoice, &'static str)> = Vec::new();
    let payment = |amount| InvoicePayment {
        payment_intent: Some(msg.payment_intent),
        amount,
        method: PaymentMethod::Kobo,
        note: None,
        paid_at: now,
    };
    let targets: Vec<Invoice> = match msg.invoice {
        Some(id) => load_any(k, id)?
            .filter(|i| i.customer == customer && i.merchant == m && i.mode == mode)
            .into_iter()
            .collect(),
        None => {
            let mut open: Vec<Invoice> = of_customer(k, m, mode, customer)?
                .into_iter()
                .filter(|i| i.status == InvoiceStatus::Open)
                .collect();
            open.sort_by_key(|i| (i.due_date, i.seq));
            open
        }
    };
    for before in targets {
        if before.currency != msg.currency {
            continue;
        }
        let take = before.takes(money);
        if take == 0 {
            continue;
        }
        let mut after = before.clone();
        let t = after.apply(payment(take));
        money -= take;
        touched.push((before, after, t));
    }
    let mut with = post.with.take()?;
    for (before, after, t) in &touched {
        put_invoice(k, Some(before), after, &mut with);
        Event::record(k, (m, mode), t, to_api(k, after)?, now, &mut with);
    }
    if money > 0 && msg.currency == Currency::NGN {
        let credit = super::service::credit_balance(k, customer)?;
        with.put(
            Table::CustomerCredits,
            customer.as_bytes().to_vec(),
            &(credit + money),
        );
    }
    post.with = crate::registry::Once::new(with);
    k.ledgers.send((m, mode), post).await??;
    Ok(())
}

async fn overdue(k: &InvoiceDeps, customer: Uuid, msg: OverdueTimer) -> DomainResult<()> {
    let now = k.clock.now();
    let found = load_any(k, msg.invoice)?;
    let mut batch = Batch::new();
    if let Some(i) = &found {
        batch.owned_by(i.merchant.as_bytes());
    }
    batch.delete(Table::Timers, msg.timer_key);
    if let Some(before) = found.filter(|i| i.customer == customer) {
        if before.status == InvoiceStatus::Open && !before.overdue {
            let mut after = before.clone();
            after.overdue = true;
            after.updated_at = now;
            put_invoice(k, Some(&before), &after, &mut batch);
            let scope = (after.merchant, after.mode);
            Event::record(
                k,
                scope,
                event::INVOICE_OVERDUE,
                to_api(k, &after)?,
                now,
                &mut batch,
            );
        }
    }
    k.writer.commit(batch).await.map_err(DomainError::from)
}
