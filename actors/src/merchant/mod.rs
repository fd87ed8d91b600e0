//! Merchants, their settings, secret keys and brands.
//!
//! This file holds the merchant object and its operator view;
//! `settings.rs` the settings, their bounds and partial updates; `keys.rs`
//! secret keys (`svc_test_` / `svc_live_` + 40 base62 characters, stored
//! only as a SHA-256 hash); `brand.rs` brands (a default one per mode,
//! created with the merchant); `query.rs` brand reads.

use std::fmt;
use std::sync::{Arc, LazyLock};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::{ReadTxn, StoreError, Table};

use crate::decoded::DecodedRows;
use crate::error::{DomainError, DomainResult};
use crate::ids::{random_base62, sha256_hex, Mode};
use crate::money::{default_pricing, Channel, Currency, FeeRule, Pricing, MAX_AMOUNT};

/// Merchants and API keys as last decoded: read on every request. One
/// for the process, whatever the store: a decoded row depends only on its
/// bytes, which every read compares ([`DecodedRows`]).
static MERCHANTS: LazyLock<DecodedRows<Merchant>> =
    LazyLock::new(|| DecodedRows::new(Table::Merchants));
static API_KEYS: LazyLock<DecodedRows<ApiKey>> = LazyLock::new(|| DecodedRows::new(Table::ApiKeys));

/// The merchant `id` as `read` sees it, shared (decoded once per version).
pub fn read_merchant(read: &ReadTxn, id: Uuid) -> Result<Option<Arc<Merchant>>, StoreError> {
    MERCHANTS.get(read, id.as_bytes())
}

/// The API key stored under `hash` ([`key_hash`]) as `read` sees it.
pub fn read_api_key(read: &ReadTxn, hash: &str) -> Result<Option<Arc<ApiKey>>, StoreError> {
    API_KEYS.get(read, hash.as_bytes())
}

mod brand;
mod keys;
pub mod query;
mod settings;

pub use brand::*;
pub use keys::*;
pub use settings::*;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Merchant {
    pub id: Uuid,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub settings: Settings,
    pub default_brand_test: Uuid,
    pub default_brand_live: Uuid,
    pub key_hash_test: String,
    pub key_hash_live: String,
    /// When the current reserve terms were set.
    #[serde(default)]
    pub reserve_since: Option<DateTime<Utc>>,
}

impl Merchant {
    pub fn default_brand(&self, mode: Mode) -> Uuid {
        match mode {
            Mode::Test => self.default_brand_test,
            Mode::Live => self.default_brand_live,
        }
    }

    /// The operator API's view (never includes keys).
    pub fn view(&self) -> MerchantView {
        MerchantView {
            id: self.id,
            object: MerchantObject::Merchant,
            name: self.name.clone(),
            created_at: self.created_at,
            settings: self.settings.clone(),
        }
    }

    /// The operator API's view (never includes keys), as JSON.
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a merchant view serializes")
    }
}

/// The `object` value of a merchant.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum MerchantObject {
    #[serde(rename = "merchant")]
    Merchant,
}

/// The operator API's Merchant object (never includes keys).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Merchant)]
pub struct MerchantView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: MerchantObject,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub settings: Settings,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_partial_update_changes_only_the_named_fields() {
        let s = Settings::default();
        let p = s
            .patched(&json!({"live_approved": true, "payment_methods": {"card": false}}))
            .unwrap();
        assert!(p.live_approved);
        assert!(!p.payment_methods.card);
        assert!(p.payment_methods.bank_transfer);
        assert_eq!(p.pricing, s.pricing);
    }

    #[test]
    fn pricing_merges_per_channel() {
        let s = Settings::default();
        let p = s
            .patched(&json!({"pricing": {"NGN": {"card": {"percent_bps": 100}}}}))
            .unwrap();
        let card = p.pricing[&Currency::NGN][&crate::money::Channel::Card];
        assert_eq!(card.percent_bps, 100);
        assert_eq!(card.flat, 10_000);
        assert_eq!(
            p.pricing[&Currency::NGN][&crate::money::Channel::BankTransfer],
            s.pricing[&Currency::NGN][&crate::money::Channel::BankTransfer]
        );
    }

    #[test]
    fn unknown_and_invalid_settings_are_refused_with_their_param() {
        let s = Settings::default();
        let e = s.patched(&json!({"colour": "blue"})).unwrap_err();
        assert_eq!(e.code, "parameter_unknown");
        assert_eq!(e.param.as_deref(), Some("settings.colour"));
        let e = s.patched(&json!({"payout_tier": "gold"})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("settings.payout_tier"));
        let e = s
            .patched(&json!({"reserve": {"percent_bps": 20000, "days": 3}}))
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("settings.reserve.percent_bps"));
    }

    /// The views render exactly what the `json!` renderings they replaced
    /// did.
    #[test]
    fn merchant_and_brand_json_is_unchanged() {
        let settings = Settings::default()
            .patched(&json!({
                "live_approved": true,
                "payout_approval_threshold": 500_000,
                "payout_limits": {"per_payout": 1, "daily": 2},
                "reserve": {"percent_bps": 500, "days": 30, "reason": "new"},
                "auto_settlement": {"enabled": true, "minimum": 100, "usd": "convert"},
                "usdt": {"enabled": true, "fee_bps": 50},
            }))
            .unwrap();
        for settings in [Settings::default(), settings] {
            let m = Merchant {
                id: Uuid::new_v4(),
                name: "Shop".into(),
                created_at: Utc::now(),
                settings,
                default_brand_test: Uuid::new_v4(),
                default_brand_live: Uuid::new_v4(),
                key_hash_test: "t".into(),
                key_hash_live: "l".into(),
                reserve_since: None,
            };
            let old = json!({
                "id": m.id,
                "object": "merchant",
                "name": m.name,
                "created_at": m.created_at,
                "settings": m.settings,
            });
            assert_eq!(m.to_api(), old);
        }
        for (mode, default) in [(Mode::Test, true), (Mode::Live, false)] {
            let b = Brand {
                id: Uuid::new_v4(),
                merchant: Uuid::new_v4(),
                mode,
                seq: 3,
                name: "Shoes".into(),
                default,
                created_at: Utc::now(),
            };
            let old = json!({
                "id": b.id,
                "object": "brand",
                "livemode": b.mode.livemode(),
                "name": b.name,
                "default": b.default,
                "created_at": b.created_at,
            });
            assert_eq!(b.to_api(), old);
        }
    }

    #[test]
    fn secret_keys_have_their_mode_prefix_and_are_recognised() {
        let k = new_secret_key(Mode::Live);
        assert_eq!(secret_key_mode(&k), Some(Mode::Live));
        assert_eq!(secret_key_mode("svc_test_short"), None);
        assert_eq!(
            secret_key_mode("sk_test_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
            None
        );
    }
}
