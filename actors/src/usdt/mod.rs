//! USDT payouts: operator-registered wallets, the crypto payout object, its
//! public views, the fee arithmetic and the pure state machine.
//!
//! ```text
//! (new) --create--> queued      (dollars: USD available -> payout_in_flight)
//! queued --partner accepts--> processing
//! queued --partner refuses--> failed
//! queued | processing --confirmed paid--> paid      (dollars leave)
//! queued | processing --confirmed failed--> failed  (dollars back to available)
//! paid | failed --any partner news--> unchanged (duplicates are harmless)
//! ```
//! The partner ([`partner`]) confirms asynchronously; the actor ([`actor`])
//! applies each confirmation once. The amount in cents leaves the USD
//! balance; kobo's fee and its VAT come out of it and the partner sends the
//! rest as USDT at 1 USDT per dollar.

pub mod actor;
pub mod partner;
pub mod service;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::ids::Mode;
use crate::merchant::UsdtSettings;
use crate::money::vat_on;

pub const CRYPTO_PAYOUT_PAID: &str = "crypto_payout.paid";
pub const CRYPTO_PAYOUT_FAILED: &str = "crypto_payout.failed";

/// The one-time code the sandbox accepts (CONTRACT section 5).
pub const SANDBOX_OTP: &str = "123456";

/// How often the partner is asked about an unconfirmed payout (clock time):
/// a backstop for a confirmation that never arrived.
pub fn check_interval() -> Duration {
    Duration::minutes(1)
}

/// A blockchain network USDT is sent on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub enum Network {
    /// Tron; addresses are `T` + 33 base58 characters.
    #[serde(rename = "TRC20")]
    Trc20,
    /// Ethereum; addresses are `0x` + 40 hexadecimal digits.
    #[serde(rename = "ERC20")]
    Erc20,
}

impl Network {
    pub fn parse(s: &str) -> Option<Network> {
        match s {
            "TRC20" => Some(Network::Trc20),
            "ERC20" => Some(Network::Erc20),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Trc20 => "TRC20",
            Network::Erc20 => "ERC20",
        }
    }
    pub fn byte(self) -> u8 {
        match self {
            Network::Trc20 => 1,
            Network::Erc20 => 2,
        }
    }

    /// Checks the address's shape for this network and answers the form
    /// used to recognise the same wallet twice (ERC20 hex is
    /// case-insensitive; base58 is not). Checksums (base58check, EIP-55)
    /// are left to the partner.
    pub fn normalize(self, address: &str) -> Result<String, String> {
        const BASE58: &str = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
        match self {
            Network::Trc20 => {
                let ok = address.len() == 34
                    && address.starts_with('T')
                    && address.chars().all(|c| BASE58.contains(c));
                if ok {
                    Ok(address.to_string())
                } else {
                    Err("a TRC20 address is `T` followed by 33 base58 characters".into())
                }
            }
            Network::Erc20 => {
                let hex = address
                    .strip_prefix("0x")
                    .or_else(|| address.strip_prefix("0X"));
                match hex {
                    Some(h) if h.len() == 40 && h.chars().all(|c| c.is_ascii_hexdigit()) => {
                        Ok(format!("0x{}", h.to_ascii_lowercase()))
                    }
                    _ => Err("an ERC20 address is `0x` followed by 40 hexadecimal digits".into()),
                }
            }
        }
    }
}

/// A wallet the operator registered for a merchant (what the dashboard
/// does). Deleting it keeps the row (`deleted_at`), so payouts that went to
/// it still name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsdtWallet {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub network: Network,
    pub address: String,
    pub label: Option<String>,
    pub created_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum UsdtWalletObject {
    #[serde(rename = "usdt_wallet")]
    UsdtWallet,
}

/// A USDT wallet payouts can go to.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = UsdtWallet)]
pub struct UsdtWalletView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: UsdtWalletObject,
    pub livemode: bool,
    pub network: Network,
    pub address: String,
    #[schema(required = true)]
    pub label: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// The answer of a wallet delete.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = DeletedUsdtWallet)]
pub struct DeletedWalletView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: UsdtWalletObject,
    pub livemode: bool,
    /// Always true.
    pub deleted: bool,
}

