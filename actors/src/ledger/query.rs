//! Ledger reads from store snapshots: balances (per brand or summed),
//! balance transactions (filtered, newest first), statement lines, a
//! brand's available balance. Writes go through the ledger actor.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::Africa::Lagos;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::{decode, ReadTxn, Table};

use crate::env::Env;
use crate::error::DomainResult;
use crate::ids::{scope_key, Mode};
use crate::ledger::{balance_prefix, line_key, BalanceRow, Bucket, EntryType, LedgerLine};
use crate::money::Currency;
use crate::paging::Page;

/// The `object` value of a balance.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum BalanceObject {
    #[serde(rename = "balance")]
    Balance,
}

/// One currency's amount in one bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub struct BalanceAmount {
    pub currency: Currency,
    pub amount: i64,
}

/// The public Balance object: every bucket, one entry per currency (zeros
/// included).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Balance)]
pub struct BalanceView {
    #[schema(inline)]
    pub object: BalanceObject,
    pub livemode: bool,
    /// The brand asked for; null for the whole business (the sum of its
    /// brands).
    #[schema(required = true)]
    pub brand: Option<Uuid>,
    /// Collected, not yet released.
    pub pending: Vec<BalanceAmount>,
    /// Can be paid out.
    pub available: Vec<BalanceAmount>,
    /// Rolling reserve held against chargebacks.
    pub reserve: Vec<BalanceAmount>,
    /// Sent to a bank, awaiting confirmation.
    pub payout_in_flight: Vec<BalanceAmount>,
    /// Being refunded to customers.
    pub refund_in_flight: Vec<BalanceAmount>,
    /// Held for disputes.
    pub dispute_hold: Vec<BalanceAmount>,
}

/// `GET /v1/balance`, as JSON.
pub fn balance(kobo: &Env, merchant: Uuid, mode: Mode, brand: Option<Uuid>) -> DomainResult<Value> {
    let view = balance_view(kobo, merchant, mode, brand)?;
    Ok(serde_json::to_value(view).expect("a balance view serializes"))
}

/// `GET /v1/balance`: every bucket, one entry per currency, zeros included;
/// a brand's own money, or the whole business (sum of brands).
pub fn balance_view(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    brand: Option<Uuid>,
) -> DomainResult<BalanceView> {
    let read = kobo.store.read()?;
    let mut sums: BTreeMap<(Bucket, Currency), i64> = BTreeMap::new();
    read.scan_prefix(
        Table::Balances,
        &balance_prefix(merchant, mode, brand).build(),
        None,
        |_, v| {
            let row: BalanceRow = decode(v)?;
            *sums.entry((row.bucket, row.currency)).or_default() += row.amount;
            Ok(true)
        },
    )?;
    Ok(balance_from_sums(mode, brand, &sums))
}

fn balance_from_sums(
    mode: Mode,
    brand: Option<Uuid>,
    sums: &BTreeMap<(Bucket, Currency), i64>,
) -> BalanceView {
    let amounts = |bucket: Bucket| -> Vec<BalanceAmount> {
        Currency::ALL
            .iter()
            .map(|c| BalanceAmount {
                currency: *c,
                amount: sums.get(&(bucket, *c)).copied().unwrap_or(0),
            })
            .collect()
    };
    BalanceView {
        object: BalanceObject::Balance,
        livemode: mode.livemode(),
        brand,
        pending: amounts(Bucket::Pending),
        available: amounts(Bucket::Available),
        reserve: amounts(Bucket::Reserve),
        payout_in_flight: amounts(Bucket::PayoutInFlight),
        refund_in_flight: amounts(Bucket::RefundInFlight),
        dispute_hold: amounts(Bucket::DisputeHold),
    }
}

/// Filters of balance transactions and statement exports.
#[derive(Debug, Clone, Default)]
pub struct LineFilter {
    pub brand: Option<Uuid>,
    pub currency: Option<Currency>,
    pub bucket: Option<Bucket>,
    pub types: Option<Vec<EntryType>>,
    /// Inclusive Lagos dates.
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
}

fn lagos_midnight(d: NaiveDate) -> DateTime<Utc> {
    Lagos
        .from_local_datetime(&d.and_hms_opt(0, 0, 0).expect("midnight"))
        .single()
        .expect("Lagos has no DST")
        .with_timezone(&Utc)
}

