//! Creating payouts, the payout quote, limits, and automatic settlement.

use std::sync::Arc;

use serde_json::{json, Value};
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::banks::{self, BankAccount};
use crate::error::{DomainError, DomainResult};
use crate::idempotency::IdempotencySave;
use crate::ids::{new_id, scope_key, Mode};
use crate::ledger::actor::{stored_usage, PostEntry, UsageChange};
use crate::ledger::{Bucket, EntrySpec, EntryType, LineSpec};
use crate::merchant::{Merchant, PayoutTier};
use crate::money::{payout_fee, Currency};
use crate::payout::{Payout, PayoutStatus};
use crate::runtime::Kobo;
use crate::timers::{Timer, TimerKind};

/// The smallest payout: ₦1.
pub const MIN_PAYOUT: i64 = 100;

/// Per-payout and daily limits in force for a merchant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub tier: PayoutTier,
    pub custom: bool,
    pub per_payout: i64,
    pub daily: i64,
}

pub fn limits(merchant: &Merchant) -> Limits {
    let s = &merchant.settings;
    let (per_payout, daily) = match s.payout_tier {
        PayoutTier::Starter => (100_000_000, 500_000_000),
        PayoutTier::Verified => (1_000_000_000, 5_000_000_000),
        PayoutTier::Enterprise => (10_000_000_000, 50_000_000_000),
    };
    match &s.payout_limits {
        Some(c) => Limits {
            tier: s.payout_tier,
            custom: true,
            per_payout: c.per_payout,
            daily: c.daily,
        },
        None => Limits {
            tier: s.payout_tier,
            custom: false,
            per_payout,
            daily,
        },
    }
}

fn tier_name(t: PayoutTier) -> &'static str {
    match t {
        PayoutTier::Starter => "starter",
        PayoutTier::Verified => "verified",
        PayoutTier::Enterprise => "enterprise",
    }
}

/// The largest amount whose amount + fee + VAT fits `available` (the fee
/// steps with the amount, so each step is tried).
pub fn max_for_balance(available: i64) -> i64 {
    const STEPS: [(i64, i64); 3] = [(0, 500_000), (500_000, 5_000_000), (5_000_000, i64::MAX)];
    let mut best = 0;
    for (above, upto) in STEPS {
        let (fee, vat) = payout_fee(above + 1);
        let a = (available - fee - vat).min(upto);
        if a > above && a > best {
            best = a;
        }
    }
    best
}

pub fn payout_list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

pub fn load(kobo: &Kobo, id: Uuid) -> DomainResult<Option<Payout>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::Payouts, id.as_bytes())?)
}

fn available_of(kobo: &Kobo, merchant: Uuid, mode: Mode, brand: Uuid) -> DomainResult<i64> {
    let read = kobo.store.read()?;
    let key =
        crate::ledger::balance_store_key(merchant, mode, (brand, Currency::NGN, Bucket::Available));
    Ok(read
        .get_decoded::<crate::ledger::BalanceRow>(Table::Balances, &key)?
        .map(|r| r.amount)
        .unwrap_or(0))
}

/// `GET /v1/payouts/quote`. Reads the balance and the day's usage; reserves
/// nothing.
pub fn quote(
    kobo: &Kobo,
    merchant: &Merchant,
    mode: Mode,
    amount: i64,
    brand: Uuid,
) -> DomainResult<Value> {
    let (fee, vat) = payout_fee(amount);
    let total = amount + fee + vat;
    let available = available_of(kobo, merchant.id, mode, brand)?;
    let l = limits(merchant);
    let day = kobo.calendar.lagos_date(kobo.clock.now());
    let used_today = stored_usage(kobo, merchant.id, mode, day)?;
    let by_balance = max_for_balance(available);
    let by_daily = (l.daily - used_today).max(0);
    let (max_amount, max_reason) = [
        (by_balance, "balance"),
        (l.per_payout, "per_payout"),
        (by_daily, "daily"),
    ]
    .into_iter()
    .min_by_key(|(v, _)| *v)
    .expect("three candidates");
    Ok(json!({
        "object": "payout_quote",
        "livemode": mode.livemode(),
        "currency": "NGN",
        "amount": amount,
        "fee": fee,
        "vat": vat,
        "total_debited": total,
        "available": available,
        "max_amount": max_amount.max(0),
        "max_reason": max_reason,
        "sufficient": total <= available,
        "within_limits": amount <= l.per_payout && used_today + amount <= l.daily,
        "limits": {
            "tier": tier_name(l.tier),
            "custom": l.custom,
            "per_payout": l.per_payout,
            "daily": l.daily,
            "used_today": used_today,
        },
    }))
}

