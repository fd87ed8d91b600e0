//! The aftercare actor: one per captured payment, serializing its refunds
//! and disputes.

use std::sync::Arc;

use actix::prelude::*;
use serde_json::{Map, Value};
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event::Event;
use crate::idempotency::IdempotencySave;
use crate::ids::{new_id, Mode};
use crate::ledger::actor::Ledgers;
use crate::ledger::actor::{PaymentMoney, PaymentMoneyOp};
use crate::ledger::{Bucket, EntryType};
use crate::payment_intent::{PaymentIntent, Status};
use crate::refund::provider::{sandbox_answer, RefundAnswer, SANDBOX_CONFIRMATION_DELAY};
use crate::refund::service::{self, dispute_list_key, refund_by_payment_key, refund_list_key};
use crate::refund::{response_window, Aftercare, Dispute, DisputeStatus, Refund, RefundStatus};
use crate::registry::{run_once, Activation, Registry, VirtualActor};

/// What the aftercare actor reaches: the merchant's ledger.
pub struct AftercareDeps {
    pub env: Arc<Env>,
    pub ledgers: Ledgers,
    /// This kind's registry: a provider's later answer is delivered to it.
    pub aftercare: std::sync::Weak<Registry<AftercareActor>>,
}

impl std::ops::Deref for AftercareDeps {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}

pub struct AftercareActor {
    activation: Activation<Self>,
}

#[derive(Debug, Clone)]
pub enum AftercareAction {
    CreateRefund {
        amount: Option<i64>,
        reason: Option<String>,
        metadata: Map<String, Value>,
    },
    /// The provider answered about a refund.
    RefundOutcome {
        refund: Uuid,
        succeeded: bool,
        reason: Option<String>,
    },
    OpenDispute {
        amount: Option<i64>,
        reason: Option<String>,
    },
    SubmitEvidence {
        dispute: Uuid,
        evidence: Value,
    },
    ResolveDispute {
        dispute: Uuid,
        won: bool,
    },
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Value>")]
pub struct AftercareMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub action: AftercareAction,
    pub idem: Option<IdempotencySave>,
}

impl Actor for AftercareActor {
    type Context = Context<Self>;
}

