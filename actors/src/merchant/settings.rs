//! Merchant settings (CONTRACT section 2): their types and defaults, the
//! bounds each field is checked against, and partial updates as a JSON
//! merge patch.

use super::*;

/// Upper bounds of the merchant settings (docs/api.md, "Bounds of merchant
/// settings"). Amounts are minor units.
pub mod bounds {
    /// `settlement_delay_days.NGN` and `.USD`: business days.
    pub const MAX_SETTLEMENT_DELAY_DAYS: u32 = 30;
    /// `reserve.days`.
    pub const MAX_RESERVE_DAYS: u32 = 180;
    /// Basis points: `pricing.*.*.percent_bps`, `reserve.percent_bps`,
    /// `usdt.fee_bps` (100%).
    pub const MAX_BPS: i64 = 10_000;
    /// `pricing.*.*.flat`: 10^8 minor units (₦1,000,000 or $1,000,000).
    pub const MAX_FLAT_FEE: i64 = 100_000_000;
    /// `pricing.*.*.cap`, `pricing.*.*.flat_waived_below`,
    /// `payout_approval_threshold`, `payout_limits.*`,
    /// `auto_settlement.minimum`: the largest amount accepted anywhere.
    pub const MAX_SETTING_AMOUNT: i64 = super::MAX_AMOUNT;
    /// `reserve.reason`, in characters.
    pub const MAX_REASON_CHARS: usize = 200;
    /// `reserve.note`, in characters.
    pub const MAX_NOTE_CHARS: usize = 1000;
    /// `rate_limits.live_per_second` and `.test_per_second`.
    pub const MIN_RATE_PER_SECOND: u32 = 1;
    pub const MAX_RATE_PER_SECOND: u32 = 100_000;
}

/// Requests per second a secret key may make when the merchant's
/// `rate_limits` leave it null (about Stripe's: 100 live, 25 test).
pub const DEFAULT_LIVE_PER_SECOND: u32 = 100;
pub const DEFAULT_TEST_PER_SECOND: u32 = 25;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PaymentMethods {
    pub card: bool,
    pub bank_transfer: bool,
    pub direct_debit: bool,
}

