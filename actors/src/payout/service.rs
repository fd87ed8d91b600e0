//! Creating payouts, the payout quote, limits, and automatic settlement.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::banks::{self, BankAccount};
use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::{new_id, scope_key, Mode};
use crate::ledger::actor::{stored_usage, PostEntry, UsageChange};
use crate::merchant::{Merchant, PayoutTier};
use crate::money::{payout_fee, Currency};
use crate::payout::actor::PayoutDeps;
use crate::payout::{Payout, PayoutStatus, PayoutView};
use crate::timer::{Timer, TimerKind};

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

pub fn load(kobo: &Env, id: Uuid) -> DomainResult<Option<Payout>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::Payouts, id.as_bytes())?)
}

/// Payout rows one look for approvals reads at most.
pub const APPROVAL_SCAN_MAX: usize = 200_000;

/// Payouts of every merchant waiting for an operator's approval, oldest
/// first, at most `limit` (the operator console's queue). Reads at most
/// [`APPROVAL_SCAN_MAX`] payout rows.
pub fn awaiting_approval(kobo: &Env, limit: usize) -> DomainResult<Vec<Payout>> {
    let read = kobo.store.read()?;
    let mut out: Vec<Payout> = Vec::new();
    let mut seen = 0;
    read.scan_prefix(Table::Payouts, &[], None, |_, v| {
        seen += 1;
        let p: Payout = kobo_storage::decode(v)?;
        if p.status == PayoutStatus::AwaitingApproval {
            out.push(p);
        }
        Ok(out.len() < limit && seen < APPROVAL_SCAN_MAX)
    })?;
    out.sort_by_key(|p| (p.created_at, p.id));
    Ok(out)
}

/// The `object` value of a payout quote.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum PayoutQuoteObject {
    #[serde(rename = "payout_quote")]
    PayoutQuote,
}

/// The tightest bound on a payout now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MaxReason {
    /// The available balance (amount, fee and VAT must fit).
    Balance,
    /// The per-payout limit.
    PerPayout,
    /// What is left of the day's limit.
    Daily,
}

/// The payout limits in force.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct PayoutLimitsView {
    pub tier: PayoutTier,
    /// Limits set for this merchant replace the tier's.
    pub custom: bool,
    /// The most one payout may carry, kobo.
    pub per_payout: i64,
    /// The most the payouts of one Lagos day may carry, kobo.
    pub daily: i64,
    /// Kobo of today's (Lagos) payouts counted toward `daily` (failed and
    /// canceled ones no longer count).
    pub used_today: i64,
}

/// A payout quote: the fee and VAT of a payout of `amount`, and whether the
/// balance and the limits allow it now. Nothing is reserved.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = PayoutQuote)]
pub struct PayoutQuoteView {
    #[schema(inline)]
    pub object: PayoutQuoteObject,
    pub livemode: bool,
    /// Always `NGN`.
    pub currency: Currency,
    /// Kobo, as asked.
    pub amount: i64,
    /// The payout fee, kobo.
    #[schema(minimum = 0)]
    pub fee: i64,
    /// VAT on the fee, kobo.
    #[schema(minimum = 0)]
    pub vat: i64,
    /// `amount + fee + vat`: what the payout would take from the balance.
    pub total_debited: i64,
    /// The brand's available naira, kobo.
    pub available: i64,
    /// The largest payout possible now: the tightest of the balance (minding
    /// the fee steps), the per-payout limit and what is left of the day's.
    #[schema(minimum = 0)]
    pub max_amount: i64,
    /// Which bound `max_amount` is.
    pub max_reason: MaxReason,
    /// `total_debited` fits the available balance.
    pub sufficient: bool,
    /// `amount` is within the per-payout limit and what is left of the
    /// day's.
    pub within_limits: bool,
    #[schema(inline)]
    pub limits: PayoutLimitsView,
}

/// `GET /v1/payouts/quote`, as JSON. Reads the balance and the day's usage;
/// reserves nothing.
pub fn quote(
    kobo: &Env,
    merchant: &Merchant,
    mode: Mode,
    amount: i64,
    brand: Uuid,
) -> DomainResult<Value> {
    let view = quote_view(kobo, merchant, mode, amount, brand)?;
    Ok(serde_json::to_value(view).expect("a payout quote serializes"))
}

