//! Dedicated virtual accounts: create (one open account per customer, also
//! under concurrent creates), live-mode rules, activation and failure at
//! the next check on the manual clock, lists. Transfers:
//! `virtual_account_transfers.rs`.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::helpers::{spawn_app, Resp, TestApp};

pub(crate) fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

pub(crate) async fn customer(app: &TestApp, key: &str, body: Value) -> String {
    let r = app.post(key, "/v1/customers", body).await;
    assert!(r.status == 201 || r.status == 200, "{}", r.text);
    id(&r.body)
}

pub(crate) async fn open(app: &TestApp, key: &str, customer: &str) -> Resp {
    app.post(key, "/v1/virtual_accounts", json!({"customer": customer}))
        .await
}

/// An account the bank opened (created, then refreshed).
pub(crate) async fn active(app: &TestApp, key: &str, customer: &str) -> Value {
    let a = open(app, key, customer).await;
    a.assert_status(201);
    let r = app
        .post(
            key,
            &format!("/v1/virtual_accounts/{}/refresh", id(&a.body)),
            json!({}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "active");
    r.body
}

pub(crate) async fn transfer(app: &TestApp, key: &str, account: &str, body: Value) -> Resp {
    app.post(
        key,
        &format!("/v1/test_helpers/virtual_accounts/{account}/simulate_transfer"),
        body,
    )
    .await
}

pub(crate) async fn get(app: &TestApp, key: &str, path: &str) -> Value {
    let r = app.get(key, path).await;
    r.assert_status(200);
    r.body
}

fn existing(r: &Resp) -> bool {
    r.headers
        .get("existing-object")
        .is_some_and(|v| v == "true")
}

/// The NUBAN check digit (CBN): bank code padded to 6 digits, then the 9
/// serial digits, weighted 3, 7, 3 repeating.
fn nuban_ok(bank: &str, number: &str) -> bool {
    let digits = format!("{bank:0>6}{}", &number[..9]);
    let sum: u32 = digits
        .bytes()
        .zip([3u32, 7, 3].iter().cycle())
        .map(|(d, w)| u32::from(d - b'0') * w)
        .sum();
    let check = (10 - sum % 10) % 10;
    number.len() == 10 && number[9..] == check.to_string()
}

#[tokio::test]
async fn create_validates_its_body_and_customer() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = customer(&app, k, json!({"email": "ada@example.com"})).await;
    for (body, code, param) in [
        (json!({}), "parameter_missing", "customer"),
        (json!({"customer": "x"}), "parameter_invalid", "customer"),
        (
            json!({"customer": ada, "preferred_bank": "058"}),
            "parameter_invalid",
            "preferred_bank",
        ),
        (
            json!({"customer": ada, "amount": 5}),
            "parameter_unknown",
            "amount",
        ),
    ] {
        app.post(k, "/v1/virtual_accounts", body)
            .await
            .assert_error(400, code, Some(param));
    }
    open(&app, k, &uuid::Uuid::new_v4().to_string())
        .await
        .assert_error(404, "resource_missing", Some("customer"));
    let other = app.merchant().await;
    let theirs = customer(&app, &other.test_key, json!({"email": "t@example.com"})).await;
    open(&app, k, &theirs)
        .await
        .assert_error(404, "resource_missing", Some("customer"));
}

