//! The virtual account actor: one per account. It takes one command at a
//! time to completion (reading the account from the store, whose only
//! writer it is after the create), so checks, deactivation and credits
//! never race, and each credit is recorded once (`credit.rs`).

use std::sync::Arc;

use actix::prelude::*;
use futures_util::future::join_all;
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use super::bank::{AccountCheck, ReceivedTransfer};
use super::credit::record_credit;
use super::deps::VirtualAccountDeps;
use super::service::{load, open_key, status_prefix};
use super::{decide, AccountStatus, Command, Effect, VirtualAccount};
use crate::customer::Customer;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event::Event;
use crate::idempotency::IdempotencySave;
use crate::ids::Mode;
use crate::payment_intent::PaymentIntent;
use crate::registry::{run_once, Activation, Registry, VirtualActor};
use crate::timer::{Timer, TimerKind};

/// The accounts' registry: what `src/` and the timers hold.
pub type VirtualAccounts = Arc<Registry<VirtualAccountActor>>;

pub struct VirtualAccountActor {
    activation: Activation<Self>,
}

/// A transfer the test helper sends (its session id resolved).
#[derive(Debug, Clone)]
pub struct SimulatedTransfer {
    pub amount: i64,
    pub session_id: String,
    pub sender_name: Option<String>,
    pub sender_account_number: Option<String>,
}

#[derive(Debug, Clone)]
pub enum AccountAction {
    /// Ask the bank now (a pending account), and record every transfer on
    /// its statement not yet recorded.
    Refresh,
    Deactivate,
    /// The periodic check timer fired.
    CheckTimer {
        timer_key: Vec<u8>,
    },
    /// The bank notified a transfer (by its session id).
    Notified {
        session_id: String,
    },
    /// Test mode: a transfer arrives at the sandbox bank.
    SimulateTransfer(SimulatedTransfer),
}

#[derive(Debug)]
pub enum AccountReply {
    Account(Box<VirtualAccount>),
    Payment(Box<PaymentIntent>),
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<AccountReply>")]
pub struct AccountMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub action: AccountAction,
    pub idem: Option<IdempotencySave>,
}

impl Actor for VirtualAccountActor {
    type Context = Context<Self>;
}

