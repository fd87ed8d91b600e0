//! Subscription renewals under SIGKILL (the crash suite's sixth test):
//! many daily subscriptions on direct debit all renew at one 08:00 Lagos;
//! the clock is moved to that instant and the server killed at a random
//! moment while the renewals run, restarted, and the clock moved on; three
//! such cycles. Most plans' debits succeed; some subscriptions were moved
//! (at the period end) to plans whose debits fail (amount ending in 51
//! kobo) or stay processing (52). After each restart: every subscription's
//! period advanced exactly once per renewal instant, exactly one invoice
//! per (subscription, period) with no period skipped, exactly one
//! successful debit per period of the succeeding plans and none of the
//! failing ones, the ledger's lines sum to the balance; at the end `kobo
//! check` finds the store clean.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::stream::{self, StreamExt};
use rand::Rng;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, TestApp, CLOCK_ADVANCE_TIMEOUT};
use crate::mandates::{answer, pending, refresh};
use crate::subscriptions::{id, plan};

/// The debit's fate for a subscription's plan after the first period.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Fate {
    Succeeds,
    Fails,
    Processing,
}

struct Sub {
    id: String,
    fate: Fate,
}

/// `n` customers, each with an active mandate.
pub(crate) async fn mandated_customers(app: &TestApp, k: &str, n: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for c in 0..n {
        let m = pending(app, k, &format!("c{c}@example.com")).await;
        answer(app, &m, true).await.assert_status(200);
        let r = refresh(app, k, &id(&m)).await;
        r.assert_status(200);
        assert_eq!(r.body["status"], "active");
        out.push((r.body["customer"].as_str().unwrap().to_string(), id(&m)));
    }
    out
}

