//! `ledger`: lines chain per bucket and balances equal their lines.

use std::collections::HashMap;

use uuid::Uuid;

use kobo_storage::{decode, StoreError, Table};

use super::{hex, uuid_of, Checker};
use crate::ids::Mode;
use crate::ledger::{balance_store_key, BalanceRow, Bucket, EntryType, LedgerLine};
use crate::money::Currency;

/// A bucket: merchant, mode, brand, currency, bucket.
type BucketKey = (Uuid, Mode, Uuid, Currency, Bucket);

#[derive(Default)]
struct BucketLines {
    sum: i64,
    last_after: i64,
    lines: u64,
}

/// What the ledger walk leaves for the object checks.
pub(super) struct Ledger {
    /// Captures (payment entries' `pending` lines) per payment.
    pub captures: HashMap<Uuid, u32>,
    /// The `payout_in_flight` balances.
    pub in_flight: InFlight,
}

/// In-flight money per merchant, mode, brand and currency.
pub(super) type InFlight = HashMap<(Uuid, Mode, Uuid, Currency), i64>;

type Buckets = HashMap<BucketKey, BucketLines>;

pub(super) fn ledger(c: &mut Checker) -> Result<Ledger, StoreError> {
    let mut breaches = Vec::new();
    let (buckets, captures) = lines(c, &mut breaches)?;
    let in_flight = balances(c, buckets, &mut breaches)?;
    for b in breaches {
        c.breach("ledger", b);
    }
    Ok(Ledger {
        captures,
        in_flight,
    })
}

/// Walks the lines: each under its own key, chained in its bucket.
fn lines(
    c: &mut Checker,
    breaches: &mut Vec<String>,
) -> Result<(Buckets, HashMap<Uuid, u32>), StoreError> {
    let mut buckets: Buckets = HashMap::new();
    let mut captures: HashMap<Uuid, u32> = HashMap::new();
    let mut n = 0;
    let mut max_line = 0u64;
    c.each(Table::LedgerLines, |k, v| {
        n += 1;
        let Ok(line) = decode::<LedgerLine>(v) else {
            breaches.push(format!("ledger line key {} does not decode", hex(k)));
            return Ok(());
        };
        if line.store_key() != k {
            breaches.push(format!(
                "ledger line {} is stored under the key of another line ({})",
                line.id,
                hex(k)
            ));
        }
        max_line = max_line.max(line.id);
        let key = (
            line.merchant,
            line.mode,
            line.brand,
            line.currency,
            line.bucket,
        );
        chain(&line, buckets.entry(key).or_default(), breaches);
        if line.entry_type == EntryType::Payment && line.bucket == Bucket::Pending {
            *captures.entry(line.source).or_default() += 1;
        }
        Ok(())
    })?;
    c.examined("ledger", n);
    if max_line > 0 {
        c.seq(max_line, || "a ledger line id".into());
    }
    Ok((buckets, captures))
}

/// Adds `line` to its bucket: its `balance_after` must follow the last.
fn chain(line: &LedgerLine, b: &mut BucketLines, breaches: &mut Vec<String>) {
    let expected = b.last_after + line.amount;
    if line.balance_after != expected {
        breaches.push(format!(
                "ledger line {} (merchant {} {} {} {}, brand {}): balance_after {} but the bucket's previous balance_after {} plus its amount {} is {} (a line before it is missing or changed)",
                line.id,
                line.merchant,
                line.mode.as_str(),
                line.currency.as_str(),
                line.bucket.as_str(),
                line.brand,
                line.balance_after,
                b.last_after,
                line.amount,
                expected
            ));
    }
    b.last_after = line.balance_after;
    b.sum += line.amount;
    b.lines += 1;
}

/// Walks the balances: each under its key, equal to its bucket's lines;
/// a bucket with lines but no balance sums to 0. Returns the
/// `payout_in_flight` balances.
fn balances(
    c: &mut Checker,
    mut buckets: Buckets,
    breaches: &mut Vec<String>,
) -> Result<InFlight, StoreError> {
    let mut in_flight = HashMap::new();
    let mut rows = 0;
    c.each(Table::Balances, |k, v| {
        rows += 1;
        let (Ok(row), Some((merchant, mode))) = (decode::<BalanceRow>(v), scope_of(k)) else {
            breaches.push(format!("balance key {} does not decode", hex(k)));
            return Ok(());
        };
        if balance_store_key(merchant, mode, (row.brand, row.currency, row.bucket)) != k {
            breaches.push(format!(
                "balance {} {} {} (brand {}) of merchant {merchant} is stored under another key ({})",
                mode.as_str(),
                row.currency.as_str(),
                row.bucket.as_str(),
                row.brand,
                hex(k)
            ));
        }
        let name = format!(
            "merchant {merchant} {} {} {} (brand {})",
            mode.as_str(),
            row.currency.as_str(),
            row.bucket.as_str(),
            row.brand
        );
        let lines = buckets
            .remove(&(merchant, mode, row.brand, row.currency, row.bucket))
            .unwrap_or_default();
        if row.amount != lines.sum {
            breaches.push(format!(
                "balance of {name} is {} but its {} ledger lines sum to {}",
                row.amount, lines.lines, lines.sum
            ));
        } else if row.amount != lines.last_after {
            breaches.push(format!(
                "balance of {name} is {} but its newest line's balance_after is {}",
                row.amount, lines.last_after
            ));
        }
        if row.bucket == Bucket::PayoutInFlight {
            in_flight.insert((merchant, mode, row.brand, row.currency), row.amount);
        }
        Ok(())
    })?;
    c.examined("ledger", rows);
    for ((merchant, mode, brand, currency, bucket), lines) in buckets {
        if lines.sum != 0 {
            breaches.push(format!(
                "merchant {merchant} {} {} {} (brand {brand}) has {} ledger lines summing to {} but no balance",
                mode.as_str(),
                currency.as_str(),
                bucket.as_str(),
                lines.lines,
                lines.sum
            ));
        }
    }
    Ok(in_flight)
}

/// The merchant and mode a balance key starts with.
fn scope_of(k: &[u8]) -> Option<(Uuid, Mode)> {
    let merchant = k.get(..16).and_then(uuid_of)?;
    let mode = match k.get(16)? {
        0 => Mode::Test,
        1 => Mode::Live,
        _ => return None,
    };
    Some((merchant, mode))
}
