//! The aftercare state machine: refunds and disputes of one payment.
//! [`decide`] is `(payment, aftercare, command, now) -> decision`: the new
//! aftercare, the refund or dispute it makes or changes, and the effects
//! (rows, event, money, the provider call). Pure: no store, clock, random
//! source or provider; the actor loads what a command names, draws the ids
//! of what it makes, and carries the decision out.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::idempotency::{Kind, Outcome};
use crate::ids::Mode;
use crate::ledger::actor::PaymentMoneyOp;
use crate::ledger::{Bucket, EntryType};
use crate::payment_intent::{PaymentIntent, Status};
use crate::refund::{
    response_window, Aftercare, Dispute, DisputeStatus, DisputeView, Refund, RefundStatus,
    RefundView,
};

/// The ids of a refund or dispute a command makes (drawn by the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewIds {
    pub id: Uuid,
    /// Its place in the lists (the global sequence).
    pub seq: u64,
}

/// A command to a payment's aftercare. A command about an existing refund
/// or dispute carries it, as stored (the actor loads it and checks it is
/// this payment's).
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    CreateRefund {
        new: NewIds,
        amount: Option<i64>,
        reason: Option<String>,
        metadata: Map<String, Value>,
    },
    /// The provider answered about a refund.
    RefundOutcome {
        refund: Refund,
        succeeded: bool,
        reason: Option<String>,
    },
    OpenDispute {
        new: NewIds,
        amount: Option<i64>,
        reason: Option<String>,
    },
    SubmitEvidence {
        dispute: Dispute,
        evidence: Value,
    },
    ResolveDispute {
        dispute: Dispute,
        won: bool,
    },
}

/// The refund or dispute a decision makes or changes.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    Refund(Refund),
    Dispute(Dispute),
}

impl Subject {
    pub fn id(&self) -> Uuid {
        match self {
            Subject::Refund(r) => r.id,
            Subject::Dispute(d) => d.id,
        }
    }

    /// Its merchant and mode.
    pub fn scope(&self) -> (Uuid, Mode) {
        match self {
            Subject::Refund(r) => (r.merchant, r.mode),
            Subject::Dispute(d) => (d.merchant, d.mode),
        }
    }

    pub fn view(&self) -> AftercareView {
        match self {
            Subject::Refund(r) => AftercareView::Refund(r.view()),
            Subject::Dispute(d) => AftercareView::Dispute(d.view()),
        }
    }
}

/// The public view of what an aftercare command made or changed.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum AftercareView {
    Refund(RefundView),
    Dispute(DisputeView),
}

/// The ledger entry of a decision: `op` on the payment's money, with the
/// subject as its source.
#[derive(Debug, Clone, PartialEq)]
pub struct Money {
    pub op: PaymentMoneyOp,
    pub entry_type: EntryType,
    pub description: String,
}

/// What a decision asks the actor to do, in this order.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Save the subject and the payment's aftercare.
    Save,
    /// A new subject: its list rows (a refund's also its row among those
    /// awaiting the provider).
    Index,
    /// The refund's answer came: it leaves those awaiting the provider.
    Answered,
    /// An event with the subject's view.
    Event(&'static str),
    /// Move the payment's money (through the ledger, with the batch).
    Money(Money),
    /// After the commit, ask the provider to send the new refund.
    AskProvider,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The payment's aftercare after the command.
    pub care: Aftercare,
    pub subject: Subject,
    /// Made (`Created`) or changed (`Updated`).
    pub kind: Kind,
    pub effects: Vec<Effect>,
}

impl Decision {
    /// The outcome the command answers.
    pub fn outcome(&self) -> Outcome<AftercareView> {
        Outcome::new(self.kind, self.subject.view())
    }
}

/// The state machine. `payment` is the captured payment, `care` its
/// aftercare so far.
pub fn decide(
    payment: &PaymentIntent,
    care: &Aftercare,
    command: Command,
    now: DateTime<Utc>,
) -> DomainResult<Decision> {
    let care = care.clone();
    match command {
        Command::CreateRefund {
            new,
            amount,
            reason,
            metadata,
        } => create_refund(payment, care, new, amount, reason, metadata, now),
        Command::RefundOutcome {
            refund,
            succeeded,
            reason,
        } => refund_outcome(care, refund, succeeded, reason, now),
        Command::OpenDispute {
            new,
            amount,
            reason,
        } => open_dispute(payment, care, new, amount, reason, now),
        Command::SubmitEvidence { dispute, evidence } => {
            submit_evidence(care, dispute, evidence, now)
        }
        Command::ResolveDispute { dispute, won } => resolve_dispute(care, dispute, won, now),
    }
}

fn create_refund(
    payment: &PaymentIntent,
    mut care: Aftercare,
    new: NewIds,
    amount: Option<i64>,
    reason: Option<String>,
    metadata: Map<String, Value>,
    now: DateTime<Utc>,
) -> DomainResult<Decision> {
    if payment.status != Status::Successful {
        return Err(DomainError::state(
            ErrorCode::PaymentNotRefundable,
            format!(
                "only a successful payment can be refunded; this one is {}",
                payment.status.as_str()
            ),
        ));
    }
    let amount = care.refund_amount(payment.amount, amount)?;
    care.refunded += amount;
    let refund = Refund {
        id: new.id,
        merchant: payment.merchant,
        mode: payment.mode,
        seq: new.seq,
        payment_intent: payment.id,
        brand: payment.brand,
        amount,
        currency: payment.currency,
        status: RefundStatus::Pending,
        reason,
        failure_reason: None,
        metadata,
        created_at: now,
        updated_at: now,
    };
    let money = Money {
        op: PaymentMoneyOp::Debit {
            amount,
            into: Bucket::RefundInFlight,
            allow_negative: false,
        },
        entry_type: EntryType::Refund,
        description: format!("refund of payment {}", payment.id),
    };
    Ok(Decision {
        care,
        subject: Subject::Refund(refund),
        kind: Kind::Created,
        effects: vec![
            Effect::Save,
            Effect::Index,
            Effect::Money(money),
            Effect::AskProvider,
        ],
    })
}