/// `GET /v1/payouts/quote`. Reads the balance and the day's usage; reserves
/// nothing.
pub fn quote_view(
    kobo: &Env,
    merchant: &Merchant,
    mode: Mode,
    amount: i64,
    brand: Uuid,
) -> DomainResult<PayoutQuoteView> {
    let available = crate::ledger::query::available(kobo, merchant.id, mode, brand, Currency::NGN)?;
    let day = kobo.calendar.lagos_date(kobo.clock.now());
    let used_today = stored_usage(kobo, merchant.id, mode, day)?;
    Ok(quote_from(
        mode,
        amount,
        available,
        limits(merchant),
        used_today,
    ))
}

fn quote_from(
    mode: Mode,
    amount: i64,
    available: i64,
    l: Limits,
    used_today: i64,
) -> PayoutQuoteView {
    let (fee, vat) = payout_fee(amount);
    let total = amount + fee + vat;
    let by_balance = max_for_balance(available);
    let by_daily = (l.daily - used_today).max(0);
    let (max_amount, max_reason) = [
        (by_balance, MaxReason::Balance),
        (l.per_payout, MaxReason::PerPayout),
        (by_daily, MaxReason::Daily),
    ]
    .into_iter()
    .min_by_key(|(v, _)| *v)
    .expect("three candidates");
    PayoutQuoteView {
        object: PayoutQuoteObject::PayoutQuote,
        livemode: mode.livemode(),
        currency: Currency::NGN,
        amount,
        fee,
        vat,
        total_debited: total,
        available,
        max_amount: max_amount.max(0),
        max_reason,
        sufficient: total <= available,
        within_limits: amount <= l.per_payout && used_today + amount <= l.daily,
        limits: PayoutLimitsView {
            tier: l.tier,
            custom: l.custom,
            per_payout: l.per_payout,
            daily: l.daily,
            used_today,
        },
    }
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
    kobo: &PayoutDeps,
    merchant: &Merchant,
    mode: Mode,
    req: CreatePayout,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<PayoutView>> {
    let (account, brand) = check_create(kobo, merchant, mode, &req)?;
    let now = kobo.clock.now();
    let awaiting = !req.automatic
        && merchant
            .settings
            .payout_approval_threshold
            .is_some_and(|t| req.amount >= t);
    let payout = new_payout(kobo, merchant, mode, &req, account.id, brand, awaiting, now);
    let mut batch = Batch::new();
    batch.owned_by(merchant.id.as_bytes());
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
    let answer = Answer::save(Outcome::Created(payout.view()), idem, &mut batch, now);
    let total = payout.total();
    let usage = UsageChange {
        day: payout.day,
        delta: payout.amount,
        daily_limit: Some(limits(merchant).daily),
    };
    kobo.ledgers
        .send(
            (merchant.id, mode),
            PostEntry {
                entry: super::entries::hold_entry(&payout, &account),
                with: crate::registry::Once::new(batch),
                usage: Some(usage),
            },
        )
        .await?
        .map_err(|e| {
            if e.code == ErrorCode::InsufficientFunds {
                DomainError::state(
                    ErrorCode::InsufficientFunds,
                    format!(
                        "the available balance does not cover {} (amount, fee and VAT)",
                        total
                    ),
                )
            } else {
                e
            }
        })?;
    Ok(answer)
}

/// A create's checks, in order: the bank account (404), the brand (404),
/// the per-payout limit (409). Answers the account and the brand.
fn check_create(
    kobo: &PayoutDeps,
    merchant: &Merchant,
    mode: Mode,
    req: &CreatePayout,
) -> DomainResult<(BankAccount, Uuid)> {
    let account: BankAccount =
        banks::load(kobo, merchant.id, mode, req.bank_account)?.ok_or_else(|| {
            DomainError::not_found("bank_account", req.bank_account).with_param("bank_account_id")
        })?;
    let brand = match req.brand {
        Some(b) => {
            crate::merchant::query::brand(kobo, merchant.id, mode, b)
                .map_err(|e| e.with_param("brand"))?
                .id
        }
        None => merchant.default_brand(mode),
    };
    let l = limits(merchant);
    if req.amount > l.per_payout {
        return Err(DomainError::state(
            ErrorCode::PayoutLimitExceeded,
            format!("the most one payout may carry is {}", l.per_payout),
        ));
    }
    Ok((account, brand))
}

/// A new payout, `awaiting_approval` or `queued`.
#[allow(clippy::too_many_arguments)] // the parts of a new payout, each named
fn new_payout(
    kobo: &PayoutDeps,
    merchant: &Merchant,
    mode: Mode,
    req: &CreatePayout,
    bank_account: Uuid,
    brand: Uuid,
    awaiting: bool,
    now: DateTime<Utc>,
) -> Payout {
    let (fee, vat) = payout_fee(req.amount);
    Payout {
        id: new_id(now),
        merchant: merchant.id,
        mode,
        seq: kobo.seq.next(),
        amount: req.amount,
        currency: Currency::NGN,
        fee,
        vat,
        bank_account,
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
    }
}

/// Newest first, with a cursor.
pub fn list(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    limit: usize,
    starting_after: Option<Uuid>,
) -> DomainResult<crate::paging::Page> {
    crate::paging::page_by_index::<Payout>(
        kobo,
        Table::Payouts,
        Table::PayoutIndex,
        merchant,
        mode,
        limit,
        starting_after,
        |p| (p.merchant, p.mode, p.seq),
        Payout::to_api,
    )
}

/// Automatic settlement for one merchant and mode: after the morning's
/// releases, pay each brand's available naira (less the payout fee) to the
/// settlement account when it is above the minimum. Only what is available
/// at this moment is paid, so a second run the same morning finds nothing.
pub async fn auto_settle(
    kobo: &PayoutDeps,
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
    let page = crate::merchant::query::list_brands(kobo, merchant.id, mode, 100, None)?;
    for brand in page.data {
        let brand: Uuid = brand["id"]
            .as_str()
            .and_then(|s| Uuid::try_parse(s).ok())
            .expect("brand id");
        let available =
            crate::ledger::query::available(kobo, merchant.id, mode, brand, Currency::NGN)?;
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
        made.push(p.view().id);
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The view renders exactly what the `json!` rendering it replaced did.
    #[test]
    fn quote_json_is_unchanged() {
        fn tier_name(t: PayoutTier) -> &'static str {
            match t {
                PayoutTier::Starter => "starter",
                PayoutTier::Verified => "verified",
                PayoutTier::Enterprise => "enterprise",
            }
        }
        // The rendering the view replaced.
        fn old(mode: Mode, amount: i64, available: i64, l: Limits, used_today: i64) -> Value {
            let (fee, vat) = payout_fee(amount);
            let total = amount + fee + vat;
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
            serde_json::json!({
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
            })
        }
        let limits = [
            Limits {
                tier: PayoutTier::Starter,
                custom: false,
                per_payout: 100_000_000,
                daily: 500_000_000,
            },
            Limits {
                tier: PayoutTier::Verified,
                custom: true,
                per_payout: 50_000,
                daily: 60_000,
            },
            Limits {
                tier: PayoutTier::Enterprise,
                custom: false,
                per_payout: 10_000_000_000,
                daily: 50_000_000_000,
            },
        ];
        let mut reasons = std::collections::BTreeSet::new();
        for mode in [Mode::Test, Mode::Live] {
            for l in limits {
                for amount in [1, 100, 500_000, 500_001, 5_000_001, 1_000_000_000_000] {
                    for available in [-500, 0, 1_075, 600_000, 1_000_000_000_000] {
                        for used_today in [0, 40_000, 70_000, 600_000_000] {
                            let new = quote_from(mode, amount, available, l, used_today);
                            reasons.insert(format!("{:?}", new.max_reason));
                            let new = serde_json::to_value(new).unwrap();
                            let old = old(mode, amount, available, l, used_today);
                            assert_eq!(new, old);
                            assert_eq!(new.to_string(), old.to_string());
                        }
                    }
                }
            }
        }
        // Every reason was rendered.
        assert_eq!(reasons.len(), 3);
    }

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
