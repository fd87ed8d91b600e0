//! Cards by API (service-api.md Payment intents rules 3 to 8, CONTRACT
//! sections 3 and 5): every sandbox card's outcome, authentication steps,
//! the sandbox bank page, bad input, live-mode rules, concurrent requests,
//! and that no card number, CVC, PIN or code is kept or logged anywhere.

use chrono::Datelike;
use serde_json::{json, Value};

use crate::helpers::{attempts, pay, spawn_app, spawn_app_with, Resp, TestApp};

const SUCCESS: &str = "4084080000000409";
const VERVE_PIN_OTP: &str = "5060990580000217499";
const REDIRECT: &str = "4000000000003220";
const DECLINED: &str = "4000000000000002";
/// Luhn-valid, not a test card: declined.
const OTHER: &str = "5399838383838381";
/// An unusual CVC, easy to look for.
const CVC: &str = "739";

fn card(number: &str) -> Value {
    json!({"number": number, "exp_month": 12, "exp_year": 2040, "cvc": CVC, "name": "Ada Obi"})
}

fn address() -> Value {
    json!({"line1": "1 Congress Ave", "city": "Austin", "state": "TX", "postal_code": "78701", "country": "US"})
}

async fn intent(app: &TestApp, key: &str, body: Value) -> (String, Value) {
    let pi = app.create_intent(key, body).await;
    (pi["id"].as_str().unwrap().to_string(), pi)
}

async fn ngn(app: &TestApp, key: &str, amount: i64) -> String {
    intent(app, key, json!({"amount": amount, "currency": "NGN"}))
        .await
        .0
}

async fn answer(app: &TestApp, key: &str, id: &str, body: Value) -> Resp {
    app.post(key, &format!("/v1/payment_intents/{id}/authenticate"), body)
        .await
}

async fn status_of(app: &TestApp, key: &str, id: &str) -> String {
    let r = app.get(key, &format!("/v1/payment_intents/{id}")).await;
    r.body["status"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn the_success_card_pays_at_once_at_the_card_price() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let (id, _) = intent(
        &app,
        &m.test_key,
        json!({"amount": 1000000, "currency": "NGN", "fee_bearer": "customer"}),
    )
    .await;
    let r = pay(&app, &m.test_key, &id, card(SUCCESS)).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "successful");
    assert!(r.body["next_action"].is_null());
    assert!(r.body["failure_code"].is_null());
    assert!(r.body["paid_at"].is_string());
    // Card: 1.5% + ₦100 = 25,000 kobo; VAT 1,875; on top of the amount.
    assert_eq!(
        r.body["fees"],
        json!({"fee": 25000, "vat": 1875, "net": 1000000})
    );
    assert_eq!(r.body["amount_charged"]["total"], 1026875);
    let data = attempts(&app, &m.test_key, &id).await;
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["object"], "charge_attempt");
    assert_eq!(data[0]["livemode"], false);
    assert_eq!(data[0]["channel"], "card");
    assert_eq!(data[0]["status"], "successful");
    assert_eq!(data[0]["card"], json!({"last4": "0409", "brand": "visa"}));
    assert!(data[0]["failure_code"].is_null());
    // The existing capture path: the ledger holds the net in pending.
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 1000000);
    let lines = app.all_lines(&m.test_key).await;
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["gross"], 1026875);
    assert_eq!(lines[0]["fee"], 26875);
    // A second card on a paid intent is refused.
    pay(&app, &m.test_key, &id, card(SUCCESS))
        .await
        .assert_error(409, "payment_intent_unexpected_state", None);
}

#[tokio::test]
async fn the_verve_card_asks_for_the_pin_then_the_code() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let id = ngn(&app, &m.test_key, 500000).await;
    let r = pay(&app, &m.test_key, &id, card(VERVE_PIN_OTP)).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "processing");
    assert_eq!(r.body["next_action"]["type"], "otp");
    assert_eq!(r.body["next_action"]["input"], "pin");
    assert!(r.body["next_action"]["message"].is_string());
    // Retrieve shows the same next_action.
    let got = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    assert_eq!(got.body["next_action"], r.body["next_action"]);

    // The code before the PIN: 400 naming the field, nothing changes.
    answer(&app, &m.test_key, &id, json!({"otp": "123456"}))
        .await
        .assert_error(400, "parameter_invalid", Some("otp"));
    let r = answer(&app, &m.test_key, &id, json!({"pin": "1234"})).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "processing");
    assert_eq!(r.body["next_action"]["type"], "otp");
    assert_eq!(r.body["next_action"]["input"], "otp");
    let r = answer(&app, &m.test_key, &id, json!({"otp": "123456"})).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "successful");
    assert!(r.body["next_action"].is_null());
    let data = attempts(&app, &m.test_key, &id).await;
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["status"], "successful");
    assert_eq!(data[0]["card"], json!({"last4": "7499", "brand": "verve"}));
    // Nothing waits any more.
    answer(&app, &m.test_key, &id, json!({"otp": "123456"}))
        .await
        .assert_error(409, "payment_intent_unexpected_state", None);
}

