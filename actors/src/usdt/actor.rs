//! The crypto payout actor (one per crypto payout) and the wallet actor (one
//! per merchant, serializing the operator's wallet changes).
//!
//! The crypto payout actor takes one message at a time to completion, so a
//! pushed confirmation, a periodic check and a re-ask after restart never
//! race: each partner answer is applied once, and news about a payout that is
//! already final changes nothing. Before submitting, it asks the partner
//! whether it already has the reference (a submission that happened before a
//! crash is never repeated).

use std::sync::Arc;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::audit::Audit;
use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::event::Event;
use crate::idempotency::{render, Outcome};
use crate::ids::Mode;
use crate::ledger::actor::Ledgers;
use crate::ledger::actor::PostEntry;
use crate::ledger::{Bucket, EntrySpec, EntryType, LineSpec};
use crate::money::Currency;
use crate::registry::{run_command, run_once, Activation, ObjectActor, VirtualActor};
use crate::timer::{Timer, TimerKind};
use crate::usdt::partner::UsdtHub;
use crate::usdt::partner::{CryptoTransfer, PartnerStatus, SubmitOutcome};
use crate::usdt::{
    check_interval, decide, service, Command, CryptoPayout, CryptoPayoutView, DeletedWalletView,
    Effect, Network, UsdtWalletView,
};

/// What a crypto payout's actor reaches: the merchant's ledger and the USDT
/// partners.
pub struct UsdtDeps {
    pub env: Arc<Env>,
    pub ledgers: Ledgers,
    pub usdt: Arc<UsdtHub>,
}

impl std::ops::Deref for UsdtDeps {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}

pub struct CryptoPayoutActor {
    activation: Activation<Self>,
    state: Option<CryptoPayout>,
}

