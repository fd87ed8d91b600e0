//! USDT: wallets, the settings view, the preview, creating and listing
//! crypto payouts, and the confirmation pump started with the server.

use std::time::Duration;

use futures_util::future::join_all;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::audit::{Audit, AuditAction, Record};
use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode, ErrorKind};
use crate::fx::{available, resolve_brand};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::{new_id, scope_key, Mode};
use crate::ledger::actor::PostEntry;
use crate::ledger::{Bucket, EntrySpec, EntryType, LineSpec};
use crate::merchant::{Merchant, UsdtSettings};
use crate::money::Currency;
use crate::paging::{page_by_index, Page};
use crate::registry::Registry;
use crate::resumption::{Merchants, Resumption};
use crate::timer::{Timer, TimerKind};
use crate::usdt::actor::{CryptoAction, CryptoPayoutActor, CryptoPayoutMessage, UsdtDeps};

/// The crypto payouts' registry: the handle their services are given.
pub type CryptoPayouts = std::sync::Arc<Registry<CryptoPayoutActor>>;
use crate::usdt::partner::{unconfigured, Confirmation};
use crate::usdt::{
    check_interval, quote, settings_of, CryptoPayout, CryptoPayoutStatus, CryptoPayoutView,
    DeletedWalletView, Network, UsdtQuote, UsdtWallet, UsdtWalletObject, UsdtWalletView,
};

/// Most characters in a wallet label.
pub const MAX_LABEL_LEN: usize = 100;

pub fn wallet_list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

fn wallet_address_key(merchant: Uuid, mode: Mode, network: Network, address: &str) -> Vec<u8> {
    scope_key(merchant, mode)
        .u8(network.byte())
        .str(address)
        .build()
}

pub fn payout_list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

pub fn load_wallet(kobo: &Env, id: Uuid) -> DomainResult<Option<UsdtWallet>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::UsdtWallets, id.as_bytes())?)
}

pub async fn add_wallet(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    network: Network,
    address: &str,
    label: Option<String>,
    audit: &Audit,
) -> DomainResult<Outcome<UsdtWalletView>> {
    let normalized = network
        .normalize(address)
        .map_err(|m| DomainError::invalid("address", m))?;
    let address_key = wallet_address_key(merchant, mode, network, &normalized);
    let read = kobo.store.read()?;
    if let Some(id) = read.get(Table::UsdtWalletAddresses, &address_key)? {
        let id = Uuid::from_slice(&id).map_err(|_| DomainError::internal("bad wallet index"))?;
        if let Some(w) = read.get_decoded::<UsdtWallet>(Table::UsdtWallets, id.as_bytes())? {
            return Ok(Outcome::Existing(w.view()));
        }
    }
    drop(read);
    let now = kobo.clock.now();
    let wallet = UsdtWallet {
        id: new_id(now),
        merchant,
        mode,
        seq: kobo.seq.next(),
        network,
        address: if network == Network::Erc20 {
            // Keep the operator's casing (an EIP-55 checksum lives in it).
            address.to_string()
        } else {
            normalized
        },
        label,
        created_at: now,
        deleted_at: None,
    };
    let mut batch = Batch::new();
    batch.owned_by(wallet.merchant.as_bytes());
    batch
        .put(Table::UsdtWallets, wallet.id.as_bytes().to_vec(), &wallet)
        .put_raw(
            Table::UsdtWalletIndex,
            wallet_list_key(merchant, mode, wallet.seq),
            wallet.id.as_bytes().to_vec(),
        )
        .put_raw(
            Table::UsdtWalletAddresses,
            address_key,
            wallet.id.as_bytes().to_vec(),
        )
        .note_seq(wallet.seq);
    audit.add_to(
        kobo,
        &mut batch,
        Record::new(AuditAction::UsdtWalletAdded, "usdt_wallet", wallet.id)
            .merchant(merchant)
            .after(wallet.to_api()),
    );
    kobo.writer.commit(batch).await.map_err(DomainError::from)?;
    Ok(Outcome::Created(wallet.view()))
}

