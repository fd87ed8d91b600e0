//! Plan reads and writes that need no actor: create (nothing can name a
//! plan before it exists), one plan, the list, and the commit of a change
//! the plan's actor decided.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use super::{check_schedule, Interval, Plan, PlanView};
use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::event::{self, Event};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::{new_id, scope_key, Mode};
use crate::money::Currency;
use crate::paging::{Page, Walk};

/// A new plan's inputs (fields checked by the HTTP layer; the schedule
/// here).
#[derive(Debug, Clone)]
pub struct NewPlan {
    pub name: String,
    pub amount: i64,
    pub currency: Currency,
    pub interval: Interval,
    pub interval_count: u32,
    pub trial_days: u32,
    pub invoice_limit: Option<u32>,
    pub metadata: Map<String, Value>,
}

pub fn list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

pub fn load_any(kobo: &Env, id: Uuid) -> DomainResult<Option<Plan>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::Plans, id.as_bytes())?)
}

/// The merchant's plan in this mode, else 404.
pub fn load(kobo: &Env, merchant: Uuid, mode: Mode, id: Uuid) -> DomainResult<Plan> {
    match load_any(kobo, id)? {
        Some(p) if p.merchant == merchant && p.mode == mode => Ok(p),
        _ => Err(DomainError::not_found("plan", id)),
    }
}

/// Creates a plan: the plan, its list row, `plan.created` and the saved
/// response in one batch.
pub async fn create(
    kobo: &Env,
    (merchant, mode): (Uuid, Mode),
    new: NewPlan,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<PlanView>> {
    check_schedule(new.interval, new.interval_count)?;
    let now = kobo.clock.now();
    let plan = Plan {
        id: new_id(now),
        merchant,
        mode,
        seq: kobo.seq.next(),
        name: new.name,
        amount: new.amount,
        currency: new.currency,
        interval: new.interval,
        interval_count: new.interval_count,
        trial_days: new.trial_days,
        invoice_limit: new.invoice_limit,
        active: true,
        metadata: new.metadata,
        created_at: now,
        updated_at: now,
        archived_at: None,
    };
    let mut batch = Batch::new();
    batch.owned_by(merchant.as_bytes());
    batch
        .put(Table::Plans, plan.id.as_bytes().to_vec(), &plan)
        .put_raw(
            Table::PlanIndex,
            list_key(merchant, mode, plan.seq),
            plan.id.as_bytes().to_vec(),
        )
        .note_seq(plan.seq);
    Event::record(
        kobo,
        (merchant, mode),
        event::PLAN_CREATED,
        plan.to_api(),
        now,
        &mut batch,
    );
    let answer = Answer::save(Outcome::Created(plan.view()), idem, &mut batch, now);
    kobo.writer.commit(batch).await.map_err(DomainError::from)?;
    Ok(answer)
}

/// Commits the plan's change (`event` when it changed) with the saved
/// response.
pub async fn commit_change(
    kobo: &Env,
    before: &Plan,
    after: &Plan,
    event_type: &str,
    idem: Option<&IdempotencySave>,
    now: DateTime<Utc>,
) -> DomainResult<Answer<PlanView>> {
    let mut batch = Batch::new();
    batch.owned_by(after.merchant.as_bytes());
    if after != before {
        batch.put(Table::Plans, after.id.as_bytes().to_vec(), after);
        let scope = (after.merchant, after.mode);
        Event::record(kobo, scope, event_type, after.to_api(), now, &mut batch);
    }
    let answer = Answer::save(Outcome::Updated(after.view()), idem, &mut batch, now);
    if !batch.is_empty() {
        kobo.writer.commit(batch).await.map_err(DomainError::from)?;
    }
    Ok(answer)
}

pub struct PlanFilter {
    pub limit: usize,
    pub starting_after: Option<Uuid>,
    pub active: Option<bool>,
}

/// Newest first, with a cursor (a plan of this merchant and mode, else 400
/// on `starting_after`).
pub fn list(kobo: &Env, merchant: Uuid, mode: Mode, f: &PlanFilter) -> DomainResult<Page> {
    let before = match f.starting_after {
        Some(id) => match load_any(kobo, id)? {
            Some(p) if p.merchant == merchant && p.mode == mode => Some(p.seq),
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("no such plan: {id}"),
                ))
            }
        },
        None => None,
    };
    let prefix = scope_key(merchant, mode).build();
    let walk = Walk {
        objects: Table::Plans,
        index: Table::PlanIndex,
        prefix: &prefix,
        before_seq: before,
        limit: f.limit,
    };
    walk.page(
        kobo,
        |p: &Plan| f.active.is_none_or(|a| p.active == a),
        |p: &Plan| p.to_api(),
    )
}
