//! The ledger: buckets, entries and lines, and the pure posting function.
//!
//! A merchant's money in one mode is a set of balances keyed by
//! (brand, currency, bucket). Money moves only by posting an entry: one or
//! more lines sharing a type, a source and a time. [`post`] checks the entry
//! and computes each line's `balance_after`; it never touches the store. The
//! ledger actor ([`actor`]) is the only caller, so balances are checked and
//! `balance_after` computed in one place.

pub mod actor;
#[cfg(test)]
mod moved_tests;
mod post;
pub mod query;
pub mod release;
pub mod reserve;

pub use post::*;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::KeyBuf;

use crate::error::{DomainError, DomainResult, ErrorCode};
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
    #[serde(with = "kobo_storage::codec::timestamp")]
    pub created_at: DateTime<Utc>,
}

/// Stored in the compact format (kobo_storage::codec); lines written as
/// JSON before it still read. Pinned by
/// `tests::the_stored_layout_of_a_ledger_line_is_pinned`.
impl kobo_storage::Compact for LedgerLine {}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn stored_line() -> LedgerLine {
        LedgerLine {
            id: 9,
            merchant: Uuid::from_u128(1),
            mode: Mode::Test,
            brand: Uuid::from_u128(2),
            currency: Currency::NGN,
            bucket: Bucket::Pending,
            amount: 247_312,
            balance_after: 247_312,
            entry_type: EntryType::Payment,
            gross: Some(250_000),
            fee: Some(2_688),
            source: Uuid::from_u128(3),
            description: "payment".into(),
            created_at: "2025-03-03T09:00:00Z".parse().unwrap(),
        }
    }

    #[test]
    fn a_ledger_line_is_stored_compact_and_a_json_one_still_reads() {
        let l = stored_line();
        let bytes = kobo_storage::encode_compact(&l);
        assert_eq!(bytes[0], kobo_storage::codec::FORMAT_V3);
        assert_eq!(kobo_storage::decode::<LedgerLine>(&bytes).unwrap(), l);
        let json = kobo_storage::encode(&l);
        assert!(bytes.len() * 3 < json.len(), "{}", bytes.len());
        assert_eq!(kobo_storage::decode::<LedgerLine>(&json).unwrap(), l);
    }

    /// postcard stores fields by position (and enum variants by index): if
    /// this fails, the change needs a new format version, not a new pinned
    /// value. The line as format 2 wrote it (the time as text) still reads.
    #[test]
    fn the_stored_layout_of_a_ledger_line_is_pinned() {
        let bytes = kobo_storage::encode_compact(&stored_line());
        assert_eq!(
            hex::encode(&bytes),
            concat!(
                "030910000000000000000000000000000000010010000000000000000000000000000000020000a0",
                "981ea0981e0001a0c21e01802a1000000000000000000000000000000003077061796d656e74a0be",
                "abfc0c00",
            ),
            "the compact layout of LedgerLine changed"
        );
        crate::compact_layout::assert_reads_as(
            concat!(
                "020910000000000000000000000000000000010010000000000000000000000000000000020000a098",
                "1ea0981e0001a0c21e01802a1000000000000000000000000000000003077061796d656e7414323032",
                "352d30332d30335430393a30303a30305a",
            ),
            &stored_line(),
        );
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
}