impl VirtualActor for VirtualAccountActor {
    type Key = Uuid;
    type Deps = VirtualAccountDeps;
    const KIND: &'static str = "virtual_account";
    fn activate(activation: Activation<Self>) -> Self {
        VirtualAccountActor { activation }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

impl Handler<AccountMessage> for VirtualAccountActor {
    type Result = AtomicResponse<Self, DomainResult<AccountReply>>;
    fn handle(&mut self, msg: AccountMessage, _: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let k = self.activation.deps.clone();
        let id = self.activation.key;
        run_once(self, async move {
            let a = match load(&k, id)? {
                Some(a) if a.merchant == msg.merchant && a.mode == msg.mode => a,
                _ => return Err(DomainError::not_found("virtual_account", id)),
            };
            process(&k, a, msg).await
        })
    }
}

fn account(a: VirtualAccount) -> AccountReply {
    AccountReply::Account(Box::new(a))
}

async fn process(
    k: &VirtualAccountDeps,
    a: VirtualAccount,
    msg: AccountMessage,
) -> DomainResult<AccountReply> {
    let now = k.clock.now();
    let pending = a.status == AccountStatus::Pending;
    match msg.action {
        AccountAction::Refresh => {
            let a = match pending {
                true => {
                    let command = Command::Checked {
                        answer: check(k, &a).await?,
                        periodic: false,
                    };
                    let (after, effects) = decide(&a, &command, now)?;
                    finish(k, &a, after, effects, Batch::new(), None).await?
                }
                false => a,
            };
            refind(k, &a).await?;
            Ok(account(a))
        }
        AccountAction::Deactivate => {
            let (after, effects) = decide(&a, &Command::Deactivate, now)?;
            let a = finish(k, &a, after, effects, Batch::new(), msg.idem.as_ref()).await?;
            Ok(account(a))
        }
        AccountAction::CheckTimer { timer_key } => {
            let live = a
                .check_due
                .is_some_and(|d| Timer::key(d, TimerKind::VirtualAccountCheck, a.id) == timer_key);
            let mut batch = Batch::new();
            batch.delete(Table::Timers, timer_key);
            if !pending || !live {
                return Ok(account(
                    finish(k, &a, a.clone(), Vec::new(), batch, None).await?,
                ));
            }
            let command = Command::Checked {
                answer: check(k, &a).await?,
                periodic: true,
            };
            let (after, effects) = decide(&a, &command, now)?;
            Ok(account(finish(k, &a, after, effects, batch, None).await?))
        }
        AccountAction::Notified { session_id } => {
            let t = k
                .banks
                .test
                .find(a.id, &session_id)?
                .ok_or_else(|| DomainError::not_found("transfer", &session_id))?;
            Ok(AccountReply::Payment(Box::new(
                record_credit(k, &a, &t).await?,
            )))
        }
        AccountAction::SimulateTransfer(s) => simulate(k, &a, s).await,
    }
}

/// The test helper's transfer: only an account the bank has opened takes
/// money (a deactivated one still does: the money is recorded, flagged).
async fn simulate(
    k: &VirtualAccountDeps,
    a: &VirtualAccount,
    s: SimulatedTransfer,
) -> DomainResult<AccountReply> {
    if !matches!(a.status, AccountStatus::Active | AccountStatus::Deactivated) {
        return Err(DomainError::state(
            ErrorCode::VirtualAccountUnexpectedState,
            format!(
                "this virtual account is {}; the bank takes no transfers into it",
                a.status.as_str()
            ),
        ));
    }
    let transfer = ReceivedTransfer {
        session_id: s.session_id,
        amount: s.amount,
        sender_name: s.sender_name,
        sender_account_number: s.sender_account_number,
        received_at: k.clock.now(),
    };
    let t = k.banks.test.receive(a.id, transfer).await?;
    Ok(AccountReply::Payment(Box::new(
        record_credit(k, a, &t).await?,
    )))
}

/// Records every transfer on the account's statement not yet recorded.
async fn refind(k: &VirtualAccountDeps, a: &VirtualAccount) -> DomainResult<()> {
    if !matches!(a.status, AccountStatus::Active | AccountStatus::Deactivated) {
        return Ok(());
    }
    for t in k.banks.for_mode(a.mode).statement(a.id).await? {
        record_credit(k, a, &t).await?;
    }
    Ok(())
}

/// Asks the bank whether it opened the account.
async fn check(k: &VirtualAccountDeps, a: &VirtualAccount) -> DomainResult<super::BankAnswer> {
    let c: Option<Customer> = k
        .store
        .read()?
        .get_decoded(Table::Customers, a.customer.as_bytes())?;
    let check = AccountCheck {
        id: a.id,
        customer_email: c.as_ref().and_then(|c| c.email.clone()),
        customer_phone: c.and_then(|c| c.phone),
    };
    k.banks.for_mode(a.mode).check(check).await
}

async fn finish(
    k: &VirtualAccountDeps,
    before: &VirtualAccount,
    after: VirtualAccount,
    effects: Vec<Effect>,
    mut batch: Batch,
    idem: Option<&IdempotencySave>,
) -> DomainResult<VirtualAccount> {
    let now = k.clock.now();
    let (id, m, mode) = (after.id, after.merchant, after.mode);
    if &after != before {
        batch.put(Table::VirtualAccounts, id.as_bytes().to_vec(), &after);
    }
    if after.status != before.status {
        batch
            .delete(
                Table::VirtualAccountStatusIndex,
                status_prefix(m, mode, before.status).u64(after.seq).build(),
            )
            .put_raw(
                Table::VirtualAccountStatusIndex,
                status_prefix(m, mode, after.status).u64(after.seq).build(),
                id.as_bytes().to_vec(),
            );
    }
    for effect in effects {
        match effect {
            Effect::ScheduleCheck(due) => {
                Timer::new(TimerKind::VirtualAccountCheck, id, m, mode).schedule(&mut batch, due)
            }
            Effect::CancelCheck(due) => {
                batch.delete(
                    Table::Timers,
                    Timer::key(due, TimerKind::VirtualAccountCheck, id),
                );
            }
            Effect::Event(t) => Event::record(k, (m, mode), t, after.to_api(), now, &mut batch),
            Effect::Close => {
                batch.delete(
                    Table::CustomerOpenAccounts,
                    open_key(m, mode, after.customer),
                );
            }
        }
    }
    if let Some(idem) = idem {
        idem.add_to(&mut batch, 200, &after.to_api().to_string(), now);
    }
    if !batch.is_empty() {
        k.writer
            .commit(batch)
            .await
            .map_err(|e| DomainError::internal(e.to_string()))?;
    }
    Ok(after)
}

/// At start-up: delivers the sandbox bank's notifications a crash left
/// unrecorded to their accounts' actors (each is recorded once whatever
/// else delivers it).
pub fn start(accounts: &VirtualAccounts) -> DomainResult<usize> {
    let deps = accounts.deps().clone();
    let mut jobs = Vec::new();
    for (id, session_id) in deps.banks.test.inbox()? {
        if let Some(a) = load(&deps, id)? {
            jobs.push((a, session_id));
        }
    }
    let n = jobs.len();
    let accounts = accounts.clone();
    actix::spawn(async move {
        for chunk in jobs.chunks(64) {
            join_all(chunk.iter().map(|(a, session_id)| {
                let msg = AccountMessage {
                    merchant: a.merchant,
                    mode: a.mode,
                    action: AccountAction::Notified {
                        session_id: session_id.clone(),
                    },
                    idem: None,
                };
                let accounts = accounts.clone();
                async move {
                    if let Err(e) = accounts.send(a.id, msg).await.and_then(|r| r) {
                        tracing::warn!(error = %e, account = %a.id, "a transfer notification failed; refresh re-finds it");
                    }
                }
            }))
            .await;
        }
    });
    Ok(n)
}
