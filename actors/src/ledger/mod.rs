//! The ledger: buckets, entries and lines, and the pure posting function.
//!
//! A merchant's money in one mode is a set of balances keyed by
//! (brand, currency, bucket). Money moves only by posting an entry: one or
//! more lines sharing a type, a source and a time. [`post`] checks the entry
//! and computes each line's `balance_after`; it never touches the store. The
//! ledger actor ([`actor`]) is the only caller, so balances are checked and
//! `balance_after` computed in one place.

pub mod actor;
pub mod query;
pub mod release;
pub mod reserve;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::KeyBuf;

use crate::error::{DomainError, DomainResult};
use crate::ids::{scope_key, Mode};
use crate::money::Currency;

/// A balance bucket.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    Pending,
    Available,
    Reserve,
    PayoutInFlight,
    RefundInFlight,
    DisputeHold,
}

impl Bucket {
    pub const ALL: [Bucket; 6] = [
        Bucket::Pending,
        Bucket::Available,
        Bucket::Reserve,
        Bucket::PayoutInFlight,
        Bucket::RefundInFlight,
        Bucket::DisputeHold,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Bucket::Pending => "pending",
            Bucket::Available => "available",
            Bucket::Reserve => "reserve",
            Bucket::PayoutInFlight => "payout_in_flight",
            Bucket::RefundInFlight => "refund_in_flight",
            Bucket::DisputeHold => "dispute_hold",
        }
    }
    pub fn parse(s: &str) -> Option<Bucket> {
        Bucket::ALL.into_iter().find(|b| b.as_str() == s)
    }
    pub fn byte(self) -> u8 {
        self as u8
    }
}

/// The type shared by the lines of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryType {
    Payment,
    Release,
    Payout,
    Refund,
    Dispute,
    Conversion,
    Correction,
}

impl EntryType {
    pub const ALL: [EntryType; 7] = [
        EntryType::Payment,
        EntryType::Release,
        EntryType::Payout,
        EntryType::Refund,
        EntryType::Dispute,
        EntryType::Conversion,
        EntryType::Correction,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            EntryType::Payment => "payment",
            EntryType::Release => "release",
            EntryType::Payout => "payout",
            EntryType::Refund => "refund",
            EntryType::Dispute => "dispute",
            EntryType::Conversion => "conversion",
            EntryType::Correction => "correction",
        }
    }
    /// The balance-transaction filter groups (plural) and the types they match.
    pub fn parse_group(s: &str) -> Option<&'static [EntryType]> {
        EntryGroup::ALL
            .into_iter()
            .find(|g| g.as_str() == s)
            .map(EntryGroup::types)
    }
    /// Whether an entry of this type may bring money into the business or
    /// take it out (a named external flow). Other entries only move money
    /// between buckets and must sum to zero per currency.
    fn crosses_the_boundary(self) -> bool {
        !matches!(self, EntryType::Release)
    }
}

/// A balance-transaction filter group (the `type` filter): plural names, each
/// matching one or more entry types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryGroup {
    Payments,
    Releases,
    Payouts,
    Refunds,
    Disputes,
    /// Conversions, corrections included.
    Conversions,
}

impl EntryGroup {
    pub const ALL: [EntryGroup; 6] = [
        EntryGroup::Payments,
        EntryGroup::Releases,
        EntryGroup::Payouts,
        EntryGroup::Refunds,
        EntryGroup::Disputes,
        EntryGroup::Conversions,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            EntryGroup::Payments => "payments",
            EntryGroup::Releases => "releases",
            EntryGroup::Payouts => "payouts",
            EntryGroup::Refunds => "refunds",
            EntryGroup::Disputes => "disputes",
            EntryGroup::Conversions => "conversions",
        }
    }
    /// The entry types the group matches.
    pub fn types(self) -> &'static [EntryType] {
        match self {
            EntryGroup::Payments => &[EntryType::Payment],
            EntryGroup::Releases => &[EntryType::Release],
            EntryGroup::Payouts => &[EntryType::Payout],
            EntryGroup::Refunds => &[EntryType::Refund],
            EntryGroup::Disputes => &[EntryType::Dispute],
            EntryGroup::Conversions => &[EntryType::Conversion, EntryType::Correction],
        }
    }
}