impl Default for PaymentMethods {
    fn default() -> Self {
        PaymentMethods {
            card: true,
            bank_transfer: true,
            direct_debit: true,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PayoutTier {
    #[default]
    Starter,
    Verified,
    Enterprise,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PayoutLimits {
    pub per_payout: i64,
    pub daily: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettlementDelayDays {
    #[serde(rename = "NGN")]
    pub ngn: u32,
    #[serde(rename = "USD")]
    pub usd: u32,
}

impl Default for SettlementDelayDays {
    fn default() -> Self {
        SettlementDelayDays { ngn: 1, usd: 7 }
    }
}

impl SettlementDelayDays {
    pub fn for_currency(&self, c: Currency) -> u32 {
        match c {
            Currency::NGN => self.ngn,
            Currency::USD => self.usd,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReserveTerms {
    pub percent_bps: i64,
    pub days: u32,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UsdSettlement {
    #[default]
    Keep,
    Convert,
    Usdt,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AutoSettlement {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub bank_account_id: Option<Uuid>,
    #[serde(default)]
    pub minimum: i64,
    #[serde(default)]
    pub usd: UsdSettlement,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UsdtSettings {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub settle_wallet: Option<Uuid>,
    #[serde(default)]
    pub fee_bps: i64,
}

/// Per-merchant request rates (token buckets holding one second's worth):
/// `null` takes the default of the mode.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSettings {
    /// Requests per second with the live key (and each live payment
    /// intent's client secret); null: 100.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100000)]
    pub live_per_second: Option<u32>,
    /// Requests per second with the test key (and each test payment
    /// intent's client secret); null: 25.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100000)]
    pub test_per_second: Option<u32>,
}

impl RateLimitSettings {
    /// The rate of `mode`, the default when not set.
    pub fn per_second(&self, mode: Mode) -> u32 {
        match mode {
            Mode::Live => self.live_per_second.unwrap_or(DEFAULT_LIVE_PER_SECOND),
            Mode::Test => self.test_per_second.unwrap_or(DEFAULT_TEST_PER_SECOND),
        }
    }
}

/// Merchant settings (CONTRACT section 2). Every field has a default.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default)]
    pub live_approved: bool,
    #[serde(default)]
    pub card_api_enabled: bool,
    #[serde(default)]
    pub payment_methods: PaymentMethods,
    #[serde(default = "default_pricing")]
    #[schema(value_type = BTreeMap<Currency, BTreeMap<Channel, FeeRule>>)]
    pub pricing: Pricing,
    #[serde(default)]
    pub payout_approval_threshold: Option<i64>,
    #[serde(default)]
    pub payout_tier: PayoutTier,
    #[serde(default)]
    pub payout_limits: Option<PayoutLimits>,
    #[serde(default)]
    pub settlement_delay_days: SettlementDelayDays,
    #[serde(default)]
    pub reserve: Option<ReserveTerms>,
    #[serde(default)]
    pub auto_settlement: Option<AutoSettlement>,
    #[serde(default)]
    pub usdt: Option<UsdtSettings>,
    #[serde(default)]
    pub rate_limits: RateLimitSettings,
}

impl Default for Settings {
    fn default() -> Self {
        serde_json::from_value(Value::Object(Map::new())).expect("all settings have defaults")
    }
}

const SETTINGS_FIELDS: &[&str] = &[
    "live_approved",
    "card_api_enabled",
    "payment_methods",
    "pricing",
    "payout_approval_threshold",
    "payout_tier",
    "payout_limits",
    "settlement_delay_days",
    "reserve",
    "auto_settlement",
    "usdt",
    "rate_limits",
];

impl Settings {
    /// Applies a partial update: named fields change, others stay. Nested
    /// objects merge (JSON merge patch); `null` resets a field to its default.
    /// Bad input changes nothing and names the field.
    pub fn patched(&self, patch: &Value) -> DomainResult<Settings> {
        let patch = patch
            .as_object()
            .ok_or_else(|| DomainError::invalid("settings", "settings must be an object"))?;
        let mut current = serde_json::to_value(self).expect("settings serialize");
        for (key, value) in patch {
            if !SETTINGS_FIELDS.contains(&key.as_str()) {
                return Err(DomainError::unknown(&format!("settings.{key}")));
            }
            let slot = current.as_object_mut().expect("object");
            if key == "pricing" && value.is_object() {
                // Pricing merges per currency and channel.
                let mut merged = slot.get("pricing").cloned().unwrap_or(Value::Null);
                merge_patch(&mut merged, value);
                slot.insert(key.clone(), merged);
            } else {
                let mut merged = slot.get(key).cloned().unwrap_or(Value::Null);
                merge_patch(&mut merged, value);
                if merged.is_null() {
                    slot.remove(key);
                } else {
                    slot.insert(key.clone(), merged);
                }
            }
        }
        let settings: Settings = serde_json::from_value(current).map_err(|e| {
            let field = patch
                .keys()
                .next()
                .map(|k| k.as_str())
                .unwrap_or("settings");
            let param = if patch.len() == 1 {
                format!("settings.{field}")
            } else {
                "settings".to_string()
            };
            DomainError::invalid(&param, format!("invalid settings: {e}"))
        })?;
        settings.validate()?;
        Ok(settings)
    }

    /// Checks every setting against its bounds ([`bounds`]), in field
    /// order; an error names the nested field
    /// (`settings.settlement_delay_days.NGN`).
    pub fn validate(&self) -> DomainResult<()> {
        use bounds::*;
        self.validate_pricing()?;
        self.validate_payouts()?;
        for currency in Currency::ALL {
            in_range(
                &format!("settings.settlement_delay_days.{}", currency.as_str()),
                self.settlement_delay_days.for_currency(currency),
                0,
                MAX_SETTLEMENT_DELAY_DAYS,
            )?;
        }
        if let Some(r) = &self.reserve {
            in_range("settings.reserve.percent_bps", r.percent_bps, 0, MAX_BPS)?;
            in_range("settings.reserve.days", r.days, 0, MAX_RESERVE_DAYS)?;
            max_chars(
                "settings.reserve.reason",
                r.reason.as_deref(),
                MAX_REASON_CHARS,
            )?;
            max_chars("settings.reserve.note", r.note.as_deref(), MAX_NOTE_CHARS)?;
        }
        if let Some(u) = &self.usdt {
            in_range("settings.usdt.fee_bps", u.fee_bps, 0, MAX_BPS)?;
        }
        if let Some(a) = &self.auto_settlement {
            in_range(
                "settings.auto_settlement.minimum",
                a.minimum,
                0,
                MAX_SETTING_AMOUNT,
            )?;
        }
        for (field, rate) in [
            ("live_per_second", self.rate_limits.live_per_second),
            ("test_per_second", self.rate_limits.test_per_second),
        ] {
            if let Some(rate) = rate {
                in_range(
                    &format!("settings.rate_limits.{field}"),
                    rate,
                    MIN_RATE_PER_SECOND,
                    MAX_RATE_PER_SECOND,
                )?;
            }
        }
        Ok(())
    }

    /// Each price rule's bounds.
    fn validate_pricing(&self) -> DomainResult<()> {
        use bounds::*;
        for (currency, rules) in &self.pricing {
            for (channel, rule) in rules {
                let at = format!(
                    "settings.pricing.{}.{}",
                    currency.as_str(),
                    channel.as_str()
                );
                in_range(&format!("{at}.percent_bps"), rule.percent_bps, 0, MAX_BPS)?;
                in_range(&format!("{at}.flat"), rule.flat, 0, MAX_FLAT_FEE)?;
                in_range(
                    &format!("{at}.flat_waived_below"),
                    rule.flat_waived_below,
                    0,
                    MAX_SETTING_AMOUNT,
                )?;
                if let Some(cap) = rule.cap {
                    in_range(&format!("{at}.cap"), cap, 0, MAX_SETTING_AMOUNT)?;
                }
                // The rule's own checks (none beyond these bounds today).
                rule.validate().map_err(|m| DomainError::invalid(&at, m))?;
            }
        }
        Ok(())
    }

    /// The approval threshold and the payout limits.
    fn validate_payouts(&self) -> DomainResult<()> {
        use bounds::*;
        if let Some(t) = self.payout_approval_threshold {
            in_range(
                "settings.payout_approval_threshold",
                t,
                0,
                MAX_SETTING_AMOUNT,
            )?;
        }
        if let Some(l) = &self.payout_limits {
            in_range(
                "settings.payout_limits.per_payout",
                l.per_payout,
                1,
                MAX_SETTING_AMOUNT,
            )?;
            in_range(
                "settings.payout_limits.daily",
                l.daily,
                1,
                MAX_SETTING_AMOUNT,
            )?;
        }
        Ok(())
    }
}

/// 400 `parameter_invalid` naming `param` unless `min <= value <= max`.
fn in_range<T>(param: &str, value: T, min: T, max: T) -> DomainResult<()>
where
    T: PartialOrd + fmt::Display,
{
    if value < min || value > max {
        return Err(DomainError::invalid(
            param,
            format!("`{param}` must be between {min} and {max}; got {value}"),
        ));
    }
    Ok(())
}

/// 400 `parameter_invalid` naming `param` when `value` is longer than `max`
/// characters.
fn max_chars(param: &str, value: Option<&str>, max: usize) -> DomainResult<()> {
    if value.is_some_and(|v| v.chars().count() > max) {
        return Err(DomainError::invalid(
            param,
            format!("`{param}` must be at most {max} characters"),
        ));
    }
    Ok(())
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let t = target.as_object_mut().expect("object");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}
