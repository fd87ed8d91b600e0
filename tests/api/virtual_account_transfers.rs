//! Transfers into dedicated virtual accounts: each becomes one successful
//! payment intent (its brand, fee, attempt, capture, event), once per
//! interbank session id (a repeat, a refresh: nothing new), found by
//! account and customer and released like any other payment; money into a
//! deactivated account or a denied customer's is recorded (and flagged).

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::helpers::{spawn_app, TestApp};
use crate::virtual_accounts::{active, customer, get, id, open, transfer};

async fn intents_of(app: &TestApp, key: &str, query: &str) -> Vec<Value> {
    let r = get(app, key, &format!("/v1/payment_intents?limit=100&{query}")).await;
    r["data"].as_array().unwrap().clone()
}

#[tokio::test]
async fn deactivation_is_permanent_and_late_money_is_recorded_and_flagged() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = customer(&app, k, json!({"email": "ada@example.com"})).await;
    let a = active(&app, k, &ada).await;
    let path = format!("/v1/virtual_accounts/{}", id(&a));
    let before = transfer(
        &app,
        k,
        &id(&a),
        json!({"amount": 10_000, "session_id": "S1"}),
    )
    .await;
    assert_eq!(before.body["sender"]["account_deactivated"], false);
    app.advance(60).await;
    let idem = app.next_key();
    let d = app
        .post_with_key(k, &format!("{path}/deactivate"), &idem, json!({}))
        .await;
    d.assert_status(200);
    assert_eq!(d.body["status"], "deactivated");
    assert!(d.body["deactivated_at"].is_string());
    let replay = app
        .post_with_key(k, &format!("{path}/deactivate"), &idem, json!({}))
        .await;
    assert!(replay.replayed());
    assert_eq!(replay.body, d.body);
    app.post(k, &format!("{path}/deactivate"), json!({}))
        .await
        .assert_error(409, "virtual_account_unexpected_state", None);
    // Money that arrives anyway is recorded, and flagged.
    let late = transfer(
        &app,
        k,
        &id(&a),
        json!({"amount": 10_000, "session_id": "S2"}),
    )
    .await;
    late.assert_status(200);
    assert_eq!(late.body["status"], "successful");
    assert_eq!(late.body["sender"]["account_deactivated"], true);
    // The earlier credit stays as it was.
    let again = transfer(
        &app,
        k,
        &id(&a),
        json!({"amount": 10_000, "session_id": "S1"}),
    )
    .await;
    assert_eq!(again.body, before.body);
    // A new account, a new number; the customer may now be deleted...
    let b = open(&app, k, &ada).await;
    b.assert_status(201);
    assert_ne!(b.body["account_number"], a["account_number"]);
    app.post(
        k,
        &format!("/v1/virtual_accounts/{}/deactivate", id(&b.body)),
        json!({}),
    )
    .await
    .assert_status(200);
    app.post(k, &format!("/v1/customers/{ada}/delete"), json!({}))
        .await
        .assert_status(200);
    // ...and money into its old account is still recorded.
    let after = transfer(
        &app,
        k,
        &id(&a),
        json!({"amount": 10_000, "session_id": "S3"}),
    )
    .await;
    after.assert_status(200);
    assert_eq!(after.body["customer"], ada.as_str());
    // Numbers are never given twice.
    let all = get(&app, k, "/v1/virtual_accounts?limit=100").await;
    let numbers: HashSet<&str> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["account_number"].as_str().unwrap())
        .collect();
    assert_eq!(numbers.len(), 2);
}

#[tokio::test]
async fn a_denied_customers_money_is_still_recorded() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = customer(&app, k, json!({"email": "ada@example.com"})).await;
    let a = active(&app, k, &ada).await;
    app.post(
        k,
        &format!("/v1/customers/{ada}"),
        json!({"risk_action": "deny"}),
    )
    .await
    .assert_status(200);
    let r = transfer(&app, k, &id(&a), json!({"amount": 10_000})).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "successful");
    // An existing open account is answered as it is.
    open(&app, k, &ada).await.assert_status(200);
}

/// A merchant with a brand, its customer of that brand, and the
/// customer's active account.
async fn setup(app: &TestApp) -> (String, String, String, String) {
    let m = app.merchant().await;
    let k = m.test_key.clone();
    let brand = app
        .post(&k, "/v1/brands", json!({"name": "Shoes"}))
        .await
        .body;
    let ada = customer(
        app,
        &k,
        json!({"email": "ada@example.com", "brand": id(&brand)}),
    )
    .await;
    let a = active(app, &k, &ada).await;
    (k, id(&brand), ada, id(&a))
}

const SESSION: &str = "000013250303090000123456789012";

fn first_transfer() -> Value {
    json!({"amount": 50_000, "session_id": SESSION,
           "sender_name": "BOLA ADE", "sender_account": "0123456789"})
}

#[tokio::test]
async fn simulate_transfer_validates_its_body() {
    let app = spawn_app().await;
    let (k, _, _, account) = setup(&app).await;
    for (body, param) in [
        (json!({}), "amount"),
        (json!({"amount": 0}), "amount"),
        (
            json!({"amount": 100, "session_id": "no spaces"}),
            "session_id",
        ),
        (json!({"amount": 100, "session_id": ""}), "session_id"),
        (
            json!({"amount": 100, "sender_account": "123"}),
            "sender_account",
        ),
    ] {
        let r = transfer(&app, &k, &account, body).await;
        r.assert_status(400);
        assert_eq!(r.param(), Some(param));
    }
    transfer(
        &app,
        &k,
        &uuid::Uuid::new_v4().to_string(),
        json!({"amount": 100}),
    )
    .await
    .assert_error(404, "resource_missing", None);
    assert!(intents_of(&app, &k, "").await.is_empty());
}