impl UsdtWallet {
    pub fn view(&self) -> UsdtWalletView {
        UsdtWalletView {
            id: self.id,
            object: UsdtWalletObject::UsdtWallet,
            livemode: self.mode.livemode(),
            network: self.network,
            address: self.address.clone(),
            label: self.label.clone(),
            created_at: self.created_at,
        }
    }
    pub fn to_api(&self) -> serde_json::Value {
        serde_json::to_value(self.view()).expect("a wallet view serializes")
    }
    pub fn is_active(&self) -> bool {
        self.deleted_at.is_none()
    }
}

/// kobo's fee on a USDT payout: `fee_bps` of the amount, half up; VAT 7.5%
/// of the fee, half up; the wallet receives the rest (never below zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsdtQuote {
    pub fee_bps: i64,
    pub fee: i64,
    pub vat: i64,
    pub usdt_amount: i64,
}

pub fn quote(usd_amount: i64, fee_bps: i64) -> UsdtQuote {
    let bps = fee_bps.clamp(0, 10_000);
    let fee = ((usd_amount as i128 * bps as i128 + 5_000) / 10_000) as i64;
    let vat = vat_on(fee);
    UsdtQuote {
        fee_bps: bps,
        fee,
        vat,
        usdt_amount: (usd_amount - fee - vat).max(0),
    }
}

/// The merchant's USDT settings, defaults when none were set.
pub fn settings_of(s: &Option<UsdtSettings>) -> UsdtSettings {
    s.clone().unwrap_or(UsdtSettings {
        enabled: false,
        settle_wallet: None,
        fee_bps: 0,
    })
}

/// The status of a crypto payout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CryptoPayoutStatus {
    /// Created; the dollars are held in `payout_in_flight`.
    Queued,
    /// The partner accepted it and is sending.
    Processing,
    /// The partner confirmed the USDT arrived; the dollars left.
    Paid,
    /// The partner could not send; the dollars are back in `available`.
    Failed,
}