impl VirtualActor for AftercareActor {
    type Key = Uuid;
    type Deps = AftercareDeps;
    const KIND: &'static str = "payment_aftercare";
    fn activate(activation: Activation<Self>) -> Self {
        AftercareActor { activation }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

impl Handler<AftercareMessage> for AftercareActor {
    type Result = AtomicResponse<Self, DomainResult<Value>>;

    fn handle(&mut self, msg: AftercareMessage, _ctx: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let kobo = self.activation.deps.clone();
        let payment = self.activation.key;
        // State is read from the store each time: this actor is its only
        // writer and waits for each commit, so the store is always current.
        run_once(self, process(kobo, payment, msg))
    }
}

// Long: one match over aftercare actions (refunds, disputes), an arm each; the batch,
// saved response and ledger call after it are shared.
async fn process(
    kobo: Arc<AftercareDeps>,
    payment: Uuid,
    msg: AftercareMessage,
) -> DomainResult<Value> {
    let read = kobo.store.read()?;
    let intent: PaymentIntent =
        match read.get_decoded::<PaymentIntent>(Table::PaymentIntents, payment.as_bytes())? {
            Some(i) if i.merchant == msg.merchant && i.mode == msg.mode => i,
            _ => {
                return Err(
                    DomainError::not_found("payment_intent", payment).with_param("payment_intent")
                )
            }
        };
    let mut care: Aftercare = read
        .get_decoded(Table::PaymentAftercare, payment.as_bytes())?
        .unwrap_or_default();
    drop(read);
    let now = kobo.clock.now();
    let mut batch = Batch::new();
    let money = |op: PaymentMoneyOp,
                 entry_type: EntryType,
                 source: Uuid,
                 description: String,
                 with: Batch| PaymentMoney {
        payment,
        brand: intent.brand,
        currency: intent.currency,
        entry_type,
        source,
        description,
        op,
        with,
    };
    let (view, status, op) = match msg.action {
        AftercareAction::CreateRefund {
            amount,
            reason,
            metadata,
        } => {
            if intent.status != Status::Successful {
                return Err(DomainError::state(
                    ErrorCode::PaymentNotRefundable,
                    format!(
                        "only a successful payment can be refunded; this one is {}",
                        intent.status.as_str()
                    ),
                ));
            }
            let amount = care.refund_amount(intent.amount, amount)?;
            care.refunded += amount;
            let refund = Refund {
                id: new_id(now),
                merchant: intent.merchant,
                mode: intent.mode,
                seq: kobo.seq.next(),
                payment_intent: payment,
                brand: intent.brand,
                amount,
                currency: intent.currency,
                status: RefundStatus::Pending,
                reason,
                failure_reason: None,
                metadata,
                created_at: now,
                updated_at: now,
            };
            batch
                .put(Table::Refunds, refund.id.as_bytes().to_vec(), &refund)
                .put_raw(
                    Table::RefundIndex,
                    refund_list_key(refund.merchant, refund.mode, refund.seq),
                    refund.id.as_bytes().to_vec(),
                )
                .put_raw(
                    Table::RefundByPayment,
                    refund_by_payment_key(refund.merchant, refund.mode, payment, refund.seq),
                    refund.id.as_bytes().to_vec(),
                )
                .put_raw(
                    Table::RefundsAwaiting,
                    refund.id.as_bytes().to_vec(),
                    Vec::new(),
                )
                .note_seq(refund.seq);
            let op = PaymentMoneyOp::Debit {
                amount,
                into: Bucket::RefundInFlight,
                allow_negative: false,
            };
            (
                refund.to_api(),
                201,
                Some((
                    op,
                    EntryType::Refund,
                    refund.id,
                    format!("refund of payment {payment}"),
                )),
            )
        }
        AftercareAction::RefundOutcome {
            refund,
            succeeded,
            reason,
        } => {
            let mut r: Refund = service::load_refund(&kobo, refund)?
                .ok_or_else(|| DomainError::not_found("refund", refund))?;
            batch.delete(Table::RefundsAwaiting, refund.as_bytes().to_vec());
            if r.status != RefundStatus::Pending {
                // Answered before (a repeated confirmation): nothing moves.
                return commit_plain(&kobo, batch, r.to_api()).await;
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
            batch.put(Table::Refunds, r.id.as_bytes().to_vec(), &r);
            let t = if succeeded {
                "refund.succeeded"
            } else {
                "refund.failed"
            };
            Event::record(&kobo, (r.merchant, r.mode), t, r.to_api(), now, &mut batch);
            (
                r.to_api(),
                200,
                Some((
                    op,
                    EntryType::Refund,
                    r.id,
                    format!(
                        "refund {} {}",
                        r.id,
                        if succeeded { "sent" } else { "returned" }
                    ),
                )),
            )
        }
        AftercareAction::OpenDispute { amount, reason } => {
            if intent.status != Status::Successful {
                return Err(DomainError::state(
                    ErrorCode::PaymentNotDisputable,
                    "only a successful payment can be disputed",
                ));
            }
            let amount = care.dispute_amount(intent.amount, amount)?;
            let d = Dispute {
                id: new_id(now),
                merchant: intent.merchant,
                mode: intent.mode,
                seq: kobo.seq.next(),
                payment_intent: payment,
                brand: intent.brand,
                amount,
                currency: intent.currency,
                status: DisputeStatus::Open,
                reason: reason.unwrap_or_else(|| "general".into()),
                respond_by: now + response_window(),
                evidence: None,
                evidence_submitted_at: None,
                created_at: now,
                updated_at: now,
            };
            care.open_dispute = Some(d.id);
            batch
                .put(Table::Disputes, d.id.as_bytes().to_vec(), &d)
                .put_raw(
                    Table::DisputeIndex,
                    dispute_list_key(d.merchant, d.mode, d.seq),
                    d.id.as_bytes().to_vec(),
                )
                .note_seq(d.seq);
            Event::record(
                &kobo,
                (d.merchant, d.mode),
                "dispute.created",
                d.to_api(),
                now,
                &mut batch,
            );
            let op = PaymentMoneyOp::Debit {
                amount,
                into: Bucket::DisputeHold,
                allow_negative: true,
            };
            (
                d.to_api(),
                // A test helper: every test helper answers 200 (CONTRACT 3a).
                200,
                Some((
                    op,
                    EntryType::Dispute,
                    d.id,
                    format!("dispute on payment {payment}"),
                )),
            )
        }
        AftercareAction::SubmitEvidence { dispute, evidence } => {
            let mut d = own_dispute(&kobo, dispute, &intent)?;
            if d.status != DisputeStatus::Open {
                return Err(DomainError::state(
                    ErrorCode::DisputeNotOpen,
                    "this dispute is already decided",
                ));
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
            batch.put(Table::Disputes, d.id.as_bytes().to_vec(), &d);
            (d.to_api(), 200, None)
        }
        AftercareAction::ResolveDispute { dispute, won } => {
            let mut d = own_dispute(&kobo, dispute, &intent)?;
            if d.status != DisputeStatus::Open {
                return Err(DomainError::state(
                    ErrorCode::DisputeNotOpen,
                    "this dispute is already decided",
                ));
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
            batch.put(Table::Disputes, d.id.as_bytes().to_vec(), &d);
            let t = if won { "dispute.won" } else { "dispute.lost" };
            Event::record(&kobo, (d.merchant, d.mode), t, d.to_api(), now, &mut batch);
            (
                d.to_api(),
                200,
                Some((
                    op,
                    EntryType::Dispute,
                    d.id,
                    format!("dispute {} {}", d.id, if won { "won" } else { "lost" }),
                )),
            )
        }
    };
    batch.put(Table::PaymentAftercare, payment.as_bytes().to_vec(), &care);
    if let Some(idem) = &msg.idem {
        idem.add_to(&mut batch, status, &view.to_string(), now);
    }
    match op {
        Some((op, entry_type, source, description)) => {
            kobo.ledgers
                .send(
                    (intent.merchant, intent.mode),
                    money(op, entry_type, source, description, batch),
                )
                .await??;
        }
        None => {
            kobo.writer
                .commit(batch)
                .await
                .map_err(|e| DomainError::internal(e.to_string()))?;
        }
    }
    if status == 201 && view["object"] == "refund" {
        let id = view["id"]
            .as_str()
            .and_then(|s| Uuid::try_parse(s).ok())
            .expect("refund id");
        ask_provider(
            &kobo,
            intent.merchant,
            intent.mode,
            payment,
            id,
            view["amount"].as_i64().unwrap_or(0),
        );
    }
    Ok(view)
}

async fn commit_plain(kobo: &Env, batch: Batch, view: Value) -> DomainResult<Value> {
    kobo.writer
        .commit(batch)
        .await
        .map_err(|e| DomainError::internal(e.to_string()))?;
    Ok(view)
}

fn own_dispute(kobo: &Env, id: Uuid, intent: &PaymentIntent) -> DomainResult<Dispute> {
    match service::load_dispute(kobo, id)? {
        Some(d) if d.payment_intent == intent.id => Ok(d),
        _ => Err(DomainError::not_found("dispute", id)),
    }
}

/// Asks the provider to send a refund; its confirmation arrives later, as
/// a message to the payment's aftercare actor. Test mode: the sandbox.
pub fn ask_provider(
    kobo: &AftercareDeps,
    merchant: Uuid,
    mode: Mode,
    payment: Uuid,
    refund: Uuid,
    amount: i64,
) {
    if mode == Mode::Live {
        // No live refund provider is configured: the refund stays pending
        // until one confirms it.
        return;
    }
    let answer = sandbox_answer(amount);
    if answer == RefundAnswer::StaysPending {
        return;
    }
    let aftercare = kobo.aftercare.clone();
    actix::spawn(async move {
        tokio::time::sleep(SANDBOX_CONFIRMATION_DELAY).await;
        let Some(aftercare) = aftercare.upgrade() else {
            return;
        };
        let (succeeded, reason) = match answer {
            RefundAnswer::Succeeded => (true, None),
            RefundAnswer::Failed(r) => (false, Some(r)),
            RefundAnswer::StaysPending => return,
        };
        let msg = AftercareMessage {
            merchant,
            mode,
            action: AftercareAction::RefundOutcome {
                refund,
                succeeded,
                reason,
            },
            idem: None,
        };
        if let Err(e) = aftercare.send(payment, msg).await.and_then(|r| r) {
            tracing::warn!(%refund, error = %e, "refund confirmation not applied; it is retried at the next start");
        }
    });
}
