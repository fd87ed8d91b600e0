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
//! - `timers`: every timer is stored under its key and its target exists
//!   (a release timer: its release row).
//! - `idempotency`: every saved response decodes, and records and their
//!   expiry rows match one to one.
//! - `sequence`: the persisted high-water mark is at least every sequence
//!   number in use (a restart never reuses one).
//!
//! The walk is linear in the store's size; memory holds one entry per
//! ledger bucket, per captured payment and per saved response.

use std::collections::{HashMap, HashSet};

use serde::de::DeserializeOwned;
use uuid::Uuid;

use kobo_storage::writer::{u64_from, META_SEQ_HIGH_WATER};
use kobo_storage::{decode, KeyBuf, ReadTxn, Store, StoreError, Table};

use crate::audit::AuditEntry;
use crate::event::{type_byte, Event};
use crate::fx::{FxConversion, FxRate};
use crate::idempotency::IdempotencyRecord;
use crate::ids::{scope_key, Mode};
use crate::ledger::release::{by_payment_key, release_key, ScheduledRelease};
use crate::ledger::{balance_store_key, BalanceRow, Bucket, EntryType, LedgerLine};
use crate::mandate::Mandate;
use crate::merchant::{Brand, Merchant};
use crate::money::Currency;
use crate::payment_intent::{service as pi, PaymentIntent, Status};
use crate::payout::{Payout, PayoutStatus};
use crate::refund::{Dispute, Refund};
use crate::timer::{due_of, Timer, TimerKind};
use crate::usdt::{CryptoPayout, UsdtWallet};
use crate::webhook::WebhookEndpoint;

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

fn hex(b: &[u8]) -> String {
    hex::encode(b)
}

fn uuid_of(v: &[u8]) -> Option<Uuid> {
    Uuid::from_slice(v).ok()
}