/// Clears a wallet (run by the merchant's wallet actor): it leaves the
/// lists and can no longer be paid to; the row stays for the payouts that
/// name it. Unknown, another merchant's, or already cleared: 404.
pub async fn delete_wallet(
    kobo: &Env,
    merchant: Uuid,
    wallet: Uuid,
    audit: &Audit,
) -> DomainResult<DeletedWalletView> {
    let mut w = match load_wallet(kobo, wallet)? {
        Some(w) if w.merchant == merchant && w.is_active() => w,
        _ => return Err(DomainError::not_found("usdt_wallet", wallet)),
    };
    let normalized = w
        .network
        .normalize(&w.address)
        .map_err(DomainError::internal)?;
    let before = w.to_api();
    w.deleted_at = Some(kobo.clock.now());
    let mut batch = Batch::new();
    batch.owned_by(w.merchant.as_bytes());
    audit.add_to(
        kobo,
        &mut batch,
        Record::new(AuditAction::UsdtWalletRemoved, "usdt_wallet", w.id)
            .merchant(merchant)
            .before(before)
            .after(w.to_api()),
    );
    batch
        .put(Table::UsdtWallets, w.id.as_bytes().to_vec(), &w)
        .delete(
            Table::UsdtWalletIndex,
            wallet_list_key(merchant, w.mode, w.seq),
        )
        .delete(
            Table::UsdtWalletAddresses,
            wallet_address_key(merchant, w.mode, w.network, &normalized),
        );
    kobo.writer.commit(batch).await.map_err(DomainError::from)?;
    Ok(DeletedWalletView {
        id: w.id,
        object: UsdtWalletObject::UsdtWallet,
        livemode: w.mode.livemode(),
        deleted: true,
    })
}

