//! Payment intents (their indexes and captures) and payouts (the money
//! in flight).

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use kobo_storage::StoreError;
use kobo_storage::Table;

use super::ledger::InFlight;
use super::links::LinkTally;
use super::table::{index, list_key, object_table, Index};
use super::{accounts, Checker};
use crate::money::Currency;
use crate::payment_intent::{checkout_code, link, service as pi, PaymentIntent, Status};
use crate::payout::{Payout, PayoutStatus};
use crate::usdt::CryptoPayout;

/// The indexes a payment intent belongs in.
fn intent_indexes() -> Vec<Index<PaymentIntent>> {
    vec![
        index(Table::PaymentIntentIndex, |p: &PaymentIntent| {
            vec![pi::list_key(p.merchant, p.mode, p.seq)]
        }),
        index(Table::PaymentIntentStatusIndex, |p: &PaymentIntent| {
            vec![pi::status_prefix(p.merchant, p.mode, p.status)
                .u64(p.seq)
                .build()]
        }),
        index(Table::PaymentIntentCustomerIndex, |p: &PaymentIntent| {
            p.customer
                .map(|cu| {
                    pi::customer_prefix(p.merchant, p.mode, cu)
                        .u64(p.seq)
                        .build()
                })
                .into_iter()
                .collect()
        }),
        index(Table::PaymentIntentReferences, |p: &PaymentIntent| {
            p.reference
                .as_deref()
                .map(|r| pi::reference_key(p.merchant, p.mode, r))
                .into_iter()
                .collect()
        }),
        // A code that names its intent needs no row, and a credit's
        // payment has no checkout link: nobody pays it.
        index(Table::CheckoutLinks, |p: &PaymentIntent| {
            checkout_code::has_link_row(p)
                .then(|| p.checkout_code.as_bytes().to_vec())
                .into_iter()
                .collect()
        }),
        index(
            Table::PaymentIntentVirtualAccountIndex,
            |p: &PaymentIntent| {
                p.bank_credit
                    .as_ref()
                    .map(|b| {
                        pi::virtual_account_prefix(p.merchant, p.mode, b.virtual_account)
                            .u64(p.seq)
                            .build()
                    })
                    .into_iter()
                    .collect()
            },
        ),
        index(Table::PaymentIntentLinkIndex, |p: &PaymentIntent| {
            p.payment_link
                .map(|l| link::link_prefix(p.merchant, p.mode, l).u64(p.seq).build())
                .into_iter()
                .collect()
        }),
    ]
}

/// Payment intents: their indexes, one capture per success (none
/// otherwise), their credit rows; returns what each link's counters
/// should hold.
pub(super) fn payments(
    c: &mut Checker,
    mut captures: HashMap<Uuid, u32>,
) -> Result<LinkTally, StoreError> {
    let mut capture_breaches = Vec::new();
    let mut tally = LinkTally::new();
    object_table::<PaymentIntent>(
        c,
        Table::PaymentIntents,
        "payment_intent",
        |p| p.id,
        |p| Some(p.seq),
        &intent_indexes(),
        |c, p| {
            c.examined("captures", 1);
            let found = captures.remove(&p.id).unwrap_or(0);
            if let Some(b) = capture(p, found) {
                capture_breaches.push(b);
            }
            if let Some(l) = p.payment_link {
                tally.add(l, p);
            }
            accounts::credit_row(c, p)
        },
    )?;
    for (source, n) in captures {
        capture_breaches.push(format!(
            "{n} captures of payment {source}, which does not exist"
        ));
    }
    for b in capture_breaches {
        c.breach("captures", b);
    }
    Ok(tally)
}

/// A payment's captures: one if it succeeded, none otherwise.
fn capture(p: &PaymentIntent, found: u32) -> Option<String> {
    let wanted = u32::from(p.status == Status::Successful);
    if found == wanted {
        return None;
    }
    Some(match wanted {
        1 => format!(
            "successful payment_intent {} (merchant {}) has {found} captures, not one",
            p.id, p.merchant
        ),
        _ => format!(
            "payment_intent {} (merchant {}) is {} but has {found} captures",
            p.id,
            p.merchant,
            p.status.as_str()
        ),
    })
}

/// Payouts and crypto payouts: their indexes, and the `payout_in_flight`
/// balances (`held`) equal those not yet paid, failed or canceled.
pub(super) fn payouts(c: &mut Checker, held: InFlight) -> Result<(), StoreError> {
    let mut expected: InFlight = HashMap::new();
    object_table::<Payout>(
        c,
        Table::Payouts,
        "payout",
        |p| p.id,
        |p| Some(p.seq),
        &[index(Table::PayoutIndex, |p: &Payout| {
            vec![list_key(p.merchant, p.mode, p.seq)]
        })],
        |_, p| {
            if matches!(
                p.status,
                PayoutStatus::AwaitingApproval | PayoutStatus::Queued | PayoutStatus::Processing
            ) {
                *expected
                    .entry((p.merchant, p.mode, p.brand, p.currency))
                    .or_default() += p.total();
            }
            Ok(())
        },
    )?;
    object_table::<CryptoPayout>(
        c,
        Table::CryptoPayouts,
        "crypto_payout",
        |p| p.id,
        |p| Some(p.seq),
        &[index(Table::CryptoPayoutIndex, |p: &CryptoPayout| {
            vec![list_key(p.merchant, p.mode, p.seq)]
        })],
        |_, p| {
            if !p.status.is_final() {
                *expected
                    .entry((p.merchant, p.mode, p.brand, Currency::USD))
                    .or_default() += p.usd_amount;
            }
            Ok(())
        },
    )?;
    let mut keys: HashSet<_> = expected.keys().copied().collect();
    keys.extend(held.keys().copied());
    for key in keys {
        c.examined("payouts_in_flight", 1);
        let (want, have) = (
            expected.get(&key).copied().unwrap_or(0),
            held.get(&key).copied().unwrap_or(0),
        );
        if want != have {
            let (merchant, mode, brand, currency) = key;
            c.breach(
                "payouts_in_flight",
                format!(
                    "merchant {merchant} {} {} (brand {brand}): payouts in flight total {want} but payout_in_flight holds {have}",
                    mode.as_str(),
                    currency.as_str()
                ),
            );
        }
    }
    Ok(())
}
