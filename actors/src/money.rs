//! Currencies, channels, pricing and the fee arithmetic of CONTRACT section 4.
//!
//! Every amount is an `i64` of minor units (kobo, cents); there are no floats.
//! Percentages round half up to the minor unit:
//! `fee = (amount*bps + 5000) / 10000`, then the flat part, then the cap;
//! `vat = (fee*750 + 5000) / 10000`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{DomainError, DomainResult, ErrorCode};

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

    /// The exact fee (before VAT) for `amount`, in `i128` (no operand of
    /// an `i64` rule and amount can overflow it).
    fn exact_fee(&self, amount: i64) -> i128 {
        let mut fee = (amount as i128 * self.percent_bps as i128 + 5000).div_euclid(10000);
        if self.flat > 0 && amount >= self.flat_waived_below {
            fee += self.flat as i128;
        }
        if let Some(cap) = self.cap {
            fee = fee.min(cap as i128);
        }
        fee
    }

    /// `(fee, vat)` for `amount`. Refused (409 `pricing_out_of_range`)
    /// when the amount is negative or the rule gives a fee below 0 or above
    /// [`MAX_FEE`]: never a wrapped or negative fee.
    pub fn fee_and_vat(&self, amount: i64) -> DomainResult<(i64, i64)> {
        if amount < 0 {
            return Err(pricing_out_of_range(format!(
                "a fee cannot be computed on a negative amount ({amount})"
            )));
        }
        let fee = self.exact_fee(amount);
        if !(0..=MAX_FEE as i128).contains(&fee) {
            return Err(pricing_out_of_range(format!(
                "this price gives a fee of {fee} on {amount}, outside 0 to {MAX_FEE}"
            )));
        }
        let fee = fee as i64;
        Ok((fee, vat_on(fee)))
    }

    /// `(fee, vat)` for display only (a stored payment whose price cannot
    /// be computed, see [`FeeRule::fee_and_vat`]): the exact values held to
    /// 0..=[`MAX_FEE`]. Money is never moved on these.
    pub fn fee_and_vat_for_display(&self, amount: i64) -> (i64, i64) {
        let fee = self.exact_fee(amount.max(0)).clamp(0, MAX_FEE as i128) as i64;
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

/// The largest fee (before VAT) a price may give: no fee above the largest
/// payment. So every fee, VAT and customer total stays far inside `i64`.
pub const MAX_FEE: i64 = MAX_AMOUNT;

/// 409 `pricing_out_of_range`: the merchant's price cannot price this
/// amount (a fee outside 0..=[`MAX_FEE`], or a total that does not fit).
pub fn pricing_out_of_range(message: impl Into<String>) -> DomainError {
    DomainError::state(ErrorCode::PricingOutOfRange, message)
}

/// VAT on a fee, half up. Exact for any `i64` fee (computed in `i128`,
/// held to the `i64` range, which a fee up to [`MAX_FEE`] never reaches).
pub fn vat_on(fee: i64) -> i64 {
    let vat = (fee as i128 * VAT_BPS as i128 + 5000).div_euclid(10000);
    vat.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// `a + b + c`, or `pricing_out_of_range`.
pub fn checked_total(a: i64, b: i64, c: i64) -> DomainResult<i64> {
    a.checked_add(b)
        .and_then(|t| t.checked_add(c))
        .ok_or_else(|| pricing_out_of_range(format!("{a} + {b} + {c} does not fit")))
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
/// Errors as [`FeeRule::fee_and_vat`].
pub fn fees(amount: i64, rule: &FeeRule, bearer: FeeBearer) -> DomainResult<Fees> {
    let (fee, vat) = rule.fee_and_vat(amount)?;
    Ok(split(amount, fee, vat, bearer))
}

/// [`fees`] for display only (see [`FeeRule::fee_and_vat_for_display`]).
pub fn fees_for_display(amount: i64, rule: &FeeRule, bearer: FeeBearer) -> Fees {
    let (fee, vat) = rule.fee_and_vat_for_display(amount);
    split(amount.max(0), fee, vat, bearer)
}

/// `fee` and `vat` (each 0..=MAX_FEE and its VAT) against `amount >= 0`.
fn split(amount: i64, mut fee: i64, mut vat: i64, bearer: FeeBearer) -> Fees {
    match bearer {
        FeeBearer::Customer => Fees {
            fee,
            vat,
            net: amount,
        },
        FeeBearer::Merchant => {
            if fee as i128 + vat as i128 > amount as i128 {
                // Largest fee whose fee + VAT still fits the amount.
                fee = ((amount as i128 * 10_000) / (10_000 + VAT_BPS as i128)) as i64;
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
        assert_eq!(card.fee_and_vat(249_999).unwrap(), (3_750, 281));
        // exactly ₦2,500: 1.5% + ₦100.
        assert_eq!(card.fee_and_vat(250_000).unwrap(), (3_750 + 10_000, 1_031));
        // capped at ₦2,000.
        assert_eq!(card.fee_and_vat(100_000_000).unwrap().0, 200_000);
    }

    #[test]
    fn bank_transfer_fee_is_one_percent_capped_at_300_naira() {
        let bt = rule(Currency::NGN, Channel::BankTransfer);
        assert_eq!(bt.fee_and_vat(1_000_000).unwrap(), (10_000, 750));
        assert_eq!(bt.fee_and_vat(100_000_000).unwrap(), (30_000, 2_250));
        // half up: 1% of 150 kobo is 1.5 -> 2.
        assert_eq!(bt.fee_and_vat(150).unwrap().0, 2);
    }

    #[test]
    fn dollar_card_fee_is_3_9_percent() {
        assert_eq!(
            rule(Currency::USD, Channel::Card)
                .fee_and_vat(10_000)
                .unwrap(),
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
        let f = fees(100, &r, FeeBearer::Merchant).unwrap();
        assert_eq!(f.fee + f.vat + f.net, 100);
        assert!(f.net >= 0);
    }

    #[test]
    fn extreme_prices_and_amounts_are_refused_never_wrapped_or_negative() {
        let huge = FeeRule {
            percent_bps: 0,
            flat: i64::MAX,
            flat_waived_below: 0,
            cap: None,
        };
        for amount in [100, MAX_AMOUNT, i64::MAX] {
            for bearer in [FeeBearer::Customer, FeeBearer::Merchant] {
                let e = fees(amount, &huge, bearer).unwrap_err();
                assert_eq!(e.code, "pricing_out_of_range", "{amount} {bearer:?}");
            }
        }
        // Just inside the limit: the fee is MAX_FEE, never negative.
        let max = FeeRule {
            flat: MAX_FEE,
            ..huge
        };
        let f = fees(MAX_AMOUNT, &max, FeeBearer::Customer).unwrap();
        assert_eq!((f.fee, f.net), (MAX_FEE, MAX_AMOUNT));
        assert!(checked_total(MAX_AMOUNT, f.fee, f.vat).unwrap() > 0);
        let over = FeeRule {
            flat: MAX_FEE + 1,
            ..huge
        };
        assert!(fees(100, &over, FeeBearer::Customer).is_err());
        // i64::MAX amounts at 100%: computed in i128, refused, no panic.
        let all = FeeRule::percent(10_000, None);
        assert!(all.fee_and_vat(i64::MAX).is_err());
        assert!(all.fee_and_vat(-1).is_err());
        // A merchant-borne fee is cut to fit even at the largest amount.
        let f = fees(MAX_AMOUNT, &all, FeeBearer::Merchant).unwrap();
        assert_eq!(f.fee + f.vat + f.net, MAX_AMOUNT);
        // Display never panics or goes negative.
        assert_eq!(huge.fee_and_vat_for_display(i64::MAX).0, MAX_FEE);
        assert!(fees_for_display(i64::MAX, &huge, FeeBearer::Customer).fee >= 0);
        assert!(vat_on(i64::MAX) > 0);
        assert!(checked_total(i64::MAX, 1, 0).is_err());
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
            let f = fees(amount, &r, FeeBearer::Merchant).unwrap();
            prop_assert_eq!(f.fee + f.vat + f.net, amount);
            prop_assert!(f.fee >= 0 && f.vat >= 0 && f.net >= 0);
        }

        #[test]
        fn customer_bearer_nets_the_whole_amount(
            amount in 100i64..=MAX_AMOUNT,
            ch in prop_oneof![Just(Channel::Card), Just(Channel::BankTransfer), Just(Channel::DirectDebit)],
        ) {
            let r = rule(Currency::NGN, ch);
            let f = fees(amount, &r, FeeBearer::Customer).unwrap();
            prop_assert_eq!(f.net, amount);
            prop_assert_eq!((f.fee, f.vat), r.fee_and_vat(amount).unwrap());
        }

        #[test]
        fn fees_never_exceed_the_cap(amount in 100i64..=MAX_AMOUNT) {
            let (fee, _) = rule(Currency::NGN, Channel::Card).fee_and_vat(amount).unwrap();
            prop_assert!(fee <= 200_000);
        }
    }
}