#[derive(Debug, Clone)]
pub enum CryptoAction {
    /// Ask the partner about the payout, submitting it if the partner never
    /// got it: after create, after a restart, and when the check timer
    /// fires (`timer_key`: that timer, replaced by the next one while the
    /// payout is unconfirmed).
    Reconcile { timer_key: Option<Vec<u8>> },
    /// The partner's pushed confirmation.
    Confirmed(PartnerStatus),
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<CryptoPayoutView>")]
pub struct CryptoPayoutMessage {
    pub merchant: Uuid,
    pub mode: Mode,
    pub action: CryptoAction,
}

impl Actor for CryptoPayoutActor {
    type Context = Context<Self>;
}

impl VirtualActor for CryptoPayoutActor {
    type Key = Uuid;
    type Deps = UsdtDeps;
    const KIND: &'static str = "crypto_payout";
    fn activate(activation: Activation<Self>) -> Self {
        CryptoPayoutActor {
            activation,
            state: None,
        }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

impl ObjectActor for CryptoPayoutActor {
    type Object = CryptoPayout;
    fn object(&mut self) -> &mut Option<CryptoPayout> {
        &mut self.state
    }
    fn activation_mut(&mut self) -> &mut Activation<Self> {
        &mut self.activation
    }
    fn load(kobo: &Self::Deps, id: Uuid) -> DomainResult<Option<CryptoPayout>> {
        service::load_payout(kobo, id)
    }
    fn scope(o: &CryptoPayout) -> (Uuid, Mode) {
        (o.merchant, o.mode)
    }
}

impl Handler<CryptoPayoutMessage> for CryptoPayoutActor {
    type Result = AtomicResponse<Self, DomainResult<CryptoPayoutView>>;

    fn handle(&mut self, msg: CryptoPayoutMessage, _ctx: &mut Context<Self>) -> Self::Result {
        let (merchant, mode) = (msg.merchant, msg.mode);
        run_command(self, merchant, mode, move |kobo, object| async move {
            process(&kobo, &object, msg.action).await
        })
    }
}

/// The partner's answer as a command (`None`: nothing new).
fn command_of(status: PartnerStatus) -> Command {
    match status {
        PartnerStatus::Pending => Command::Accepted,
        PartnerStatus::Paid { transaction_hash } => Command::Paid { transaction_hash },
        PartnerStatus::Failed(code) => Command::Failed(code),
    }
}

/// Asks the partner; submits when it never got the payout.
async fn ask_partner(
    kobo: &UsdtDeps,
    p: &CryptoPayout,
    now: DateTime<Utc>,
) -> DomainResult<Command> {
    let partner = kobo.usdt.for_mode(p.mode);
    if let Some(status) = partner.status(p.id).await? {
        return Ok(command_of(status));
    }
    let transfer = CryptoTransfer {
        reference: p.id,
        network: p.network,
        address: p.address.clone(),
        usdt_amount: p.usdt_amount,
    };
    Ok(match partner.submit(&transfer, now).await? {
        SubmitOutcome::Accepted | SubmitOutcome::AlreadySubmitted => Command::Accepted,
        SubmitOutcome::Rejected(code) => Command::Failed(code),
    })
}

async fn process(
    kobo: &UsdtDeps,
    p: &CryptoPayout,
    action: CryptoAction,
) -> DomainResult<(CryptoPayout, CryptoPayoutView)> {
    let now = kobo.clock.now();
    let mut batch = Batch::new();
    batch.owned_by(p.merchant.as_bytes());
    let mut from_timer = false;
    let command = match action {
        CryptoAction::Confirmed(status) => Some(command_of(status)),
        CryptoAction::Reconcile { timer_key } => {
            if let Some(k) = timer_key {
                batch.delete(Table::Timers, k);
                from_timer = true;
            }
            if p.status.is_final() {
                None
            } else {
                match ask_partner(kobo, p, now).await {
                    Ok(c) => Some(c),
                    // The timer keeps asking; a kick's failure is left to it.
                    Err(e) if from_timer => {
                        tracing::warn!(payout = %p.id, error = %e, "USDT partner check failed; asking again later");
                        None
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    };
    let (mut after, effects) = match command {
        Some(c) => decide(p, &c, now)?,
        None => (p.clone(), Vec::new()),
    };
    if from_timer && !after.status.is_final() {
        let due = now + check_interval();
        after.next_check_at = Some(due);
        Timer::new(
            TimerKind::CryptoPayoutCheck,
            after.id,
            after.merchant,
            after.mode,
        )
        .schedule(&mut batch, due);
    }
    finish(kobo, p, after, effects, batch, now).await
}

fn line(p: &CryptoPayout, bucket: Bucket, amount: i64) -> LineSpec {
    LineSpec {
        brand: p.brand,
        currency: Currency::USD,
        bucket,
        amount,
        gross: None,
        fee: None,
    }
}

/// Saves the decision: the payout, its events, the closing of its checks,
/// in one batch; through the ledger when money moves.
async fn finish(
    kobo: &UsdtDeps,
    before: &CryptoPayout,
    after: CryptoPayout,
    effects: Vec<Effect>,
    mut batch: Batch,
    now: DateTime<Utc>,
) -> DomainResult<(CryptoPayout, CryptoPayoutView)> {
    let view = after.view();
    if &after != before {
        batch.put(Table::CryptoPayouts, after.id.as_bytes().to_vec(), &after);
    }
    let mut money = None;
    for effect in effects {
        match effect {
            Effect::Event(t) => Event::record(
                kobo,
                (after.merchant, after.mode),
                t,
                render(&view),
                now,
                &mut batch,
            ),
            Effect::Close => {
                batch.delete(Table::CryptoPayoutsOpen, after.id.as_bytes().to_vec());
                if let Some(due) = before.next_check_at {
                    batch.delete(
                        Table::Timers,
                        Timer::key(due, TimerKind::CryptoPayoutCheck, after.id),
                    );
                }
            }
            Effect::ReturnMoney | Effect::PayOut => money = Some(entry_of(&after, &effect)),
        }
    }
    match money {
        Some(entry) => {
            kobo.ledgers
                .send(
                    (after.merchant, after.mode),
                    PostEntry {
                        entry,
                        with: crate::registry::Once::new(batch),
                        usage: None,
                    },
                )
                .await??;
        }
        None if !batch.is_empty() => kobo.writer.commit(batch).await.map_err(DomainError::from)?,
        None => {}
    }
    Ok((after, view))
}

/// The ledger entry of a money effect.
fn entry_of(after: &CryptoPayout, effect: &Effect) -> EntrySpec {
    match effect {
        Effect::ReturnMoney => EntrySpec {
            entry_type: EntryType::Payout,
            source: after.id,
            description: "USDT payout failed; dollars returned".into(),
            lines: vec![
                line(after, Bucket::PayoutInFlight, -after.usd_amount),
                line(after, Bucket::Available, after.usd_amount),
            ],
            allow_negative: false,
        },
        Effect::PayOut => EntrySpec {
            entry_type: EntryType::Payout,
            source: after.id,
            description: "USDT payout paid".into(),
            lines: vec![line(after, Bucket::PayoutInFlight, -after.usd_amount)],
            allow_negative: false,
        },
        other => unreachable!("{other:?} moves no money"),
    }
}

/// Serializes one merchant's wallet changes (add, delete), so the same
/// address is never registered twice and a delete never races an add.
pub struct UsdtWalletsActor {
    activation: Activation<Self>,
}

/// Registers a wallet: `Created`, or `Existing` when the mode has that
/// network and address already (answered as it is). The operator's audit
/// entry commits with a new wallet.
#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Outcome<UsdtWalletView>>")]
pub struct AddWallet {
    pub mode: Mode,
    pub network: Network,
    pub address: String,
    pub label: Option<String>,
    pub audit: Audit,
}

/// Clears a wallet. The operator's audit entry commits with it.
#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<DeletedWalletView>")]
pub struct DeleteWallet {
    pub wallet: Uuid,
    pub audit: Audit,
}

impl Actor for UsdtWalletsActor {
    type Context = Context<Self>;
}

impl VirtualActor for UsdtWalletsActor {
    type Key = Uuid;
    type Deps = Env;
    const KIND: &'static str = "usdt_wallets";
    fn activate(activation: Activation<Self>) -> Self {
        UsdtWalletsActor { activation }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

impl Handler<AddWallet> for UsdtWalletsActor {
    type Result = AtomicResponse<Self, DomainResult<Outcome<UsdtWalletView>>>;
    fn handle(&mut self, msg: AddWallet, _: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let kobo = self.activation.deps.clone();
        let merchant = self.activation.key;
        let work = async move {
            let AddWallet {
                mode,
                network,
                address,
                label,
                audit,
            } = msg;
            service::add_wallet(&kobo, merchant, mode, network, &address, label, &audit).await
        };
        run_once(self, work)
    }
}

impl Handler<DeleteWallet> for UsdtWalletsActor {
    type Result = AtomicResponse<Self, DomainResult<DeletedWalletView>>;
    fn handle(&mut self, msg: DeleteWallet, _: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let kobo = self.activation.deps.clone();
        let merchant = self.activation.key;
        let work =
            async move { service::delete_wallet(&kobo, merchant, msg.wallet, &msg.audit).await };
        run_once(self, work)
    }
}
