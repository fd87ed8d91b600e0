//! The mandate actor: one per mandate. It takes one command at a time to
//! completion, so a refresh, the periodic check, expiry, cancel and charges
//! never race: a charge after a committed cancel is refused, and a charge
//! accepted before it goes on to its debit.

use actix::prelude::*;
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::Mode;
use crate::mandate::deps::MandateDeps;
use crate::mandate::service::status_prefix;
use crate::mandate::{decide, service, Command, Effect, Mandate, MandateStatus, MandateView};
use crate::merchant::Merchant;
use crate::payment_intent::service::{create_mandate_charge, CreatePaymentIntent};
use crate::payment_intent::PaymentIntentView;
use crate::registry::{run_command, Activation, ObjectActor, VirtualActor};
use crate::timer::{Timer, TimerKind};

pub struct MandateActor {
    activation: Activation<Self>,
    state: Option<Mandate>,
}

#[derive(Debug, Clone)]
pub enum MandateAction {
    /// Ask the provider now.
    Refresh,
    Cancel,
    /// The periodic check timer fired.
    CheckTimer {
        timer_key: Vec<u8>,
    },
    /// The expiry timer fired.
    ExpireTimer {
        timer_key: Vec<u8>,
    },
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Answer<MandateView>>")]
pub struct MandateMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub action: MandateAction,
    pub idem: Option<IdempotencySave>,
}

/// Create a payment intent that debits this mandate (accepted only while
/// it is active): answers the new payment intent.
#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Answer<PaymentIntentView>>")]
pub struct ChargeMandate {
    pub merchant: Box<Merchant>,
    pub mode: Mode,
    pub params: CreatePaymentIntent,
    /// The invoice the charge pays (`charge_mandate`; checked by the
    /// caller: the mandate's customer's, payable, the amount allowed).
    pub invoice: Option<Uuid>,
    pub idem: Option<IdempotencySave>,
    /// A row claimed absent with the payment (a subscription's debit
    /// attempt, `subscription_charges`).
    pub claim: Option<(Table, Vec<u8>)>,
}

impl Actor for MandateActor {
    type Context = Context<Self>;
}