/// A merchant's wallets in one mode, newest first.
pub fn wallets(kobo: &Env, merchant: Uuid, mode: Mode) -> DomainResult<Vec<UsdtWallet>> {
    let read = kobo.store.read()?;
    let mut out = Vec::new();
    read.scan_prefix_rev(
        Table::UsdtWalletIndex,
        &scope_key(merchant, mode).build(),
        None,
        |_, v| {
            let id = Uuid::from_slice(v)
                .map_err(|_| kobo_storage::StoreError::Redb("bad wallet index".into()))?;
            if let Some(w) = read.get_decoded::<UsdtWallet>(Table::UsdtWallets, id.as_bytes())? {
                out.push(w);
            }
            Ok(true)
        },
    )?;
    Ok(out)
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum UsdtObject {
    #[serde(rename = "usdt")]
    Usdt,
}

/// The merchant's USDT set-up in this mode.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Usdt)]
pub struct UsdtView {
    #[schema(inline)]
    pub object: UsdtObject,
    pub livemode: bool,
    /// `settings.enabled`: whether USDT payouts may be made.
    pub enabled: bool,
    /// The wallet dollar settlement sends to (`settings.settle_wallet`),
    /// when it names one of this mode's wallets; else null.
    #[schema(required = true)]
    pub settle_wallet: Option<Uuid>,
    /// The merchant's `usdt` settings (defaults when none were set).
    pub settings: UsdtSettings,
    /// This mode's wallets, newest first.
    pub wallets: Vec<UsdtWalletView>,
}

/// `GET /v1/usdt`.
pub fn usdt_view(kobo: &Env, merchant: &Merchant, mode: Mode) -> DomainResult<UsdtView> {
    let settings = settings_of(&merchant.settings.usdt);
    let wallets = wallets(kobo, merchant.id, mode)?;
    let settle_wallet = settings
        .settle_wallet
        .filter(|id| wallets.iter().any(|w| w.id == *id));
    Ok(UsdtView {
        object: UsdtObject::Usdt,
        livemode: mode.livemode(),
        enabled: settings.enabled,
        settle_wallet,
        settings,
        wallets: wallets.iter().map(UsdtWallet::view).collect(),
    })
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum UsdtPreviewObject {
    #[serde(rename = "usdt_preview")]
    UsdtPreview,
}

/// Dollars available, and for `usd_amount` kobo's fee, the VAT on it and
/// the USDT the wallet receives (1 USDT per dollar), all in cents.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = UsdtPreview)]
pub struct UsdtPreviewView {
    #[schema(inline)]
    pub object: UsdtPreviewObject,
    pub livemode: bool,
    pub brand: Uuid,
    /// Cents in the brand's USD `available`.
    pub usd_available: i64,
    /// The fee rate, basis points (`settings.fee_bps`).
    pub fee_bps: i64,
    /// As asked; null without `usd_amount`.
    #[schema(required = true)]
    pub usd_amount: Option<i64>,
    /// `fee_bps` of `usd_amount`, rounded half up.
    #[schema(required = true)]
    pub fee: Option<i64>,
    /// 7.5% of the fee, rounded half up.
    #[schema(required = true)]
    pub vat: Option<i64>,
    /// `usd_amount - fee - vat`, in cents of USDT.
    #[schema(required = true)]
    pub usdt_amount: Option<i64>,
    /// Whether `usd_amount` fits the available dollars.
    #[schema(required = true)]
    pub sufficient: Option<bool>,
}

/// `GET /v1/usdt/preview`. Reserves nothing.
pub fn preview(
    kobo: &Env,
    merchant: &Merchant,
    mode: Mode,
    brand: Uuid,
    usd_amount: Option<i64>,
) -> DomainResult<UsdtPreviewView> {
    let settings = settings_of(&merchant.settings.usdt);
    let usd_available = available(kobo, merchant.id, mode, brand, Currency::USD)?;
    let q = usd_amount.map(|u| quote(u, settings.fee_bps));
    Ok(UsdtPreviewView {
        object: UsdtPreviewObject::UsdtPreview,
        livemode: mode.livemode(),
        brand,
        usd_available,
        fee_bps: quote(0, settings.fee_bps).fee_bps,
        usd_amount,
        fee: q.map(|q| q.fee),
        vat: q.map(|q| q.vat),
        usdt_amount: q.map(|q| q.usdt_amount),
        sufficient: usd_amount.map(|u| u <= usd_available),
    })
}

pub fn usdt_not_enabled() -> DomainError {
    DomainError::forbidden(
        ErrorCode::UsdtNotEnabled,
        "USDT payouts are not enabled for this account (settings.usdt.enabled)",
    )
}

/// A validated create request.
#[derive(Debug, Clone)]
pub struct CreateCryptoPayout {
    pub usd_amount: i64,
    pub wallet: Uuid,
    pub brand: Option<Uuid>,
    /// Made by dollar settlement.
    pub automatic: bool,
}

/// Creates a crypto payout: the record and the move of `usd_amount` from
/// USD `available` to `payout_in_flight` commit together, through the
/// merchant's ledger, which checks the dollars in that step. Then the
/// partner is asked (in the background). Checks in order: USDT enabled
/// (403), the amount leaves something after fee and VAT (400
/// `usd_amount`), wallet (404 `wallet`), brand (404 `brand`), a partner for the mode
/// (409 `provider_not_configured`), the dollars (409 `insufficient_funds`).
pub async fn create_payout(
    payouts: &CryptoPayouts,
    merchant: &Merchant,
    mode: Mode,
    req: CreateCryptoPayout,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<CryptoPayoutView>> {
    let kobo = payouts.deps();
    let (q, wallet, brand) = check_create(kobo, merchant, mode, &req)?;
    let now = kobo.clock.now();
    let payout = new_payout(kobo, merchant.id, mode, &req, q, &wallet, brand, now);
    let mut batch = Batch::new();
    batch.owned_by(merchant.id.as_bytes());
    batch
        .put(Table::CryptoPayouts, payout.id.as_bytes().to_vec(), &payout)
        .put_raw(
            Table::CryptoPayoutIndex,
            payout_list_key(merchant.id, mode, payout.seq),
            payout.id.as_bytes().to_vec(),
        )
        .put_raw(
            Table::CryptoPayoutsOpen,
            payout.id.as_bytes().to_vec(),
            Vec::new(),
        )
        .note_seq(payout.seq);
    let check_due = payout
        .next_check_at
        .expect("a new crypto payout is checked");
    Timer::new(TimerKind::CryptoPayoutCheck, payout.id, merchant.id, mode)
        .schedule(&mut batch, check_due);
    let answer = Answer::save(Outcome::Created(payout.view()), idem, &mut batch, now);
    kobo.ledgers
        .send(
            (merchant.id, mode),
            PostEntry {
                entry: hold_entry(&payout, &wallet),
                with: crate::registry::Once::new(batch),
                usage: None,
            },
        )
        .await??;
    kick(payouts, payout.id);
    Ok(answer)
}

/// A create's checks, in order (see [`create_payout`]): answers the quote,
/// the wallet and the brand.
fn check_create(
    kobo: &UsdtDeps,
    merchant: &Merchant,
    mode: Mode,
    req: &CreateCryptoPayout,
) -> DomainResult<(UsdtQuote, UsdtWallet, Uuid)> {
    let settings = settings_of(&merchant.settings.usdt);
    if !settings.enabled {
        return Err(usdt_not_enabled());
    }
    let q = quote(req.usd_amount, settings.fee_bps);
    if q.usdt_amount < 1 {
        return Err(DomainError::invalid(
            "usd_amount",
            format!(
                "{} cents do not cover the fee ({}) and its VAT ({})",
                req.usd_amount, q.fee, q.vat
            ),
        ));
    }
    let wallet = match load_wallet(kobo, req.wallet)? {
        Some(w) if w.merchant == merchant.id && w.mode == mode && w.is_active() => w,
        _ => return Err(DomainError::not_found("usdt_wallet", req.wallet).with_param("wallet")),
    };
    let brand = resolve_brand(kobo, merchant, mode, req.brand)?;
    if !kobo.usdt.for_mode(mode).configured() {
        return Err(unconfigured());
    }
    Ok((q, wallet, brand))
}

/// A new crypto payout, `queued`, its first check due after the interval.
#[allow(clippy::too_many_arguments)] // the parts of a new payout, each named
fn new_payout(
    kobo: &UsdtDeps,
    merchant: Uuid,
    mode: Mode,
    req: &CreateCryptoPayout,
    q: UsdtQuote,
    wallet: &UsdtWallet,
    brand: Uuid,
    now: chrono::DateTime<chrono::Utc>,
) -> CryptoPayout {
    CryptoPayout {
        id: new_id(now),
        merchant,
        mode,
        seq: kobo.seq.next(),
        brand,
        wallet: wallet.id,
        network: wallet.network,
        address: wallet.address.clone(),
        usd_amount: req.usd_amount,
        fee: q.fee,
        vat: q.vat,
        usdt_amount: q.usdt_amount,
        status: CryptoPayoutStatus::Queued,
        failure_code: None,
        automatic: req.automatic,
        transaction_hash: None,
        next_check_at: Some(now + check_interval()),
        created_at: now,
        updated_at: now,
        paid_at: None,
        version: 1,
    }
}

/// The ledger entry of a new crypto payout: `usd_amount` from USD
/// `available` (fee and VAT noted) to `payout_in_flight`.
fn hold_entry(payout: &CryptoPayout, wallet: &UsdtWallet) -> EntrySpec {
    let line = |bucket, amount, fee| LineSpec {
        brand: payout.brand,
        currency: Currency::USD,
        bucket,
        amount,
        gross: None,
        fee,
    };
    EntrySpec {
        entry_type: EntryType::Payout,
        source: payout.id,
        description: format!(
            "USDT payout to {} {}",
            wallet.network.as_str(),
            wallet.address
        ),
        lines: vec![
            line(
                Bucket::Available,
                -payout.usd_amount,
                Some(payout.fee + payout.vat),
            ),
            line(Bucket::PayoutInFlight, payout.usd_amount, None),
        ],
        allow_negative: false,
    }
}

pub fn load_payout(kobo: &Env, id: Uuid) -> DomainResult<Option<CryptoPayout>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::CryptoPayouts, id.as_bytes())?)
}

