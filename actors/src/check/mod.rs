//! `kobo check`: the invariants the service relies on, verified over one
//! read snapshot of a store (offline, or a restored backup). Each breach is
//! a line naming the object or key; a clean store has none.
//!
//! The checks:
//! - `decode`: every stored value of a codec table decodes (version byte,
//!   JSON), and every object decodes into its type.
//! - `ledger`: each line is stored under its own key and id; per bucket, in
//!   line order, every `balance_after` is the previous one plus the line's
//!   amount (from 0); every balance equals the sum of its bucket's lines
//!   (and its last `balance_after`).
//! - `captures`: every successful payment has exactly one capture (one
//!   `payment` entry, whose `pending` line is counted), and nothing else
//!   has one.
//! - `payouts_in_flight`: per merchant, mode, brand and currency, the
//!   `payout_in_flight` balance equals the payouts (and crypto payouts) not
//!   yet paid, failed or canceled.
//! - `releases`: every scheduled release is stored under its key, has
//!   exactly its one timer (and a pending one its payment's pointer), and no
//!   payment has two releases of one bucket; every pointer leads to its row.
//! - `indexes`: every index entry points at an object that lists it, and
//!   every object is in each index it belongs to.
//! - `customers`: every live customer's email row names it (its email
//!   lowercased) and every email row names a live customer with that email.
//! - `credits`: every virtual-account credit row names an existing
//!   successful payment intent whose `bank_credit` is that account and
//!   session, and every such intent has its row.
//! - `links`: every payment link's counters row is whole `i64`s and its
//!   `held`, `payments` and `amount` equal its intents (created or
//!   processing; successful; their amounts); visit and outbox rows name
//!   intents of their link.
//! - `timers`: every timer is stored under its key and its target exists
//!   (a release timer: its release row).
//! - `idempotency`: every saved response decodes, and records and their
//!   expiry rows match one to one.
//! - `sequence`: the persisted high-water mark is at least every sequence
//!   number in use (a restart never reuses one).
//!
//! Files: this one holds the report and the runner; `decode.rs` the codec
//! walk; `ledger.rs` the ledger; `table.rs` the generic object-and-index
//! check; `objects.rs` and `payments.rs` the older resources' tables;
//! `customers.rs`, `accounts.rs` and `links.rs` customers, virtual
//! accounts and payment links; `releases.rs`, `timers.rs` and
//! `idempotency.rs` the rest.
//!
//! The walk is linear in the store's size; memory holds one entry per
//! ledger bucket, per captured payment and per saved response.

mod accounts;
mod customers;
mod decode;
mod idempotency;
mod ledger;
mod links;
mod objects;
mod payments;
mod releases;
mod subscriptions;
mod table;
mod timers;

use uuid::Uuid;

use kobo_storage::writer::{u64_from, META_SEQ_HIGH_WATER};
use kobo_storage::{ReadTxn, Store, StoreError, Table};

/// Breaches kept per check (all are counted).
const KEEP: usize = 1000;

/// One check's outcome.
#[derive(Debug, Clone)]
pub struct Section {
    pub name: &'static str,
    /// What it verified, for the report.
    pub what: &'static str,
    /// Rows it looked at.
    pub examined: u64,
    /// Breaches found (all of them counted; the first [`KEEP`] kept).
    pub found: u64,
    pub breaches: Vec<String>,
}

/// What `kobo check` found.
#[derive(Debug, Clone)]
pub struct Report {
    pub seq_high_water: u64,
    pub sections: Vec<Section>,
}

impl Report {
    pub fn breaches(&self) -> u64 {
        self.sections.iter().map(|s| s.found).sum()
    }
    pub fn is_clean(&self) -> bool {
        self.breaches() == 0
    }
}