impl LineFilter {
    fn window(&self) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
        (
            self.from.map(lagos_midnight),
            self.to.and_then(|d| d.succ_opt()).map(lagos_midnight),
        )
    }
    fn matches(&self, l: &LedgerLine) -> bool {
        self.brand.is_none_or(|b| l.brand == b)
            && self.currency.is_none_or(|c| l.currency == c)
            && self.bucket.is_none_or(|b| l.bucket == b)
            && self
                .types
                .as_ref()
                .is_none_or(|t| t.contains(&l.entry_type))
    }
}

/// Visits matching lines newest first, below `before` (a line id).
/// Lines of one merchant are in time order, so the scan stops at `from`.
fn scan_lines(
    read: &ReadTxn,
    merchant: Uuid,
    mode: Mode,
    f: &LineFilter,
    before: Option<u64>,
    mut visit: impl FnMut(LedgerLine) -> bool,
) -> DomainResult<()> {
    let prefix = scope_key(merchant, mode).build();
    let before_key = before.map(|id| line_key(merchant, mode, id));
    let (start, end) = f.window();
    read.scan_prefix_rev(
        Table::LedgerLines,
        &prefix,
        before_key.as_deref(),
        |_, v| {
            let line: LedgerLine = decode(v)?;
            if start.is_some_and(|s| line.created_at < s) {
                return Ok(false);
            }
            if end.is_some_and(|e| line.created_at >= e) || !f.matches(&line) {
                return Ok(true);
            }
            Ok(visit(line))
        },
    )?;
    Ok(())
}

pub fn balance_transactions(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    f: &LineFilter,
    limit: usize,
    starting_after: Option<u64>,
) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    let mut data = Vec::new();
    let mut has_more = false;
    scan_lines(&read, merchant, mode, f, starting_after, |line| {
        if data.len() == limit {
            has_more = true;
            return false;
        }
        data.push(line.to_api());
        true
    })?;
    Ok(Page { data, has_more })
}

/// Up to `max` matching lines, oldest first, and whether more matched
/// (the oldest are then left out: narrow the dates for them).
pub fn statement_lines(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    f: &LineFilter,
    max: usize,
) -> DomainResult<(Vec<LedgerLine>, bool)> {
    let read = kobo.store.read()?;
    let mut lines = Vec::new();
    let mut truncated = false;
    scan_lines(&read, merchant, mode, f, None, |line| {
        if lines.len() == max {
            truncated = true;
            return false;
        }
        lines.push(line);
        true
    })?;
    lines.reverse();
    Ok((lines, truncated))
}

/// A brand's `available` balance in `currency`, from a snapshot.
pub fn available(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    brand: Uuid,
    currency: Currency,
) -> DomainResult<i64> {
    let key =
        crate::ledger::balance_store_key(merchant, mode, (brand, currency, Bucket::Available));
    Ok(kobo
        .store
        .read()?
        .get_decoded::<crate::ledger::BalanceRow>(Table::Balances, &key)?
        .map(|r| r.amount)
        .unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn balance_json_is_unchanged() {
        let mut sums = BTreeMap::new();
        for (n, bucket) in Bucket::ALL.into_iter().enumerate() {
            sums.insert((bucket, Currency::NGN), 100 * n as i64 - 150);
        }
        sums.insert((Bucket::Available, Currency::USD), 42);
        for (mode, brand) in [(Mode::Test, None), (Mode::Live, Some(Uuid::new_v4()))] {
            for sums in [BTreeMap::new(), sums.clone()] {
                // The rendering the view replaced.
                let mut old = json!({
                    "object": "balance",
                    "livemode": mode.livemode(),
                    "brand": brand,
                });
                let o = old.as_object_mut().expect("object");
                for bucket in Bucket::ALL {
                    let entries: Vec<Value> = Currency::ALL
                        .iter()
                        .map(|c| {
                            json!({"currency": c, "amount": sums.get(&(bucket, *c)).copied().unwrap_or(0)})
                        })
                        .collect();
                    o.insert(bucket.as_str().to_string(), Value::Array(entries));
                }
                let new = serde_json::to_value(balance_from_sums(mode, brand, &sums)).unwrap();
                assert_eq!(new, old);
            }
        }
    }
}