/// One line to post.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LineSpec {
    pub brand: Uuid,
    pub currency: Currency,
    pub bucket: Bucket,
    pub amount: i64,
    pub gross: Option<i64>,
    pub fee: Option<i64>,
}

/// An entry to post.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EntrySpec {
    pub entry_type: EntryType,
    pub source: Uuid,
    pub description: String,
    pub lines: Vec<LineSpec>,
    /// Buckets may go below zero for this entry (a flow that must happen
    /// whatever the balance, such as a lost dispute).
    pub allow_negative: bool,
}

/// One posted line: a balance transaction.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LedgerLine {
    pub id: u64,
    pub merchant: Uuid,
    pub mode: Mode,
    pub brand: Uuid,
    pub currency: Currency,
    pub bucket: Bucket,
    pub amount: i64,
    pub balance_after: i64,
    pub entry_type: EntryType,
    pub gross: Option<i64>,
    pub fee: Option<i64>,
    pub source: Uuid,
    pub description: String,
    pub created_at: DateTime<Utc>,
}

/// The `object` value of a balance transaction.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum BalanceTransactionObject {
    #[serde(rename = "balance_transaction")]
    BalanceTransaction,
}

/// The public balance transaction object: one ledger line.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = BalanceTransaction)]
pub struct BalanceTransactionView {
    /// A string of digits; the pagination cursor.
    #[schema(pattern = "^[0-9]+$")]
    pub id: String,
    #[schema(inline)]
    pub object: BalanceTransactionObject,
    pub livemode: bool,
    /// Lines of one entry share `type` and `created_at`.
    #[serde(rename = "type")]
    pub entry_type: EntryType,
    /// Signed: positive adds to `bucket`, negative takes from it.
    pub amount: i64,
    pub currency: Currency,
    pub bucket: Bucket,
    /// That bucket's balance after the line.
    pub balance_after: i64,
    /// On payment lines: what the customer paid.
    #[schema(required = true)]
    pub gross: Option<i64>,
    /// On payment lines: fee plus VAT.
    #[schema(required = true)]
    pub fee: Option<i64>,
    /// The id of the payment, payout, refund, dispute or conversion behind
    /// the line.
    pub source: Uuid,
    pub brand: Uuid,
    pub description: String,
    pub created_at: DateTime<Utc>,
}

impl LedgerLine {
    pub fn view(&self) -> BalanceTransactionView {
        BalanceTransactionView {
            id: self.id.to_string(),
            object: BalanceTransactionObject::BalanceTransaction,
            livemode: self.mode.livemode(),
            entry_type: self.entry_type,
            amount: self.amount,
            currency: self.currency,
            bucket: self.bucket,
            balance_after: self.balance_after,
            gross: self.gross,
            fee: self.fee,
            source: self.source,
            brand: self.brand,
            description: self.description.clone(),
            created_at: self.created_at,
        }
    }

    /// The public balance transaction object, as JSON.
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a balance transaction view serializes")
    }

    pub fn store_key(&self) -> Vec<u8> {
        line_key(self.merchant, self.mode, self.id)
    }
}

pub fn line_key(merchant: Uuid, mode: Mode, id: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(id).build()
}

pub type BalanceKey = (Uuid, Currency, Bucket);

pub fn balance_store_key(merchant: Uuid, mode: Mode, key: BalanceKey) -> Vec<u8> {
    balance_prefix(merchant, mode, Some(key.0))
        .u8(key.1.byte())
        .u8(key.2.byte())
        .build()
}

pub fn balance_prefix(merchant: Uuid, mode: Mode, brand: Option<Uuid>) -> KeyBuf {
    let k = scope_key(merchant, mode);
    match brand {
        Some(b) => k.bytes(b.as_bytes()),
        None => k,
    }
}

/// Stored value of one balance row.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct BalanceRow {
    pub brand: Uuid,
    pub currency: Currency,
    pub bucket: Bucket,
    pub amount: i64,
}