/// A validated create request.
pub struct CreatePayout {
    pub amount: i64,
    pub bank_account: Uuid,
    pub brand: Option<Uuid>,
    /// Made by automatic settlement (no approval threshold).
    pub automatic: bool,
}

/// Creates a payout: the record and the move of amount + fee + VAT from
/// `available` to `payout_in_flight` commit together, through the merchant's
/// ledger, which checks the balance and the day's limit in the same step.
pub async fn create(
    kobo: &Arc<Kobo>,
    merchant: &Merchant,
    mode: Mode,
    req: CreatePayout,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Payout> {
    let account: BankAccount =
        banks::load(kobo, merchant.id, mode, req.bank_account)?.ok_or_else(|| {
            DomainError::not_found("bank_account", req.bank_account).with_param("bank_account_id")
        })?;
    let brand = match req.brand {
        Some(b) => {
            crate::query::brand(kobo, merchant.id, mode, b)
                .map_err(|e| e.with_param("brand"))?
                .id
        }
        None => merchant.default_brand(mode),
    };
    let l = limits(merchant);
    if req.amount > l.per_payout {
        return Err(DomainError::state(
            "payout_limit_exceeded",
            format!("the most one payout may carry is {}", l.per_payout),
        ));
    }
    let now = kobo.clock.now();
    let (fee, vat) = payout_fee(req.amount);
    let awaiting = !req.automatic
        && merchant
            .settings
            .payout_approval_threshold
            .is_some_and(|t| req.amount >= t);
    let payout = Payout {
        id: new_id(now),
        merchant: merchant.id,
        mode,
        seq: kobo.seq.next(),
        amount: req.amount,
        currency: Currency::NGN,
        fee,
        vat,
        bank_account: account.id,
        brand,
        status: if awaiting {
            PayoutStatus::AwaitingApproval
        } else {
            PayoutStatus::Queued
        },
        failure_code: None,
        automatic: req.automatic,
        day: kobo.calendar.lagos_date(now),
        created_at: now,
        updated_at: now,
        paid_at: None,
        version: 1,
    };
    let mut batch = Batch::new();
    batch
        .put(Table::Payouts, payout.id.as_bytes().to_vec(), &payout)
        .put_raw(
            Table::PayoutIndex,
            payout_list_key(merchant.id, mode, payout.seq),
            payout.id.as_bytes().to_vec(),
        )
        .note_seq(payout.seq);
    if !awaiting {
        Timer::new(TimerKind::PayoutSend, payout.id, merchant.id, mode).schedule(&mut batch, now);
    }
    if let Some(idem) = idem {
        idem.add_to(&mut batch, 201, &payout.to_api().to_string(), now);
    }
    let total = payout.total();
    let entry = EntrySpec {
        entry_type: EntryType::Payout,
        source: payout.id,
        description: format!("payout to {} {}", account.bank_name, account.account_number),
        lines: vec![
            LineSpec {
                brand,
                currency: Currency::NGN,
                bucket: Bucket::Available,
                amount: -total,
                gross: None,
                fee: Some(fee + vat),
            },
            LineSpec {
                brand,
                currency: Currency::NGN,
                bucket: Bucket::PayoutInFlight,
                amount: total,
                gross: None,
                fee: None,
            },
        ],
        allow_negative: false,
    };
    kobo.ledgers
        .send(
            kobo,
            (merchant.id, mode),
            PostEntry {
                entry,
                with: batch,
                usage: Some(UsageChange {
                    day: payout.day,
                    delta: payout.amount,
                    daily_limit: Some(l.daily),
                }),
            },
        )
        .await?
        .map_err(|e| {
            if e.code == "insufficient_funds" {
                DomainError::state(
                    "insufficient_funds",
                    format!(
                        "the available balance does not cover {} (amount, fee and VAT)",
                        total
                    ),
                )
            } else {
                e
            }
        })?;
    Ok(payout)
}

/// Newest first, with a cursor.
pub fn list(
    kobo: &Kobo,
    merchant: Uuid,
    mode: Mode,
    limit: usize,
    starting_after: Option<Uuid>,
) -> DomainResult<crate::query::Page> {
    let read = kobo.store.read()?;
    let prefix = scope_key(merchant, mode).build();
    let before = match starting_after {
        Some(id) => match read.get_decoded::<Payout>(Table::Payouts, id.as_bytes())? {
            Some(p) if p.merchant == merchant && p.mode == mode => {
                Some(payout_list_key(merchant, mode, p.seq))
            }
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("no such payout: {id}"),
                ))
            }
        },
        None => None,
    };
    let mut data = Vec::new();
    let mut has_more = false;
    read.scan_prefix_rev(Table::PayoutIndex, &prefix, before.as_deref(), |_, v| {
        let id = Uuid::from_slice(v)
            .map_err(|_| kobo_storage::StoreError::Redb("bad payout index".into()))?;
        if let Some(p) = read.get_decoded::<Payout>(Table::Payouts, id.as_bytes())? {
            if data.len() == limit {
                has_more = true;
                return Ok(false);
            }
            data.push(p.to_api());
        }
        Ok(true)
    })?;
    Ok(crate::query::Page { data, has_more })
}

