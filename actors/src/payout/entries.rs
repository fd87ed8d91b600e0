//! A payout's ledger entries: the hold when it is created, and the money
//! returned or paid out when it ends.

use crate::banks::BankAccount;
use crate::ledger::actor::UsageChange;
use crate::ledger::{Bucket, EntrySpec, EntryType, LineSpec};
use crate::money::Currency;
use crate::payout::{Effect, Payout};

/// The ledger entry of a new payout: amount + fee + VAT from `available`
/// to `payout_in_flight`.
pub(super) fn hold_entry(payout: &Payout, account: &BankAccount) -> EntrySpec {
    let total = payout.total();
    let line = |bucket, amount, fee| LineSpec {
        brand: payout.brand,
        currency: Currency::NGN,
        bucket,
        amount,
        gross: None,
        fee,
    };
    EntrySpec {
        entry_type: EntryType::Payout,
        source: payout.id,
        description: format!("payout to {} {}", account.bank_name, account.account_number),
        lines: vec![
            line(Bucket::Available, -total, Some(payout.fee + payout.vat)),
            line(Bucket::PayoutInFlight, total, None),
        ],
        allow_negative: false,
    }
}

/// The ledger entry (and the day's usage change) of a money effect.
pub(super) fn money_of(after: &Payout, effect: &Effect) -> (EntrySpec, Option<UsageChange>) {
    let total = after.total();
    let line = |bucket: Bucket, amount: i64| LineSpec {
        brand: after.brand,
        currency: after.currency,
        bucket,
        amount,
        gross: None,
        fee: None,
    };
    match effect {
        Effect::ReturnMoney => (
            EntrySpec {
                entry_type: EntryType::Payout,
                source: after.id,
                description: format!("payout {} returned", after.status.as_str()),
                lines: vec![
                    line(Bucket::PayoutInFlight, -total),
                    line(Bucket::Available, total),
                ],
                allow_negative: false,
            },
            Some(UsageChange {
                day: after.day,
                delta: -after.amount,
                daily_limit: None,
            }),
        ),
        Effect::PayOut => (
            EntrySpec {
                entry_type: EntryType::Payout,
                source: after.id,
                description: "payout paid".into(),
                lines: vec![line(Bucket::PayoutInFlight, -total)],
                allow_negative: false,
            },
            None,
        ),
        other => unreachable!("{other:?} moves no money"),
    }
}