const SECTIONS: &[(&str, &str)] = &[
    ("decode", "every stored value decodes"),
    ("ledger", "balance_after chains; balances equal their lines"),
    (
        "captures",
        "every successful payment has exactly one capture",
    ),
    (
        "payouts_in_flight",
        "payout_in_flight holds the payouts in flight",
    ),
    (
        "releases",
        "every release is scheduled once, with its timer",
    ),
    (
        "indexes",
        "index entries point at objects; objects are indexed",
    ),
    (
        "customers",
        "email rows and live customers match one to one",
    ),
    (
        "credits",
        "every account credit is one successful payment of that account",
    ),
    (
        "links",
        "link counters equal their payments; visits and outbox rows match",
    ),
    (
        "subscriptions",
        "open claims and timers of unfinished subscriptions; one invoice and at most one successful debit per period",
    ),
    ("timers", "no timer is orphaned"),
    ("idempotency", "saved responses decode; expiry rows match"),
    (
        "sequence",
        "the high-water mark covers every sequence in use",
    ),
];

struct Checker<'r> {
    read: &'r ReadTxn,
    sections: Vec<Section>,
    max_seq: (u64, String),
}

impl<'r> Checker<'r> {
    fn section(&mut self, name: &str) -> &mut Section {
        self.sections
            .iter_mut()
            .find(|s| s.name == name)
            .expect("a known section")
    }
    fn examined(&mut self, name: &str, n: u64) {
        self.section(name).examined += n;
    }
    fn breach(&mut self, name: &str, detail: String) {
        let s = self.section(name);
        s.found += 1;
        if s.breaches.len() < KEEP {
            s.breaches.push(detail);
        }
    }
    fn seq(&mut self, seq: u64, what: impl FnOnce() -> String) {
        if seq > self.max_seq.0 {
            self.max_seq = (seq, what());
        }
    }
    fn exists(&self, table: Table, key: &[u8]) -> Result<bool, StoreError> {
        Ok(self.read.get(table, key)?.is_some())
    }
    /// Every row of `table`, in key order.
    fn each(
        &self,
        table: Table,
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.read.scan_prefix(table, &[], None, |k, v| {
            visit(k, v)?;
            Ok(true)
        })
    }
}

pub(crate) fn hex(b: &[u8]) -> String {
    hex::encode(b)
}

pub(crate) fn uuid_of(v: &[u8]) -> Option<Uuid> {
    Uuid::from_slice(v).ok()
}

/// Runs every check over one snapshot of `store`.
pub fn check(store: &Store) -> Result<Report, StoreError> {
    let read = store.read()?;
    // Cluster nodes take their numbers in blocks reserved from the
    // database's sequence and note no high-water mark.
    let seq_high_water = read
        .get(Table::Meta, META_SEQ_HIGH_WATER)?
        .map(|v| u64_from(&v))
        .unwrap_or(0)
        .max(store.reserved_sequence()?);
    let mut c = Checker {
        read: &read,
        sections: SECTIONS
            .iter()
            .map(|(name, what)| Section {
                name,
                what,
                examined: 0,
                found: 0,
                breaches: Vec::new(),
            })
            .collect(),
        max_seq: (0, String::new()),
    };
    decode::decode_all(&mut c)?;
    let ledger = ledger::ledger(&mut c)?;
    let held = payments::payments(&mut c, ledger.captures)?;
    payments::payouts(&mut c, ledger.in_flight)?;
    objects::objects(&mut c)?;
    customers::customers(&mut c)?;
    accounts::accounts(&mut c)?;
    links::links(&mut c, held)?;
    subscriptions::subscriptions(&mut c)?;
    releases::releases(&mut c)?;
    timers::timers(&mut c)?;
    idempotency::idempotency(&mut c)?;
    c.examined("sequence", 1);
    if c.max_seq.0 > seq_high_water {
        let (seq, what) = c.max_seq.clone();
        c.breach(
            "sequence",
            format!("the sequence high-water mark is {seq_high_water} but {what} uses {seq}: a restart would reuse it"),
        );
    }
    Ok(Report {
        seq_high_water,
        sections: c.sections,
    })
}