#[tokio::test]
async fn a_transfer_becomes_one_successful_payment_of_the_accounts_brand() {
    let app = spawn_app().await;
    let (k, brand, ada, account) = setup(&app).await;
    let k = &k;
    let r = transfer(&app, k, &account, first_transfer()).await;
    r.assert_status(200);
    let pi = r.body.clone();
    assert_eq!(pi["object"], "payment_intent");
    assert_eq!(pi["status"], "successful");
    assert_eq!(pi["amount"], 50_000);
    assert_eq!(pi["virtual_account"], account.as_str());
    assert_eq!(pi["customer"], ada.as_str());
    assert_eq!(pi["customer_email"], "ada@example.com");
    assert_eq!(pi["brand"], brand.as_str());
    assert_eq!(pi["fee_bearer"], "merchant");
    assert_eq!(pi["amount_charged"]["total"], 50_000);
    assert_eq!(
        pi["sender"],
        json!({"name": "BOLA ADE", "account_number": "0123456789",
               "session_id": SESSION, "account_deactivated": false})
    );
    assert!(pi["paid_at"].is_string());
    let attempts = get(
        &app,
        k,
        &format!("/v1/payment_intents/{}/charge_attempts", id(&pi)),
    )
    .await;
    let attempts = attempts["data"].as_array().unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["channel"], "bank_transfer");
    assert_eq!(attempts[0]["status"], "successful");
    let net = pi["fees"]["net"].as_i64().unwrap();
    assert!(net > 0 && net < 50_000);
    assert_eq!(app.balance(k, "pending", "NGN").await, net);
    let successful = get(&app, k, "/v1/events?type=payment_intent.successful").await;
    assert_eq!(successful["data"].as_array().unwrap().len(), 1);
    assert_eq!(
        successful["data"][0]["data"]["object"]["id"],
        id(&pi).as_str()
    );
}

#[tokio::test]
async fn the_same_session_id_is_the_same_payment_and_writes_nothing() {
    let app = spawn_app().await;
    let (k, _, _, account) = setup(&app).await;
    let k = &k;
    let pi = transfer(&app, k, &account, first_transfer()).await.body;
    let lines = app.all_lines(k).await;
    // The same credit notified again (another request, even another
    // amount): the same payment intent, nothing new.
    for again in [
        first_transfer(),
        json!({"amount": 1, "session_id": SESSION}),
    ] {
        let r = transfer(&app, k, &account, again).await;
        r.assert_status(200);
        assert_eq!(r.body, pi);
    }
    // And found again by a refresh.
    app.post(
        k,
        &format!("/v1/virtual_accounts/{account}/refresh"),
        json!({}),
    )
    .await
    .assert_status(200);
    assert_eq!(app.all_lines(k).await, lines);
    assert_eq!(intents_of(&app, k, "").await.len(), 1);
    let successful = get(&app, k, "/v1/events?type=payment_intent.successful").await;
    assert_eq!(successful["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn payments_are_found_by_account_and_customer_and_released_like_any_other() {
    let app = spawn_app().await;
    let (k, brand, ada, account) = setup(&app).await;
    let k = &k;
    let pi = transfer(&app, k, &account, first_transfer()).await.body;
    // Without a session id: one is derived from the Idempotency-Key.
    let idem = app.next_key();
    let path = format!("/v1/test_helpers/virtual_accounts/{account}/simulate_transfer");
    let first = app
        .post_with_key(k, &path, &idem, json!({"amount": 20_000}))
        .await;
    first.assert_status(200);
    assert_eq!(
        first.body["sender"]["session_id"].as_str().unwrap().len(),
        30
    );
    let replay = app
        .post_with_key(k, &path, &idem, json!({"amount": 20_000}))
        .await;
    assert!(replay.replayed());
    assert_eq!(replay.body["id"], first.body["id"]);
    let other = transfer(&app, k, &account, json!({"amount": 20_000})).await;
    assert_ne!(other.body["id"], first.body["id"]);
    // A payment intent of the customer's but not of the account.
    app.create_intent(
        k,
        json!({"amount": 10_000, "currency": "NGN", "customer": ada}),
    )
    .await;
    let listed = intents_of(&app, k, &format!("virtual_account={account}")).await;
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[2]["id"], pi["id"]);
    assert_eq!(
        intents_of(&app, k, &format!("customer={ada}")).await.len(),
        4
    );
    let both = format!("customer={ada}&virtual_account={account}&status=successful");
    assert_eq!(intents_of(&app, k, &both).await.len(), 3);
    let none = format!("virtual_account={}", uuid::Uuid::new_v4());
    assert!(intents_of(&app, k, &none).await.is_empty());
    // Released like any other payment.
    let r = app
        .post(k, "/v1/test_helpers/balance/release_pending", json!({}))
        .await;
    r.assert_status(200);
    assert_eq!(app.balance(k, "pending", "NGN").await, 0);
    let total_net: i64 = listed
        .iter()
        .map(|p| p["fees"]["net"].as_i64().unwrap())
        .sum();
    assert_eq!(app.balance(k, "available", "NGN").await, total_net);
    let by_brand = get(&app, k, &format!("/v1/balance?brand={brand}")).await;
    assert_eq!(by_brand["available"][0]["amount"], total_net);
}