#[tokio::test]
async fn create_gives_each_customer_one_open_account_with_its_own_number() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = customer(
        &app,
        k,
        json!({"email": "ada@example.com", "name": "Ada Obi"}),
    )
    .await;
    let idem = app.next_key();
    let body = json!({"customer": ada, "metadata": {"plan": "gold"}});
    let r = app
        .post_with_key(k, "/v1/virtual_accounts", &idem, body.clone())
        .await;
    r.assert_status(201);
    assert!(!existing(&r));
    let a = r.body.clone();
    assert_eq!(a["object"], "virtual_account");
    assert_eq!(a["livemode"], false);
    assert_eq!(a["customer"], ada.as_str());
    let c = get(&app, k, &format!("/v1/customers/{ada}")).await;
    assert_eq!(a["brand"], c["brand"]);
    assert_eq!(a["status"], "pending");
    assert_eq!(a["currency"], "NGN");
    assert_eq!(a["bank_code"], "035");
    assert_eq!(a["bank_name"], "Wema Bank");
    assert_eq!(a["account_name"], "ADA STORES/ADA OBI");
    assert_eq!(a["metadata"], json!({"plan": "gold"}));
    let number = a["account_number"].as_str().unwrap();
    assert!(nuban_ok("035", number), "{number}");
    assert!(!number.starts_with('9'));
    for f in ["failure_reason", "activated_at", "deactivated_at"] {
        assert!(a[f].is_null(), "{f}");
    }
    let replay = app
        .post_with_key(k, "/v1/virtual_accounts", &idem, body)
        .await;
    assert!(replay.replayed());
    assert_eq!(replay.body, a);
    // The customer's open account again: 200, unchanged.
    let again = open(&app, k, &ada).await;
    again.assert_status(200);
    assert!(existing(&again));
    assert_eq!(again.body, a);
    assert_eq!(
        get(&app, k, &format!("/v1/virtual_accounts/{}", id(&a))).await,
        a
    );
    let other = app.merchant().await;
    app.get(&other.test_key, &format!("/v1/virtual_accounts/{}", id(&a)))
        .await
        .assert_status(404);

    // Another customer, another bank: another number.
    let bola = customer(&app, k, json!({"phone": "+2348031234567"})).await;
    let b = app
        .post(
            k,
            "/v1/virtual_accounts",
            json!({"customer": bola, "preferred_bank": "101"}),
        )
        .await;
    b.assert_status(201);
    assert_eq!(b.body["bank_name"], "Providus Bank");
    assert_eq!(b.body["account_name"], "ADA STORES/+2348031234567");
    assert_ne!(b.body["account_number"], a["account_number"]);
    assert!(nuban_ok("101", b.body["account_number"].as_str().unwrap()));

    // In use: the customer cannot be deleted.
    app.post(k, &format!("/v1/customers/{ada}/delete"), json!({}))
        .await
        .assert_error(409, "customer_in_use", None);
    // A denied customer gets no new account.
    let chi = customer(
        &app,
        k,
        json!({"email": "chi@example.com", "risk_action": "deny"}),
    )
    .await;
    open(&app, k, &chi)
        .await
        .assert_error(409, "customer_blocked", None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_for_one_customer_make_one_account() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let c = customer(&app, &m.test_key, json!({"email": "ada@example.com"})).await;
    let mut tasks = Vec::new();
    for n in 0..10 {
        let (client, base, key, c) = (
            app.client.clone(),
            app.base.clone(),
            m.test_key.clone(),
            c.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let r = client
                .post(format!("{base}/v1/virtual_accounts"))
                .bearer_auth(&key)
                .header("Idempotency-Key", format!("va-{n}"))
                .json(&json!({"customer": c}))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }));
    }
    let (mut created, mut ids) = (0, HashSet::new());
    for t in tasks {
        let (status, body) = t.await.unwrap();
        assert!(status == 201 || status == 200, "{status} {body}");
        created += usize::from(status == 201);
        ids.insert(id(&body));
    }
    assert_eq!((created, ids.len()), (1, 1));
}

#[tokio::test]
async fn live_accounts_need_activation_and_a_verified_identity() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let c = customer(&app, &m.live_key, json!({"email": "ada@example.com"})).await;
    open(&app, &m.live_key, &c)
        .await
        .assert_error(403, "account_not_activated", None);
    let live = app.live_merchant().await;
    let c = customer(&app, &live.live_key, json!({"email": "ada@example.com"})).await;
    open(&app, &live.live_key, &c)
        .await
        .assert_error(409, "customer_identity_unverified", None);
    // Test helpers are for test keys only.
    let t = customer(&app, &live.test_key, json!({"email": "ada@example.com"})).await;
    let a = active(&app, &live.test_key, &t).await;
    transfer(&app, &live.live_key, &id(&a), json!({"amount": 100}))
        .await
        .assert_error(404, "resource_missing", None);
}