impl VirtualActor for MandateActor {
    type Key = Uuid;
    type Deps = MandateDeps;
    const KIND: &'static str = "mandate";
    fn activate(activation: Activation<Self>) -> Self {
        MandateActor {
            activation,
            state: None,
        }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

impl ObjectActor for MandateActor {
    type Object = Mandate;
    fn object(&mut self) -> &mut Option<Mandate> {
        &mut self.state
    }
    fn activation_mut(&mut self) -> &mut Activation<Self> {
        &mut self.activation
    }
    fn load(kobo: &Self::Deps, id: Uuid) -> DomainResult<Option<Mandate>> {
        service::load(kobo, id)
    }
    fn scope(o: &Mandate) -> (Uuid, Mode) {
        (o.merchant, o.mode)
    }
}

impl Handler<MandateMessage> for MandateActor {
    type Result = AtomicResponse<Self, DomainResult<Answer<MandateView>>>;

    fn handle(&mut self, msg: MandateMessage, _ctx: &mut Context<Self>) -> Self::Result {
        let (merchant, mode) = (msg.merchant, msg.mode);
        run_command(self, merchant, mode, move |kobo, object| async move {
            process(&kobo, &object, msg).await
        })
    }
}

impl Handler<ChargeMandate> for MandateActor {
    type Result = AtomicResponse<Self, DomainResult<Answer<PaymentIntentView>>>;

    fn handle(&mut self, msg: ChargeMandate, _ctx: &mut Context<Self>) -> Self::Result {
        let (merchant, mode) = (msg.merchant.id, msg.mode);
        run_command(self, merchant, mode, move |kobo, m| async move {
            let now = kobo.clock.now();
            decide(&m, &Command::Charge, now)?;
            crate::customer::check_charge_allowed(&kobo, m.merchant, m.mode, m.customer)?;
            // The payment belongs to the mandate's customer.
            let mut params = msg.params;
            params.customer = Some(m.customer);
            params.customer_email = m.customer_email.clone();
            let idem = msg.idem.as_ref();
            let charge = (m.mode, m.id, params, msg.invoice);
            let answer =
                create_mandate_charge(&kobo, &msg.merchant, charge, idem, msg.claim).await?;
            Ok((m, answer))
        })
    }
}

async fn process(
    kobo: &MandateDeps,
    m: &Mandate,
    msg: MandateMessage,
) -> DomainResult<(Mandate, Answer<MandateView>)> {
    let now = kobo.clock.now();
    let mut batch = Batch::new();
    batch.owned_by(m.merchant.as_bytes());
    let provider = kobo.mandate_providers.for_mode(m.mode);
    let pending = m.status == MandateStatus::Pending;
    let command = match msg.action {
        MandateAction::Refresh if pending => Command::Checked {
            answer: provider.check(m.check()).await?,
            periodic: false,
        },
        // Settled: nothing to ask.
        MandateAction::Refresh => {
            return finish(kobo, m, m.clone(), Vec::new(), batch, msg.idem.as_ref()).await
        }
        MandateAction::Cancel => Command::Cancel,
        MandateAction::CheckTimer { timer_key } => {
            let live = m
                .check_due
                .is_some_and(|d| Timer::key(d, TimerKind::MandateCheck, m.id) == timer_key);
            batch.delete(Table::Timers, timer_key);
            if !pending || !live {
                return finish(kobo, m, m.clone(), Vec::new(), batch, None).await;
            }
            Command::Checked {
                answer: provider.check(m.check()).await?,
                periodic: true,
            }
        }
        MandateAction::ExpireTimer { timer_key } => {
            batch.delete(Table::Timers, timer_key);
            if !pending || now < m.expires_at {
                return finish(kobo, m, m.clone(), Vec::new(), batch, None).await;
            }
            Command::ExpiryDue {
                answer: provider.check(m.check()).await?,
            }
        }
    };
    let (after, effects) = decide(m, &command, now)?;
    finish(kobo, m, after, effects, batch, msg.idem.as_ref()).await
}

async fn finish(
    kobo: &Env,
    before: &Mandate,
    after: Mandate,
    effects: Vec<Effect>,
    mut batch: Batch,
    idem: Option<&IdempotencySave>,
) -> DomainResult<(Mandate, Answer<MandateView>)> {
    let now = kobo.clock.now();
    if &after != before {
        batch.put(Table::Mandates, after.id.as_bytes().to_vec(), &after);
    }
    if after.status != before.status {
        let (merchant, mode) = (after.merchant, after.mode);
        batch
            .delete(
                Table::MandateStatusIndex,
                status_prefix(merchant, mode, before.status)
                    .u64(after.seq)
                    .build(),
            )
            .put_raw(
                Table::MandateStatusIndex,
                status_prefix(merchant, mode, after.status)
                    .u64(after.seq)
                    .build(),
                after.id.as_bytes().to_vec(),
            );
    }
    for effect in effects {
        match effect {
            Effect::ScheduleCheck(due) => Timer::new(
                TimerKind::MandateCheck,
                after.id,
                after.merchant,
                after.mode,
            )
            .schedule(&mut batch, due),
            Effect::CancelCheck(due) => {
                batch.delete(
                    Table::Timers,
                    Timer::key(due, TimerKind::MandateCheck, after.id),
                );
            }
            Effect::CancelExpiry(due) => {
                batch.delete(
                    Table::Timers,
                    Timer::key(due, TimerKind::MandateExpire, after.id),
                );
            }
        }
    }
    let answer = Answer::save(Outcome::Updated(after.view()), idem, &mut batch, now);
    if !batch.is_empty() {
        kobo.writer.commit(batch).await.map_err(DomainError::from)?;
    }
    Ok((after, answer))
}
