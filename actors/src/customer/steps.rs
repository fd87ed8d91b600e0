//! The directory's writing steps (run inside the customer directory, the
//! only writer of its scope's customers): the commit of a change (a taken
//! email is 409 `customer_exists`), with its saved answer, and the
//! identity check: the request and its timer.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use kobo_storage::{Batch, CommitError, Table};

use super::deps::CustomerDeps;
use super::identity::{IdentityAnswer, IdentityRequest};
use super::{
    identity_check_interval, identity_check_window, load, CustomerView, Identity, IdentityStatus,
};
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event::{self, Event};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::Mode;
use crate::timer::{Timer, TimerKind};

type Scope = (Uuid, Mode);

/// Commits `batch` (when it holds anything); a taken email row is 409
/// `customer_exists`.
pub(super) async fn commit(k: &CustomerDeps, batch: Batch) -> DomainResult<()> {
    if batch.is_empty() {
        return Ok(());
    }
    match k.writer.commit(batch).await {
        Ok(()) => Ok(()),
        Err(CommitError::Conflict { .. }) => Err(DomainError::state(
            ErrorCode::CustomerExists,
            "another customer of this mode has this email",
        )),
        Err(e) => Err(DomainError::from(e)),
    }
}

/// Saves the response to `outcome` in `batch` ([`Answer::save`]) and
/// commits them together. With nothing to commit, the answer is unsaved
/// (the idempotency layer saves it).
pub(super) async fn commit_answer<V: serde::Serialize>(
    k: &CustomerDeps,
    outcome: Outcome<V>,
    idem: Option<&IdempotencySave>,
    mut batch: Batch,
) -> DomainResult<Answer<V>> {
    if batch.is_empty() {
        return Ok(Answer::unsaved(outcome));
    }
    let answer = Answer::save(outcome, idem, &mut batch, k.clock.now());
    commit(k, batch).await?;
    Ok(answer)
}

fn last4(s: &str) -> String {
    s[s.len().saturating_sub(4)..].to_string()
}

/// `verify_identity` (in the directory): hands the check to the provider
/// and makes the identity `pending` with a check timer. A verified
/// customer is answered unchanged.
pub(super) async fn verify_identity(
    k: &CustomerDeps,
    scope: Scope,
    id: Uuid,
    request: IdentityRequest,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<CustomerView>> {
    let c = load(k, scope.0, scope.1, id)?;
    if c.identity.status == IdentityStatus::Verified {
        return commit_answer(k, Outcome::Updated(c.view()), idem, Batch::new()).await;
    }
    let reference = Uuid::new_v4();
    k.identity
        .for_mode(scope.1)
        .submit(reference, &request)
        .await?;
    let now = k.clock.now();
    let mut batch = Batch::new();
    batch.owned_by(scope.0.as_bytes());
    if let Some(due) = c.identity.check_due {
        batch.delete(Table::Timers, timer_key(due, id));
    }
    let due = now + identity_check_interval();
    let mut after = c.clone();
    after.identity = Identity {
        status: IdentityStatus::Pending,
        bvn_last4: Some(request.bvn.last4()),
        bank_code: Some(request.bank_code.clone()),
        account_number_last4: Some(last4(&request.account_number)),
        failure_reason: None,
        requested_at: Some(now),
        verified_at: None,
        reference: Some(reference),
        check_due: Some(due),
    };
    after.updated_at = Some(now);
    Timer::new(TimerKind::CustomerIdentityCheck, id, scope.0, scope.1).schedule(&mut batch, due);
    c.update_in(&after, &mut batch);
    commit_answer(k, Outcome::Updated(after.view()), idem, batch).await
}

fn timer_key(due: DateTime<Utc>, id: Uuid) -> Vec<u8> {
    Timer::key(due, TimerKind::CustomerIdentityCheck, id)
}

/// The identity check timer (in the directory): asks the provider; a
/// verdict moves the identity and records its event; still pending, the
/// next check is set while the check window lasts.
pub(super) async fn identity_timer(
    k: &CustomerDeps,
    scope: Scope,
    id: Uuid,
    fired: Vec<u8>,
) -> DomainResult<()> {
    let mut batch = Batch::new();
    batch.owned_by(scope.0.as_bytes());
    batch.delete(Table::Timers, fired.clone());
    let c = match load(k, scope.0, scope.1, id) {
        Ok(c) => Some(c),
        Err(e) if e.code == ErrorCode::ResourceMissing => None,
        Err(e) => return Err(e),
    };
    let live = c.as_ref().filter(|c| {
        c.identity.status == IdentityStatus::Pending
            && c.identity.check_due.map(|d| timer_key(d, id)) == Some(fired.clone())
    });
    let (Some(c), Some(reference)) = (live, live.and_then(|c| c.identity.reference)) else {
        return commit(k, batch).await;
    };
    let answer = k.identity.for_mode(scope.1).status(reference).await?;
    let now = k.clock.now();
    let mut after = c.clone();
    after.identity.check_due = None;
    let event = match answer {
        IdentityAnswer::Verified => {
            after.identity.status = IdentityStatus::Verified;
            after.identity.verified_at = Some(now);
            Some(event::CUSTOMER_IDENTITY_VERIFIED)
        }
        IdentityAnswer::Failed(reason) => {
            after.identity.status = IdentityStatus::Failed;
            after.identity.failure_reason = Some(reason);
            Some(event::CUSTOMER_IDENTITY_FAILED)
        }
        IdentityAnswer::Pending => {
            let requested = c.identity.requested_at.unwrap_or(now);
            if now < requested + identity_check_window() {
                let due = now + identity_check_interval();
                after.identity.check_due = Some(due);
                Timer::new(TimerKind::CustomerIdentityCheck, id, scope.0, scope.1)
                    .schedule(&mut batch, due);
            }
            None
        }
    };
    if let Some(t) = event {
        after.updated_at = Some(now);
        Event::record(k, scope, t, after.to_api(), now, &mut batch);
    }
    c.update_in(&after, &mut batch);
    commit(k, batch).await
}
