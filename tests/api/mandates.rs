//! Direct debit: every transition of the mandate state table on the manual
//! clock (approval by refresh and by the periodic check, expiry at exactly
//! 7 days, rejection by the provider, decline on the page, cancel), charges
//! on active and non-active mandates, the sandbox debit outcomes, cancel
//! during an in-flight debit, idempotent replays, customers.

use std::time::Instant;

use serde_json::{json, Value};

use crate::helpers::{spawn_app, Resp, TestApp};

const SEVEN_DAYS: i64 = 7 * 24 * 3600;

async fn create(app: &TestApp, key: &str, body: Value) -> Value {
    let r = app.post(key, "/v1/mandates", body).await;
    r.assert_status(201);
    r.body
}

pub(crate) async fn pending(app: &TestApp, key: &str, email: &str) -> Value {
    create(
        app,
        key,
        json!({"customer_email": email, "customer_name": "Ada Obi", "callback_url": "https://shop.example/mandate-done"}),
    )
    .await
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

async fn get(app: &TestApp, key: &str, m: &str) -> Value {
    let r = app.get(key, &format!("/v1/mandates/{m}")).await;
    r.assert_status(200);
    r.body
}

pub(crate) async fn refresh(app: &TestApp, key: &str, m: &str) -> Resp {
    app.post(key, &format!("/v1/mandates/{m}/refresh"), json!({}))
        .await
}

/// The customer's answer on the sandbox page, as a program posts it.
pub(crate) async fn answer(app: &TestApp, mandate: &Value, approve: bool) -> Resp {
    let url = mandate["authorization_url"].as_str().unwrap();
    let action = if approve { "approve" } else { "decline" };
    let res = app
        .client
        .post(format!("{url}/{action}"))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let text = res.text().await.unwrap();
    Resp {
        status,
        headers,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
    }
}

/// An active mandate (approved, then refreshed).
pub(crate) async fn active(app: &TestApp, key: &str) -> Value {
    let m = pending(app, key, "ada@example.com").await;
    answer(app, &m, true).await.assert_status(200);
    let r = refresh(app, key, &id(&m)).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "active");
    r.body
}

async fn charge(app: &TestApp, key: &str, m: &str, amount: i64) -> Resp {
    app.post(
        key,
        &format!("/v1/mandates/{m}/charge"),
        json!({"amount": amount, "currency": "NGN", "description": "June plan"}),
    )
    .await
}

async fn intent(app: &TestApp, key: &str, pi: &str) -> Value {
    let r = app.get(key, &format!("/v1/payment_intents/{pi}")).await;
    r.assert_status(200);
    r.body
}

fn assert_pending_shape(m: &Value) {
    assert_eq!(m["object"], "mandate");
    assert_eq!(m["status"], "pending");
    assert_eq!(m["livemode"], false);
    for f in [
        "bank_name",
        "account_name",
        "account_number_last4",
        "failure_reason",
        "activated_at",
        "canceled_at",
    ] {
        assert!(m[f].is_null(), "{f}: {m}");
    }
    assert!(m["authorization_url"]
        .as_str()
        .unwrap()
        .contains("/sandbox/mandates/"));
}