/// The posted result of an entry: its lines and the balances they leave.
#[derive(Debug, Clone)]
pub struct Posting {
    pub lines: Vec<LedgerLine>,
    pub balances: Vec<(BalanceKey, i64)>,
}

/// Checks `entry` against `balances` and computes its lines. Pure.
pub fn post(
    balances: &HashMap<BalanceKey, i64>,
    merchant: Uuid,
    mode: Mode,
    entry: &EntrySpec,
    mut next_id: impl FnMut() -> u64,
    now: DateTime<Utc>,
) -> DomainResult<Posting> {
    assert_entry_balances(entry);
    let mut working: HashMap<BalanceKey, i64> = HashMap::new();
    let mut lines = Vec::with_capacity(entry.lines.len());
    for spec in &entry.lines {
        let key = (spec.brand, spec.currency, spec.bucket);
        let before = *working
            .get(&key)
            .unwrap_or_else(|| balances.get(&key).unwrap_or(&0));
        let after = before
            .checked_add(spec.amount)
            .ok_or_else(|| DomainError::internal("balance overflow"))?;
        if after < 0 && spec.amount < 0 && !entry.allow_negative {
            return Err(DomainError::state(
                "insufficient_funds",
                format!(
                    "the {} {} balance is {before}, short of {}",
                    spec.currency.as_str(),
                    spec.bucket.as_str(),
                    -spec.amount
                ),
            ));
        }
        working.insert(key, after);
        lines.push(LedgerLine {
            id: next_id(),
            merchant,
            mode,
            brand: spec.brand,
            currency: spec.currency,
            bucket: spec.bucket,
            amount: spec.amount,
            balance_after: after,
            entry_type: entry.entry_type,
            gross: spec.gross,
            fee: spec.fee,
            source: entry.source,
            description: entry.description.clone(),
            created_at: now,
        });
    }
    let posting = Posting {
        lines,
        balances: working.into_iter().collect(),
    };
    assert_posting_follows(balances, &posting);
    Ok(posting)
}

/// Asserts that `entry` balances: it has lines, and an entry that only moves
/// money between buckets (a release) sums to zero in each currency. A broken
/// entry is a programmer error, so this stops the posting (fail-stop: the
/// ledger actor restarts and nothing is written) rather than answering 500.
pub fn assert_entry_balances(entry: &EntrySpec) {
    assert!(
        !entry.lines.is_empty(),
        "ledger invariant: a {} entry needs at least one line",
        entry.entry_type.as_str()
    );
    if entry.entry_type.crosses_the_boundary() {
        return;
    }
    for c in Currency::ALL {
        // In i128: lines of extreme amounts cannot overflow the check.
        let sum: i128 = entry
            .lines
            .iter()
            .filter(|l| l.currency == c)
            .map(|l| l.amount as i128)
            .sum();
        assert!(
            sum == 0,
            "ledger invariant: a {} entry must balance; its {} lines sum to {sum}",
            entry.entry_type.as_str(),
            c.as_str()
        );
    }
}

/// Asserts that a posting's lines chain from `before`: in each bucket the
/// first line's `balance_after` is the old balance plus its amount, each next
/// line's is the previous one's plus its amount, and the balance the posting
/// leaves is its last line's `balance_after`.
fn assert_posting_follows(before: &HashMap<BalanceKey, i64>, posting: &Posting) {
    let mut running: HashMap<BalanceKey, i64> = HashMap::new();
    for l in &posting.lines {
        let key = (l.brand, l.currency, l.bucket);
        let prev = running
            .get(&key)
            .or_else(|| before.get(&key))
            .copied()
            .unwrap_or(0);
        assert!(
            prev.checked_add(l.amount) == Some(l.balance_after),
            "ledger invariant: line {} moves {} {} by {} from {prev} but records {}",
            l.id,
            l.currency.as_str(),
            l.bucket.as_str(),
            l.amount,
            l.balance_after
        );
        running.insert(key, l.balance_after);
    }
    assert_eq!(
        running.len(),
        posting.balances.len(),
        "ledger invariant: a posting leaves a balance for each bucket it moves"
    );
    for (key, amount) in &posting.balances {
        assert_eq!(
            running.get(key),
            Some(amount),
            "ledger invariant: the balance a posting leaves is its last line's balance_after"
        );
    }
}

