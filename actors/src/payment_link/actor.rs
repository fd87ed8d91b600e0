//! The payment link actor: one per link. It takes one command at a time
//! to completion, so visits never race each other for the last slot, and
//! changes, the expiry timer and the payments check never race a visit.
//!
//! A visit reads the link's counters after the previous command's commit:
//! only this actor adds held slots, and the intents only free them or turn
//! them into payments, so what it reads is never below the truth (except a
//! retry of a failed payment in flight, which the documented overshoot
//! covers), and `payments + held < max_payments` admits no extra payment.

use std::sync::Arc;

use actix::prelude::*;
use serde_json::Value;
use uuid::Uuid;

use kobo_storage::{Batch, KeyBuf, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::idempotency::IdempotencySave;
use crate::ids::Mode;
use crate::payment_intent::link::{create_for_link, read_counters, HELD, PAYMENTS};
use crate::payment_intent::PaymentIntent;
use crate::registry::{run_command, Activation, ObjectActor, Registry, VirtualActor};
use crate::timer::{Timer, TimerKind};

use super::service::{commit_change, load};
use super::visit::{self, VisitInput};
use super::{decide, Command, InactiveReason, LinkStatus, LinkUpdate, PaymentLink};

pub struct PaymentLinkActor {
    activation: Activation<Self>,
    state: Option<PaymentLink>,
}

pub type PaymentLinks = Arc<Registry<PaymentLinkActor>>;

#[derive(Debug, Clone)]
pub enum LinkAction {
    Update(Box<LinkUpdate>),
    Deactivate,
    Activate,
    /// A visitor's answers: create the payment intent (answers it, with
    /// `checkout_url`).
    Visit(Box<VisitInput>),
    /// The expiry timer stored under `timer_key` fired.
    ExpireTimer {
        timer_key: Vec<u8>,
    },
    /// Successes recorded in the outbox (these rows): check `max_payments`.
    PaymentsCheck {
        rows: Vec<Vec<u8>>,
    },
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Value>")]
pub struct LinkMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub action: LinkAction,
    pub idem: Option<IdempotencySave>,
}

impl Actor for PaymentLinkActor {
    type Context = Context<Self>;
}

impl VirtualActor for PaymentLinkActor {
    type Key = Uuid;
    type Deps = Env;
    const KIND: &'static str = "payment_link";
    fn activate(activation: Activation<Self>) -> Self {
        PaymentLinkActor {
            activation,
            state: None,
        }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

impl ObjectActor for PaymentLinkActor {
    type Object = PaymentLink;
    fn object(&mut self) -> &mut Option<PaymentLink> {
        &mut self.state
    }
    fn activation_mut(&mut self) -> &mut Activation<Self> {
        &mut self.activation
    }
    fn load(kobo: &Env, id: Uuid) -> DomainResult<Option<PaymentLink>> {
        load(kobo, id)
    }
    fn scope(o: &PaymentLink) -> (Uuid, Mode) {
        (o.merchant, o.mode)
    }
}

impl Handler<LinkMessage> for PaymentLinkActor {
    type Result = AtomicResponse<Self, DomainResult<Value>>;

    fn handle(&mut self, msg: LinkMessage, _ctx: &mut Context<Self>) -> Self::Result {
        let (merchant, mode) = (msg.merchant, msg.mode);
        run_command(self, merchant, mode, move |kobo, link| async move {
            process(&kobo, &link, msg).await
        })
    }
}

async fn process(
    kobo: &Env,
    link: &PaymentLink,
    msg: LinkMessage,
) -> DomainResult<(PaymentLink, Value)> {
    let now = kobo.clock.now();
    let payments = read_counters(&kobo.store.read()?, link.id)?[PAYMENTS];
    let mut batch = Batch::new();
    let command = match msg.action {
        LinkAction::Visit(input) => {
            return admit(kobo, link, &input).await.map(|v| (link.clone(), v))
        }
        LinkAction::Update(u) => Command::Update(u),
        LinkAction::Deactivate => Command::Deactivate,
        LinkAction::Activate => Command::Activate,
        LinkAction::ExpireTimer { timer_key } => {
            batch.delete(Table::Timers, timer_key.clone());
            let live = link
                .expires_at
                .is_some_and(|e| Timer::key(e, TimerKind::PaymentLinkExpire, link.id) == timer_key);
            if !live {
                let view = commit_change(kobo, link, link, &[], batch, None).await?;
                return Ok((link.clone(), view));
            }
            Command::ExpiryDue
        }
        LinkAction::PaymentsCheck { rows } => {
            for row in rows {
                batch.delete(Table::PaymentLinkOutbox, row);
            }
            Command::PaymentsCheck
        }
    };
    let (after, effects) = decide(link, &command, payments, now)?;
    let view = commit_change(kobo, link, &after, &effects, batch, msg.idem.as_ref()).await?;
    Ok((after, view))
}

fn visit_key(link: Uuid, nonce: &str) -> Vec<u8> {
    KeyBuf::new().bytes(link.as_bytes()).str(nonce).build()
}

/// A visit: the form's earlier payment if this nonce made one, else the
/// link's checks (active now, a free slot, the answers) and a new payment
/// intent holding a slot.
async fn admit(kobo: &Env, link: &PaymentLink, input: &VisitInput) -> DomainResult<Value> {
    let now = kobo.clock.now();
    let read = kobo.store.read()?;
    if let Some(nonce) = &input.nonce {
        if let Some(raw) = read.get(Table::PaymentLinkVisits, &visit_key(link.id, nonce))? {
            let id = Uuid::from_slice(&raw).map_err(|e| DomainError::internal(e.to_string()))?;
            let found: Option<PaymentIntent> =
                read.get_decoded(Table::PaymentIntents, id.as_bytes())?;
            let intent =
                found.ok_or_else(|| DomainError::internal("a visit's payment is missing"))?;
            return Ok(with_checkout_url(kobo, intent.to_api(None), &intent));
        }
    }
    let counters = read_counters(&read, link.id)?;
    drop(read);
    let (status, reason) = link.effective_status(counters[PAYMENTS], now);
    if status == LinkStatus::Inactive {
        let why = match reason {
            Some(InactiveReason::Expired) => "it has expired",
            Some(InactiveReason::MaxPaymentsReached) => "it has taken all its payments",
            _ => "the business deactivated it",
        };
        return Err(DomainError::state(
            ErrorCode::PaymentLinkInactive,
            format!("this payment link no longer accepts payments: {why}"),
        ));
    }
    if link
        .max_payments
        .is_some_and(|m| counters[PAYMENTS] + counters[HELD] >= m)
    {
        return Err(DomainError::state(
            ErrorCode::PaymentLinkFull,
            "every remaining payment of this link is held by a payment in progress; try again in a few minutes",
        ));
    }
    let params = visit::check(link, input).map_err(|mut errors| errors.remove(0))?;
    let merchant = crate::admin::load_merchant(kobo, link.merchant)?
        .ok_or_else(|| DomainError::internal("a link of an unknown merchant"))?;
    if link.mode == Mode::Live && !merchant.settings.live_approved {
        return Err(DomainError::state(
            ErrorCode::PaymentLinkInactive,
            "this business cannot take live payments yet",
        ));
    }
    let key = input.nonce.as_ref().map(|n| visit_key(link.id, n));
    let (intent, view) =
        create_for_link(kobo, &merchant, link.mode, link.id, params, key, now).await?;
    Ok(with_checkout_url(kobo, view, &intent))
}

fn with_checkout_url(kobo: &Env, mut view: Value, intent: &PaymentIntent) -> Value {
    let url = format!("{}/c/{}", kobo.config.base_url, intent.checkout_code);
    if let Some(o) = view.as_object_mut() {
        o.insert("checkout_url".into(), Value::String(url));
    }
    view
}

/// Sends a command to a link's actor.
pub async fn send(
    links: &Registry<PaymentLinkActor>,
    link: &PaymentLink,
    action: LinkAction,
    idem: Option<IdempotencySave>,
) -> DomainResult<Value> {
    let msg = LinkMessage {
        merchant: link.merchant,
        mode: link.mode,
        action,
        idem,
    };
    links.send(link.id, msg).await?
}

/// Starts the outbox pump: after every commit that records a link's
/// success (an outbox row, written in the success's batch), the link's
/// actor checks `max_payments` and deletes the rows it checked. Rows left
/// by a crash are checked at start. A failed check leaves its rows for
/// the next wake (the next success, or the next start).
pub fn start(links: &PaymentLinks) {
    let notify = links.deps().writer.watch(Table::PaymentLinkOutbox);
    let links = links.clone();
    actix::spawn(async move {
        loop {
            if let Err(e) = drain(&links).await {
                tracing::warn!(error = %e, "payment link outbox check failed");
            }
            notify.notified().await;
        }
    });
}

/// Rows one pass takes.
const DRAIN_MAX: usize = 10_000;

async fn drain(links: &PaymentLinks) -> DomainResult<()> {
    while drain_some(links).await? == DRAIN_MAX {}
    Ok(())
}

async fn drain_some(links: &PaymentLinks) -> DomainResult<usize> {
    let mut rows: Vec<(Uuid, Vec<u8>)> = Vec::new();
    links
        .deps()
        .store
        .read()?
        .scan_prefix(Table::PaymentLinkOutbox, &[], None, |k, _| {
            if let Ok(link) = Uuid::from_slice(&k[..16.min(k.len())]) {
                rows.push((link, k.to_vec()));
            }
            Ok(rows.len() < DRAIN_MAX)
        })?;
    let taken = rows.len();
    let mut by_link: std::collections::BTreeMap<Uuid, Vec<Vec<u8>>> = Default::default();
    for (link, row) in rows {
        by_link.entry(link).or_default().push(row);
    }
    for (id, rows) in by_link {
        let Some(link) = load(links.deps(), id)? else {
            continue;
        };
        send(links, &link, LinkAction::PaymentsCheck { rows }, None).await?;
    }
    Ok(taken)
}
