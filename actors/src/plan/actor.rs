//! The plan actor: one per plan, so an update and an archive of one plan
//! never race (each reads the plan its predecessor committed).

use std::sync::Arc;

use actix::prelude::*;
use uuid::Uuid;

use super::service::{commit_change, load_any};
use super::{apply_patch, Plan, PlanPatch, PlanView};
use crate::env::Env;
use crate::error::DomainResult;
use crate::event;
use crate::idempotency::{Answer, IdempotencySave};
use crate::ids::Mode;
use crate::registry::{run_command, Activation, ObjectActor, Registry, VirtualActor};

pub type Plans = Arc<Registry<PlanActor>>;

pub struct PlanActor {
    activation: Activation<Self>,
    state: Option<Plan>,
}

#[derive(Debug, Clone)]
pub enum PlanAction {
    Update(PlanPatch),
    /// No new subscriptions; archiving twice changes nothing.
    Archive,
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Answer<PlanView>>")]
pub struct PlanMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub action: PlanAction,
    pub idem: Option<IdempotencySave>,
}

impl Actor for PlanActor {
    type Context = Context<Self>;
}

impl VirtualActor for PlanActor {
    type Key = Uuid;
    type Deps = Env;
    const KIND: &'static str = "plan";
    fn activate(activation: Activation<Self>) -> Self {
        PlanActor {
            activation,
            state: None,
        }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

impl ObjectActor for PlanActor {
    type Object = Plan;
    fn object(&mut self) -> &mut Option<Plan> {
        &mut self.state
    }
    fn activation_mut(&mut self) -> &mut Activation<Self> {
        &mut self.activation
    }
    fn load(kobo: &Env, id: Uuid) -> DomainResult<Option<Plan>> {
        load_any(kobo, id)
    }
    fn scope(o: &Plan) -> (Uuid, Mode) {
        (o.merchant, o.mode)
    }
}

impl Handler<PlanMessage> for PlanActor {
    type Result = AtomicResponse<Self, DomainResult<Answer<PlanView>>>;

    fn handle(&mut self, msg: PlanMessage, _: &mut Context<Self>) -> Self::Result {
        let (merchant, mode) = (msg.merchant, msg.mode);
        run_command(self, merchant, mode, move |kobo, before| async move {
            let now = kobo.clock.now();
            let (after, event_type) = match &msg.action {
                PlanAction::Update(patch) => {
                    (apply_patch(&before, patch, now), event::PLAN_UPDATED)
                }
                PlanAction::Archive => {
                    let mut after = before.clone();
                    if after.active {
                        after.active = false;
                        after.archived_at = Some(now);
                        after.updated_at = now;
                    }
                    (after, event::PLAN_ARCHIVED)
                }
            };
            let idem = msg.idem.as_ref();
            let answer = commit_change(&kobo, &before, &after, event_type, idem, now).await?;
            Ok((after, answer))
        })
    }
}
