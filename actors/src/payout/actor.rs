//! The payout actor: one per payout. It takes one command at a time to
//! completion, so an approval, a cancel and the bank's answers never race.
//! Before sending, it asks the rail whether the payout's reference is
//! already there (a send that happened before a crash is never repeated).

use std::sync::Arc;

use actix::prelude::*;
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::audit::{Audit, AuditAction, Record};
use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::event::Event;
use crate::idempotency::{render, Answer, IdempotencySave, Outcome};
use crate::ids::Mode;
use crate::ledger::actor::Ledgers;
use crate::ledger::actor::PostEntry;
use crate::payout::rail::Rails;
use crate::payout::rail::{RailStatus, SendOutcome, Transfer};
use crate::payout::{decide, service, Command, Effect, Payout, PayoutStatus, PayoutView};
use crate::registry::{run_command, Activation, ObjectActor, VirtualActor};
use crate::timer::{Timer, TimerKind};

/// What a payout's actor reaches: the merchant's ledger and the payout rails.
pub struct PayoutDeps {
    pub env: Arc<Env>,
    pub ledgers: Ledgers,
    pub rails: Arc<Rails>,
}

impl std::ops::Deref for PayoutDeps {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}

pub struct PayoutActor {
    activation: Activation<Self>,
    state: Option<Payout>,
}

#[derive(Debug, Clone)]
pub enum PayoutAction {
    /// The operator's approval (its audit entry commits with it).
    Approve(Audit),
    /// The operator's rejection (its audit entry commits with it).
    Reject(Audit),
    Cancel,
    /// The send timer fired.
    Dispatch {
        timer_key: Vec<u8>,
    },
    /// The status-query timer fired.
    QueryStatus {
        timer_key: Vec<u8>,
    },
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Answer<PayoutView>>")]
pub struct PayoutMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub action: PayoutAction,
    pub idem: Option<IdempotencySave>,
}

impl Actor for PayoutActor {
    type Context = Context<Self>;
}

impl VirtualActor for PayoutActor {
    type Key = Uuid;
    type Deps = PayoutDeps;
    const KIND: &'static str = "payout";
    fn activate(activation: Activation<Self>) -> Self {
        PayoutActor {
            activation,
            state: None,
        }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

impl ObjectActor for PayoutActor {
    type Object = Payout;
    fn object(&mut self) -> &mut Option<Payout> {
        &mut self.state
    }
    fn activation_mut(&mut self) -> &mut Activation<Self> {
        &mut self.activation
    }
    fn load(kobo: &Self::Deps, id: Uuid) -> DomainResult<Option<Payout>> {
        service::load(kobo, id)
    }
    fn scope(o: &Payout) -> (Uuid, Mode) {
        (o.merchant, o.mode)
    }
}

impl Handler<PayoutMessage> for PayoutActor {
    type Result = AtomicResponse<Self, DomainResult<Answer<PayoutView>>>;

    fn handle(&mut self, msg: PayoutMessage, _ctx: &mut Context<Self>) -> Self::Result {
        let (merchant, mode) = (msg.merchant, msg.mode);
        run_command(self, merchant, mode, move |kobo, object| async move {
            process(&kobo, &object, msg).await
        })
    }
}

async fn process(
    kobo: &PayoutDeps,
    p: &Payout,
    msg: PayoutMessage,
) -> DomainResult<(Payout, Answer<PayoutView>)> {
    let now = kobo.clock.now();
    let mut batch = Batch::new();
    batch.owned_by(p.merchant.as_bytes());
    let rail = kobo.rails.for_mode(p.mode);
    let mut audit = None;
    let command = match msg.action {
        PayoutAction::Approve(who) => {
            audit = Some((who, AuditAction::PayoutApproved));
            Command::Approve
        }
        PayoutAction::Reject(who) => {
            audit = Some((who, AuditAction::PayoutRejected));
            Command::Reject
        }
        PayoutAction::Cancel => Command::Cancel,
        PayoutAction::Dispatch { timer_key } => {
            batch.delete(Table::Timers, timer_key);
            if p.status != PayoutStatus::Queued {
                return finish(kobo, p, p.clone(), Vec::new(), batch, None, now).await;
            }
            if rail.status(p.id).await?.is_some() {
                // Sent before a crash: never send twice.
                Command::Sent
            } else {
                let account = crate::banks::load(kobo, p.merchant, p.mode, p.bank_account)?
                    .ok_or_else(|| DomainError::internal("payout to an unknown bank account"))?;
                let transfer = Transfer {
                    reference: p.id,
                    bank_code: account.bank_code,
                    account_number: account.account_number,
                    amount: p.amount,
                };
                match rail.send(&transfer, now).await? {
                    SendOutcome::Accepted | SendOutcome::AlreadySent => Command::Sent,
                    SendOutcome::Rejected(code) => Command::RailRejected(code),
                }
            }
        }
        PayoutAction::QueryStatus { timer_key } => {
            batch.delete(Table::Timers, timer_key);
            if p.status != PayoutStatus::Processing {
                return finish(kobo, p, p.clone(), Vec::new(), batch, None, now).await;
            }
            match rail.status(p.id).await? {
                Some(RailStatus::Paid) => Command::StatusPaid,
                Some(RailStatus::Failed(code)) => Command::StatusFailed(code),
                Some(RailStatus::Processing) | None => Command::StatusProcessing,
            }
        }
    };
    let (after, effects) = decide(p, &command, now)?;
    if let Some((who, action)) = audit {
        who.add_to(
            kobo,
            &mut batch,
            Record::new(action, "payout", p.id)
                .merchant(p.merchant)
                .before(p.to_api())
                .after(after.to_api()),
        );
    }
    finish(kobo, p, after, effects, batch, msg.idem.as_ref(), now).await
}

/// Saves the decision: the payout, its events and timers, the saved
/// response, in one batch; through the ledger when money moves.
async fn finish(
    kobo: &PayoutDeps,
    before: &Payout,
    after: Payout,
    effects: Vec<Effect>,
    mut batch: Batch,
    idem: Option<&IdempotencySave>,
    now: chrono::DateTime<chrono::Utc>,
) -> DomainResult<(Payout, Answer<PayoutView>)> {
    let view = after.view();
    let body = render(&view);
    if &after != before {
        batch.put(Table::Payouts, after.id.as_bytes().to_vec(), &after);
    }
    let mut money = None;
    for effect in effects {
        match effect {
            Effect::Event(t) => Event::record(
                kobo,
                (after.merchant, after.mode),
                t,
                body.clone(),
                now,
                &mut batch,
            ),
            Effect::ScheduleSend(due) => {
                Timer::new(TimerKind::PayoutSend, after.id, after.merchant, after.mode)
                    .schedule(&mut batch, due)
            }
            Effect::ScheduleStatusQuery(due) => Timer::new(
                TimerKind::PayoutStatus,
                after.id,
                after.merchant,
                after.mode,
            )
            .schedule(&mut batch, due),
            Effect::ReturnMoney | Effect::PayOut => {
                money = Some(super::entries::money_of(&after, &effect))
            }
        }
    }
    let answer = Answer::save_rendered(Outcome::Updated(view), &body, idem, &mut batch, now);
    match money {
        Some((entry, usage)) => {
            kobo.ledgers
                .send(
                    (after.merchant, after.mode),
                    PostEntry {
                        entry,
                        with: crate::registry::Once::new(batch),
                        usage,
                    },
                )
                .await??;
        }
        None if !batch.is_empty() => kobo.writer.commit(batch).await.map_err(DomainError::from)?,
        None => {}
    }
    Ok((after, answer))
}