fn refund_outcome(
    mut care: Aftercare,
    mut r: Refund,
    succeeded: bool,
    reason: Option<String>,
    now: DateTime<Utc>,
) -> DomainResult<Decision> {
    if r.status != RefundStatus::Pending {
        // Answered before (a repeated confirmation): nothing moves.
        return Ok(Decision {
            care,
            subject: Subject::Refund(r),
            kind: Kind::Updated,
            effects: vec![Effect::Answered],
        });
    }
    r.updated_at = now;
    let op = if succeeded {
        r.status = RefundStatus::Succeeded;
        PaymentMoneyOp::Leave {
            amount: r.amount,
            from: Bucket::RefundInFlight,
        }
    } else {
        r.status = RefundStatus::Failed;
        r.failure_reason = reason.or(Some("refund_failed".into()));
        care.refunded -= r.amount;
        PaymentMoneyOp::Return {
            amount: r.amount,
            from: Bucket::RefundInFlight,
        }
    };
    let (event, done) = if succeeded {
        ("refund.succeeded", "sent")
    } else {
        ("refund.failed", "returned")
    };
    let money = Money {
        op,
        entry_type: EntryType::Refund,
        description: format!("refund {} {done}", r.id),
    };
    Ok(Decision {
        care,
        subject: Subject::Refund(r),
        kind: Kind::Updated,
        effects: vec![
            Effect::Answered,
            Effect::Save,
            Effect::Event(event),
            Effect::Money(money),
        ],
    })
}

fn open_dispute(
    payment: &PaymentIntent,
    mut care: Aftercare,
    new: NewIds,
    amount: Option<i64>,
    reason: Option<String>,
    now: DateTime<Utc>,
) -> DomainResult<Decision> {
    if payment.status != Status::Successful {
        return Err(DomainError::state(
            ErrorCode::PaymentNotDisputable,
            "only a successful payment can be disputed",
        ));
    }
    let amount = care.dispute_amount(payment.amount, amount)?;
    let d = Dispute {
        id: new.id,
        merchant: payment.merchant,
        mode: payment.mode,
        seq: new.seq,
        payment_intent: payment.id,
        brand: payment.brand,
        amount,
        currency: payment.currency,
        status: DisputeStatus::Open,
        reason: reason.unwrap_or_else(|| "general".into()),
        respond_by: now + response_window(),
        evidence: None,
        evidence_submitted_at: None,
        created_at: now,
        updated_at: now,
    };
    care.open_dispute = Some(d.id);
    let money = Money {
        op: PaymentMoneyOp::Debit {
            amount,
            into: Bucket::DisputeHold,
            allow_negative: true,
        },
        entry_type: EntryType::Dispute,
        description: format!("dispute on payment {}", payment.id),
    };
    Ok(Decision {
        care,
        subject: Subject::Dispute(d),
        kind: Kind::Created,
        effects: vec![
            Effect::Save,
            Effect::Index,
            Effect::Event("dispute.created"),
            Effect::Money(money),
        ],
    })
}

fn dispute_not_open() -> DomainError {
    DomainError::state(ErrorCode::DisputeNotOpen, "this dispute is already decided")
}

fn submit_evidence(
    care: Aftercare,
    mut d: Dispute,
    evidence: Value,
    now: DateTime<Utc>,
) -> DomainResult<Decision> {
    if d.status != DisputeStatus::Open {
        return Err(dispute_not_open());
    }
    if now >= d.respond_by {
        return Err(DomainError::state(
            ErrorCode::DisputeResponseLate,
            format!("evidence was due by {}", d.respond_by),
        ));
    }
    d.evidence = Some(evidence);
    d.evidence_submitted_at = Some(now);
    d.updated_at = now;
    Ok(Decision {
        care,
        subject: Subject::Dispute(d),
        kind: Kind::Updated,
        effects: vec![Effect::Save],
    })
}

fn resolve_dispute(
    mut care: Aftercare,
    mut d: Dispute,
    won: bool,
    now: DateTime<Utc>,
) -> DomainResult<Decision> {
    if d.status != DisputeStatus::Open {
        return Err(dispute_not_open());
    }
    d.status = if won {
        DisputeStatus::Won
    } else {
        DisputeStatus::Lost
    };
    d.updated_at = now;
    care.open_dispute = None;
    let op = if won {
        PaymentMoneyOp::Return {
            amount: d.amount,
            from: Bucket::DisputeHold,
        }
    } else {
        care.lost += d.amount;
        PaymentMoneyOp::Leave {
            amount: d.amount,
            from: Bucket::DisputeHold,
        }
    };
    let (event, done) = if won {
        ("dispute.won", "won")
    } else {
        ("dispute.lost", "lost")
    };
    let money = Money {
        op,
        entry_type: EntryType::Dispute,
        description: format!("dispute {} {done}", d.id),
    };
    Ok(Decision {
        care,
        subject: Subject::Dispute(d),
        kind: Kind::Updated,
        effects: vec![Effect::Save, Effect::Event(event), Effect::Money(money)],
    })
}

#[cfg(test)]
mod tests;