#[tokio::test]
async fn create_validates_its_body_and_makes_a_customer_for_an_email() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    for body in [
        json!({}),
        json!({"customer_email": "a@example.com", "customer": uuid::Uuid::new_v4()}),
    ] {
        app.post(k, "/v1/mandates", body).await.assert_error(
            400,
            "parameter_invalid",
            Some("customer"),
        );
    }
    app.post(k, "/v1/mandates", json!({"customer_email": "nope"}))
        .await
        .assert_error(400, "parameter_invalid", Some("customer_email"));
    app.post(
        k,
        "/v1/mandates",
        json!({"customer_email": "a@example.com", "callback_url": "ftp://x"}),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("callback_url"));
    app.post(
        k,
        "/v1/mandates",
        json!({"customer_email": "a@example.com", "currency": "NGN"}),
    )
    .await
    .assert_error(400, "parameter_unknown", Some("currency"));
    app.post(k, "/v1/mandates", json!({"customer": uuid::Uuid::new_v4()}))
        .await
        .assert_error(404, "resource_missing", Some("customer"));

    let first = pending(&app, k, "ada@example.com").await;
    assert_pending_shape(&first);
    assert_eq!(first["customer_email"], "ada@example.com");
    assert_eq!(first["customer_name"], "Ada Obi");
    let customer = first["customer"].as_str().unwrap().to_string();
    let c = app.get(k, &format!("/v1/customers/{customer}")).await;
    c.assert_status(200);
    assert_eq!(c.body["object"], "customer");
    assert_eq!(c.body["email"], "ada@example.com");
    assert_eq!(c.body["name"], "Ada Obi");
    assert_eq!(c.body["livemode"], false);
    assert!(c.body["created_at"].is_string());
    // Another merchant, the live key, an unknown id: 404.
    let other = app.merchant().await;
    app.get(&other.test_key, &format!("/v1/customers/{customer}"))
        .await
        .assert_status(404);
    app.get(&m.live_key, &format!("/v1/customers/{customer}"))
        .await
        .assert_status(404);
    app.get(&other.test_key, &format!("/v1/mandates/{}", id(&first)))
        .await
        .assert_status(404);

    // An existing customer.
    let second = create(&app, k, json!({"customer": customer})).await;
    assert_eq!(second["customer"], customer.as_str());
    assert_eq!(second["customer_email"], "ada@example.com");
    assert_eq!(second["customer_name"], "Ada Obi");
    let third = pending(&app, k, "bola@example.com").await;

    // Lists: newest first, filters, cursors.
    let all = app.get(k, "/v1/mandates").await;
    all.assert_status(200);
    let ids: Vec<&str> = all.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![id(&third), id(&second), id(&first)]);
    let mine = app
        .get(k, &format!("/v1/mandates?customer={customer}"))
        .await;
    assert_eq!(mine.body["data"].as_array().unwrap().len(), 2);
    let page = app.get(k, "/v1/mandates?limit=1").await;
    assert_eq!(page.body["has_more"], true);
    assert_eq!(page.body["data"][0]["id"], id(&third).as_str());
    let next = app
        .get(
            k,
            &format!("/v1/mandates?limit=2&starting_after={}", id(&third)),
        )
        .await;
    assert_eq!(next.body["data"][0]["id"], id(&second).as_str());
    assert_eq!(next.body["has_more"], false);
    app.post(
        k,
        &format!("/v1/mandates/{}/cancel", id(&second)),
        json!({}),
    )
    .await
    .assert_status(200);
    let canceled = app.get(k, "/v1/mandates?status=canceled").await;
    assert_eq!(canceled.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(canceled.body["data"][0]["id"], id(&second).as_str());
    let pend = app
        .get(
            k,
            &format!("/v1/mandates?status=pending&customer={customer}"),
        )
        .await;
    assert_eq!(pend.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(pend.body["data"][0]["id"], id(&first).as_str());
    app.get(k, "/v1/mandates?status=nope").await.assert_error(
        400,
        "parameter_invalid",
        Some("status"),
    );
    assert_eq!(
        app.get(&m.live_key, "/v1/mandates").await.body["data"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

#[tokio::test]
async fn approval_reaches_the_mandate_at_refresh() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let mandate = pending(&app, k, "ada@example.com").await;
    let mid = id(&mandate);
    // Refresh before approval: still pending.
    let r = refresh(&app, k, &mid).await;
    r.assert_status(200);
    assert_pending_shape(&r.body);
    // The sandbox page shows Approve and Decline.
    let page = app
        .client
        .get(mandate["authorization_url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("/approve") && html.contains("/decline"));
    assert!(html.contains("Ada Stores"));

    let a = answer(&app, &mandate, true).await;
    a.assert_status(200);
    assert_eq!(a.body["approved"], true);
    // The mandate moves only at the next provider check.
    assert_pending_shape(&get(&app, k, &mid).await);
    let before = app.now().await;
    let r = refresh(&app, k, &mid).await;
    r.assert_status(200);
    let v = &r.body;
    assert_eq!(v["status"], "active");
    assert!(v["authorization_url"].is_null());
    assert_eq!(
        v["activated_at"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap(),
        before
    );
    assert_eq!(v["bank_name"], "Kobo Sandbox Bank");
    assert_eq!(v["account_name"], "ADA OBI");
    assert_eq!(v["account_number_last4"].as_str().unwrap().len(), 4);
    assert!(v["failure_reason"].is_null());
    // Answering again, or a refresh of an active mandate, changes nothing.
    answer(&app, &mandate, false).await.assert_status(409);
    let again = refresh(&app, k, &mid).await;
    assert_eq!(again.body, r.body);
    // Later checks and the 7 days leave an active mandate alone.
    app.advance(SEVEN_DAYS + 600).await;
    assert_eq!(get(&app, k, &mid).await, r.body);
}

#[tokio::test]
async fn approval_reaches_the_mandate_at_the_periodic_check_every_five_minutes() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let mandate = pending(&app, k, "ada@example.com").await;
    let mid = id(&mandate);
    app.advance(120).await;
    // A browser's Approve goes back to the business's callback_url.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let url = mandate["authorization_url"].as_str().unwrap();
    let token = app.form_token(url).await;
    let res = no_redirects
        .post(format!("{url}/approve"))
        .header("accept", "text/html")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("form_token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 303);
    assert_eq!(
        res.headers()["location"].to_str().unwrap(),
        "https://shop.example/mandate-done"
    );
    // The first check is 5 minutes after creation.
    app.advance(179).await;
    assert_eq!(get(&app, k, &mid).await["status"], "pending");
    app.advance(1).await;
    let v = get(&app, k, &mid).await;
    assert_eq!(v["status"], "active");
    assert_eq!(
        v["activated_at"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap(),
        app.now().await
    );

    // Approved later: found at the check after the approval.
    let late = pending(&app, k, "bola@example.com").await;
    app.advance(12 * 60).await; // checks at +5 and +10 minutes found nothing
    answer(&app, &late, true).await.assert_status(200);
    app.advance(2 * 60).await; // +14
    assert_eq!(get(&app, k, &id(&late)).await["status"], "pending");
    app.advance(60).await; // +15: the third check
    assert_eq!(get(&app, k, &id(&late)).await["status"], "active");
}

#[tokio::test]
async fn a_mandate_not_approved_in_seven_days_fails_expired_exactly_then() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let mandate = pending(&app, k, "ada@example.com").await;
    let mid = id(&mandate);
    let created: chrono::DateTime<chrono::Utc> =
        mandate["created_at"].as_str().unwrap().parse().unwrap();
    let started = Instant::now();
    app.advance(SEVEN_DAYS - 1).await;
    let elapsed = started.elapsed();
    eprintln!("7 days of 5-minute checks (2016 timers) ran in {elapsed:?}");
    let v = get(&app, k, &mid).await;
    assert_pending_shape(&v);
    app.advance(1).await;
    let v = get(&app, k, &mid).await;
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_reason"], "expired");
    assert!(v["authorization_url"].is_null());
    assert!(v["activated_at"].is_null());
    assert_eq!(
        app.now().await,
        created + chrono::Duration::seconds(SEVEN_DAYS)
    );
    // An approval after expiry is refused; nothing moves it again.
    answer(&app, &mandate, true).await.assert_status(409);
    refresh(&app, k, &mid).await.assert_status(200);
    app.advance(3600).await;
    assert_eq!(get(&app, k, &mid).await["status"], "failed");
}

#[tokio::test]
async fn the_provider_rejects_decline_test_customers_at_the_first_check() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    // By refresh.
    let a = pending(&app, k, "bad@decline.test").await;
    let r = refresh(&app, k, &id(&a)).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "failed");
    assert_eq!(r.body["failure_reason"], "declined_by_bank");
    assert!(r.body["authorization_url"].is_null());
    // By the periodic check, even after the customer approved.
    let b = pending(&app, k, "worse@decline.test").await;
    answer(&app, &b, true).await.assert_status(200);
    app.advance(299).await;
    assert_eq!(get(&app, k, &id(&b)).await["status"], "pending");
    app.advance(1).await;
    let v = get(&app, k, &id(&b)).await;
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_reason"], "declined_by_bank");
}

#[tokio::test]
async fn decline_on_the_page_fails_the_mandate_at_the_next_check() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let mandate = pending(&app, k, "ada@example.com").await;
    let mid = id(&mandate);
    let d = answer(&app, &mandate, false).await;
    d.assert_status(200);
    assert_eq!(d.body["approved"], false);
    // The first answer stands.
    let again = answer(&app, &mandate, true).await;
    again.assert_error(409, "mandate_already_answered", None);
    assert_eq!(get(&app, k, &mid).await["status"], "pending");
    app.advance(300).await;
    let v = get(&app, k, &mid).await;
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_reason"], "declined_by_customer");
    // An unknown authorization address.
    let url = mandate["authorization_url"].as_str().unwrap();
    let bad = app
        .client
        .post(format!("{}x/approve", url))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 404);
}

#[tokio::test]
async fn cancel_is_accepted_while_pending_or_active_and_refused_after() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let p = pending(&app, k, "ada@example.com").await;
    let r = app
        .post(k, &format!("/v1/mandates/{}/cancel", id(&p)), json!({}))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "canceled");
    assert!(r.body["authorization_url"].is_null());
    assert_eq!(
        r.body["canceled_at"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap(),
        app.now().await
    );
    // No check or expiry moves a canceled mandate; an approval is refused.
    answer(&app, &p, true).await.assert_status(409);
    app.advance(SEVEN_DAYS).await;
    assert_eq!(get(&app, k, &id(&p)).await["status"], "canceled");
    app.post(k, &format!("/v1/mandates/{}/cancel", id(&p)), json!({}))
        .await
        .assert_error(409, "mandate_unexpected_state", None);

    let a = active(&app, k).await;
    let r = app
        .post(k, &format!("/v1/mandates/{}/cancel", id(&a)), json!({}))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "canceled");
    assert!(r.body["activated_at"].is_string());

    let f = pending(&app, k, "x@decline.test").await;
    refresh(&app, k, &id(&f)).await;
    app.post(k, &format!("/v1/mandates/{}/cancel", id(&f)), json!({}))
        .await
        .assert_error(409, "mandate_unexpected_state", None);
    app.post(
        k,
        &format!("/v1/mandates/{}/cancel", uuid::Uuid::new_v4()),
        json!({}),
    )
    .await
    .assert_status(404);
}