/// How many of the newest lines [`assert_loaded_balances`] reads: balances
/// are kept running (one row per bucket), so activation checks the recent
/// chain of lines against them instead of summing the whole history.
pub const LOAD_CHECK_LINES: usize = 1_000;

/// Asserts that loaded `balances` agree with the newest lines (given newest
/// first): each bucket with a line has a balance row equal to its newest
/// line's `balance_after`, consecutive lines of a bucket chain (the older
/// line's `balance_after` plus the newer line's amount is the newer line's
/// `balance_after`), and when `complete` (the lines are the whole history) a
/// bucket without lines has a zero balance.
pub fn assert_loaded_balances(
    balances: &HashMap<BalanceKey, i64>,
    newest_first: &[LedgerLine],
    complete: bool,
) {
    // The newer line of each bucket seen so far.
    let mut newer: HashMap<BalanceKey, &LedgerLine> = HashMap::new();
    for l in newest_first {
        let key = (l.brand, l.currency, l.bucket);
        match newer.get(&key) {
            None => assert_eq!(
                balances.get(&key),
                Some(&l.balance_after),
                "ledger invariant: the {} {} balance of brand {} is not its newest line's ({})",
                l.currency.as_str(),
                l.bucket.as_str(),
                l.brand,
                l.id
            ),
            Some(n) => assert!(
                l.balance_after.checked_add(n.amount) == Some(n.balance_after),
                "ledger invariant: line {} ({} after {}) does not follow line {} ({})",
                n.id,
                n.balance_after,
                n.amount,
                l.id,
                l.balance_after
            ),
        }
        newer.insert(key, l);
    }
    if complete {
        for (key, amount) in balances {
            assert!(
                newer.contains_key(key) || *amount == 0,
                "ledger invariant: the {} {} balance of brand {} is {amount} with no line",
                key.1.as_str(),
                key.2.as_str(),
                key.0
            );
        }
    }
}

