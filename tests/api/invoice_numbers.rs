//! Invoice numbers under load: many invoices of one brand finalized at
//! the same moment (API finalizes, subscription renewals at one 08:00)
//! all get distinct, consecutive numbers at once, none waiting for a
//! retry.

use std::collections::HashSet;

use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};

use crate::crash_subscriptions::{mandated_customers, subscribe_pairs};
use crate::helpers::spawn_app;
use crate::subscriptions::{id, plan};

/// The numbers of `invoices`, sorted, as integers.
fn numbers(invoices: &[Value]) -> Vec<u64> {
    let mut n: Vec<u64> = invoices
        .iter()
        .map(|i| {
            let s = i["number"]
                .as_str()
                .expect("a finalized invoice has a number");
            s.strip_prefix("INV-").unwrap().parse().unwrap()
        })
        .collect();
    n.sort();
    n
}

/// Found that concurrent finalizes of one brand collided on their number
/// and, after 16 collisions, failed with a 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_and_fifty_concurrent_finalizes_all_succeed_with_consecutive_numbers() {
    let app = spawn_app().await;
    let k = app.merchant().await.test_key;
    let due = (app.now().await + chrono::Duration::days(3)).date_naive();
    let drafts: Vec<String> = stream::iter(0..150)
        .map(|c| {
            let (app, k) = (&app, &k);
            async move {
                let r = app
                    .post(
                        k,
                        "/v1/customers",
                        json!({"email": format!("c{c}@example.com")}),
                    )
                    .await;
                r.assert_status(201);
                let body = json!({
                    "customer": id(&r.body),
                    "currency": "NGN",
                    "line_items": [{"description": "Rice", "quantity": 1, "unit_amount": 10_000}],
                    "due_date": due.to_string(),
                });
                let r = app.post(k, "/v1/invoices", body).await;
                r.assert_status(201);
                id(&r.body)
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let paths: Vec<String> = drafts
        .iter()
        .map(|d| format!("/v1/invoices/{d}/finalize"))
        .collect();
    let finals =
        futures_util::future::join_all(paths.iter().map(|p| app.post(&k, p, json!({})))).await;
    for r in &finals {
        r.assert_status(200);
    }
    let bodies: Vec<Value> = finals.iter().map(|r| r.body.clone()).collect();
    assert_eq!(numbers(&bodies), (1..=150).collect::<Vec<u64>>());
    let stored = app.all_pages(&k, "/v1/invoices").await;
    assert_eq!(numbers(&stored), (1..=150).collect::<Vec<u64>>());
}

/// Found that with 200 subscriptions renewing at one instant, 41 of the
/// renewals met contended numbers, gave up and waited a minute for their
/// timer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_renewals_at_one_instant_are_all_invoiced_at_once_with_consecutive_numbers() {
    let app = spawn_app().await;
    let k = app.merchant().await.test_key;
    let who = mandated_customers(&app, &k, 10).await;
    let mut plans = Vec::new();
    for p in 0..20 {
        let body = json!({"interval": "day", "amount": 100_000 + 100 * p});
        plans.push(id(&plan(&app, &k, body).await));
    }
    let pairs: Vec<(usize, usize)> = (0..10).flat_map(|c| (0..20).map(move |p| (c, p))).collect();
    let subs: Vec<String> = subscribe_pairs(&app, &k, &who, &plans, pairs, 8)
        .await
        .into_iter()
        .map(|(_, _, s)| s)
        .collect();
    app.advance(60).await;
    let first = app.get(&k, &format!("/v1/subscriptions/{}", subs[0])).await;
    let due = first.body["current_period_end"]
        .as_str()
        .unwrap()
        .to_string();
    // To the renewal instant exactly: every renewal runs in this advance.
    app.admin_post("/admin/v1/clock/advance", json!({"to": due}))
        .await
        .assert_status(200);
    let all = app.all_pages(&k, "/v1/subscriptions").await;
    let renewed = all.iter().filter(|s| s["current_period"] == 2).count();
    assert_eq!(renewed, 200, "every subscription renewed at the instant");
    let invoices = app.all_pages(&k, "/v1/invoices").await;
    let periods: HashSet<(String, u64)> = invoices
        .iter()
        .map(|i| {
            (
                i["subscription"].as_str().unwrap().to_string(),
                i["metadata"]["period"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        periods.len(),
        400,
        "one invoice per subscription and period"
    );
    assert_eq!(numbers(&invoices), (1..=400).collect::<Vec<u64>>());
}