/// Automatic settlement for one merchant and mode: after the morning's
/// releases, pay each brand's available naira (less the payout fee) to the
/// settlement account when it is above the minimum. Only what is available
/// at this moment is paid, so a second run the same morning finds nothing.
pub async fn auto_settle(
    kobo: &Arc<Kobo>,
    merchant: &Merchant,
    mode: Mode,
) -> DomainResult<Vec<Uuid>> {
    let Some(auto) = merchant
        .settings
        .auto_settlement
        .as_ref()
        .filter(|a| a.enabled)
    else {
        return Ok(Vec::new());
    };
    let Some(account) = auto.bank_account_id else {
        return Ok(Vec::new());
    };
    if banks::load(kobo, merchant.id, mode, account)?.is_none() {
        return Ok(Vec::new());
    }
    let l = limits(merchant);
    let day = kobo.calendar.lagos_date(kobo.clock.now());
    let mut made = Vec::new();
    let page = crate::query::list_brands(kobo, merchant.id, mode, 100, None)?;
    for brand in page.data {
        let brand: Uuid = brand["id"]
            .as_str()
            .and_then(|s| Uuid::try_parse(s).ok())
            .expect("brand id");
        let available = available_of(kobo, merchant.id, mode, brand)?;
        let used = stored_usage(kobo, merchant.id, mode, day)?;
        let amount = max_for_balance(available)
            .min(l.per_payout)
            .min(l.daily - used);
        if amount < MIN_PAYOUT || amount <= auto.minimum {
            continue;
        }
        let p = create(
            kobo,
            merchant,
            mode,
            CreatePayout {
                amount,
                bank_account: account,
                brand: Some(brand),
                automatic: true,
            },
            None,
        )
        .await?;
        made.push(p.id);
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_payout_fits_amount_fee_and_vat_in_the_balance() {
        for available in [
            0,
            1_074,
            1_075,
            1_076,
            501_075,
            501_076,
            502_687,
            502_688,
            5_002_688,
            5_005_375,
            5_005_376,
            1_000_000_000,
        ] {
            let a = max_for_balance(available);
            if a > 0 {
                let (fee, vat) = payout_fee(a);
                assert!(a + fee + vat <= available, "{available}: {a}");
                let (fee1, vat1) = payout_fee(a + 1);
                assert!(
                    a + 1 + fee1 + vat1 > available,
                    "{available}: {a} is not the largest"
                );
            }
        }
        assert_eq!(max_for_balance(1_075), 0);
        assert_eq!(max_for_balance(1_076), 1);
        // At ₦5,000 the fee is ₦10; one kobo more and it is ₦25.
        assert_eq!(max_for_balance(501_075), 500_000);
        assert_eq!(max_for_balance(502_688), 500_000);
        assert_eq!(max_for_balance(502_689), 500_001);
    }
}