/// Runs every check over one snapshot of `store`.
pub fn check(store: &Store) -> Result<Report, StoreError> {
    let read = store.read()?;
    let seq_high_water = read
        .get(Table::Meta, META_SEQ_HIGH_WATER)?
        .map(|v| u64_from(&v))
        .unwrap_or(0);
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
    decode_all(&mut c)?;
    let ledger = ledger(&mut c)?;
    objects(&mut c, ledger)?;
    releases(&mut c)?;
    timers(&mut c)?;
    idempotency(&mut c)?;
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

/// Tables whose values are codec-encoded (a version byte, then JSON); the
/// others hold raw ids, keys or nothing.
const CODEC_TABLES: &[Table] = &[
    Table::Merchants,
    Table::ApiKeys,
    Table::Brands,
    Table::PaymentIntents,
    Table::ChargeAttempts,
    Table::LedgerLines,
    Table::Balances,
    Table::Events,
    Table::Timers,
    Table::Idempotency,
    Table::ScheduledReleases,
    Table::BankAccounts,
    Table::Payouts,
    Table::PayoutUsage,
    Table::SandboxTransfers,
    Table::WebhookEndpoints,
    Table::Deliveries,
    Table::Refunds,
    Table::Disputes,
    Table::PaymentAftercare,
    Table::FxRates,
    Table::FxConversions,
    Table::UsdtWallets,
    Table::CryptoPayouts,
    Table::SandboxCryptoTransfers,
    Table::Customers,
    Table::Mandates,
    Table::SandboxMandates,
    Table::SandboxDebits,
    Table::AuditLog,
    Table::Invoices,
    Table::CustomerCredits,
];

fn decode_all(c: &mut Checker) -> Result<(), StoreError> {
    for &table in CODEC_TABLES {
        let mut bad = Vec::new();
        let mut n = 0;
        c.each(table, |k, v| {
            n += 1;
            if let Err(e) = decode::<serde_json::Value>(v) {
                bad.push(format!("{} key {}: {e}", table.name(), hex(k)));
            }
            Ok(())
        })?;
        c.examined("decode", n);
        for b in bad {
            c.breach("decode", b);
        }
    }
    Ok(())
}

/// A bucket: merchant, mode, brand, currency, bucket.
type BucketKey = (Uuid, Mode, Uuid, Currency, Bucket);

#[derive(Default)]
struct BucketLines {
    sum: i64,
    last_after: i64,
    lines: u64,
}

/// What the ledger walk leaves for the object checks.
struct Ledger {
    /// Captures (payment entries' `pending` lines) per payment.
    captures: HashMap<Uuid, u32>,
    /// The `payout_in_flight` balances.
    in_flight: HashMap<(Uuid, Mode, Uuid, Currency), i64>,
}

fn ledger(c: &mut Checker) -> Result<Ledger, StoreError> {
    let mut buckets: HashMap<BucketKey, BucketLines> = HashMap::new();
    let mut captures: HashMap<Uuid, u32> = HashMap::new();
    let mut breaches = Vec::new();
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
        let b = buckets.entry(key).or_default();
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
        if line.entry_type == EntryType::Payment && line.bucket == Bucket::Pending {
            *captures.entry(line.source).or_default() += 1;
        }
        Ok(())
    })?;
    c.examined("ledger", n);
    if max_line > 0 {
        c.seq(max_line, || "a ledger line id".into());
    }
    let mut in_flight = HashMap::new();
    let mut rows = 0;
    c.each(Table::Balances, |k, v| {
        rows += 1;
        let (Ok(row), Some(merchant), Some(mode)) = (
            decode::<BalanceRow>(v),
            k.get(..16).and_then(uuid_of),
            k.get(16).and_then(|b| match b {
                0 => Some(Mode::Test),
                1 => Some(Mode::Live),
                _ => None,
            }),
        ) else {
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
    for b in breaches {
        c.breach("ledger", b);
    }
    Ok(Ledger {
        captures,
        in_flight,
    })
}

/// An index an object belongs in: its table and the object's keys in it.
struct Index<T> {
    table: Table,
    keys: fn(&T) -> Vec<Vec<u8>>,
}

fn index<T>(table: Table, keys: fn(&T) -> Vec<Vec<u8>>) -> Index<T> {
    Index { table, keys }
}

/// Checks one object table: each object decodes and is stored under its
/// id; it is in each of its indexes (forward); each entry of those indexes
/// names an object that lists that key (backward). `each` sees every
/// decoded object.
fn object_table<T: DeserializeOwned>(
    c: &mut Checker,
    table: Table,
    what: &str,
    id_of: fn(&T) -> Uuid,
    seq_of: fn(&T) -> Option<u64>,
    indexes: &[Index<T>],
    mut each: impl FnMut(&mut Checker, &T),
) -> Result<(), StoreError> {
    // In chunks, so a large table is never held in memory.
    let mut from: Option<Vec<u8>> = None;
    loop {
        let mut chunk = Vec::with_capacity(4096);
        c.read.scan_prefix(table, &[], from.as_deref(), |k, v| {
            if from.as_deref() == Some(k) {
                return Ok(true);
            }
            chunk.push((k.to_vec(), v.to_vec()));
            Ok(chunk.len() < 4096)
        })?;
        let Some((last, _)) = chunk.last() else { break };
        from = Some(last.clone());
        for (k, v) in &chunk {
            c.examined("indexes", 1);
            let Ok(o) = decode::<T>(v) else {
                c.breach(
                    "decode",
                    format!("{what} {} does not decode as a {what}", hex(k)),
                );
                continue;
            };
            let id = id_of(&o);
            if id.as_bytes() != k.as_slice() {
                c.breach(
                    "indexes",
                    format!("{what} {id} is stored under another id ({})", hex(k)),
                );
            }
            if let Some(seq) = seq_of(&o) {
                c.seq(seq, || format!("{what} {id}"));
            }
            for ix in indexes {
                for key in (ix.keys)(&o) {
                    match c.read.get(ix.table, &key)? {
                        Some(v) if v == id.as_bytes() => {}
                        Some(v) => c.breach(
                            "indexes",
                            format!(
                                "{what} {id} is not in {}: its key {} names {}",
                                ix.table.name(),
                                hex(&key),
                                uuid_of(&v)
                                    .map(|u| u.to_string())
                                    .unwrap_or_else(|| hex(&v))
                            ),
                        ),
                        None => c.breach(
                            "indexes",
                            format!(
                                "{what} {id} is missing from {} (key {})",
                                ix.table.name(),
                                hex(&key)
                            ),
                        ),
                    }
                }
            }
            each(c, &o);
        }
    }
    for ix in indexes {
        let mut bad = Vec::new();
        let mut n = 0;
        c.each(ix.table, |k, v| {
            n += 1;
            let Some(id) = uuid_of(v) else {
                bad.push(format!(
                    "{} entry {} holds no id ({} bytes)",
                    ix.table.name(),
                    hex(k),
                    v.len()
                ));
                return Ok(());
            };
            match c.read.get(table, id.as_bytes())? {
                None => bad.push(format!(
                    "{} entry {} points at {what} {id}, which does not exist",
                    ix.table.name(),
                    hex(k)
                )),
                Some(ov) => {
                    if let Ok(o) = decode::<T>(&ov) {
                        if !(ix.keys)(&o).iter().any(|key| key == k) {
                            bad.push(format!(
                                "{} entry {} points at {what} {id}, which belongs under another key",
                                ix.table.name(),
                                hex(k)
                            ));
                        }
                    }
                }
            }
            Ok(())
        })?;
        c.examined("indexes", n);
        for b in bad {
            c.breach("indexes", b);
        }
    }
    Ok(())
}

fn list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

/// In-flight money expected per merchant, mode, brand and currency.
type InFlight = HashMap<(Uuid, Mode, Uuid, Currency), i64>;

fn objects(c: &mut Checker, ledger: Ledger) -> Result<(), StoreError> {
    let Ledger {
        mut captures,
        in_flight: held,
    } = ledger;
    let none = |_: &_| None;

    object_table::<Merchant>(
        c,
        Table::Merchants,
        "merchant",
        |m| m.id,
        none,
        &[],
        |_, _| {},
    )?;
    object_table::<Brand>(
        c,
        Table::Brands,
        "brand",
        |b| b.id,
        |b| Some(b.seq),
        &[index(Table::BrandIndex, |b: &Brand| {
            vec![list_key(b.merchant, b.mode, b.seq)]
        })],
        |_, _| {},
    )?;
    let mut capture_breaches = Vec::new();
    object_table::<PaymentIntent>(
        c,
        Table::PaymentIntents,
        "payment_intent",
        |p| p.id,
        |p| Some(p.seq),
        &[
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
            index(Table::CheckoutLinks, |p: &PaymentIntent| {
                vec![p.checkout_code.as_bytes().to_vec()]
            }),
        ],
        |c, p| {
            c.examined("captures", 1);
            let found = captures.remove(&p.id).unwrap_or(0);
            let wanted = u32::from(p.status == Status::Successful);
            if found != wanted {
                capture_breaches.push(match wanted {
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
                });
            }
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
    object_table::<Event>(
        c,
        Table::Events,
        "event",
        |e| e.id,
        |e| Some(e.seq),
        &[
            index(Table::EventIndex, |e: &Event| {
                vec![list_key(e.merchant, e.mode, e.seq)]
            }),
            index(Table::EventTypeIndex, |e: &Event| {
                vec![scope_key(e.merchant, e.mode)
                    .u8(type_byte(&e.event_type))
                    .u64(e.seq)
                    .build()]
            }),
        ],
        |_, _| {},
    )?;
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
    object_table::<Refund>(
        c,
        Table::Refunds,
        "refund",
        |r| r.id,
        |r| Some(r.seq),
        &[
            index(Table::RefundIndex, |r: &Refund| {
                vec![list_key(r.merchant, r.mode, r.seq)]
            }),
            index(Table::RefundByPayment, |r: &Refund| {
                vec![scope_key(r.merchant, r.mode)
                    .bytes(r.payment_intent.as_bytes())
                    .u64(r.seq)
                    .build()]
            }),
        ],
        |_, _| {},
    )?;
    object_table::<Dispute>(
        c,
        Table::Disputes,
        "dispute",
        |d| d.id,
        |d| Some(d.seq),
        &[index(Table::DisputeIndex, |d: &Dispute| {
            vec![list_key(d.merchant, d.mode, d.seq)]
        })],
        |_, _| {},
    )?;
    object_table::<FxRate>(
        c,
        Table::FxRates,
        "fx_rate",
        |r| r.id,
        |r| Some(r.seq),
        &[index(Table::FxRateIndex, |r: &FxRate| {
            vec![KeyBuf::new().u64(r.seq).build()]
        })],
        |_, _| {},
    )?;
    object_table::<FxConversion>(
        c,
        Table::FxConversions,
        "fx_conversion",
        |x| x.id,
        |x| Some(x.seq),
        &[index(Table::FxConversionIndex, |x: &FxConversion| {
            vec![list_key(x.merchant, x.mode, x.seq)]
        })],
        |_, _| {},
    )?;
    object_table::<UsdtWallet>(
        c,
        Table::UsdtWallets,
        "usdt_wallet",
        |w| w.id,
        |w| Some(w.seq),
        &[
            index(Table::UsdtWalletIndex, |w: &UsdtWallet| {
                w.is_active()
                    .then(|| list_key(w.merchant, w.mode, w.seq))
                    .into_iter()
                    .collect()
            }),
            index(Table::UsdtWalletAddresses, |w: &UsdtWallet| {
                match (w.is_active(), w.network.normalize(&w.address)) {
                    (true, Ok(a)) => vec![scope_key(w.merchant, w.mode)
                        .u8(w.network.byte())
                        .str(&a)
                        .build()],
                    _ => Vec::new(),
                }
            }),
        ],
        |_, _| {},
    )?;
    object_table::<crate::customer::Customer>(
        c,
        Table::Customers,
        "customer",
        |x| x.id,
        |x| Some(x.seq),
        &[index(
            Table::CustomerIndex,
            |x: &crate::customer::Customer| vec![list_key(x.merchant, x.mode, x.seq)],
        )],
        |_, _| {},
    )?;
    object_table::<Mandate>(
        c,
        Table::Mandates,
        "mandate",
        |m| m.id,
        |m| Some(m.seq),
        &[
            index(Table::MandateIndex, |m: &Mandate| {
                vec![list_key(m.merchant, m.mode, m.seq)]
            }),
            index(Table::MandateStatusIndex, |m: &Mandate| {
                vec![scope_key(m.merchant, m.mode)
                    .u8(m.status.byte())
                    .u64(m.seq)
                    .build()]
            }),
            index(Table::MandateCustomerIndex, |m: &Mandate| {
                vec![scope_key(m.merchant, m.mode)
                    .bytes(m.customer.as_bytes())
                    .u64(m.seq)
                    .build()]
            }),
        ],
        |_, _| {},
    )?;
    object_table::<crate::banks::BankAccount>(
        c,
        Table::BankAccounts,
        "bank_account",
        |a| a.id,
        |a| Some(a.seq),
        &[
            index(Table::BankAccountList, |a: &crate::banks::BankAccount| {
                vec![list_key(a.merchant, a.mode, a.seq)]
            }),
            index(Table::BankAccountIndex, |a: &crate::banks::BankAccount| {
                vec![scope_key(a.merchant, a.mode)
                    .str(&a.bank_code)
                    .str(&a.account_number)
                    .build()]
            }),
        ],
        |_, _| {},
    )?;
    object_table::<WebhookEndpoint>(
        c,
        Table::WebhookEndpoints,
        "webhook_endpoint",
        |e| e.id,
        |e| Some(e.seq),
        &[index(Table::WebhookEndpointIndex, |e: &WebhookEndpoint| {
            e.deleted_at
                .is_none()
                .then(|| list_key(e.merchant, e.mode, e.seq))
                .into_iter()
                .collect()
        })],
        |_, _| {},
    )?;
    object_table::<AuditEntry>(
        c,
        Table::AuditLog,
        "audit_entry",
        |e| e.id,
        |e| Some(e.seq),
        &[
            index(Table::AuditIndex, |e: &AuditEntry| {
                audit_keys(e, Table::AuditIndex)
            }),
            index(Table::AuditActionIndex, |e: &AuditEntry| {
                audit_keys(e, Table::AuditActionIndex)
            }),
            index(Table::AuditMerchantIndex, |e: &AuditEntry| {
                audit_keys(e, Table::AuditMerchantIndex)
            }),
        ],
        |_, _| {},
    )?;
    Ok(())
}

fn audit_keys(e: &AuditEntry, table: Table) -> Vec<Vec<u8>> {
    e.index_keys()
        .into_iter()
        .filter(|(t, _)| *t == table)
        .map(|(_, k)| k)
        .collect()
}

fn releases(c: &mut Checker) -> Result<(), StoreError> {
    let mut breaches = Vec::new();
    let mut per_payment: HashSet<(Uuid, Mode, Bucket, Uuid)> = HashSet::new();
    let mut n = 0;
    c.each(Table::ScheduledReleases, |k, v| {
        n += 1;
        let Ok(r) = decode::<ScheduledRelease>(v) else {
            breaches.push(format!("scheduled release {} does not decode", hex(k)));
            return Ok(());
        };
        let name = format!(
            "scheduled release of payment {} ({} {}, due {})",
            r.payment,
            r.bucket.as_str(),
            r.amount,
            r.due.to_rfc3339()
        );
        if r.key() != k {
            breaches.push(format!("{name} is stored under another key ({})", hex(k)));
        }
        if !per_payment.insert((r.merchant, r.mode, r.bucket, r.payment)) {
            breaches.push(format!(
                "{name}: the payment has more than one {} release scheduled",
                r.bucket.as_str()
            ));
        }
        match c.read.get(Table::Timers, &r.timer_key())? {
            None => breaches.push(format!("{name} has no timer: it would never be released")),
            Some(t) => match decode::<Timer>(&t) {
                Ok(t) if t.kind == r.timer_kind() && t.target == r.payment => {}
                _ => breaches.push(format!("{name}: its timer is of another kind or target")),
            },
        }
        if r.bucket == Bucket::Pending {
            match c.read.get(
                Table::ReleasesByPayment,
                &by_payment_key(r.merchant, r.mode, r.payment),
            )? {
                Some(p) if p == k => {}
                Some(_) => breaches.push(format!(
                    "{name}: the payment's release pointer names another release"
                )),
                None => breaches.push(format!("{name}: the payment's release pointer is missing")),
            }
        }
        Ok(())
    })?;
    let mut pointers = 0;
    c.each(Table::ReleasesByPayment, |k, v| {
        pointers += 1;
        if !c.exists(Table::ScheduledReleases, v)? {
            breaches.push(format!(
                "release pointer {} names a release that does not exist",
                hex(k)
            ));
        }
        Ok(())
    })?;
    c.examined("releases", n + pointers);
    for b in breaches {
        c.breach("releases", b);
    }
    Ok(())
}

fn timers(c: &mut Checker) -> Result<(), StoreError> {
    let mut breaches = Vec::new();
    let mut n = 0;
    c.each(Table::Timers, |k, v| {
        n += 1;
        let Ok(t) = decode::<Timer>(v) else {
            breaches.push(format!("timer {} does not decode", hex(k)));
            return Ok(());
        };
        if k.len() < 8 {
            breaches.push(format!("timer key {} is too short", hex(k)));
            return Ok(());
        }
        let due = due_of(k);
        if Timer::key(due, t.kind, t.target) != k {
            breaches.push(format!(
                "timer {:?} of {} is stored under another key ({})",
                t.kind,
                t.target,
                hex(k)
            ));
        }
        let target = match t.kind {
            TimerKind::PaymentIntentAbandon
            | TimerKind::DirectDebitSend
            | TimerKind::DirectDebitStatus => {
                Some((Table::PaymentIntents, t.target.as_bytes().to_vec()))
            }
            TimerKind::PayoutSend | TimerKind::PayoutStatus => {
                Some((Table::Payouts, t.target.as_bytes().to_vec()))
            }
            TimerKind::CryptoPayoutCheck => {
                Some((Table::CryptoPayouts, t.target.as_bytes().to_vec()))
            }
            TimerKind::MandateCheck | TimerKind::MandateExpire => {
                Some((Table::Mandates, t.target.as_bytes().to_vec()))
            }
            TimerKind::ReleasePending => Some((
                Table::ScheduledReleases,
                release_key(t.merchant, t.mode, Bucket::Pending, due, t.target),
            )),
            TimerKind::ReleaseReserve => Some((
                Table::ScheduledReleases,
                release_key(t.merchant, t.mode, Bucket::Reserve, due, t.target),
            )),
            TimerKind::CustomerIdentityCheck => {
                Some((Table::Customers, t.target.as_bytes().to_vec()))
            }
            TimerKind::VirtualAccountCheck => {
                Some((Table::VirtualAccounts, t.target.as_bytes().to_vec()))
            }
            TimerKind::PaymentLinkExpire => {
                Some((Table::PaymentLinks, t.target.as_bytes().to_vec()))
            }
            TimerKind::InvoiceOverdue => Some((Table::Invoices, t.target.as_bytes().to_vec())),
            TimerKind::SettlementRun => None,
        };
        if let Some((table, key)) = target {
            if !c.exists(table, &key)? {
                breaches.push(format!(
                    "timer {:?} due {} names {} {} (merchant {}), which does not exist: an orphan",
                    t.kind,
                    due.to_rfc3339(),
                    table.name(),
                    t.target,
                    t.merchant
                ));
            }
        }
        Ok(())
    })?;
    c.examined("timers", n);
    for b in breaches {
        c.breach("timers", b);
    }
    Ok(())
}

fn idempotency(c: &mut Checker) -> Result<(), StoreError> {
    let mut breaches = Vec::new();
    let mut records: HashSet<Vec<u8>> = HashSet::new();
    let mut n = 0;
    c.each(Table::Idempotency, |k, v| {
        n += 1;
        match decode::<IdempotencyRecord>(v) {
            Ok(r) if (100..600).contains(&r.status) => {
                if serde_json::from_str::<serde_json::Value>(r.body.get()).is_err() {
                    breaches.push(format!("saved response {} does not decode as JSON", hex(k)));
                }
            }
            Ok(r) => breaches.push(format!("saved response {} has status {}", hex(k), r.status)),
            Err(e) => breaches.push(format!("saved response {} does not decode: {e}", hex(k))),
        }
        records.insert(k.to_vec());
        Ok(())
    })?;
    let mut expiries = 0;
    c.each(Table::IdempotencyExpiry, |k, _| {
        expiries += 1;
        match k.get(8..) {
            Some(record) if records.contains(record) => {}
            Some(record) if c.exists(Table::Idempotency, record)? => {}
            _ => breaches.push(format!(
                "idempotency expiry row {} names no saved response",
                hex(k)
            )),
        }
        Ok(())
    })?;
    let mut expiring: HashSet<Vec<u8>> = HashSet::new();
    c.each(Table::IdempotencyExpiry, |k, _| {
        if let Some(record) = k.get(8..) {
            expiring.insert(record.to_vec());
        }
        Ok(())
    })?;
    for r in records.difference(&expiring) {
        breaches.push(format!(
            "saved response {} has no expiry row: it would be kept forever",
            hex(r)
        ));
    }
    c.examined("idempotency", n + expiries);
    for b in breaches {
        c.breach("idempotency", b);
    }
    Ok(())
}
