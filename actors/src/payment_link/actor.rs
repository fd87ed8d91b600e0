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
use uuid::Uuid;

use kobo_storage::{Batch, KeyBuf, Table};

use crate::customer::directory::Customers;
use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::Mode;
use crate::payment_intent::link::{read_counters, HELD, PAYMENTS};
use crate::payment_intent::service::create_for_link;
use crate::payment_intent::{PaymentIntent, PaymentIntentView};
use crate::registry::{run_command, Activation, ObjectActor, Registry, VirtualActor};
use crate::resumption::{Merchants, Resumption};
use crate::timer::{Timer, TimerKind};

use super::service::{commit_change, load};
use super::visit::{self, VisitInput};
use super::{
    decide, Command, InactiveReason, LinkStatus, LinkUpdate, PaymentLink, PaymentLinkView,
};

pub struct PaymentLinkActor {
    activation: Activation<Self>,
    state: Option<PaymentLink>,
}

pub type PaymentLinks = Arc<Registry<PaymentLinkActor>>;

/// What a payment link's actor reaches: the environment, and the customer
/// directories (a visit finds or makes the customer of its email).
pub struct PaymentLinkDeps {
    pub env: Arc<Env>,
    pub customers: Customers,
}

impl std::ops::Deref for PaymentLinkDeps {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}

#[derive(Debug, Clone)]
pub enum LinkAction {
    Update(Box<LinkUpdate>),
    Deactivate,
    Activate,
    /// The expiry timer stored under `timer_key` fired.
    ExpireTimer {
        timer_key: Vec<u8>,
    },
    /// Successes recorded in the outbox (these rows): check `max_payments`.
    PaymentsCheck {
        rows: Vec<Vec<u8>>,
    },
}

/// A change of the link: answers the link.
#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Answer<PaymentLinkView>>")]
pub struct LinkMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub action: LinkAction,
    pub idem: Option<IdempotencySave>,
}

/// A visitor's answers: create the payment intent. Answers it (with
/// `checkout_url`): `Created`, or `Existing` when the page form's nonce
/// already made it.
#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Outcome<PaymentIntentView>>")]
pub struct VisitLink {
    pub merchant: Uuid,
    pub mode: Mode,
    pub input: Box<VisitInput>,
}

impl Actor for PaymentLinkActor {
    type Context = Context<Self>;
}

impl VirtualActor for PaymentLinkActor {
    type Key = Uuid;
    type Deps = PaymentLinkDeps;
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
    fn load(kobo: &PaymentLinkDeps, id: Uuid) -> DomainResult<Option<PaymentLink>> {
        load(kobo, id)
    }
    fn scope(o: &PaymentLink) -> (Uuid, Mode) {
        (o.merchant, o.mode)
    }
}

impl Handler<LinkMessage> for PaymentLinkActor {
    type Result = AtomicResponse<Self, DomainResult<Answer<PaymentLinkView>>>;

    fn handle(&mut self, msg: LinkMessage, _ctx: &mut Context<Self>) -> Self::Result {
        let (merchant, mode) = (msg.merchant, msg.mode);
        run_command(self, merchant, mode, move |kobo, link| async move {
            process(&kobo, &link, msg).await
        })
    }
}

impl Handler<VisitLink> for PaymentLinkActor {
    type Result = AtomicResponse<Self, DomainResult<Outcome<PaymentIntentView>>>;

    fn handle(&mut self, msg: VisitLink, _ctx: &mut Context<Self>) -> Self::Result {
        let (merchant, mode) = (msg.merchant, msg.mode);
        run_command(self, merchant, mode, move |kobo, link| async move {
            let made = admit(&kobo, &link, &msg.input).await?;
            Ok((link, made))
        })
    }
}