#[tokio::test]
async fn accounts_open_or_fail_at_the_next_check() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = customer(&app, k, json!({"email": "ada@example.com"})).await;
    let a = open(&app, k, &ada).await.body;
    let path = format!("/v1/virtual_accounts/{}", id(&a));
    // Pending accounts take no transfers.
    transfer(&app, k, &id(&a), json!({"amount": 10_000}))
        .await
        .assert_error(409, "virtual_account_unexpected_state", None);
    app.advance(299).await;
    assert_eq!(get(&app, k, &path).await["status"], "pending");
    app.advance(1).await;
    let v = get(&app, k, &path).await;
    assert_eq!(v["status"], "active");
    let at: chrono::DateTime<chrono::Utc> = v["activated_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(at, app.now().await);
    let events = get(&app, k, "/v1/events?type=virtual_account.activated").await;
    assert_eq!(events["data"].as_array().unwrap().len(), 1);
    assert_eq!(events["data"][0]["data"]["object"]["id"], id(&a).as_str());
    // Later checks leave it alone.
    app.advance(3600).await;
    assert_eq!(get(&app, k, &path).await, v);

    // The sandbox bank refuses customers with an email ending
    // @decline.test or a phone ending 0000.
    for body in [
        json!({"email": "x@DECLINE.test"}),
        json!({"phone": "+2348030000000"}),
    ] {
        let c = customer(&app, k, body).await;
        let f = open(&app, k, &c).await.body;
        let r = app
            .post(
                k,
                &format!("/v1/virtual_accounts/{}/refresh", id(&f)),
                json!({}),
            )
            .await;
        assert_eq!(r.body["status"], "failed");
        assert_eq!(r.body["failure_reason"], "bank_rejected");
        transfer(&app, k, &id(&f), json!({"amount": 10_000}))
            .await
            .assert_error(409, "virtual_account_unexpected_state", None);
        app.post(
            k,
            &format!("/v1/virtual_accounts/{}/deactivate", id(&f)),
            json!({}),
        )
        .await
        .assert_error(409, "virtual_account_unexpected_state", None);
        // A failed account is not the customer's open one.
        let next = open(&app, k, &c).await;
        next.assert_status(201);
        assert_ne!(next.body["account_number"], f["account_number"]);
    }
    let failed = get(&app, k, "/v1/events?type=virtual_account.failed").await;
    assert_eq!(failed["data"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn lists_filter_by_customer_status_and_number() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = customer(&app, k, json!({"email": "ada@example.com"})).await;
    let bola = customer(&app, k, json!({"email": "bola@example.com"})).await;
    let a1 = active(&app, k, &ada).await;
    app.post(
        k,
        &format!("/v1/virtual_accounts/{}/deactivate", id(&a1)),
        json!({}),
    )
    .await
    .assert_status(200);
    let a2 = open(&app, k, &ada).await.body;
    let b1 = open(&app, k, &bola).await.body;
    let ids = |v: Value| -> Vec<String> { v["data"].as_array().unwrap().iter().map(id).collect() };
    let l = |q: &str| {
        let path = format!("/v1/virtual_accounts{q}");
        let app = &app;
        async move { get(app, k, &path).await }
    };
    assert_eq!(ids(l("").await), vec![id(&b1), id(&a2), id(&a1)]);
    assert_eq!(
        ids(l(&format!("?customer={ada}")).await),
        vec![id(&a2), id(&a1)]
    );
    assert_eq!(ids(l("?status=pending").await), vec![id(&b1), id(&a2)]);
    assert_eq!(
        ids(l(&format!("?customer={ada}&status=deactivated")).await),
        vec![id(&a1)]
    );
    let n = a2["account_number"].as_str().unwrap();
    assert_eq!(ids(l(&format!("?account_number={n}")).await), vec![id(&a2)]);
    assert!(ids(l("?account_number=0000000000").await).is_empty());
    let page = l("?limit=1").await;
    assert_eq!(page["has_more"], true);
    assert_eq!(
        ids(l(&format!("?starting_after={}", id(&a2))).await),
        vec![id(&a1)]
    );
    for (q, param) in [
        ("?status=open", "status"),
        ("?customer=x", "customer"),
        ("?bank=1", "bank"),
    ] {
        let r = app.get(k, &format!("/v1/virtual_accounts{q}")).await;
        assert_eq!(r.status, 400, "{q}");
        assert_eq!(r.param(), Some(param));
    }
    let other = app.merchant().await;
    assert!(ids(get(
        &app,
        &other.test_key,
        &format!("/v1/virtual_accounts?account_number={n}")
    )
    .await)
    .is_empty());
}
