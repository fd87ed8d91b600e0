//! `hot-ledger`: one merchant's ledger at its own ceiling
//! (docs/performance.md, "One hot merchant"). Every posting of a merchant
//! and mode goes through that merchant's one ledger actor, so the actor's
//! pace bounds what one merchant can move, whatever the HTTP layer in
//! front of it does. This drives the real actor, the real group-commit
//! writer and a real store (every posting durable before it is answered),
//! without HTTP: CONCURRENCY callers post entries of LINES lines each,
//! each with an object row of ROW_BYTES in the same batch (as a capture
//! carries its payment intent and event), for SECONDS. Then it checks the
//! money: the store's balance is the sum of every acknowledged posting.
//!
//!   hot-ledger [CONCURRENCY] [SECONDS] [LINES] [ROW_BYTES]
//!
//! Prints one JSON line: postings (entries) and lines per second, the
//! latency percentiles of a posting, and the audit's outcome.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use uuid::Uuid;

use kobo_actors::clock::Clock;
use kobo_actors::env::Config;
use kobo_actors::ids::Mode;
use kobo_actors::ledger::actor::{load_balances, PostEntry};
use kobo_actors::ledger::{Bucket, EntrySpec, EntryType, LineSpec};
use kobo_actors::money::Currency;
use kobo_actors::runtime::Kobo;
use kobo_storage::{Batch, Store, Table, WriterMetrics};

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .map(|a| a.parse().expect("a whole number"))
        .unwrap_or(default)
}

/// Latencies in microseconds, up to a minute.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds")
}

fn main() {
    let concurrency = arg(1, 64) as usize;
    let seconds = arg(2, 10);
    let lines = arg(3, 1) as usize;
    let row_bytes = arg(4, 800) as usize;
    let dir = std::env::temp_dir().join(format!("kobo-hot-ledger-{}", Uuid::new_v4()));
    let data = dir.clone();
    let ok = actix::System::new().block_on(async move {
        let store = Store::open(&data).expect("store");
        let writer = store.start_writer(WriterMetrics::new());
        let kobo = Kobo::new(
            store,
            writer,
            Clock::manual("2026-11-25T10:00:00Z".parse().expect("RFC 3339")),
            Config {
                base_url: "http://localhost".into(),
                actor_idle: Duration::from_secs(60),
                mailbox_capacity: 1024,
                calendar: kobo_actors::calendar::Calendar::nigeria(),
                sandbox_card_latency: Duration::ZERO,
            },
        )
        .expect("runtime");
        let merchant = Uuid::new_v4();
        let brand = Uuid::new_v4();
        let stop = Arc::new(AtomicBool::new(false));
        let posted = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let latencies = Arc::new(Mutex::new(histogram()));
        let started = Instant::now();
        let callers = (0..concurrency).map(|_| {
            let (kobo, stop, posted, errors, latencies) = (
                kobo.clone(),
                stop.clone(),
                posted.clone(),
                errors.clone(),
                latencies.clone(),
            );
            async move {
                let mut mine = histogram();
                while !stop.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    match post(&kobo, merchant, brand, lines, row_bytes).await {
                        Ok(()) => {
                            posted.fetch_add(1, Ordering::Relaxed);
                            let _ = mine.record(sent.elapsed().as_micros() as u64);
                        }
                        Err(e) => {
                            if errors.fetch_add(1, Ordering::Relaxed) == 0 {
                                eprintln!("hot-ledger: first error: {e}");
                            }
                        }
                    }
                }
                latencies.lock().add(&mine).expect("same bounds");
            }
        });
        let timer = {
            let stop = stop.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(seconds)).await;
                stop.store(true, Ordering::Relaxed);
            }
        };
        futures_util::future::join(futures_util::future::join_all(callers), timer).await;
        let elapsed = started.elapsed().as_secs_f64();
        let posted = posted.load(Ordering::Relaxed);
        let errors = errors.load(Ordering::Relaxed);

        // The audit: every acknowledged posting is in the stored balance.
        let balances = load_balances(&kobo, merchant, Mode::Test).expect("balances");
        let stored = balances
            .get(&(brand, Currency::NGN, Bucket::Available))
            .copied()
            .unwrap_or(0);
        let expected = posted as i64 * lines as i64;
        let h = latencies.lock();
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "{}",
            serde_json::json!({
                "concurrency": concurrency,
                "seconds": elapsed,
                "lines_per_posting": lines,
                "row_bytes": row_bytes,
                "postings": posted,
                "postings_per_sec": (posted as f64 / elapsed).round(),
                "lines_per_sec": (posted as f64 * lines as f64 / elapsed).round(),
                "p50_ms": ms(0.5),
                "p99_ms": ms(0.99),
                "max_ms": h.max() as f64 / 1000.0,
                "errors": errors,
                "commits": kobo.writer.commits(),
                "audit": if stored == expected { "ok" } else { "MISMATCH" },
                "stored_balance": stored,
                "acknowledged_total": expected,
            })
        );
        stored == expected
    });
    let _ = std::fs::remove_dir_all(&dir);
    if !ok {
        std::process::exit(1);
    }
}

/// One entry of `lines` lines of 1 kobo each to the available balance,
/// with an object row in the same batch.
async fn post(
    kobo: &Kobo,
    merchant: Uuid,
    brand: Uuid,
    lines: usize,
    row_bytes: usize,
) -> Result<(), String> {
    let source = Uuid::now_v7();
    let mut with = Batch::new();
    with.owned_by(merchant.as_bytes());
    with.put_raw(
        Table::Meta,
        source.as_bytes().to_vec(),
        vec![b'x'; row_bytes],
    );
    let entry = PostEntry {
        entry: EntrySpec {
            entry_type: EntryType::Correction,
            source,
            description: "hot-ledger".into(),
            lines: (0..lines)
                .map(|_| LineSpec {
                    brand,
                    currency: Currency::NGN,
                    bucket: Bucket::Available,
                    amount: 1,
                    gross: None,
                    fee: None,
                })
                .collect(),
            allow_negative: false,
        },
        with: kobo_actors::registry::Once::new(with),
        usage: None,
    };
    match kobo.ledgers.send((merchant, Mode::Test), entry).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}