async fn process(
    kobo: &Env,
    link: &PaymentLink,
    msg: LinkMessage,
) -> DomainResult<(PaymentLink, Answer<PaymentLinkView>)> {
    let now = kobo.clock.now();
    let payments = read_counters(&kobo.store.read()?, link.id)?[PAYMENTS];
    let mut batch = Batch::new();
    batch.owned_by(link.merchant.as_bytes());
    let command = match msg.action {
        LinkAction::Update(u) => Command::Update(u),
        LinkAction::Deactivate => Command::Deactivate,
        LinkAction::Activate => Command::Activate,
        LinkAction::ExpireTimer { timer_key } => {
            batch.delete(Table::Timers, timer_key.clone());
            let live = link
                .expires_at
                .is_some_and(|e| Timer::key(e, TimerKind::PaymentLinkExpire, link.id) == timer_key);
            if !live {
                let answer = commit_change(kobo, link, link, &[], batch, None).await?;
                return Ok((link.clone(), answer));
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
    let answer = commit_change(kobo, link, &after, &effects, batch, msg.idem.as_ref()).await?;
    Ok((after, answer))
}

fn visit_key(link: Uuid, nonce: &str) -> Vec<u8> {
    KeyBuf::new().bytes(link.as_bytes()).str(nonce).build()
}

/// A visit: the form's earlier payment if this nonce made one, else the
/// link's checks (active now, a free slot, the answers) and a new payment
/// intent holding a slot.
async fn admit(
    kobo: &PaymentLinkDeps,
    link: &PaymentLink,
    input: &VisitInput,
) -> DomainResult<Outcome<PaymentIntentView>> {
    let now = kobo.clock.now();
    let read = kobo.store.read()?;
    if let Some(nonce) = &input.nonce {
        if let Some(raw) = read.get(Table::PaymentLinkVisits, &visit_key(link.id, nonce))? {
            let id = Uuid::from_slice(&raw).map_err(|e| DomainError::internal(e.to_string()))?;
            let found: Option<PaymentIntent> =
                read.get_decoded(Table::PaymentIntents, id.as_bytes())?;
            let intent =
                found.ok_or_else(|| DomainError::internal("a visit's payment is missing"))?;
            let view = with_checkout_url(kobo, intent.view(None), &intent);
            return Ok(Outcome::Existing(view));
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
    let new = (link.mode, link.id, params, key);
    create_for_link(kobo, &kobo.customers, &merchant, new, now).await
}

/// An earlier visit's payment, with its `checkout_url` as when it was made.
fn with_checkout_url(
    kobo: &Env,
    mut view: PaymentIntentView,
    intent: &PaymentIntent,
) -> PaymentIntentView {
    view.checkout_url = Some(format!(
        "{}/c/{}",
        kobo.config.base_url, intent.checkout_code
    ));
    view
}

/// Sends a change to a link's actor.
pub async fn send(
    links: &Registry<PaymentLinkActor>,
    link: &PaymentLink,
    action: LinkAction,
    idem: Option<IdempotencySave>,
) -> DomainResult<Answer<PaymentLinkView>> {
    let msg = LinkMessage {
        merchant: link.merchant,
        mode: link.mode,
        action,
        idem,
    };
    links.send(link.id, msg).await?
}

/// Sends a visitor's answers to a link's actor: the payment intent made
/// (or found, for a page form already submitted).
pub async fn send_visit(
    links: &Registry<PaymentLinkActor>,
    link: &PaymentLink,
    input: VisitInput,
) -> DomainResult<Outcome<PaymentIntentView>> {
    let msg = VisitLink {
        merchant: link.merchant,
        mode: link.mode,
        input: Box::new(input),
    };
    links.send(link.id, msg).await?
}

/// Starts the outbox pump: after every commit that records a link's
/// success (an outbox row, written in the success's batch), the links'
/// actors check `max_payments` and delete the rows they checked. Rows
/// left by a crash or a dead cluster node are checked by the resumption
/// ([`resume_outbox`]: every row at a single process's start, a shard's
/// rows when a cluster node takes it over). A failed check leaves its rows
/// for the next wake (the next success, or the next resumption).
pub fn start(links: &PaymentLinks) {
    let notify = links.deps().writer.watch(Table::PaymentLinkOutbox);
    let links = links.clone();
    let mine = Merchants::owned(&links.deps().env);
    actix::spawn(async move {
        loop {
            notify.notified().await;
            if let Err(e) = drain(&links, &mine).await {
                tracing::warn!(error = %e, "payment link outbox check failed");
            }
        }
    });
}

/// `merchants`' outbox rows: the work checks their links.
pub fn resume_outbox(links: &PaymentLinks, merchants: &Merchants) -> DomainResult<Resumption> {
    let (links, merchants) = (links.clone(), merchants.clone());
    // The rows are read in pages by the work itself; the count is links'.
    let found = outbox_links(&links, &merchants)?;
    Ok(Resumption::new(found, async move {
        if let Err(e) = drain(&links, &merchants).await {
            tracing::warn!(error = %e, "payment link outbox check failed");
        }
    }))
}

/// How many links of `merchants` have outbox rows.
fn outbox_links(links: &PaymentLinks, merchants: &Merchants) -> DomainResult<usize> {
    let mut seen = std::collections::BTreeSet::new();
    links
        .deps()
        .store
        .read()?
        .scan_prefix(Table::PaymentLinkOutbox, &[], None, |k, _| {
            if let Ok(link) = Uuid::from_slice(&k[..16.min(k.len())]) {
                seen.insert(link);
            }
            Ok(true)
        })?;
    let mut n = 0;
    for id in seen {
        if load(links.deps(), id)?.is_some_and(|l| merchants.include(&l.merchant)) {
            n += 1;
        }
    }
    Ok(n)
}

/// Rows one pass takes.
const DRAIN_MAX: usize = 10_000;

/// Checks every outbox row of `merchants`' links, a page at a time. The
/// rows of other merchants (another cluster node's) are passed over, and a
/// link whose check fails keeps its rows; the rest go on.
async fn drain(links: &PaymentLinks, merchants: &Merchants) -> DomainResult<()> {
    let mut from: Option<Vec<u8>> = None;
    loop {
        let (taken, last) = drain_some(links, merchants, from.as_deref()).await?;
        match last {
            Some(mut last) if taken == DRAIN_MAX => {
                last.push(0);
                from = Some(last);
            }
            _ => return Ok(()),
        }
    }
}

/// One page of rows from `from`: how many it read, and the last one's key.
async fn drain_some(
    links: &PaymentLinks,
    merchants: &Merchants,
    from: Option<&[u8]>,
) -> DomainResult<(usize, Option<Vec<u8>>)> {
    let mut rows: Vec<(Uuid, Vec<u8>)> = Vec::new();
    links
        .deps()
        .store
        .read()?
        .scan_prefix(Table::PaymentLinkOutbox, &[], from, |k, _| {
            if let Ok(link) = Uuid::from_slice(&k[..16.min(k.len())]) {
                rows.push((link, k.to_vec()));
            }
            Ok(rows.len() < DRAIN_MAX)
        })?;
    let taken = rows.len();
    let last = rows.last().map(|(_, k)| k.clone());
    let mut by_link: std::collections::BTreeMap<Uuid, Vec<Vec<u8>>> = Default::default();
    for (link, row) in rows {
        by_link.entry(link).or_default().push(row);
    }
    for (id, rows) in by_link {
        let Some(link) = load(links.deps(), id)? else {
            continue;
        };
        if !merchants.include(&link.merchant) {
            continue;
        }
        if let Err(e) = send(links, &link, LinkAction::PaymentsCheck { rows }, None).await {
            tracing::warn!(link = %id, error = %e, "a payment link's outbox check failed; its rows stay");
        }
    }
    Ok((taken, last))
}