#[tokio::test]
async fn a_charge_on_an_active_mandate_debits_and_captures_at_the_direct_debit_price() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let mandate = active(&app, k).await;
    let mid = id(&mandate);
    // Body rules.
    for (body, code, param) in [
        (
            json!({"amount": 99, "currency": "NGN"}),
            "parameter_invalid",
            "amount",
        ),
        (json!({"amount": 10_000}), "parameter_missing", "currency"),
        (
            json!({"amount": 10_000, "currency": "USD"}),
            "parameter_invalid",
            "currency",
        ),
        (json!({"currency": "NGN"}), "parameter_missing", "amount"),
        (
            json!({"amount": 10_000, "currency": "NGN", "fee_bearer": "customer"}),
            "parameter_unknown",
            "fee_bearer",
        ),
    ] {
        app.post(k, &format!("/v1/mandates/{mid}/charge"), body)
            .await
            .assert_error(400, code, Some(param));
    }
    app.post(
        k,
        &format!("/v1/mandates/{}/charge", uuid::Uuid::new_v4()),
        json!({"amount": 10_000, "currency": "NGN"}),
    )
    .await
    .assert_status(404);

    let amount = 1_000_000; // ₦10,000: 1.5% = ₦150 + 7.5% VAT
    let r = app
        .post(
            k,
            &format!("/v1/mandates/{mid}/charge"),
            json!({"amount": amount, "currency": "NGN", "reference": "sub-june", "description": "June", "metadata": {"plan": "gold"}}),
        )
        .await;
    r.assert_status(201);
    let pi = r.body.clone();
    assert_eq!(pi["object"], "payment_intent");
    assert_eq!(pi["status"], "processing");
    assert_eq!(pi["fee_bearer"], "merchant");
    assert_eq!(pi["customer"], mandate["customer"]);
    assert_eq!(pi["customer_email"], "ada@example.com");
    assert_eq!(pi["reference"], "sub-june");
    assert_eq!(pi["metadata"]["plan"], "gold");
    assert!(pi["checkout_url"].is_string());
    assert!(pi["client_secret"].is_string());
    assert_eq!(
        pi["fees"],
        json!({"fee": 15_000, "vat": 1_125, "net": 983_875})
    );
    assert_eq!(pi["amount_charged"]["total"], amount);
    let pid = id(&pi);
    // The same reference again is a duplicate.
    app.post(
        k,
        &format!("/v1/mandates/{mid}/charge"),
        json!({"amount": amount, "currency": "NGN", "reference": "sub-june"}),
    )
    .await
    .assert_error(409, "duplicate_reference", None);
    // No abandonment: it stays processing until the bank answers.
    let attempts = app
        .get(k, &format!("/v1/payment_intents/{pid}/charge_attempts"))
        .await;
    let data = attempts.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["channel"], "direct_debit");
    assert_eq!(data[0]["status"], "pending");
    // The debit is sent at the next timer pass; the bank answers at the
    // status query a minute later.
    app.advance(59).await;
    assert_eq!(intent(&app, k, &pid).await["status"], "processing");
    app.advance(1).await;
    let paid = intent(&app, k, &pid).await;
    assert_eq!(paid["status"], "successful");
    assert_eq!(
        paid["fees"],
        json!({"fee": 15_000, "vat": 1_125, "net": 983_875})
    );
    let attempts = app
        .get(k, &format!("/v1/payment_intents/{pid}/charge_attempts"))
        .await;
    assert_eq!(attempts.body["data"][0]["status"], "successful");
    assert_eq!(
        app.balance(k, "pending", "NGN").await + app.balance(k, "reserve", "NGN").await,
        983_875
    );
    let lines = app.all_lines(k).await;
    let mine: Vec<&Value> = lines
        .iter()
        .filter(|l| l["source"] == pid.as_str())
        .collect();
    assert!(!mine.is_empty());
    assert!(mine.iter().all(|l| l["type"] == "payment"));
    let events = app.get(k, "/v1/events?limit=100").await;
    let successful: Vec<&Value> = events.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "payment_intent.successful")
        .collect();
    assert_eq!(successful.len(), 1);
    assert_eq!(successful[0]["data"]["object"]["id"], pid.as_str());
    // Nothing more happens later.
    app.advance(3600).await;
    assert_eq!(intent(&app, k, &pid).await["status"], "successful");
}

