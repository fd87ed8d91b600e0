//! The virtual account actor: one per account, the only writer of its
//! account after the create. It keeps the account and takes one command
//! at a time to completion ([`run_command`]), so checks, deactivation and
//! credits never race, and each credit is recorded once (`credit.rs`).

use std::sync::Arc;

use actix::prelude::*;
use futures_util::future::join_all;
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use super::bank::{AccountCheck, ReceivedTransfer};
use super::credit::record_credit;
use super::deps::VirtualAccountDeps;
use super::service::{load, open_key, status_prefix};
use super::{decide, AccountStatus, Command, Effect, VirtualAccount, VirtualAccountView};
use crate::customer::Customer;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event::Event;
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::Mode;
use crate::payment_intent::PaymentIntentView;
use crate::registry::{run_command, Activation, ObjectActor, Registry, VirtualActor};
use crate::resumption::{Merchants, Resumption};
use crate::timer::{Timer, TimerKind};

/// The accounts' registry: what `src/` and the timers hold.
pub type VirtualAccounts = Arc<Registry<VirtualAccountActor>>;

pub struct VirtualAccountActor {
    activation: Activation<Self>,
    state: Option<VirtualAccount>,
}

/// A transfer the test helper sends (its session id resolved).
#[derive(Debug, Clone)]
pub struct SimulatedTransfer {
    pub amount: i64,
    pub session_id: String,
    pub sender_name: Option<String>,
    pub sender_account_number: Option<String>,
}

/// A command that answers the account.
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
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Answer<VirtualAccountView>>")]
pub struct AccountMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub action: AccountAction,
    pub idem: Option<IdempotencySave>,
}

/// A transfer into the account: it answers the payment intent the
/// transfer made (`Created`), or made before (`Existing`).
#[derive(Debug, Clone)]
pub enum Credit {
    /// The bank notified a transfer (by its session id).
    Notified { session_id: String },
    /// Test mode: a transfer arrives at the sandbox bank.
    Simulated(SimulatedTransfer),
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Answer<PaymentIntentView>>")]
pub struct CreditMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub credit: Credit,
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
        VirtualAccountActor {
            activation,
            state: None,
        }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

impl ObjectActor for VirtualAccountActor {
    type Object = VirtualAccount;
    fn object(&mut self) -> &mut Option<VirtualAccount> {
        &mut self.state
    }
    fn activation_mut(&mut self) -> &mut Activation<Self> {
        &mut self.activation
    }
    fn load(k: &Self::Deps, id: Uuid) -> DomainResult<Option<VirtualAccount>> {
        load(k, id)
    }
    fn scope(a: &VirtualAccount) -> (Uuid, Mode) {
        (a.merchant, a.mode)
    }
}

impl Handler<AccountMessage> for VirtualAccountActor {
    type Result = AtomicResponse<Self, DomainResult<Answer<VirtualAccountView>>>;
    fn handle(&mut self, msg: AccountMessage, _: &mut Context<Self>) -> Self::Result {
        let (merchant, mode) = (msg.merchant, msg.mode);
        run_command(self, merchant, mode, move |k, a| async move {
            process(&k, a, msg).await
        })
    }
}

impl Handler<CreditMessage> for VirtualAccountActor {
    type Result = AtomicResponse<Self, DomainResult<Answer<PaymentIntentView>>>;
    fn handle(&mut self, msg: CreditMessage, _: &mut Context<Self>) -> Self::Result {
        let (merchant, mode) = (msg.merchant, msg.mode);
        run_command(self, merchant, mode, move |k, a| async move {
            let idem = msg.idem.as_ref();
            let answer = match msg.credit {
                Credit::Notified { session_id } => {
                    let t = k
                        .banks
                        .test
                        .find(a.id, &session_id)?
                        .ok_or_else(|| DomainError::not_found("transfer", &session_id))?;
                    record_credit(&k, &a, &t, idem).await?
                }
                Credit::Simulated(s) => simulate(&k, &a, s, idem).await?,
            };
            Ok((a, answer))
        })
    }
}

async fn process(
    k: &VirtualAccountDeps,
    a: VirtualAccount,
    msg: AccountMessage,
) -> DomainResult<(VirtualAccount, Answer<VirtualAccountView>)> {
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
                    finish(k, &a, after, effects, Batch::new(), None).await?.0
                }
                false => a,
            };
            // Its effects are several commits (the check, each credit
            // found): the idempotency layer saves the answer after them.
            refind(k, &a).await?;
            let answer = Answer::unsaved(Outcome::Updated(a.view()));
            Ok((a, answer))
        }
        AccountAction::Deactivate => {
            let (after, effects) = decide(&a, &Command::Deactivate, now)?;
            finish(k, &a, after, effects, Batch::new(), msg.idem.as_ref()).await
        }
        AccountAction::CheckTimer { timer_key } => {
            let live = a
                .check_due
                .is_some_and(|d| Timer::key(d, TimerKind::VirtualAccountCheck, a.id) == timer_key);
            let mut batch = Batch::new();
            batch.delete(Table::Timers, timer_key);
            if !pending || !live {
                return finish(k, &a, a.clone(), Vec::new(), batch, None).await;
            }
            let command = Command::Checked {
                answer: check(k, &a).await?,
                periodic: true,
            };
            let (after, effects) = decide(&a, &command, now)?;
            finish(k, &a, after, effects, batch, None).await
        }
    }
}

