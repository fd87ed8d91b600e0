//! The renewal benchmark (ignored; `scripts/renewal_bench.sh` runs it in
//! a release build; docs/performance.md, "Subscription renewals"):
//! `RENEWAL_BENCH_SUBS` (default 10,000) daily subscriptions collected by
//! mandate, `RENEWAL_BENCH_CUSTOMERS` (default 100) customers each on as
//! many plans, all due at one 08:00 Lagos. The clock is moved to that
//! instant (every renewal runs in that advance: the period advanced, its
//! invoice made and finalized, its debit asked for), then a minute at a
//! time until no debit is processing (each debit's answer comes a minute
//! after it is asked for). Prints the wall time of each phase and the
//! renewals per second until every period is invoiced and debited; then
//! checks every subscription renewed once and every period was invoiced
//! and paid once.

use std::collections::HashSet;
use std::time::Instant;

use serde_json::json;

use crate::crash_subscriptions::{mandated_customers, subscribe_pairs};
use crate::helpers::spawn_app;
use crate::subscriptions::{id, plan};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn renewal_bench() {
    let subs_n = env_or("RENEWAL_BENCH_SUBS", 10_000);
    let customers = env_or("RENEWAL_BENCH_CUSTOMERS", 100);
    let plans_n = subs_n.div_ceil(customers);
    let setup = Instant::now();
    let app = spawn_app().await;
    let k = app.merchant().await.test_key;
    let who = mandated_customers(&app, &k, customers).await;
    let mut plans = Vec::new();
    for p in 0..plans_n {
        let body = json!({"interval": "day", "amount": 100_000 + 100 * p as i64});
        plans.push(id(&plan(&app, &k, body).await));
    }
    let pairs: Vec<(usize, usize)> = (0..customers)
        .flat_map(|c| (0..plans_n).map(move |p| (c, p)))
        .take(subs_n)
        .collect();
    let subs: Vec<String> = subscribe_pairs(&app, &k, &who, &plans, pairs, 16)
        .await
        .into_iter()
        .map(|(_, _, s)| s)
        .collect();
    // The first debits' answers.
    app.advance(60).await;
    let first = app.get(&k, &format!("/v1/subscriptions/{}", subs[0])).await;
    let due = first.body["current_period_end"]
        .as_str()
        .unwrap()
        .to_string();
    let setup = setup.elapsed();

    let started = Instant::now();
    app.admin_post("/admin/v1/clock/advance", json!({"to": due}))
        .await
        .assert_status(200);
    let renew = started.elapsed();
    let mut minutes = 0;
    loop {
        app.advance(60).await;
        minutes += 1;
        let r = app
            .get(&k, "/v1/payment_intents?status=processing&limit=1")
            .await;
        r.assert_status(200);
        if r.body["data"].as_array().unwrap().is_empty() {
            break;
        }
        assert!(
            minutes < 30,
            "debits still processing after {minutes} minutes"
        );
    }
    let total = started.elapsed();
    println!(
        "renewal_bench subs={subs_n} customers={customers} setup_s={:.1} renew_s={:.2} \
         debited_s={:.2} clock_minutes={minutes} renewals_per_s={:.0} invoiced_per_s={:.0}",
        setup.as_secs_f64(),
        renew.as_secs_f64(),
        total.as_secs_f64(),
        subs_n as f64 / total.as_secs_f64(),
        subs_n as f64 / renew.as_secs_f64(),
    );

    // Every subscription renewed once; every period invoiced and paid once.
    let all = app.all_pages(&k, "/v1/subscriptions").await;
    assert_eq!(all.len(), subs_n);
    assert!(all
        .iter()
        .all(|s| s["current_period"] == 2 && s["status"] == "active"));
    let invoices = app.all_pages(&k, "/v1/invoices").await;
    let periods: HashSet<(String, u64)> = invoices
        .iter()
        .filter(|i| i["status"] == "paid")
        .map(|i| {
            (
                i["subscription"].as_str().unwrap().to_string(),
                i["metadata"]["period"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(invoices.len(), 2 * subs_n);
    assert_eq!(periods.len(), 2 * subs_n);
}