#[tokio::test]
async fn a_debit_of_an_amount_ending_in_99_fails_with_insufficient_funds() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let mandate = active(&app, k).await;
    let r = charge(&app, k, &id(&mandate), 50_099).await;
    r.assert_status(201);
    let pid = id(&r.body);
    app.advance(60).await;
    let v = intent(&app, k, &pid).await;
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_code"], "insufficient_funds");
    let attempts = app
        .get(k, &format!("/v1/payment_intents/{pid}/charge_attempts"))
        .await;
    assert_eq!(attempts.body["data"][0]["status"], "failed");
    assert_eq!(
        attempts.body["data"][0]["failure_code"],
        "insufficient_funds"
    );
    assert_eq!(app.balance(k, "pending", "NGN").await, 0);
    assert!(app.all_lines(k).await.is_empty());
    let events = app.get(k, "/v1/events?limit=100").await;
    let failed: Vec<&Value> = events.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "payment_intent.failed")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["data"]["object"]["id"], pid.as_str());
    // The mandate stays active and can be charged again.
    assert_eq!(get(&app, k, &id(&mandate)).await["status"], "active");
    charge(&app, k, &id(&mandate), 50_000)
        .await
        .assert_status(201);
}

#[tokio::test]
async fn only_an_active_mandate_can_be_charged() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let p = pending(&app, k, "ada@example.com").await;
    charge(&app, k, &id(&p), 10_000)
        .await
        .assert_error(409, "mandate_not_active", None);
    let f = pending(&app, k, "x@decline.test").await;
    refresh(&app, k, &id(&f)).await;
    charge(&app, k, &id(&f), 10_000)
        .await
        .assert_error(409, "mandate_not_active", None);
    let c = active(&app, k).await;
    app.post(k, &format!("/v1/mandates/{}/cancel", id(&c)), json!({}))
        .await
        .assert_status(200);
    charge(&app, k, &id(&c), 10_000)
        .await
        .assert_error(409, "mandate_not_active", None);
    // None of these made a payment intent.
    assert!(app.all_intents(k).await.is_empty());
}

