//! Currencies, channels, pricing and the fee arithmetic of CONTRACT section 4.
//!
//! Every amount is an `i64` of minor units (kobo, cents); there are no floats.
//! Percentages round half up to the minor unit:
//! `fee = (amount*bps + 5000) / 10000`, then the flat part, then the cap;
//! `vat = (fee*750 + 5000) / 10000`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Largest amount accepted anywhere (10^12 minor units).
pub const MAX_AMOUNT: i64 = 1_000_000_000_000;
/// VAT on fees: 7.5%.
pub const VAT_BPS: i64 = 750;

/// A currency, by its ISO 4217 code.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
pub enum Currency {
    NGN,
    USD,
}

impl Currency {
    pub const ALL: [Currency; 2] = [Currency::NGN, Currency::USD];
    pub fn parse(s: &str) -> Option<Currency> {
        match s {
            "NGN" => Some(Currency::NGN),
            "USD" => Some(Currency::USD),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Currency::NGN => "NGN",
            Currency::USD => "USD",
        }
    }
    pub fn byte(self) -> u8 {
        match self {
            Currency::NGN => 0,
            Currency::USD => 1,
        }
    }
}

/// How a customer pays.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Card,
    BankTransfer,
    DirectDebit,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Card => "card",
            Channel::BankTransfer => "bank_transfer",
            Channel::DirectDebit => "direct_debit",
        }
    }
}

/// Who pays the fee: the merchant (taken out of the amount) or the customer
/// (on top of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FeeBearer {
    Merchant,
    Customer,
}

/// One channel's price in one currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FeeRule {
    /// Percentage part, basis points.
    pub percent_bps: i64,
    /// Flat part, minor units.
    #[serde(default)]
    pub flat: i64,
    /// The flat part is waived for amounts below this.
    #[serde(default)]
    pub flat_waived_below: i64,
    /// Cap on the fee (before VAT), minor units.
    #[serde(default)]
    pub cap: Option<i64>,
}

impl FeeRule {
    pub const fn percent(percent_bps: i64, cap: Option<i64>) -> FeeRule {
        FeeRule {
            percent_bps,
            flat: 0,
            flat_waived_below: 0,
            cap,
        }
    }

    /// `(fee, vat)` for `amount`.
    pub fn fee_and_vat(&self, amount: i64) -> (i64, i64) {
        let mut fee = ((amount as i128 * self.percent_bps as i128 + 5000) / 10000) as i64;
        if self.flat > 0 && amount >= self.flat_waived_below {
            fee += self.flat;
        }
        if let Some(cap) = self.cap {
            fee = fee.min(cap);
        }
        (fee, vat_on(fee))
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(0..=10_000).contains(&self.percent_bps) {
            return Err("percent_bps must be between 0 and 10000".into());
        }
        if self.flat < 0 || self.flat_waived_below < 0 || self.cap.is_some_and(|c| c < 0) {
            return Err("flat, flat_waived_below and cap must not be negative".into());
        }
        Ok(())
    }
}

pub fn vat_on(fee: i64) -> i64 {
    ((fee as i128 * VAT_BPS as i128 + 5000) / 10000) as i64
}

/// A merchant's prices: currency -> channel -> rule.
pub type Pricing = BTreeMap<Currency, BTreeMap<Channel, FeeRule>>;

/// Default pricing of CONTRACT section 4.
pub fn default_pricing() -> Pricing {
    let mut ngn = BTreeMap::new();
    ngn.insert(
        Channel::Card,
        FeeRule {
            percent_bps: 150,
            flat: 10_000,
            flat_waived_below: 250_000,
            cap: Some(200_000),
        },
    );
    ngn.insert(Channel::BankTransfer, FeeRule::percent(100, Some(30_000)));
    ngn.insert(Channel::DirectDebit, FeeRule::percent(150, Some(200_000)));
    let mut usd = BTreeMap::new();
    usd.insert(Channel::Card, FeeRule::percent(390, None));
    let mut p = Pricing::new();
    p.insert(Currency::NGN, ngn);
    p.insert(Currency::USD, usd);
    p
}

/// The `fees` object: fee, VAT and what the merchant nets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Fees {
    #[schema(minimum = 0)]
    pub fee: i64,
    #[schema(minimum = 0)]
    pub vat: i64,
    #[schema(minimum = 0)]
    pub net: i64,
}