#[tokio::test]
async fn a_wrong_pin_or_code_fails_the_payment_and_another_card_may_pay_it() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let id = ngn(&app, &m.test_key, 300000).await;
    pay(&app, &m.test_key, &id, card(VERVE_PIN_OTP))
        .await
        .assert_status(200);
    let r = answer(&app, &m.test_key, &id, json!({"pin": "0000"})).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "failed");
    assert_eq!(r.body["failure_code"], "incorrect_pin");

    pay(&app, &m.test_key, &id, card(VERVE_PIN_OTP))
        .await
        .assert_status(200);
    answer(&app, &m.test_key, &id, json!({"pin": "1234"}))
        .await
        .assert_status(200);
    let r = answer(&app, &m.test_key, &id, json!({"otp": "654321"})).await;
    assert_eq!(r.body["status"], "failed");
    assert_eq!(r.body["failure_code"], "incorrect_otp");

    let r = pay(&app, &m.test_key, &id, card(SUCCESS)).await;
    assert_eq!(r.body["status"], "successful");
    assert!(r.body["failure_code"].is_null());

    let data = attempts(&app, &m.test_key, &id).await;
    let summary: Vec<(String, String, Value)> = data
        .iter()
        .map(|a| {
            (
                a["status"].as_str().unwrap().to_string(),
                a["card"]["brand"].as_str().unwrap().to_string(),
                a["failure_code"].clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("failed".into(), "verve".into(), json!("incorrect_pin")),
            ("failed".into(), "verve".into(), json!("incorrect_otp")),
            ("successful".into(), "visa".into(), Value::Null),
        ],
        "one attempt per try, in order"
    );
    assert_eq!(app.all_lines(&m.test_key).await.len(), 1, "captured once");
}

#[tokio::test]
async fn declined_cards_fail_with_card_declined_and_the_customer_may_try_again() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    for (number, brand, last4) in [(DECLINED, "visa", "0002"), (OTHER, "mastercard", "8381")] {
        let id = ngn(&app, &m.test_key, 250000).await;
        let r = pay(&app, &m.test_key, &id, card(number)).await;
        r.assert_status(200);
        assert_eq!(r.body["status"], "failed");
        assert_eq!(r.body["failure_code"], "card_declined");
        let data = attempts(&app, &m.test_key, &id).await;
        assert_eq!(data[0]["status"], "failed");
        assert_eq!(data[0]["failure_code"], "card_declined");
        assert_eq!(data[0]["card"], json!({"last4": last4, "brand": brand}));
        // Failed payments may be paid by transfer, or canceled.
        let t = app
            .post(
                &m.test_key,
                &format!("/v1/test_helpers/payment_intents/{id}/simulate_transfer"),
                json!({}),
            )
            .await;
        assert_eq!(t.body["status"], "successful");
    }
    assert!(app.balance(&m.test_key, "pending", "NGN").await > 0);
}