/// `GET /v1/usdt/payouts`: newest first.
pub fn list_payouts(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    limit: usize,
    starting_after: Option<Uuid>,
) -> DomainResult<Page> {
    page_by_index::<CryptoPayout>(
        kobo,
        Table::CryptoPayouts,
        Table::CryptoPayoutIndex,
        merchant,
        mode,
        limit,
        starting_after,
        |p| (p.merchant, p.mode, p.seq),
        CryptoPayout::to_api,
    )
}

/// Sends `action` to the payout's actor.
async fn tell(
    payouts: &CryptoPayouts,
    id: Uuid,
    action: CryptoAction,
) -> DomainResult<CryptoPayoutView> {
    let p = load_payout(payouts.deps(), id)?
        .ok_or_else(|| DomainError::not_found("crypto_payout", id))?;
    payouts
        .send(
            id,
            CryptoPayoutMessage {
                merchant: p.merchant,
                mode: p.mode,
                action,
            },
        )
        .await?
}

/// Retries a message a few times on the errors that may pass (a full
/// mailbox, a store hiccup); the check timer is the backstop after that.
async fn tell_with_retries(payouts: &CryptoPayouts, id: Uuid, action: CryptoAction) {
    let mut delay = Duration::from_millis(100);
    for attempt in 0..5 {
        match tell(payouts, id, action.clone()).await {
            Ok(_) => return,
            Err(e)
                if matches!(e.kind, ErrorKind::Overloaded | ErrorKind::Internal) && attempt < 4 =>
            {
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(e) => {
                tracing::warn!(payout = %id, error = %e, "crypto payout message not delivered; the check timer will ask again");
                return;
            }
        }
    }
}

/// Asks the partner about a payout now, in the background.
pub fn kick(payouts: &CryptoPayouts, id: Uuid) {
    let payouts = payouts.clone();
    actix::spawn(async move {
        tell_with_retries(&payouts, id, CryptoAction::Reconcile { timer_key: None }).await;
    });
}

/// The ids of `merchants`' crypto payouts not yet confirmed.
pub fn open_payouts(kobo: &Env, merchants: &Merchants) -> DomainResult<Vec<Uuid>> {
    let read = kobo.store.read()?;
    let mut ids = Vec::new();
    read.scan_prefix(Table::CryptoPayoutsOpen, &[], None, |k, _| {
        if let Ok(id) = Uuid::from_slice(k) {
            ids.push(id);
        }
        Ok(true)
    })?;
    let mut out = Vec::new();
    for id in ids {
        let p: Option<CryptoPayout> = read.get_decoded(Table::CryptoPayouts, id.as_bytes())?;
        if p.is_some_and(|p| merchants.include(&p.merchant)) {
            out.push(id);
        }
    }
    Ok(out)
}

/// Starts delivering the partner's confirmations to the payouts' actors as
/// they arrive (once per process, in every mode).
pub fn start(payouts: &CryptoPayouts) -> DomainResult<()> {
    let mut rx =
        payouts.deps().usdt.take_confirmations().ok_or_else(|| {
            DomainError::internal("the USDT confirmation pump is already running")
        })?;
    let k = payouts.clone();
    actix::spawn(async move {
        while let Some(Confirmation { reference, status }) = rx.recv().await {
            let k = k.clone();
            actix::spawn(async move {
                tell_with_retries(&k, reference, CryptoAction::Confirmed(status)).await;
            });
        }
    });
    Ok(())
}

/// `merchants`' crypto payouts left unconfirmed (by the previous run, or a
/// cluster node that died): the work re-asks the partner about each.
pub fn resume_open(payouts: &CryptoPayouts, merchants: &Merchants) -> DomainResult<Resumption> {
    let open = open_payouts(payouts.deps(), merchants)?;
    let k = payouts.clone();
    Ok(Resumption::new(open.len(), async move {
        for chunk in open.chunks(64) {
            join_all(
                chunk.iter().map(|id| {
                    tell_with_retries(&k, *id, CryptoAction::Reconcile { timer_key: None })
                }),
            )
            .await;
        }
    }))
}