/// Fees on `amount` under `rule` for the given bearer. The fee is computed on
/// `amount` in both modes. Merchant bearer: `fee + vat + net = amount`
/// (the fee is cut down to fit the amount if a custom price would exceed it).
/// Customer bearer: `net = amount` and the customer pays `amount + fee + vat`.
pub fn fees(amount: i64, rule: &FeeRule, bearer: FeeBearer) -> Fees {
    let (mut fee, mut vat) = rule.fee_and_vat(amount);
    match bearer {
        FeeBearer::Customer => Fees {
            fee,
            vat,
            net: amount,
        },
        FeeBearer::Merchant => {
            if fee + vat > amount {
                // Largest fee whose fee + VAT still fits the amount.
                fee = (amount * 10_000) / (10_000 + VAT_BPS);
                while fee + vat_on(fee) > amount {
                    fee -= 1;
                }
                vat = vat_on(fee);
            }
            Fees {
                fee,
                vat,
                net: amount - fee - vat,
            }
        }
    }
}

/// Payout fee of CONTRACT section 4: ₦10 up to and including ₦5,000, ₦25 up to
/// and including ₦50,000, ₦50 above; VAT on top.
pub fn payout_fee(amount: i64) -> (i64, i64) {
    let fee = if amount <= 500_000 {
        1_000
    } else if amount <= 5_000_000 {
        2_500
    } else {
        5_000
    };
    (fee, vat_on(fee))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rule(c: Currency, ch: Channel) -> FeeRule {
        default_pricing()[&c][&ch]
    }

    #[test]
    fn naira_card_fee_waives_the_flat_part_below_2500_naira() {
        let card = rule(Currency::NGN, Channel::Card);
        // ₦2,499.99: 1.5% only.
        assert_eq!(card.fee_and_vat(249_999), (3_750, 281));
        // exactly ₦2,500: 1.5% + ₦100.
        assert_eq!(card.fee_and_vat(250_000), (3_750 + 10_000, 1_031));
        // capped at ₦2,000.
        assert_eq!(card.fee_and_vat(100_000_000).0, 200_000);
    }

    #[test]
    fn bank_transfer_fee_is_one_percent_capped_at_300_naira() {
        let bt = rule(Currency::NGN, Channel::BankTransfer);
        assert_eq!(bt.fee_and_vat(1_000_000), (10_000, 750));
        assert_eq!(bt.fee_and_vat(100_000_000), (30_000, 2_250));
        // half up: 1% of 150 kobo is 1.5 -> 2.
        assert_eq!(bt.fee_and_vat(150).0, 2);
    }

    #[test]
    fn dollar_card_fee_is_3_9_percent() {
        assert_eq!(
            rule(Currency::USD, Channel::Card).fee_and_vat(10_000),
            (390, 29)
        );
    }

    #[test]
    fn payout_fee_steps_at_5000_and_50000_naira() {
        assert_eq!(payout_fee(500_000), (1_000, 75));
        assert_eq!(payout_fee(500_001), (2_500, 188));
        assert_eq!(payout_fee(5_000_000), (2_500, 188));
        assert_eq!(payout_fee(5_000_001), (5_000, 375));
    }

    #[test]
    fn a_fee_larger_than_the_amount_is_cut_to_fit_when_the_merchant_bears_it() {
        let r = FeeRule {
            percent_bps: 0,
            flat: 1_000,
            flat_waived_below: 0,
            cap: None,
        };
        let f = fees(100, &r, FeeBearer::Merchant);
        assert_eq!(f.fee + f.vat + f.net, 100);
        assert!(f.net >= 0);
    }

    proptest! {
        #[test]
        fn merchant_bearer_fee_vat_and_net_add_up_to_the_amount(
            amount in 100i64..=MAX_AMOUNT,
            bps in 0i64..=10_000,
            flat in 0i64..1_000_000,
            waive in 0i64..1_000_000,
            cap in proptest::option::of(0i64..10_000_000),
        ) {
            let r = FeeRule { percent_bps: bps, flat, flat_waived_below: waive, cap };
            let f = fees(amount, &r, FeeBearer::Merchant);
            prop_assert_eq!(f.fee + f.vat + f.net, amount);
            prop_assert!(f.fee >= 0 && f.vat >= 0 && f.net >= 0);
        }

        #[test]
        fn customer_bearer_nets_the_whole_amount(
            amount in 100i64..=MAX_AMOUNT,
            ch in prop_oneof![Just(Channel::Card), Just(Channel::BankTransfer), Just(Channel::DirectDebit)],
        ) {
            let r = rule(Currency::NGN, ch);
            let f = fees(amount, &r, FeeBearer::Customer);
            prop_assert_eq!(f.net, amount);
            prop_assert_eq!((f.fee, f.vat), r.fee_and_vat(amount));
        }

        #[test]
        fn fees_never_exceed_the_cap(amount in 100i64..=MAX_AMOUNT) {
            let (fee, _) = rule(Currency::NGN, Channel::Card).fee_and_vat(amount);
            prop_assert!(fee <= 200_000);
        }
    }
}