/// Subscribes each `(customer, plan)` pair (indexes into `who` and
/// `plans`) on direct debit through its customer's mandate, `concurrency`
/// creates at a time; answers `(customer, plan, subscription id)`.
pub(crate) async fn subscribe_pairs(
    app: &TestApp,
    k: &str,
    who: &[(String, String)],
    plans: &[String],
    pairs: Vec<(usize, usize)>,
    concurrency: usize,
) -> Vec<(usize, usize, String)> {
    stream::iter(pairs)
        .map(|(c, p)| {
            let (customer, mandate) = who[c].clone();
            let plan = plans[p].clone();
            async move {
                let r = app
                    .post(
                        k,
                        "/v1/subscriptions",
                        json!({"customer": customer, "plan": plan, "collection_method": "mandate", "mandate": mandate}),
                    )
                    .await;
                r.assert_status(201);
                (c, p, id(&r.body))
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

/// `customers × plans` daily subscriptions, active after their first
/// debit; a few moved at the period end to failing or processing plans.
async fn subscribe_all(app: &TestApp, k: &str, customers: usize, plans: usize) -> Vec<Sub> {
    let who = mandated_customers(app, k, customers).await;
    let mut base = Vec::new();
    for p in 0..plans {
        let amount = 100_000 + 100 * p as i64;
        base.push(id(&plan(
            app,
            k,
            json!({"interval": "day", "amount": amount}),
        )
        .await));
    }
    let fail = id(&plan(app, k, json!({"interval": "day", "amount": 100_051})).await);
    let stuck = id(&plan(app, k, json!({"interval": "day", "amount": 100_052})).await);
    let pairs: Vec<(usize, usize)> = (0..customers)
        .flat_map(|c| (0..plans).map(move |p| (c, p)))
        .collect();
    let made = subscribe_pairs(app, k, &who, &base, pairs, 8).await;
    // The first debits settle a minute later.
    app.advance(60).await;
    let mut subs = Vec::new();
    for (_, p, s) in made {
        // Each customer's subscription to plan 0 moves to the failing
        // plan, to plan 1 to the processing one (one subscription per
        // customer and plan).
        let fate = match p {
            0 => Fate::Fails,
            1 => Fate::Processing,
            _ => Fate::Succeeds,
        };
        if fate != Fate::Succeeds {
            let to = if fate == Fate::Fails { &fail } else { &stuck };
            app.post(
                k,
                &format!("/v1/subscriptions/{s}"),
                json!({"plan": to, "change_at": "period_end"}),
            )
            .await
            .assert_status(200);
        }
        subs.push(Sub { id: s, fate });
    }
    subs
}

/// Checks every subscription after `renewals` renewal instants.
async fn verify(app: &TestApp, k: &str, subs: &[Sub], renewals: u32, cycle: usize) {
    let all = app.all_pages(k, "/v1/subscriptions").await;
    let by_id: HashMap<String, Value> = all.into_iter().map(|s| (id(&s), s)).collect();
    let invoices = app.all_pages(k, "/v1/invoices").await;
    let mut periods: HashMap<String, Vec<u64>> = HashMap::new();
    let mut invoice_of: HashMap<String, (String, u64)> = HashMap::new();
    for i in &invoices {
        let s = i["subscription"].as_str().unwrap().to_string();
        let p = i["metadata"]["period"].as_u64().unwrap();
        periods.entry(s.clone()).or_default().push(p);
        invoice_of.insert(i["number"].as_str().unwrap().to_string(), (s, p));
    }
    let intents = app.all_pages(k, "/v1/payment_intents").await;
    // (subscription, period) -> statuses of its debits.
    let mut debits: HashMap<(String, u64), Vec<String>> = HashMap::new();
    for pi in &intents {
        // A debit's description names its invoice: "Invoice <number> (...".
        let d = pi["description"].as_str().unwrap();
        let number = d
            .strip_prefix("Invoice ")
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        let key = invoice_of[number].clone();
        debits
            .entry(key)
            .or_default()
            .push(pi["status"].as_str().unwrap().to_string());
    }
    let last = u64::from(renewals) + 1;
    for s in subs {
        let now = &by_id[&s.id];
        assert_eq!(
            now["current_period"],
            json!(last),
            "cycle {cycle}: {} advanced wrongly: {now}",
            s.id
        );
        let mut ps = periods.remove(&s.id).unwrap_or_default();
        ps.sort();
        assert_eq!(
            ps,
            (1..=last).collect::<Vec<_>>(),
            "cycle {cycle}: {}: one invoice per period, none skipped",
            s.id
        );
        for p in 1..=last {
            let d = debits.remove(&(s.id.clone(), p)).unwrap_or_default();
            let ok = d.iter().filter(|x| *x == "successful").count();
            let fate = if p == 1 { Fate::Succeeds } else { s.fate };
            match fate {
                Fate::Succeeds => assert_eq!(
                    (ok, d.len()),
                    (1, 1),
                    "cycle {cycle}: {} period {p}: {d:?}",
                    s.id
                ),
                Fate::Fails => {
                    assert_eq!(ok, 0, "cycle {cycle}: {} period {p}", s.id);
                    assert!(d.iter().all(|x| x == "failed"), "{d:?}");
                }
                Fate::Processing => assert_eq!(
                    d,
                    vec!["processing".to_string()],
                    "cycle {cycle}: {} period {p}",
                    s.id
                ),
            }
        }
        let status = now["status"].as_str().unwrap();
        let want = if s.fate == Fate::Fails {
            "past_due"
        } else {
            "active"
        };
        assert_eq!(status, want, "cycle {cycle}: {}", s.id);
    }
    assert!(periods.is_empty(), "invoices of unknown subscriptions");
    assert!(debits.is_empty(), "debits of unknown periods: {debits:?}");
    // The ledger: the lines sum to the balances.
    let lines = app.all_lines(k).await;
    for bucket in ["pending", "available"] {
        let sum: i64 = lines
            .iter()
            .filter(|l| l["bucket"] == bucket && l["currency"] == "NGN")
            .map(|l| l["amount"].as_i64().unwrap())
            .sum();
        assert_eq!(
            app.balance(k, bucket, "NGN").await,
            sum,
            "cycle {cycle}: {bucket} lines and balance differ"
        );
    }
}

/// `kill_ms`: the range the kill's delay is drawn from (within the time
/// the renewals take, so some but not all are done).
async fn renewals_survive_sigkill(
    customers: usize,
    plans: usize,
    cycles: u32,
    kill_ms: std::ops::Range<u64>,
) {
    let started = Instant::now();
    let mut app = spawn_app().await;
    let k = app.merchant().await.test_key;
    let subs = subscribe_all(&app, &k, customers, plans).await;
    let made = started.elapsed();
    let first = app
        .get(&k, &format!("/v1/subscriptions/{}", subs[0].id))
        .await;
    let mut due = time(&first.body["current_period_end"]);
    let client = reqwest::Client::builder()
        .timeout(CLOCK_ADVANCE_TIMEOUT)
        .build()
        .unwrap();
    let mut killed_at = Vec::new();
    // How long each cycle's resumed advance and the ten minutes after it
    // took (printed at the end: their time is the work they find).
    let mut advances = Vec::new();
    for cycle in 1..=cycles {
        // Move the clock to the renewal instant; kill while it works.
        let base = app.base.clone();
        let admin = app.admin_token.clone();
        let c = client.clone();
        let to = due.to_rfc3339();
        let advance = tokio::spawn(async move {
            let _ = c
                .post(format!("{base}/admin/v1/clock/advance"))
                .bearer_auth(admin)
                .json(&json!({"to": to}))
                .send()
                .await;
        });
        let wait = rand::thread_rng().gen_range(kill_ms.clone());
        tokio::time::sleep(Duration::from_millis(wait)).await;
        app.kill();
        let _ = advance.await;
        let count = app_invoices_on_disk(&mut app, &k).await;
        killed_at.push((wait, count));
        // The stored manual clock is the last finished advance's: move it
        // to the renewal instant again (the renewals resume), then ten
        // minutes on for the debits to settle (a debit interrupted by the
        // kill is sent again by its timer's retry a minute later). The
        // restarted server activates every actor cold (on the PostgreSQL
        // store a round trip per read), so both advances take long in a
        // debug build under the whole suite: the wait is the helpers'
        // CLOCK_ADVANCE_TIMEOUT, which bounds a hung server only.
        let resuming = Instant::now();
        let resumed = client
            .post(format!("{}/admin/v1/clock/advance", app.base))
            .bearer_auth(&app.admin_token)
            .json(&json!({"to": due.to_rfc3339()}))
            .send()
            .await
            .expect("the resumed advance answers");
        assert_eq!(resumed.status().as_u16(), 200);
        let resumed_in = resuming.elapsed();
        let settling = Instant::now();
        app.advance(600).await;
        advances.push((resumed_in, settling.elapsed()));
        verify(&app, &k, &subs, cycle, cycle as usize).await;
        due += chrono::Duration::days(1);
    }
    eprintln!(
        "subscription crash test: {} subscriptions made in {made:?}; kills after (ms, invoices then): \
         {killed_at:?}; (resumed, settled) advances took {advances:.1?}; total {:?}",
        subs.len(),
        started.elapsed()
    );
    crate::operations::assert_check_clean(&mut app);
}

/// Restarts the server and counts the invoices the killed one had made.
async fn app_invoices_on_disk(app: &mut TestApp, k: &str) -> usize {
    app.start(&[]);
    app.all_pages(k, "/v1/invoices").await.len()
}

/// Found that a renewal whose invoice create failed (invoice numbers
/// contended) after a restart was never invoiced: the actor fell back to
/// the state before its committed decision (fixed in the actor).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_renewals_charge_each_period_once_across_sigkill() {
    renewals_survive_sigkill(10, 20, 3, 10..250).await;
}

/// The scale: 1,000 subscriptions renewing at one 08:00 (about
/// 75 s in a debug build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_subscription_renewals_charge_each_period_once_across_sigkill() {
    renewals_survive_sigkill(10, 100, 3, 10..1200).await;
}