/// Posts several entries in order, each seeing the balances the previous
/// left; all or nothing. Pure.
pub fn post_all(
    balances: &HashMap<BalanceKey, i64>,
    merchant: Uuid,
    mode: Mode,
    entries: &[EntrySpec],
    mut next_id: impl FnMut() -> u64,
    now: DateTime<Utc>,
) -> DomainResult<Posting> {
    let mut overlay: HashMap<BalanceKey, i64> = HashMap::new();
    let mut lines = Vec::new();
    for entry in entries {
        let view = |k: &BalanceKey| overlay.get(k).or_else(|| balances.get(k)).copied();
        let mut current: HashMap<BalanceKey, i64> = HashMap::new();
        for l in &entry.lines {
            let k = (l.brand, l.currency, l.bucket);
            if let Some(v) = view(&k) {
                current.insert(k, v);
            }
        }
        let p = post(&current, merchant, mode, entry, &mut next_id, now)?;
        lines.extend(p.lines);
        overlay.extend(p.balances);
    }
    Ok(Posting {
        lines,
        balances: overlay.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(bucket: Bucket, amount: i64) -> LineSpec {
        LineSpec {
            brand: Uuid::nil(),
            currency: Currency::NGN,
            bucket,
            amount,
            gross: None,
            fee: None,
        }
    }

    fn entry(t: EntryType, lines: Vec<LineSpec>) -> EntrySpec {
        EntrySpec {
            entry_type: t,
            source: Uuid::nil(),
            description: String::new(),
            lines,
            allow_negative: false,
        }
    }

    #[test]
    fn balance_after_follows_each_line() {
        let mut balances = HashMap::new();
        balances.insert((Uuid::nil(), Currency::NGN, Bucket::Pending), 500);
        let mut id = 0;
        let p = post(
            &balances,
            Uuid::nil(),
            Mode::Test,
            &entry(
                EntryType::Release,
                vec![line(Bucket::Pending, -300), line(Bucket::Available, 300)],
            ),
            || {
                id += 1;
                id
            },
            Utc::now(),
        )
        .unwrap();
        assert_eq!(p.lines[0].balance_after, 200);
        assert_eq!(p.lines[1].balance_after, 300);
        assert_eq!(p.lines[0].id + 1, p.lines[1].id);
    }

    #[test]
    fn an_entry_that_would_overdraw_a_bucket_is_refused() {
        let e = post(
            &HashMap::new(),
            Uuid::nil(),
            Mode::Test,
            &entry(
                EntryType::Release,
                vec![line(Bucket::Pending, -1), line(Bucket::Available, 1)],
            ),
            || 1,
            Utc::now(),
        )
        .unwrap_err();
        assert_eq!(e.code, "insufficient_funds");
    }

    /// The view renders exactly what the `json!` rendering it replaced did.
    #[test]
    fn balance_transaction_json_is_unchanged() {
        use serde_json::json;
        let old = |l: &LedgerLine| {
            json!({
                "id": l.id.to_string(),
                "object": "balance_transaction",
                "livemode": l.mode.livemode(),
                "type": l.entry_type.as_str(),
                "amount": l.amount,
                "currency": l.currency,
                "bucket": l.bucket.as_str(),
                "balance_after": l.balance_after,
                "gross": l.gross,
                "fee": l.fee,
                "source": l.source,
                "brand": l.brand,
                "description": l.description,
                "created_at": l.created_at,
            })
        };
        for (n, entry_type) in EntryType::ALL.into_iter().enumerate() {
            for bucket in Bucket::ALL {
                for currency in Currency::ALL {
                    let mut l = LedgerLine {
                        id: 1_000 + n as u64,
                        merchant: Uuid::new_v4(),
                        mode: Mode::Test,
                        brand: Uuid::new_v4(),
                        currency,
                        bucket,
                        amount: -250,
                        balance_after: 750,
                        entry_type,
                        gross: None,
                        fee: None,
                        source: Uuid::new_v4(),
                        description: "payment order-1".into(),
                        created_at: Utc::now(),
                    };
                    assert_eq!(l.to_api(), old(&l));
                    l.mode = Mode::Live;
                    l.gross = Some(1_000);
                    l.fee = Some(250);
                    assert_eq!(l.to_api(), old(&l));
                }
            }
        }
    }

    #[test]
    fn filter_groups_match_their_entry_types() {
        let t = |s| EntryType::parse_group(s).unwrap().to_vec();
        assert_eq!(t("payments"), [EntryType::Payment]);
        assert_eq!(t("releases"), [EntryType::Release]);
        assert_eq!(t("payouts"), [EntryType::Payout]);
        assert_eq!(t("refunds"), [EntryType::Refund]);
        assert_eq!(t("disputes"), [EntryType::Dispute]);
        assert_eq!(
            t("conversions"),
            [EntryType::Conversion, EntryType::Correction]
        );
        assert_eq!(EntryType::parse_group("payment"), None);
        assert_eq!(EntryType::parse_group(""), None);
        for g in EntryGroup::ALL {
            assert_eq!(serde_json::to_value(g).unwrap(), g.as_str());
        }
        // Every entry type is in exactly one group.
        for e in EntryType::ALL {
            let n = EntryGroup::ALL
                .iter()
                .filter(|g| g.types().contains(&e))
                .count();
            assert_eq!(n, 1, "{e:?}");
        }
    }

    fn post_one(balances: &HashMap<BalanceKey, i64>, e: EntrySpec) -> DomainResult<Posting> {
        let mut id = 0;
        post(
            balances,
            Uuid::nil(),
            Mode::Test,
            &e,
            || {
                id += 1;
                id
            },
            Utc::now(),
        )
    }

    #[test]
    #[should_panic(expected = "a release entry must balance")]
    fn a_release_that_does_not_balance_is_a_programmer_error() {
        let _ = post_one(
            &HashMap::new(),
            entry(EntryType::Release, vec![line(Bucket::Available, 1)]),
        );
    }

    #[test]
    #[should_panic(expected = "needs at least one line")]
    fn an_entry_without_lines_is_a_programmer_error() {
        let _ = post_one(&HashMap::new(), entry(EntryType::Payment, vec![]));
    }

    #[test]
    #[should_panic(expected = "a release entry must balance")]
    fn extreme_lines_that_do_not_balance_panic_never_wrap() {
        // Lines whose sum overflows i64 (and does not balance).
        let _ = post_one(
            &HashMap::new(),
            entry(
                EntryType::Release,
                vec![
                    line(Bucket::Pending, i64::MAX),
                    line(Bucket::Available, i64::MAX),
                ],
            ),
        );
    }

    #[test]
    fn an_entry_crossing_the_boundary_need_not_sum_to_zero() {
        let p = post_one(
            &HashMap::new(),
            entry(EntryType::Payment, vec![line(Bucket::Pending, 700)]),
        )
        .unwrap();
        assert_eq!(p.lines[0].balance_after, 700);
    }

    fn posted(balances: &HashMap<BalanceKey, i64>, lines: Vec<LineSpec>) -> Posting {
        post_one(balances, entry(EntryType::Payment, lines)).unwrap()
    }

    #[test]
    fn loaded_balances_that_match_their_lines_pass() {
        let first = posted(&HashMap::new(), vec![line(Bucket::Pending, 500)]);
        let before: HashMap<_, _> = first.balances.iter().copied().collect();
        let second = posted(&before, vec![line(Bucket::Pending, -200)]);
        let balances: HashMap<_, _> = second.balances.iter().copied().collect();
        let newest_first = vec![second.lines[0].clone(), first.lines[0].clone()];
        assert_loaded_balances(&balances, &newest_first, true);
        assert_loaded_balances(&balances, &newest_first[..1], false);
    }

    #[test]
    #[should_panic(expected = "is not its newest line's")]
    fn a_loaded_balance_unlike_its_newest_line_panics() {
        let p = posted(&HashMap::new(), vec![line(Bucket::Pending, 500)]);
        let mut balances: HashMap<_, _> = p.balances.iter().copied().collect();
        *balances.values_mut().next().unwrap() += 1;
        assert_loaded_balances(&balances, &p.lines, true);
    }

    #[test]
    #[should_panic(expected = "does not follow line")]
    fn loaded_lines_that_do_not_chain_panic() {
        let first = posted(&HashMap::new(), vec![line(Bucket::Pending, 500)]);
        let mut second = posted(&HashMap::new(), vec![line(Bucket::Pending, 100)]);
        second.lines[0].id = 2;
        let balances: HashMap<_, _> = second.balances.iter().copied().collect();
        assert_loaded_balances(
            &balances,
            &[second.lines[0].clone(), first.lines[0].clone()],
            true,
        );
    }

    #[test]
    #[should_panic(expected = "with no line")]
    fn a_loaded_balance_without_lines_panics() {
        let mut balances = HashMap::new();
        balances.insert((Uuid::nil(), Currency::NGN, Bucket::Available), 10);
        assert_loaded_balances(&balances, &[], true);
    }

    #[test]
    #[should_panic(expected = "records")]
    fn a_posting_whose_lines_do_not_follow_panics() {
        let mut p = posted(&HashMap::new(), vec![line(Bucket::Pending, 500)]);
        p.lines[0].balance_after = 499;
        assert_posting_follows(&HashMap::new(), &p);
    }

    #[test]
    fn a_balance_past_i64_max_is_refused() {
        // A balance that would pass i64::MAX is refused.
        let mut balances = HashMap::new();
        balances.insert((Uuid::nil(), Currency::NGN, Bucket::Pending), 1);
        balances.insert((Uuid::nil(), Currency::NGN, Bucket::Available), i64::MAX);
        let e = post(
            &balances,
            Uuid::nil(),
            Mode::Test,
            &entry(
                EntryType::Release,
                vec![line(Bucket::Pending, -1), line(Bucket::Available, 1)],
            ),
            || 1,
            Utc::now(),
        )
        .unwrap_err();
        assert_eq!(e.code, "internal_error");
    }
}