/// The test helper's transfer: only an account the bank has opened takes
/// money (a deactivated one still does: the money is recorded, flagged).
async fn simulate(
    k: &VirtualAccountDeps,
    a: &VirtualAccount,
    s: SimulatedTransfer,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<PaymentIntentView>> {
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
    record_credit(k, a, &t, idem).await
}

/// Records every transfer on the account's statement not yet recorded.
async fn refind(k: &VirtualAccountDeps, a: &VirtualAccount) -> DomainResult<()> {
    if !matches!(a.status, AccountStatus::Active | AccountStatus::Deactivated) {
        return Ok(());
    }
    for t in k.banks.for_mode(a.mode).statement(a.id).await? {
        record_credit(k, a, &t, None).await?;
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

/// Commits the account's change: the object, its status index row, its
/// effects' rows and, with `idem`, the saved response, in one batch.
async fn finish(
    k: &VirtualAccountDeps,
    before: &VirtualAccount,
    after: VirtualAccount,
    effects: Vec<Effect>,
    mut batch: Batch,
    idem: Option<&IdempotencySave>,
) -> DomainResult<(VirtualAccount, Answer<VirtualAccountView>)> {
    let now = k.clock.now();
    let (id, m, mode) = (after.id, after.merchant, after.mode);
    batch.owned_by(m.as_bytes());
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
    let answer = Answer::save(Outcome::Updated(after.view()), idem, &mut batch, now);
    if !batch.is_empty() {
        k.writer.commit(batch).await.map_err(DomainError::from)?;
    }
    Ok((after, answer))
}

/// The sandbox bank's notifications left unrecorded (by a crash, or by a
/// cluster node that died) of `merchants`' accounts: delivered to the
/// accounts' actors by the work (each is recorded once whatever else
/// delivers it; one that fails stays in the inbox, and a refresh re-finds
/// its transfer).
pub fn resume_notifications(
    accounts: &VirtualAccounts,
    merchants: &Merchants,
) -> DomainResult<Resumption> {
    let deps = accounts.deps().clone();
    let mut jobs = Vec::new();
    for (id, session_id) in deps.banks.test.inbox()? {
        if let Some(a) = load(&deps, id)? {
            if merchants.include(&a.merchant) {
                jobs.push((a, session_id));
            }
        }
    }
    let n = jobs.len();
    let accounts = accounts.clone();
    Ok(Resumption::new(n, async move {
        for chunk in jobs.chunks(64) {
            join_all(chunk.iter().map(|(a, session_id)| {
                let msg = CreditMessage {
                    merchant: a.merchant,
                    mode: a.mode,
                    credit: Credit::Notified {
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
    }))
}