#[tokio::test]
async fn the_redirect_card_completes_on_the_sandbox_bank_page() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let (id, created) = intent(
        &app,
        &m.test_key,
        json!({"amount": 700000, "currency": "NGN", "return_url": "https://shop.example/done"}),
    )
    .await;
    let r = pay(&app, &m.test_key, &id, card(REDIRECT)).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "processing");
    assert_eq!(r.body["next_action"]["type"], "redirect");
    let url = r.body["next_action"]["url"].as_str().unwrap().to_string();
    assert!(
        url.starts_with(&format!("{}/sandbox/bank/", app.base)),
        "{url}"
    );
    // The bank page: Approve and Decline post to <url>/approve and /decline.
    let page = app.client.get(&url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let html = page.text().await.unwrap();
    let path = url.strip_prefix(&app.base).unwrap();
    assert!(
        html.contains(&format!(r#"action="{path}/approve""#)),
        "{html}"
    );
    assert!(html.contains(&format!(r#"action="{path}/decline""#)));
    assert!(html.contains("Approve") && html.contains("Decline"));
    assert!(html.contains("3220") && !html.contains(REDIRECT));
    // The code is not an answer here.
    answer(&app, &m.test_key, &id, json!({"otp": "123456"}))
        .await
        .assert_error(409, "payment_intent_unexpected_state", None);

    // A program may post directly: the payment intent comes back.
    let approve = app
        .client
        .post(format!("{url}/approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(approve.status(), 200);
    let body: Value = approve.json().await.unwrap();
    assert_eq!(body["status"], "successful");
    assert_eq!(body["id"], id.as_str());
    assert_eq!(status_of(&app, &m.test_key, &id).await, "successful");
    // Once only.
    let again = app
        .client
        .post(format!("{url}/approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 409);
    assert_eq!(app.all_lines(&m.test_key).await.len(), 1);
    // Its webhook event is recorded.
    let events = app
        .get(&m.test_key, "/v1/events?type=payment_intent.successful")
        .await;
    events.assert_status(200);
    assert!(
        events.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["data"]["object"]["id"] == id.as_str()),
        "{}",
        events.text
    );

    // A browser's Decline is sent back to the checkout page.
    let id2 = ngn(&app, &m.test_key, 700000).await;
    let r = pay(&app, &m.test_key, &id2, card(REDIRECT)).await;
    let url2 = r.body["next_action"]["url"].as_str().unwrap().to_string();
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let token = app.form_token(&url2).await;
    let decline = no_redirects
        .post(format!("{url2}/decline"))
        .header("accept", "text/html,application/xhtml+xml")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("form_token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(decline.status(), 303);
    let to = decline.headers()["location"].to_str().unwrap();
    assert!(to.starts_with("/c/"), "{to}");
    let r = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id2}"))
        .await;
    assert_eq!(r.body["status"], "failed");
    assert_eq!(r.body["failure_code"], "authentication_declined");
    assert!(created["checkout_url"].as_str().unwrap().contains("/c/"));

    // A made-up address is not a bank page.
    let forged = format!(
        "{}/sandbox/bank/sbx3ds_{}_1_{}",
        app.base,
        uuid::Uuid::new_v4().simple(),
        "a".repeat(24)
    );
    assert_eq!(app.client.get(&forged).send().await.unwrap().status(), 404);
    let post = app
        .client
        .post(format!("{forged}/approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 404);
}

#[tokio::test]
async fn a_browser_answer_on_the_sandbox_bank_page_without_the_pages_token_is_refused_and_changes_nothing(
) {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let id = ngn(&app, &m.test_key, 700000).await;
    let r = pay(&app, &m.test_key, &id, card(REDIRECT)).await;
    let url = r.body["next_action"]["url"].as_str().unwrap().to_string();
    let token = app.form_token(&url).await;
    let other_id = ngn(&app, &m.test_key, 700000).await;
    let other = pay(&app, &m.test_key, &other_id, card(REDIRECT)).await;
    let other_token = app
        .form_token(other.body["next_action"]["url"].as_str().unwrap())
        .await;
    assert_ne!(token, other_token);

    // What another site's form or script would send: no token, a made-up
    // one, another page's.
    for action in ["approve", "decline"] {
        for (headers, form) in [
            (vec![("accept", "text/html")], vec![]),
            (vec![("origin", "https://evil.example")], vec![]),
            (
                vec![("origin", "null"), ("sec-fetch-site", "cross-site")],
                vec![("x", "1".to_string())],
            ),
            (
                vec![("accept", "text/html")],
                vec![("form_token", "0".repeat(64))],
            ),
            (
                vec![("accept", "text/html")],
                vec![("form_token", other_token.clone())],
            ),
            // A program's wrong token is refused too.
            (vec![], vec![("form_token", other_token.clone())]),
        ] {
            let body: Vec<String> = form.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let mut req = app
                .client
                .post(format!("{url}/{action}"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body.join("&"));
            for (k, v) in &headers {
                req = req.header(*k, *v);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 403, "{action} {headers:?} {form:?}");
            let text = res.text().await.unwrap();
            if headers.is_empty() {
                let body: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(body["error"]["code"], "form_token_invalid");
                // A 403 names no param (CONTRACT 3a).
                assert_eq!(body["error"]["param"], Value::Null);
            } else {
                assert!(text.contains("Form expired"), "{text}");
            }
        }
    }
    let after = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    assert_eq!(after.body["status"], "processing");
    assert!(app.all_lines(&m.test_key).await.is_empty());

    // The page's own form goes through.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let ok = no_redirects
        .post(format!("{url}/approve"))
        .header("accept", "text/html")
        .header("origin", app.base.as_str())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("form_token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 303);
    assert_eq!(status_of(&app, &m.test_key, &id).await, "successful");
}

#[tokio::test]
async fn bad_card_details_are_refused_with_the_field_named_and_change_nothing() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let id = ngn(&app, &m.test_key, 100000).await;
    let now = app.now().await;
    let (year, month) = (now.year() as i64, now.month() as i64);
    let with = |patch: Value| {
        let mut b = card(SUCCESS);
        for (k, v) in patch.as_object().unwrap() {
            if v.is_null() {
                b.as_object_mut().unwrap().remove(k);
            } else {
                b[k] = v.clone();
            }
        }
        b
    };
    let cases = [
        (
            json!({"number": "4084080000000408"}),
            "parameter_invalid",
            "number",
        ),
        (
            json!({"number": "4084 0800"}),
            "parameter_invalid",
            "number",
        ),
        (json!({"number": null}), "parameter_missing", "number"),
        (json!({"exp_month": 13}), "parameter_invalid", "exp_month"),
        (json!({"exp_month": null}), "parameter_missing", "exp_month"),
        (
            json!({"exp_year": year - 1}),
            "parameter_invalid",
            "exp_year",
        ),
        (json!({"cvc": "12"}), "parameter_invalid", "cvc"),
        (json!({"cvc": "12a"}), "parameter_invalid", "cvc"),
        (json!({"cvc": null}), "parameter_missing", "cvc"),
        (json!({"colour": "blue"}), "parameter_unknown", "colour"),
    ];
    for (patch, code, param) in cases {
        pay(&app, &m.test_key, &id, with(patch.clone()))
            .await
            .assert_error(400, code, Some(param));
    }
    if month > 1 {
        pay(
            &app,
            &m.test_key,
            &id,
            with(json!({"exp_year": year, "exp_month": month - 1})),
        )
        .await
        .assert_error(400, "parameter_invalid", Some("exp_month"));
    }
    // Nothing happened.
    assert_eq!(status_of(&app, &m.test_key, &id).await, "created");
    assert!(attempts(&app, &m.test_key, &id).await.is_empty());

    // A card valid through this month stops working when the month ends
    // (the service clock decides).
    let this_month = with(json!({"exp_year": year, "exp_month": month}));
    let probe = ngn(&app, &m.test_key, 100000).await;
    let r = pay(&app, &m.test_key, &probe, this_month.clone()).await;
    assert_eq!(r.body["status"], "successful", "{}", r.text);
    app.advance(32 * 24 * 3600).await;
    pay(&app, &m.test_key, &id, this_month)
        .await
        .assert_error(400, "parameter_invalid", None);

    // Dollars need the billing address.
    let (usd, _) = intent(
        &app,
        &m.test_key,
        json!({"amount": 5000, "currency": "USD"}),
    )
    .await;
    pay(&app, &m.test_key, &usd, card(SUCCESS))
        .await
        .assert_error(400, "parameter_missing", Some("billing_address"));
    let mut partial = card(SUCCESS);
    partial["billing_address"] = json!({"line1": "1 Congress Ave", "country": "US"});
    pay(&app, &m.test_key, &usd, partial).await.assert_error(
        400,
        "parameter_missing",
        Some("billing_address.city"),
    );
    let mut full = card(SUCCESS);
    full["billing_address"] = address();
    let r = pay(&app, &m.test_key, &usd, full).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "successful");
    // USD card 3.9%: 195, VAT 15.
    assert_eq!(r.body["fees"], json!({"fee": 195, "vat": 15, "net": 4790}));

    // Authenticate bodies.
    let id = ngn(&app, &m.test_key, 100000).await;
    pay(&app, &m.test_key, &id, card(VERVE_PIN_OTP))
        .await
        .assert_status(200);
    for (body, code, param) in [
        (json!({}), "parameter_missing", "otp"),
        (json!({"pin": "12345"}), "parameter_invalid", "pin"),
        (json!({"pin": 1234}), "parameter_invalid", "pin"),
        (
            json!({"pin": "1234", "otp": "123456"}),
            "parameter_invalid",
            "pin",
        ),
        (json!({"cancel": false}), "parameter_invalid", "cancel"),
        (
            json!({"birthday": "1990-02-30"}),
            "parameter_invalid",
            "birthday",
        ),
        (json!({"code": "1"}), "parameter_unknown", "code"),
    ] {
        answer(&app, &m.test_key, &id, body)
            .await
            .assert_error(400, code, Some(param));
    }
    assert_eq!(status_of(&app, &m.test_key, &id).await, "processing");
}

#[tokio::test]
async fn cancel_abandons_the_attempt_and_the_payment_can_be_paid_again() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    for number in [VERVE_PIN_OTP, REDIRECT] {
        let id = ngn(&app, &m.test_key, 200000).await;
        pay(&app, &m.test_key, &id, card(number))
            .await
            .assert_status(200);
        let r = answer(&app, &m.test_key, &id, json!({"cancel": true})).await;
        r.assert_status(200);
        assert_eq!(r.body["status"], "failed");
        assert_eq!(r.body["failure_code"], "authentication_canceled");
        assert!(r.body["next_action"].is_null());
        let data = attempts(&app, &m.test_key, &id).await;
        assert_eq!(data[0]["status"], "canceled");
        answer(&app, &m.test_key, &id, json!({"cancel": true}))
            .await
            .assert_error(409, "payment_intent_unexpected_state", None);
        let r = pay(&app, &m.test_key, &id, card(SUCCESS)).await;
        assert_eq!(r.body["status"], "successful");
    }
}

#[tokio::test]
async fn a_card_waiting_for_the_customer_is_abandoned_after_30_minutes() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let id = ngn(&app, &m.test_key, 200000).await;
    pay(&app, &m.test_key, &id, card(VERVE_PIN_OTP))
        .await
        .assert_status(200);
    app.advance(30 * 60 - 1).await;
    assert_eq!(status_of(&app, &m.test_key, &id).await, "processing");
    answer(&app, &m.test_key, &id, json!({"pin": "1234"}))
        .await
        .assert_status(200);
    app.advance(1).await;
    let r = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    assert_eq!(r.body["status"], "abandoned");
    assert!(r.body["next_action"].is_null());
    assert_eq!(
        attempts(&app, &m.test_key, &id).await[0]["status"],
        "canceled"
    );
    answer(&app, &m.test_key, &id, json!({"otp": "123456"}))
        .await
        .assert_error(409, "payment_intent_unexpected_state", None);
    // The customer may still pay.
    let r = pay(&app, &m.test_key, &id, card(SUCCESS)).await;
    assert_eq!(r.body["status"], "successful");
}

#[tokio::test]
async fn the_client_secret_pays_by_card_for_its_own_payment_only() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let (id, pi) = intent(
        &app,
        &m.test_key,
        json!({"amount": 150000, "currency": "NGN"}),
    )
    .await;
    let secret = pi["client_secret"].as_str().unwrap().to_string();
    let (other, _) = intent(
        &app,
        &m.test_key,
        json!({"amount": 150000, "currency": "NGN"}),
    )
    .await;
    pay(&app, &secret, &other, card(SUCCESS))
        .await
        .assert_error(401, "invalid_api_key", None);
    answer(&app, &secret, &other, json!({"pin": "1234"}))
        .await
        .assert_error(401, "invalid_api_key", None);
    let r = pay(&app, &secret, &id, card(VERVE_PIN_OTP)).await;
    assert_eq!(r.body["next_action"]["input"], "pin");
    answer(&app, &secret, &id, json!({"pin": "1234"}))
        .await
        .assert_status(200);
    let r = answer(&app, &secret, &id, json!({"otp": "123456"})).await;
    assert_eq!(r.body["status"], "successful");
    let got = app.get(&secret, &format!("/v1/payment_intents/{id}")).await;
    assert_eq!(got.body["status"], "successful");
    app.get(
        &secret,
        &format!("/v1/payment_intents/{id}/charge_attempts"),
    )
    .await
    .assert_error(401, "invalid_api_key", None);
}

#[tokio::test]
async fn live_mode_rules_come_in_order_and_turned_off_cards_are_refused() {
    let app = spawn_app().await;
    let anyid = uuid::Uuid::new_v4();
    // Not activated: 403 before anything else.
    let m = app.merchant().await;
    pay(&app, &m.live_key, &anyid.to_string(), card(SUCCESS))
        .await
        .assert_error(403, "account_not_activated", None);
    // Activated, card API not enabled.
    let live = app.live_merchant().await;
    pay(&app, &live.live_key, &anyid.to_string(), card(SUCCESS))
        .await
        .assert_error(403, "card_api_not_enabled", None);
    answer(
        &app,
        &live.live_key,
        &anyid.to_string(),
        json!({"otp": "123456"}),
    )
    .await
    .assert_error(403, "card_api_not_enabled", None);
    let (live_id, live_pi) = intent(
        &app,
        &live.live_key,
        json!({"amount": 100000, "currency": "NGN"}),
    )
    .await;
    // The client secret needs card_api_enabled like the secret key; the
    // hosted checkout's own credential does not (this server has no live
    // card provider). See credentials.rs.
    let secret = live_pi["client_secret"].as_str().unwrap();
    pay(&app, secret, &live_id, card(SUCCESS))
        .await
        .assert_error(403, "card_api_not_enabled", None);
    let credential = app.checkout_credential(&live_pi).await;
    pay(&app, &credential, &live_id, card(SUCCESS))
        .await
        .assert_error(409, "card_api_unavailable", None);
    // Enabled: validation, then lookups, then no provider.
    let enabled = app
        .create_merchant(json!({"live_approved": true, "card_api_enabled": true}))
        .await;
    pay(
        &app,
        &enabled.live_key,
        &anyid.to_string(),
        card("4084080000000408"),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("number"));
    pay(&app, &enabled.live_key, &anyid.to_string(), card(SUCCESS))
        .await
        .assert_error(404, "resource_missing", None);
    let (eid, _) = intent(
        &app,
        &enabled.live_key,
        json!({"amount": 100000, "currency": "NGN"}),
    )
    .await;
    pay(&app, &enabled.live_key, &eid, card(SUCCESS))
        .await
        .assert_error(409, "card_api_unavailable", None);
    // Test mode works for everyone; a merchant may turn cards off.
    let off = app
        .create_merchant(json!({"payment_methods": {"card": false}}))
        .await;
    let id = ngn(&app, &off.test_key, 100000).await;
    pay(&app, &off.test_key, &id, card(SUCCESS))
        .await
        .assert_error(400, "payment_method_unavailable", None);
    assert_eq!(status_of(&app, &off.test_key, &id).await, "created");
}

#[tokio::test]
async fn a_second_request_while_one_is_working_answers_payment_in_progress() {
    // Every sandbox card call takes 1.5 s here, as a real processor might.
    let app = spawn_app_with(&["--sandbox-latency-ms".into(), "1500".into()]).await;
    let m = app.merchant().await;
    let id = ngn(&app, &m.test_key, 100000).await;
    let path = format!("/v1/payment_intents/{id}/card");
    let first = {
        let (client, base, key, path) = (
            app.client.clone(),
            app.base.clone(),
            m.test_key.clone(),
            path.clone(),
        );
        tokio::spawn(async move {
            client
                .post(format!("{base}{path}"))
                .bearer_auth(key)
                .header("Idempotency-Key", "first")
                .header("content-type", "application/json")
                .body(card(SUCCESS).to_string())
                .send()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let second = app
        .post_with_key(&m.test_key, &path, "second", card(SUCCESS))
        .await;
    second.assert_error(409, "payment_in_progress", None);
    answer(&app, &m.test_key, &id, json!({"otp": "123456"}))
        .await
        .assert_error(409, "payment_in_progress", None);
    // Reading is never blocked.
    assert_eq!(status_of(&app, &m.test_key, &id).await, "created");
    let first = first.await.unwrap();
    assert_eq!(first.status(), 200);
    let body: Value = first.json().await.unwrap();
    assert_eq!(body["status"], "successful");
    // The refusal was not saved under its key: the retry runs (and finds
    // the payment paid).
    app.post_with_key(&m.test_key, &path, "second", card(SUCCESS))
        .await
        .assert_error(409, "payment_intent_unexpected_state", None);
    assert_eq!(attempts(&app, &m.test_key, &id).await.len(), 1);
}

/// Files' bytes and where a secret was found in them.
fn find_in(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

fn files_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[tokio::test]
async fn card_numbers_cvcs_pins_and_codes_are_never_stored_logged_or_echoed() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let mut answers = String::new();
    // Every test card, a replay, a reused key, bad input.
    let id = ngn(&app, &m.test_key, 100000).await;
    let idem = app.next_key();
    let path = format!("/v1/payment_intents/{id}/card");
    let r = app
        .post_with_key(&m.test_key, &path, &idem, card(SUCCESS))
        .await;
    assert_eq!(r.body["status"], "successful");
    let replay = app
        .post_with_key(&m.test_key, &path, &idem, card(SUCCESS))
        .await;
    assert!(replay.replayed());
    assert_eq!(replay.text, r.text);
    app.post_with_key(&m.test_key, &path, &idem, card(DECLINED))
        .await
        .assert_error(422, "idempotency_key_reused", None);
    answers.push_str(&r.text);

    let id = ngn(&app, &m.test_key, 100000).await;
    answers.push_str(&pay(&app, &m.test_key, &id, card(VERVE_PIN_OTP)).await.text);
    answers.push_str(
        &answer(&app, &m.test_key, &id, json!({"pin": "1234"}))
            .await
            .text,
    );
    answers.push_str(
        &answer(&app, &m.test_key, &id, json!({"otp": "123456"}))
            .await
            .text,
    );

    let id = ngn(&app, &m.test_key, 100000).await;
    let r = pay(&app, &m.test_key, &id, card(REDIRECT)).await;
    answers.push_str(&r.text);
    let url = r.body["next_action"]["url"].as_str().unwrap();
    answers.push_str(
        &app.client
            .get(url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    app.client
        .post(format!("{url}/approve"))
        .send()
        .await
        .unwrap();

    for number in [DECLINED, OTHER, "4084080000000408"] {
        let id = ngn(&app, &m.test_key, 100000).await;
        answers.push_str(&pay(&app, &m.test_key, &id, card(number)).await.text);
    }
    let id = ngn(&app, &m.test_key, 100000).await;
    let mut expired = card(SUCCESS);
    expired["exp_year"] = json!(2001);
    answers.push_str(&pay(&app, &m.test_key, &id, expired).await.text);
    let mut bad_cvc = card(OTHER);
    bad_cvc["cvc"] = json!("7391");
    answers.push_str(&pay(&app, &m.test_key, &id, bad_cvc).await.text);
    for id in [&id] {
        answers.push_str(
            &attempts(&app, &m.test_key, id)
                .await
                .iter()
                .map(|a| a.to_string())
                .collect::<String>(),
        );
    }

    // Stop the server (everything flushed), then look everywhere.
    assert_eq!(app.terminate(), Some(0));
    let numbers = [
        SUCCESS,
        VERVE_PIN_OTP,
        REDIRECT,
        DECLINED,
        OTHER,
        "4084080000000408",
    ];
    let quoted = [
        format!("\"{CVC}\""),
        "\"7391\"".into(),
        "\"1234\"".into(),
        "\"123456\"".into(),
    ];
    let mut files = Vec::new();
    files_under(&app.data_dir(), &mut files);
    assert!(files.len() >= 2, "{files:?}");
    let store = app.store_bytes();
    let log = std::fs::read(app.log_path()).unwrap();
    assert!(!log.is_empty(), "the server logged its requests");
    let stdout = app.stdout_rest.lock().unwrap().join("\n");
    let mut places: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|f| (f.display().to_string(), std::fs::read(f).unwrap()))
        .collect();
    places.push(("the store".into(), store.clone()));
    places.push(("server log".into(), log));
    places.push(("server stdout".into(), stdout.into_bytes()));
    places.push(("API answers".into(), answers.into_bytes()));
    for (place, bytes) in &places {
        for n in numbers {
            assert!(!find_in(bytes, n), "card number {n} found in {place}");
        }
        for q in &quoted {
            assert!(!find_in(bytes, q), "{q} found in {place}");
        }
        for pattern in [
            format!("cvc={CVC}"),
            format!("cvc: {CVC}"),
            format!("cvc\":\"{CVC}"),
        ] {
            assert!(!find_in(bytes, &pattern), "{pattern} found in {place}");
        }
    }
    // What is kept: last four and brand, in the charge attempt (stored
    // compact: strings as their bytes after a one-byte length, so the
    // searches above read them as they are).
    assert!(find_in(&store, "\u{4}0409"));
}

/// Sets `settings` on merchant `m` through the operator API.
async fn set_settings(app: &TestApp, m: &crate::helpers::Merchant, settings: Value) {
    app.admin_post(
        &format!("/admin/v1/merchants/{}", m.id),
        json!({ "settings": settings }),
    )
    .await
    .assert_status(200);
}

#[tokio::test]
async fn a_card_payment_under_a_settlement_delay_that_cannot_be_scheduled_fails_before_the_charge_and_books_nothing(
) {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let id = ngn(&app, k, 1_000_000).await;
    // The operator API refuses such a delay now; a store written before
    // that bound may still hold one.
    let huge_delay = json!({"settlement_delay_days": {"NGN": 4294967295u64, "USD": 7}});
    app.plant_merchant_settings(&m.id, huge_delay.clone()).await;

    let r = pay(&app, k, &id, card(SUCCESS)).await;
    r.assert_error(409, "settlement_delay_out_of_range", None);
    // Nothing charged, nothing saved: the intent as it was, no attempt, no
    // money.
    let pi = app.get(k, &format!("/v1/payment_intents/{id}")).await;
    assert_eq!(pi.body["status"], "created");
    assert_eq!(pi.body["attempts"], Value::Null);
    assert!(attempts(&app, k, &id).await.is_empty());
    assert!(app.all_lines(k).await.is_empty());
    // The 3-D Secure card is refused before the provider too.
    let r = pay(&app, k, &id, card(REDIRECT)).await;
    r.assert_error(409, "settlement_delay_out_of_range", None);
    assert!(attempts(&app, k, &id).await.is_empty());

    // A PIN card asked for its PIN before the delay changed: the answer
    // that would capture is refused before the provider, the attempt
    // still waits.
    set_settings(&app, &m, json!({"settlement_delay_days": {"NGN": 1}})).await;
    let r = pay(&app, k, &id, card(VERVE_PIN_OTP)).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "processing");
    answer(&app, k, &id, json!({"pin": "1234"}))
        .await
        .assert_status(200);
    app.plant_merchant_settings(&m.id, huge_delay).await;
    answer(&app, k, &id, json!({"otp": "123456"}))
        .await
        .assert_error(409, "settlement_delay_out_of_range", None);
    assert_eq!(status_of(&app, k, &id).await, "processing");
    assert!(app.all_lines(k).await.is_empty());

    // Back to a delay that can be scheduled: the same payment succeeds,
    // once, and the ledger holds exactly its net.
    set_settings(&app, &m, json!({"settlement_delay_days": {"NGN": 1}})).await;
    let r = answer(&app, k, &id, json!({"otp": "123456"})).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "successful");
    let net = r.body["fees"]["net"].as_i64().unwrap();
    let lines = app.all_lines(k).await;
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["amount"].as_i64().unwrap(), net);
    assert_eq!(app.balance(k, "pending", "NGN").await, net);
    assert_eq!(
        r.body["fees"]["fee"].as_i64().unwrap() + r.body["fees"]["vat"].as_i64().unwrap() + net,
        1_000_000
    );
}

#[tokio::test]
async fn a_price_whose_fee_does_not_fit_is_refused_at_creation_and_never_books_a_negative_fee() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    // Made under the old price: keeps it.
    let (before, _) = intent(
        &app,
        k,
        json!({"amount": 1000000, "currency": "NGN", "fee_bearer": "customer"}),
    )
    .await;
    // Refused by the operator API now; a store written before that bound
    // may still hold it.
    app.plant_merchant_settings(
        &m.id,
        json!({"pricing": {"NGN": {"card": {"percent_bps": 0, "flat": i64::MAX, "cap": null}}}}),
    )
    .await;
    for bearer in ["customer", "merchant"] {
        app.post(
            k,
            "/v1/payment_intents",
            json!({"amount": 1000000, "currency": "NGN", "fee_bearer": bearer}),
        )
        .await
        .assert_error(409, "pricing_out_of_range", None);
    }
    let all = app.all_intents(k).await;
    assert_eq!(all.len(), 1);

    // The earlier payment pays at its own price; every fee booked is >= 0
    // and the ledger holds exactly the net.
    let r = pay(&app, k, &before, card(SUCCESS)).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "successful");
    let charged = &r.body["amount_charged"];
    assert!(charged["fee"].as_i64().unwrap() >= 0);
    assert_eq!(
        charged["total"].as_i64().unwrap(),
        1_000_000 + charged["fee"].as_i64().unwrap() + charged["vat"].as_i64().unwrap()
    );
    let lines = app.all_lines(k).await;
    assert_eq!(lines.len(), 1);
    assert!(lines[0]["fee"].as_i64().unwrap() >= 0, "{}", lines[0]);
    assert_eq!(lines[0]["amount"].as_i64().unwrap(), 1_000_000);
    assert_eq!(app.balance(k, "pending", "NGN").await, 1_000_000);
}
