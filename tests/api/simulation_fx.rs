//! A seeded simulation of dollars: payments in both currencies on two
//! brands, clock jumps across 08:00 settlement runs, early releases, rate
//! publishing, conversions (some at a stale rate, some too large), USDT
//! payouts to a paying and a failing wallet, and dollar settlement (`keep`,
//! `convert` or `usdt`, drawn from the seed, to a paying or failing settle
//! wallet), checked after every step against a reference model of the
//! buckets. A divergence prints the seed; rerun it with
//! `KOBO_SIM_SEED=<seed> cargo test --test api simulation_fx`.

use std::collections::BTreeMap;
use std::time::{Duration as StdDuration, Instant};

use chrono::{DateTime, Duration, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use kobo_actors::calendar::Calendar;

use crate::helpers::{spawn_app, TestApp};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Settle {
    Keep,
    Convert,
    Usdt { dead: bool },
}

struct Capture {
    brand: usize,
    currency: &'static str,
    net: i64,
    due: DateTime<Utc>,
    released: bool,
}

type Key = (usize, &'static str, &'static str);

struct Model {
    captures: Vec<Capture>,
    buckets: BTreeMap<Key, i64>,
    rate: Option<(String, i64)>,
    settle: Settle,
    fee_bps: i64,
}

fn usdt_of(usd: i64, bps: i64) -> i64 {
    let fee = (usd * bps + 5_000) / 10_000;
    let vat = (fee * 750 + 5_000) / 10_000;
    usd - fee - vat
}

impl Model {
    fn add(&mut self, brand: usize, currency: &'static str, bucket: &'static str, x: i64) {
        *self.buckets.entry((brand, currency, bucket)).or_default() += x;
    }
    fn get(&self, brand: usize, currency: &'static str, bucket: &'static str) -> i64 {
        self.buckets
            .get(&(brand, currency, bucket))
            .copied()
            .unwrap_or(0)
    }
    /// Releases every capture due at or before `until` (or all, early).
    fn release(&mut self, until: Option<DateTime<Utc>>) -> usize {
        let mut moves = Vec::new();
        for c in self.captures.iter_mut() {
            if !c.released && until.is_none_or(|u| c.due <= u) {
                c.released = true;
                moves.push((c.brand, c.currency, c.net));
            }
        }
        for (b, cur, net) in &moves {
            self.add(*b, cur, "pending", -net);
            self.add(*b, cur, "available", *net);
        }
        moves.len()
    }
    /// Dollar settlement, as the 08:00 run (and the helper) does it.
    fn settle_dollars(&mut self) {
        for brand in 0..2 {
            let usd = self.get(brand, "USD", "available");
            if usd <= 0 {
                continue;
            }
            match self.settle {
                Settle::Keep => {}
                Settle::Convert => {
                    if let Some((_, rate)) = &self.rate {
                        let ngn = (usd as i128 * *rate as i128 / 100) as i64;
                        self.add(brand, "USD", "available", -usd);
                        self.add(brand, "NGN", "available", ngn);
                    }
                }
                Settle::Usdt { dead } => {
                    // A failed payout returns the dollars once confirmed.
                    if !dead && usdt_of(usd, self.fee_bps) >= 1 {
                        self.add(brand, "USD", "available", -usd);
                    }
                }
            }
        }
    }
    /// The clock moves from `from` to `to`: each 08:00 settlement run on
    /// the way happens after that instant's releases.
    fn advance(&mut self, cal: &Calendar, from: DateTime<Utc>, to: DateTime<Utc>) {
        let mut cursor = from;
        loop {
            let run = cal.next_settlement_instant(cursor + Duration::seconds(1));
            if run > to {
                self.release(Some(to));
                return;
            }
            self.release(Some(run));
            self.settle_dollars();
            cursor = run;
        }
    }
}

/// Waits (real time, with a deadline) until the partner confirmed every
/// crypto payout.
async fn confirmations(app: &TestApp, key: &str, seed: u64, step: usize) {
    let deadline = Instant::now() + StdDuration::from_secs(15);
    loop {
        let open = app
            .all_pages(key, "/v1/usdt/payouts")
            .await
            .iter()
            .filter(|p| p["status"] == "queued" || p["status"] == "processing")
            .count();
        if open == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed} step {step}: {open} crypto payouts unconfirmed"
        );
        tokio::time::sleep(StdDuration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn a_seeded_simulation_of_dollars_conversions_usdt_and_dollar_settlement_matches_the_model() {
    let seed: u64 = std::env::var("KOBO_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    let mut rng = StdRng::seed_from_u64(seed);
    let app = spawn_app().await;
    let cal = Calendar::nigeria();
    let m = app.merchant().await;
    let key = m.test_key.clone();
    let mut wallets = Vec::new();
    for (i, tail) in ["Pay", "dead"].iter().enumerate() {
        let address = format!("T{}{}{tail}", "Q".repeat(32 - tail.len()), i + 1);
        let r = app
            .admin_post(
                &format!("/admin/v1/merchants/{}/usdt_wallets", m.id),
                json!({"address": address, "network": "TRC20"}),
            )
            .await;
        r.assert_status(201);
        wallets.push(r.body["id"].as_str().unwrap().to_string());
    }
    let settle = match rng.gen_range(0..4) {
        0 => Settle::Keep,
        1 => Settle::Convert,
        2 => Settle::Usdt { dead: false },
        _ => Settle::Usdt { dead: true },
    };
    let fee_bps = rng.gen_range(0..=300i64);
    let (usd_choice, settle_wallet) = match settle {
        Settle::Keep => ("keep", &wallets[0]),
        Settle::Convert => ("convert", &wallets[0]),
        Settle::Usdt { dead } => ("usdt", &wallets[dead as usize]),
    };
    app.admin_post(
        &format!("/admin/v1/merchants/{}", m.id),
        json!({"settings": {
            "auto_settlement": {"enabled": true, "usd": usd_choice},
            "usdt": {"enabled": true, "settle_wallet": settle_wallet, "fee_bps": fee_bps},
        }}),
    )
    .await
    .assert_status(200);
    let second = app
        .post(&key, "/v1/brands", json!({"name": "Second"}))
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let brands = app.get(&key, "/v1/brands").await;
    let default = brands.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["default"] == true)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let brand_ids = [default, second];
    let mut model = Model {
        captures: Vec::new(),
        buckets: BTreeMap::new(),
        rate: None,
        settle,
        fee_bps,
    };
    let mut stale_rate: Option<String> = None;

    for step in 0..70 {
        let now = app.now().await;
        let brand = rng.gen_range(0..2usize);
        let what = match rng.gen_range(0..20) {
            0..=5 => {
                let currency = if rng.gen_bool(0.6) { "USD" } else { "NGN" };
                let amount = rng.gen_range(100..3_000_000i64);
                let pi = app
                    .create_intent(
                        &key,
                        json!({"amount": amount, "currency": currency, "brand": brand_ids[brand]}),
                    )
                    .await;
                let id = pi["id"].as_str().unwrap();
                let path = if currency == "NGN" {
                    format!("/v1/test_helpers/payment_intents/{id}/simulate_transfer")
                } else {
                    format!("/v1/test_helpers/payment_intents/{id}/succeed")
                };
                let paid = app.post(&key, &path, json!({})).await;
                paid.assert_status(200);
                let net = paid.body["fees"]["net"].as_i64().unwrap();
                let delay = if currency == "USD" { 7 } else { 1 };
                model.captures.push(Capture {
                    brand,
                    currency,
                    net,
                    due: cal.release_instant(now, delay).unwrap(),
                    released: false,
                });
                model.add(brand, currency, "pending", net);
                format!("pay {amount} {currency} brand {brand}")
            }
            6..=7 => {
                let secs = rng.gen_range(60..3 * 86_400i64);
                app.advance(secs).await;
                model.advance(&cal, now, now + Duration::seconds(secs));
                confirmations(&app, &key, seed, step).await;
                format!("advance {secs}s")
            }
            8 => {
                let next = cal.next_settlement_instant(now + Duration::seconds(1));
                app.admin_post("/admin/v1/clock/advance", json!({"to": next.to_rfc3339()}))
                    .await
                    .assert_status(200);
                model.advance(&cal, now, next);
                confirmations(&app, &key, seed, step).await;
                format!("advance to {next}")
            }
            9 => {
                let r = app
                    .post(&key, "/v1/test_helpers/balance/release_pending", json!({}))
                    .await;
                r.assert_status(200);
                let n = model.release(None);
                assert_eq!(r.body["released"], n, "seed {seed} step {step}");
                "release_pending".into()
            }
            10..=11 => {
                let rate = rng.gen_range(100_000..200_000i64);
                let r = app
                    .admin_post("/admin/v1/fx_rates", json!({"rate": rate}))
                    .await;
                r.assert_status(201);
                stale_rate = model.rate.take().map(|(id, _)| id);
                model.rate = Some((r.body["id"].as_str().unwrap().to_string(), rate));
                format!("publish {rate}")
            }
            12..=15 => {
                let Some((rate_id, rate)) = model.rate.clone() else {
                    app.get(&key, "/v1/fx")
                        .await
                        .assert_error(409, "no_fx_rate", None);
                    continue;
                };
                let available = model.get(brand, "USD", "available");
                let stale = stale_rate.is_some() && rng.gen_bool(0.2);
                let usd = if available > 0 && rng.gen_bool(0.85) {
                    rng.gen_range(1..=available)
                } else {
                    available + rng.gen_range(1..1_000)
                };
                let used = if stale {
                    stale_rate.clone().unwrap()
                } else {
                    rate_id
                };
                let r = app
                    .post(
                        &key,
                        "/v1/fx/conversions",
                        json!({"usd_amount": usd, "rate_id": used, "brand": brand_ids[brand]}),
                    )
                    .await;
                if stale {
                    r.assert_error(409, "rate_changed", None);
                } else if usd > available {
                    r.assert_error(409, "insufficient_funds", None);
                } else {
                    r.assert_status(201);
                    let ngn = (usd as i128 * rate as i128 / 100) as i64;
                    assert_eq!(r.body["ngn_amount"], ngn, "seed {seed} step {step}");
                    model.add(brand, "USD", "available", -usd);
                    model.add(brand, "NGN", "available", ngn);
                }
                format!("convert {usd} brand {brand} (stale {stale})")
            }
            16..=17 => {
                let available = model.get(brand, "USD", "available");
                let dead = rng.gen_bool(0.3);
                let usd = if available > 0 && rng.gen_bool(0.85) {
                    rng.gen_range(1..=available)
                } else {
                    available + rng.gen_range(1..1_000)
                };
                let r = app
                    .post(
                        &key,
                        "/v1/usdt/payouts",
                        json!({"usd_amount": usd, "wallet": wallets[dead as usize], "brand": brand_ids[brand]}),
                    )
                    .await;
                if usd > available {
                    r.assert_error(409, "insufficient_funds", None);
                } else {
                    r.assert_status(201);
                    assert_eq!(
                        r.body["usdt_amount"],
                        usdt_of(usd, fee_bps),
                        "seed {seed} step {step}"
                    );
                    confirmations(&app, &key, seed, step).await;
                    if !dead {
                        model.add(brand, "USD", "available", -usd);
                    }
                }
                format!("usdt {usd} brand {brand} (dead {dead})")
            }
            _ => {
                let r = app
                    .post(&key, "/v1/test_helpers/settlements/run", json!({}))
                    .await;
                r.assert_status(200);
                model.release(Some(now));
                model.settle_dollars();
                confirmations(&app, &key, seed, step).await;
                "settlements/run".into()
            }
        };
        for (b, id) in brand_ids.iter().enumerate() {
            let balance = app.get(&key, &format!("/v1/balance?brand={id}")).await;
            for currency in ["NGN", "USD"] {
                for bucket in ["pending", "available", "payout_in_flight"] {
                    let got = balance.body[bucket]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|e| e["currency"] == currency)
                        .unwrap()["amount"]
                        .as_i64()
                        .unwrap();
                    assert_eq!(
                        got,
                        model.get(b, currency, bucket),
                        "seed {seed} step {step} ({what}), settle {settle:?}: brand {b} {currency} {bucket}"
                    );
                }
            }
        }
    }
    // The ledger's lines add up, balance_after is exact, and every
    // conversion's two lines are at the rate it names.
    let lines = app.all_lines(&key).await;
    let mut running: BTreeMap<(String, String, String), i64> = BTreeMap::new();
    for l in lines.iter().rev() {
        let v = running
            .entry((
                l["brand"].as_str().unwrap().to_string(),
                l["currency"].as_str().unwrap().to_string(),
                l["bucket"].as_str().unwrap().to_string(),
            ))
            .or_default();
        *v += l["amount"].as_i64().unwrap();
        assert_eq!(
            l["balance_after"].as_i64().unwrap(),
            *v,
            "seed {seed}: balance_after of line {}",
            l["id"]
        );
    }
    let conversions = app.get(&key, "/v1/fx/conversions?limit=100").await;
    for c in conversions.body["data"].as_array().unwrap() {
        let usd = c["usd_amount"].as_i64().unwrap();
        let rate = c["rate"]["rate"].as_i64().unwrap();
        let mine: Vec<&Value> = lines.iter().filter(|l| l["source"] == c["id"]).collect();
        assert_eq!(mine.len(), 2, "seed {seed}");
        for l in mine {
            assert_eq!(l["type"], "conversion");
            let want = if l["currency"] == "USD" {
                -usd
            } else {
                (usd as i128 * rate as i128 / 100) as i64
            };
            assert_eq!(l["amount"].as_i64().unwrap(), want, "seed {seed}");
        }
    }
    println!("seed {seed}: settle {settle:?}, fee_bps {fee_bps}");
}