#[tokio::test]
async fn cancel_during_an_in_flight_debit_lets_the_debit_finish() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let mandate = active(&app, k).await;
    let mid = id(&mandate);
    // One debit sent to the bank, one accepted and not yet sent.
    let sent = charge(&app, k, &mid, 20_000).await;
    sent.assert_status(201);
    app.advance(10).await;
    let queued = charge(&app, k, &mid, 30_000).await;
    queued.assert_status(201);
    let r = app
        .post(k, &format!("/v1/mandates/{mid}/cancel"), json!({}))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "canceled");
    charge(&app, k, &mid, 40_000)
        .await
        .assert_error(409, "mandate_not_active", None);
    app.advance(120).await;
    for pi in [&sent.body, &queued.body] {
        assert_eq!(intent(&app, k, &id(pi)).await["status"], "successful");
    }
    assert_eq!(app.all_intents(k).await.len(), 2);
}

#[tokio::test]
async fn the_same_idempotency_key_never_debits_twice() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let mandate = active(&app, k).await;
    let path = format!("/v1/mandates/{}/charge", id(&mandate));
    let body = json!({"amount": 25_000, "currency": "NGN"});
    let key = app.next_key();
    let first = app.post_with_key(k, &path, &key, body.clone()).await;
    first.assert_status(201);
    assert!(!first.replayed());
    let second = app.post_with_key(k, &path, &key, body.clone()).await;
    second.assert_status(201);
    assert!(second.replayed());
    assert_eq!(second.body, first.body);
    app.advance(120).await;
    let third = app.post_with_key(k, &path, &key, body).await;
    assert!(third.replayed());
    assert_eq!(third.body["id"], first.body["id"]);
    // A different body with the same key: 422.
    app.post_with_key(k, &path, &key, json!({"amount": 25_001, "currency": "NGN"}))
        .await
        .assert_status(422);
    let intents = app.all_intents(k).await;
    assert_eq!(intents.len(), 1);
    assert_eq!(intents[0]["status"], "successful");
    let lines = app.all_lines(k).await;
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["type"] == "payment" && l["bucket"] == "pending")
            .count(),
        1
    );
    // A refused charge is replayed as refused.
    let p = pending(&app, k, "bola@example.com").await;
    let key = app.next_key();
    let path = format!("/v1/mandates/{}/charge", id(&p));
    app.post_with_key(k, &path, &key, json!({"amount": 25_000, "currency": "NGN"}))
        .await
        .assert_error(409, "mandate_not_active", None);
    answer(&app, &p, true).await;
    refresh(&app, k, &id(&p)).await;
    let again = app
        .post_with_key(k, &path, &key, json!({"amount": 25_000, "currency": "NGN"}))
        .await;
    assert!(again.replayed());
    assert_eq!(again.status, 409);
}