impl CryptoPayoutStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CryptoPayoutStatus::Queued => "queued",
            CryptoPayoutStatus::Processing => "processing",
            CryptoPayoutStatus::Paid => "paid",
            CryptoPayoutStatus::Failed => "failed",
        }
    }
    pub fn is_final(self) -> bool {
        matches!(self, CryptoPayoutStatus::Paid | CryptoPayoutStatus::Failed)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CryptoPayout {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub brand: Uuid,
    pub wallet: Uuid,
    pub network: Network,
    pub address: String,
    /// Cents taken from the USD balance.
    pub usd_amount: i64,
    pub fee: i64,
    pub vat: i64,
    /// Cents of USDT the wallet receives (1 USDT per dollar).
    pub usdt_amount: i64,
    pub status: CryptoPayoutStatus,
    pub failure_code: Option<String>,
    /// Made by dollar settlement rather than by the API.
    pub automatic: bool,
    pub transaction_hash: Option<String>,
    /// When the partner is next asked (the check timer), while unconfirmed.
    pub next_check_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub paid_at: Option<DateTime<Utc>>,
    pub version: u64,
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum CryptoPayoutObject {
    #[serde(rename = "crypto_payout")]
    CryptoPayout,
}

/// A payout of dollars as USDT to one of the merchant's wallets.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = CryptoPayout)]
pub struct CryptoPayoutView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: CryptoPayoutObject,
    pub livemode: bool,
    pub brand: Uuid,
    /// The wallet's id.
    pub wallet: Uuid,
    pub network: Network,
    pub address: String,
    /// Cents taken from the USD balance (fee and VAT included).
    pub usd_amount: i64,
    /// kobo's fee, cents.
    pub fee: i64,
    /// 7.5% VAT on the fee, cents.
    pub vat: i64,
    /// Cents of USDT the wallet receives: `usd_amount - fee - vat`.
    pub usdt_amount: i64,
    pub status: CryptoPayoutStatus,
    /// Why it failed (`transfer_failed`, ...).
    #[schema(required = true)]
    pub failure_code: Option<String>,
    /// Made by dollar settlement (`auto_settlement.usd = usdt`).
    pub automatic: bool,
    /// The blockchain transaction, once paid.
    #[schema(required = true)]
    pub transaction_hash: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[schema(required = true)]
    pub paid_at: Option<DateTime<Utc>>,
}

impl CryptoPayout {
    pub fn view(&self) -> CryptoPayoutView {
        CryptoPayoutView {
            id: self.id,
            object: CryptoPayoutObject::CryptoPayout,
            livemode: self.mode.livemode(),
            brand: self.brand,
            wallet: self.wallet,
            network: self.network,
            address: self.address.clone(),
            usd_amount: self.usd_amount,
            fee: self.fee,
            vat: self.vat,
            usdt_amount: self.usdt_amount,
            status: self.status,
            failure_code: self.failure_code.clone(),
            automatic: self.automatic,
            transaction_hash: self.transaction_hash.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            paid_at: self.paid_at,
        }
    }
    pub fn to_api(&self) -> serde_json::Value {
        serde_json::to_value(self.view()).expect("a crypto payout view serializes")
    }
}

/// What the partner said about a payout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// The partner took the transfer and is sending.
    Accepted,
    /// The USDT arrived.
    Paid { transaction_hash: String },
    /// The partner refused or could not send.
    Failed(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Event(&'static str),
    /// Dollars back from `payout_in_flight` to `available`.
    ReturnMoney,
    /// Dollars leave `payout_in_flight` (and the business).
    PayOut,
    /// No more partner checks: drop the open marker and the check timer.
    Close,
}

/// The state machine. A final payout takes any news unchanged (a
/// confirmation may arrive twice: pushed, and answered to a check).
pub fn decide(
    p: &CryptoPayout,
    command: &Command,
    now: DateTime<Utc>,
) -> DomainResult<(CryptoPayout, Vec<Effect>)> {
    use CryptoPayoutStatus::*;
    let mut next = p.clone();
    let mut effects = Vec::new();
    match (p.status, command) {
        (Paid | Failed, _) | (Processing, Command::Accepted) => return Ok((next, effects)),
        (Queued, Command::Accepted) => next.status = Processing,
        (Queued | Processing, Command::Paid { transaction_hash }) => {
            next.status = Paid;
            next.paid_at = Some(now);
            next.transaction_hash = Some(transaction_hash.clone());
            next.next_check_at = None;
            effects.extend([
                Effect::PayOut,
                Effect::Event(CRYPTO_PAYOUT_PAID),
                Effect::Close,
            ]);
        }
        (Queued | Processing, Command::Failed(code)) => {
            if code.is_empty() {
                return Err(DomainError::internal("a failure needs a code"));
            }
            next.status = Failed;
            next.failure_code = Some(code.clone());
            next.next_check_at = None;
            effects.extend([
                Effect::ReturnMoney,
                Effect::Event(CRYPTO_PAYOUT_FAILED),
                Effect::Close,
            ]);
        }
    }
    next.updated_at = now;
    next.version += 1;
    Ok((next, effects))
}

#[cfg(test)]
mod tests {
    use super::*;
    use CryptoPayoutStatus::*;

    fn payout(status: CryptoPayoutStatus) -> CryptoPayout {
        let now = Utc::now();
        CryptoPayout {
            id: Uuid::nil(),
            merchant: Uuid::nil(),
            mode: Mode::Test,
            seq: 1,
            brand: Uuid::nil(),
            wallet: Uuid::nil(),
            network: Network::Trc20,
            address: "TQn9Y2khEsLJW1ChVWFMSMeRDow5KcbLSE".into(),
            usd_amount: 10_000,
            fee: 100,
            vat: 8,
            usdt_amount: 9_892,
            status,
            failure_code: None,
            automatic: false,
            transaction_hash: None,
            next_check_at: Some(now),
            created_at: now,
            updated_at: now,
            paid_at: None,
            version: 1,
        }
    }

    #[test]
    fn the_fee_rounds_half_up_and_vat_is_on_the_fee() {
        // 1% of 12_345 = 123.45 -> 123; VAT 7.5% of 123 = 9.225 -> 9.
        assert_eq!(
            quote(12_345, 100),
            UsdtQuote {
                fee_bps: 100,
                fee: 123,
                vat: 9,
                usdt_amount: 12_213
            }
        );
        // 1.5% of 10_050 = 150.75 -> 151; VAT 11.325 -> 11.
        let q = quote(10_050, 150);
        assert_eq!((q.fee, q.vat, q.usdt_amount), (151, 11, 9_888));
        // Exactly half rounds up: 0.5% of 100 = 0.5 -> 1; VAT 0.075 -> 0.
        let q = quote(100, 50);
        assert_eq!((q.fee, q.vat, q.usdt_amount), (1, 0, 99));
        assert_eq!(quote(5_000, 0).usdt_amount, 5_000);
        // Never negative, whatever the settings.
        assert_eq!(quote(1, 10_000).usdt_amount, 0);
        assert_eq!(quote(1_000, -5).fee, 0);
    }

    #[test]
    fn addresses_are_checked_per_network() {
        let t = Network::Trc20;
        assert!(t.normalize("TQn9Y2khEsLJW1ChVWFMSMeRDow5KcbLSE").is_ok());
        assert!(t.normalize("TQn9Y2khEsLJW1ChVWFMSMeRDow5Kcdead").is_ok());
        assert!(t.normalize("TQn9Y2khEsLJW1ChVWFMSMeRDow5KcbLS").is_err());
        assert!(t.normalize("0Qn9Y2khEsLJW1ChVWFMSMeRDow5KcbLSE").is_err());
        assert!(t.normalize("TQn9Y2khEsLJW1ChVWFMSMeRDow5KcbLS0").is_err());
        let e = Network::Erc20;
        assert_eq!(
            e.normalize("0xAbCdEf0123456789abcdef0123456789ABCDdead")
                .unwrap(),
            "0xabcdef0123456789abcdef0123456789abcddead"
        );
        assert!(e
            .normalize("0xabcdef0123456789abcdef0123456789abcddea")
            .is_err());
        assert!(e
            .normalize("abcdef0123456789abcdef0123456789abcddead00")
            .is_err());
        assert!(e
            .normalize("0xgbcdef0123456789abcdef0123456789abcddead")
            .is_err());
    }

    #[test]
    fn every_move_and_its_effects() {
        let now = Utc::now();
        let paid = Command::Paid {
            transaction_hash: "h".into(),
        };
        let failed = Command::Failed("transfer_failed".into());
        let (p, e) = decide(&payout(Queued), &Command::Accepted, now).unwrap();
        assert_eq!((p.status, e), (Processing, vec![]));
        for from in [Queued, Processing] {
            let (p, e) = decide(&payout(from), &paid, now).unwrap();
            assert_eq!(p.status, Paid);
            assert_eq!(p.paid_at, Some(now));
            assert_eq!(p.transaction_hash.as_deref(), Some("h"));
            assert_eq!(p.next_check_at, None);
            assert_eq!(
                e,
                vec![
                    Effect::PayOut,
                    Effect::Event(CRYPTO_PAYOUT_PAID),
                    Effect::Close
                ]
            );
            let (p, e) = decide(&payout(from), &failed, now).unwrap();
            assert_eq!(p.status, Failed);
            assert_eq!(p.failure_code.as_deref(), Some("transfer_failed"));
            assert_eq!(
                e,
                vec![
                    Effect::ReturnMoney,
                    Effect::Event(CRYPTO_PAYOUT_FAILED),
                    Effect::Close
                ]
            );
        }
    }

    #[test]
    fn news_about_a_final_payout_changes_nothing() {
        let now = Utc::now();
        for from in [Paid, Failed] {
            for c in [
                Command::Accepted,
                Command::Paid {
                    transaction_hash: "x".into(),
                },
                Command::Failed("x".into()),
            ] {
                let before = payout(from);
                let (after, effects) = decide(&before, &c, now).unwrap();
                assert_eq!(after, before);
                assert!(effects.is_empty());
            }
        }
        let p = payout(Processing);
        assert_eq!(decide(&p, &Command::Accepted, now).unwrap().0, p);
    }
}
