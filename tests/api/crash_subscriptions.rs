//! Subscriptions under SIGKILL: many subscriptions renewing at one 08:00
//! Lagos, the server killed at a random moment of that renewal run,
//! restarted, the clock moved on: every period invoiced once and debited
//! successfully once, and `kobo check` clean (ledger conserved, one
//! invoice and at most one successful debit per period).

use std::time::Duration;

use futures_util::future::join_all;
use rand::Rng;
use serde_json::json;

use crate::helpers::{spawn_app, TestApp};
use crate::mandates::{answer, pending, refresh};
use crate::subscriptions::{advance_to, get_sub, id, invoices_of, plan, subscribe};

/// How many subscriptions renew at the same 08:00.
const SUBSCRIPTIONS: usize = 1_000;

async fn one(app: &TestApp, k: &str, plan: &str, n: usize) -> (String, String) {
    let m = pending(app, k, &format!("sub{n}@example.com")).await;
    answer(app, &m, true).await.assert_status(200);
    refresh(app, k, &id(&m)).await.assert_status(200);
    let customer = m["customer"].as_str().unwrap().to_string();
    let r = subscribe(
        app,
        k,
        json!({"customer": customer, "plan": plan, "collection_method": "mandate", "mandate": id(&m)}),
    )
    .await;
    r.assert_status(201);
    (id(&r.body), customer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_at_one_0800_are_billed_once_across_sigkill() {
    let mut app = spawn_app().await;
    let k = app.merchant().await.test_key;
    let p = id(&plan(&app, &k, json!({"interval": "week"})).await);
    let mut subs = Vec::new();
    for chunk in (0..SUBSCRIPTIONS).collect::<Vec<_>>().chunks(16) {
        subs.extend(join_all(chunk.iter().map(|n| one(&app, &k, &p, *n))).await);
    }
    app.advance(60).await;
    let end: chrono::DateTime<chrono::Utc> = get_sub(&app, &k, &subs[0].0).await
        ["current_period_end"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    advance_to(&app, end - chrono::Duration::seconds(1)).await;
    // The renewal run over 08:00, killed at a random moment.
    let (base, token) = (app.base.clone(), app.admin_token.clone());
    let run = tokio::spawn(async move {
        let _ = reqwest::Client::new()
            .post(format!("{base}/admin/v1/clock/advance"))
            .bearer_auth(token)
            .json(&json!({"seconds": 121}))
            .send()
            .await;
    });
    let kill_after = rand::thread_rng().gen_range(50..1500);
    tokio::time::sleep(Duration::from_millis(kill_after)).await;
    app.kill();
    let _ = run.await;
    app.start(&[]);
    // Past the renewal; timers a kill interrupted (or a busy mailbox
    // refused) run again a minute later: ten minutes settles everything.
    advance_to(&app, end + chrono::Duration::seconds(600)).await;
    let mut renewed = 0;
    for (s, customer) in &subs {
        let invs = invoices_of(&app, &k, s).await;
        assert_eq!(invs.len(), 2, "subscription {s}: one invoice per period");
        assert!(invs.iter().all(|i| i["status"] == "paid"), "{s}: {invs:?}");
        let pis = app
            .get(
                &k,
                &format!("/v1/payment_intents?customer={customer}&limit=100"),
            )
            .await;
        let ok = pis.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["status"] == "successful")
            .count();
        assert_eq!(ok, 2, "subscription {s}: one successful debit per period");
        renewed += 1;
    }
    eprintln!(
        "subscription crash test: {renewed} renewals at one 08:00, killed after {kill_after} ms"
    );
    crate::operations::assert_check_clean(&mut app);
}