#[tokio::test]
async fn live_mode_has_no_direct_debit_provider() {
    let app = spawn_app().await;
    let m = app.live_merchant().await;
    app.post(
        &m.live_key,
        "/v1/mandates",
        json!({"customer_email": "a@example.com"}),
    )
    .await
    .assert_error(409, "provider_not_configured", None);
    // Not activated for live payments: 403 first.
    let n = app.merchant().await;
    app.post(
        &n.live_key,
        "/v1/mandates",
        json!({"customer_email": "a@example.com"}),
    )
    .await
    .assert_status(403);
}

#[tokio::test]
async fn a_browser_answer_on_the_sandbox_mandate_page_without_the_pages_token_is_refused_and_changes_nothing(
) {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let mandate = pending(&app, k, "ada@example.com").await;
    let mid = id(&mandate);
    let url = mandate["authorization_url"].as_str().unwrap();
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for action in ["approve", "decline"] {
        for (header, token) in [
            (("accept", "text/html"), None),
            (("origin", "https://evil.example"), None),
            (("sec-fetch-site", "cross-site"), Some("f".repeat(64))),
        ] {
            let mut req = no_redirects
                .post(format!("{url}/{action}"))
                .header(header.0, header.1);
            if let Some(t) = &token {
                req = req
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(format!("form_token={t}"));
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status().as_u16(), 403, "{action} {header:?}");
            assert!(res.text().await.unwrap().contains("Form expired"));
        }
    }
    // No answer was recorded: the page still offers both buttons, and a
    // check leaves the mandate pending.
    let html = app
        .client
        .get(url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains(r#"id="approve""#) && html.contains(r#"id="decline""#));
    let r = refresh(&app, k, &mid).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "pending");
    // The page's own token goes through.
    let token = app.form_token(url).await;
    let res = app
        .client
        .post(format!("{url}/decline"))
        .header("accept", "text/html")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("form_token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(refresh(&app, k, &mid).await.body["status"], "failed");
}
