//! Payment intents: create, retrieve, cancel, bank transfer, abandonment,
//! late money, test helpers, charge attempts.

use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn a_created_payment_intent_has_every_field_and_secrets_only_on_create() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app
        .create_intent(
            &m.test_key,
            json!({"amount": 500000, "currency": "NGN", "reference": "order-1",
                   "customer_email": "ada@example.ng", "description": "2 bags of rice",
                   "metadata": {"order": "1", "n": 2}, "return_url": "https://shop.example/done"}),
        )
        .await;
    assert_eq!(pi["object"], "payment_intent");
    assert_eq!(pi["status"], "created");
    assert_eq!(pi["livemode"], false);
    assert_eq!(pi["amount"], 500000);
    assert_eq!(pi["currency"], "NGN");
    assert_eq!(pi["reference"], "order-1");
    assert_eq!(pi["fee_bearer"], "merchant");
    assert_eq!(pi["metadata"]["n"], 2);
    assert!(pi["paid_at"].is_null() && pi["canceled_at"].is_null());
    // Card estimate: 1.5% + ₦100 = 17,500 kobo; VAT 7.5% = 1,313.
    assert_eq!(
        pi["fees"],
        json!({"fee": 17500, "vat": 1313, "net": 481187})
    );
    assert_eq!(pi["amount_charged"]["total"], 500000);
    let checkout = pi["checkout_url"].as_str().unwrap();
    assert!(checkout.starts_with(&app.base), "{checkout}");
    assert!(pi["client_secret"].as_str().unwrap().contains("_secret_"));

    let id = pi["id"].as_str().unwrap();
    let got = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    got.assert_status(200);
    assert!(got.body.get("checkout_url").is_none());
    assert!(got.body.get("client_secret").is_none());
    assert!(got.body.get("bank_transfer").is_some());
    assert!(got.body.get("next_action").is_some());
    assert_eq!(got.body["fees"], pi["fees"]);
}

#[tokio::test]
async fn a_customer_bearing_the_fee_pays_it_on_top_and_the_merchant_nets_the_amount() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app
        .create_intent(
            &m.test_key,
            json!({"amount": 1000000, "currency": "NGN", "fee_bearer": "customer"}),
        )
        .await;
    assert_eq!(pi["fees"]["net"], 1000000);
    let id = pi["id"].as_str().unwrap();
    let bt = app
        .post(
            &m.test_key,
            &format!("/v1/payment_intents/{id}/bank_transfer"),
            json!({}),
        )
        .await;
    bt.assert_status(200);
    // Bank transfer price: 1% = 10,000 kobo, VAT 750.
    assert_eq!(bt.body["bank_transfer"]["amount"], 1010750);
    assert_eq!(bt.body["amount_charged"]["total"], 1010750);
    let paid = app
        .post(
            &m.test_key,
            &format!("/v1/test_helpers/payment_intents/{id}/simulate_transfer"),
            json!({}),
        )
        .await;
    paid.assert_status(200);
    assert_eq!(paid.body["status"], "successful");
    assert_eq!(
        paid.body["fees"],
        json!({"fee": 10000, "vat": 750, "net": 1000000})
    );
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 1000000);
    let lines = app.all_lines(&m.test_key).await;
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["gross"], 1010750);
    assert_eq!(lines[0]["fee"], 10750);
}

#[tokio::test]
async fn a_bank_transfer_gives_the_same_account_while_it_is_open() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app
        .create_intent(&m.test_key, json!({"amount": 20000, "currency": "NGN"}))
        .await;
    let id = pi["id"].as_str().unwrap();
    let path = format!("/v1/payment_intents/{id}/bank_transfer");
    let first = app.post(&m.test_key, &path, json!({})).await;
    first.assert_status(200);
    assert_eq!(first.body["status"], "processing");
    assert!(first.body["next_action"].is_null());
    let acct = &first.body["bank_transfer"];
    assert_eq!(acct["bank_name"], "Kobo Sandbox Bank");
    assert_eq!(acct["account_number"].as_str().unwrap().len(), 10);
    assert_eq!(acct["amount"], 20000);
    let expires: chrono::DateTime<chrono::Utc> =
        acct["expires_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(expires - app.now().await, chrono::Duration::minutes(30));

    app.advance(600).await;
    let again = app.post(&m.test_key, &path, json!({})).await;
    again.assert_status(200);
    assert_eq!(again.body["bank_transfer"], first.body["bank_transfer"]);
    let attempts = app
        .get(
            &m.test_key,
            &format!("/v1/payment_intents/{id}/charge_attempts"),
        )
        .await;
    assert_eq!(attempts.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(attempts.body["data"][0]["channel"], "bank_transfer");
    assert_eq!(attempts.body["data"][0]["status"], "pending");
}

#[tokio::test]
async fn bank_transfer_is_for_naira_only_and_only_when_turned_on() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let usd = app
        .create_intent(&m.test_key, json!({"amount": 10000, "currency": "USD"}))
        .await;
    let r = app
        .post(
            &m.test_key,
            &format!(
                "/v1/payment_intents/{}/bank_transfer",
                usd["id"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    r.assert_error(400, "payment_method_unavailable", None);

    let off = app
        .create_merchant(json!({"payment_methods": {"bank_transfer": false}}))
        .await;
    let pi = app
        .create_intent(&off.test_key, json!({"amount": 10000, "currency": "NGN"}))
        .await;
    let r = app
        .post(
            &off.test_key,
            &format!(
                "/v1/payment_intents/{}/bank_transfer",
                pi["id"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    r.assert_error(400, "payment_method_unavailable", None);
    let again = app
        .get(
            &off.test_key,
            &format!("/v1/payment_intents/{}", pi["id"].as_str().unwrap()),
        )
        .await;
    assert_eq!(again.body["status"], "created");
}

#[tokio::test]
async fn a_payment_processing_for_30_minutes_is_abandoned_and_late_money_still_makes_it_successful()
{
    let app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app
        .create_intent(&m.test_key, json!({"amount": 30000, "currency": "NGN"}))
        .await;
    let id = pi["id"].as_str().unwrap();
    app.post(
        &m.test_key,
        &format!("/v1/payment_intents/{id}/bank_transfer"),
        json!({}),
    )
    .await
    .assert_status(200);
    app.advance(30 * 60 - 1).await;
    let r = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    assert_eq!(r.body["status"], "processing");
    app.advance(1).await;
    let r = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    assert_eq!(r.body["status"], "abandoned");

    app.advance(3600).await;
    let late = app
        .post(
            &m.test_key,
            &format!("/v1/test_helpers/payment_intents/{id}/simulate_transfer"),
            json!({}),
        )
        .await;
    late.assert_status(200);
    assert_eq!(late.body["status"], "successful");
    assert!(late.body["paid_at"].is_string());
    assert_eq!(
        app.balance(&m.test_key, "pending", "NGN").await,
        30000 - 300 - 23
    );
}

#[tokio::test]
async fn abandonment_does_not_touch_a_payment_that_was_paid_in_time() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 50000).await;
    app.advance(3600).await;
    let r = app
        .get(
            &m.test_key,
            &format!("/v1/payment_intents/{}", paid["id"].as_str().unwrap()),
        )
        .await;
    assert_eq!(r.body["status"], "successful");
}

#[tokio::test]
async fn a_transfer_of_the_wrong_amount_is_returned_and_leaves_the_payment_unchanged() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app
        .create_intent(&m.test_key, json!({"amount": 40000, "currency": "NGN"}))
        .await;
    let id = pi["id"].as_str().unwrap();
    let r = app
        .post(
            &m.test_key,
            &format!("/v1/test_helpers/payment_intents/{id}/simulate_transfer"),
            json!({"amount": 39999}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "processing");
    let attempts = app
        .get(
            &m.test_key,
            &format!("/v1/payment_intents/{id}/charge_attempts"),
        )
        .await;
    let data = attempts.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["status"], "pending");
    assert_eq!(data[1]["status"], "failed");
    assert_eq!(data[1]["failure_code"], "amount_mismatch");
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 0);
    assert!(app.all_lines(&m.test_key).await.is_empty());
}

#[tokio::test]
async fn cancel_is_allowed_only_from_created_failed_or_abandoned() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    // created -> canceled
    let pi = app
        .create_intent(&m.test_key, json!({"amount": 10000, "currency": "NGN"}))
        .await;
    let id = pi["id"].as_str().unwrap();
    let c = app
        .post(
            &m.test_key,
            &format!("/v1/payment_intents/{id}/cancel"),
            json!({}),
        )
        .await;
    c.assert_status(200);
    assert_eq!(c.body["status"], "canceled");
    assert!(c.body["canceled_at"].is_string());
    // canceled -> 409
    app.post(
        &m.test_key,
        &format!("/v1/payment_intents/{id}/cancel"),
        json!({}),
    )
    .await
    .assert_error(409, "payment_intent_unexpected_state", None);
    // processing -> 409
    let pi = app
        .create_intent(&m.test_key, json!({"amount": 10000, "currency": "NGN"}))
        .await;
    let id = pi["id"].as_str().unwrap();
    app.post(
        &m.test_key,
        &format!("/v1/payment_intents/{id}/bank_transfer"),
        json!({}),
    )
    .await;
    app.post(
        &m.test_key,
        &format!("/v1/payment_intents/{id}/cancel"),
        json!({}),
    )
    .await
    .assert_error(409, "payment_intent_unexpected_state", None);
    // abandoned -> canceled
    app.advance(1800).await;
    let c = app
        .post(
            &m.test_key,
            &format!("/v1/payment_intents/{id}/cancel"),
            json!({}),
        )
        .await;
    c.assert_status(200);
    assert_eq!(c.body["status"], "canceled");
    // successful -> 409
    let paid = app.paid_intent(&m.test_key, 10000).await;
    app.post(
        &m.test_key,
        &format!(
            "/v1/payment_intents/{}/cancel",
            paid["id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await
    .assert_error(409, "payment_intent_unexpected_state", None);
    // unknown -> 404
    app.post(
        &m.test_key,
        &format!("/v1/payment_intents/{}/cancel", uuid::Uuid::new_v4()),
        json!({}),
    )
    .await
    .assert_error(404, "resource_missing", None);
}

#[tokio::test]
async fn the_succeed_helper_captures_once_and_refuses_a_second_time() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app
        .create_intent(&m.test_key, json!({"amount": 100000, "currency": "USD"}))
        .await;
    let id = pi["id"].as_str().unwrap();
    let path = format!("/v1/test_helpers/payment_intents/{id}/succeed");
    let r = app.post(&m.test_key, &path, json!({})).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "successful");
    // USD card 3.9% = 3,900; VAT 293.
    assert_eq!(
        r.body["fees"],
        json!({"fee": 3900, "vat": 293, "net": 95807})
    );
    assert_eq!(app.balance(&m.test_key, "pending", "USD").await, 95807);
    app.post(&m.test_key, &path, json!({})).await.assert_error(
        409,
        "payment_intent_unexpected_state",
        None,
    );
    assert_eq!(app.balance(&m.test_key, "pending", "USD").await, 95807);
    assert_eq!(app.all_lines(&m.test_key).await.len(), 1);
}

#[tokio::test]
async fn a_canceled_payment_can_still_be_made_successful_by_the_test_helper() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app
        .create_intent(&m.test_key, json!({"amount": 10000, "currency": "NGN"}))
        .await;
    let id = pi["id"].as_str().unwrap();
    app.post(
        &m.test_key,
        &format!("/v1/payment_intents/{id}/cancel"),
        json!({}),
    )
    .await
    .assert_status(200);
    let r = app
        .post(
            &m.test_key,
            &format!("/v1/test_helpers/payment_intents/{id}/succeed"),
            json!({}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "successful");
}

/// The customer a mandate for `email` created, in the mode of `key`.
async fn customer_of_a_mandate(app: &crate::helpers::TestApp, key: &str, email: &str) -> String {
    let r = app
        .post(key, "/v1/mandates", json!({"customer_email": email}))
        .await;
    r.assert_status(201);
    r.body["customer"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_payment_intent_for_a_customer_that_is_not_this_merchants_in_this_mode_is_refused_and_nothing_is_created(
) {
    let app = spawn_app().await;
    let m = app.live_merchant().await;
    let other = app.merchant().await;
    let own = customer_of_a_mandate(&app, &m.test_key, "ada@example.ng").await;
    let theirs = customer_of_a_mandate(&app, &other.test_key, "obi@example.ng").await;
    let random = uuid::Uuid::new_v4().to_string();
    let body = |c: &str| json!({"amount": 500000, "currency": "NGN", "customer": c});

    for (key, customer) in [
        (&m.test_key, &theirs),
        (&m.test_key, &random),
        // A test-mode customer does not exist for the live key.
        (&m.live_key, &own),
    ] {
        app.post(key, "/v1/payment_intents", body(customer))
            .await
            .assert_error(404, "resource_missing", Some("customer"));
    }
    // Validation answers before the lookup (400 before 404).
    app.post(
        &m.test_key,
        "/v1/payment_intents",
        json!({"amount": 0, "currency": "NGN", "customer": random}),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("amount"));
    assert!(app.all_intents(&m.test_key).await.is_empty());
    assert!(app.all_intents(&m.live_key).await.is_empty());

    // Its own customer, in its mode.
    let pi = app.create_intent(&m.test_key, body(&own)).await;
    assert_eq!(pi["customer"], own.as_str());
    let listed = app
        .get(&m.test_key, &format!("/v1/payment_intents?customer={own}"))
        .await;
    listed.assert_status(200);
    assert_eq!(listed.body["data"][0]["id"], pi["id"]);
}

#[tokio::test]
async fn checkout_codes_name_their_intent_are_long_random_and_carry_no_sequence() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let other = app.merchant().await;
    let mut codes = Vec::new();
    for i in 0..8 {
        let pi = app
            .create_intent(&m.test_key, json!({"amount": 500000, "currency": "NGN"}))
            .await;
        // Other merchants' payments in between change nothing in the codes.
        for _ in 0..i {
            app.create_intent(
                &other.test_key,
                json!({"amount": 500000, "currency": "NGN"}),
            )
            .await;
        }
        let url = pi["checkout_url"].as_str().unwrap();
        let code = url
            .strip_prefix(&format!("{}/c/", app.base))
            .unwrap()
            .to_string();
        // The intent's id in 22 base62 characters, then 22 random ones
        // (131 bits).
        assert!(
            code.len() == 44 && code.bytes().all(|b| b.is_ascii_alphanumeric()),
            "{code}"
        );
        assert_eq!(
            base62_id(&code[..22]),
            uuid::Uuid::parse_str(pi["id"].as_str().unwrap()).unwrap(),
            "{code}"
        );
        // The link works.
        let page = app.client.get(url).send().await.unwrap();
        assert_eq!(page.status(), 200);
        codes.push(code);
    }
    // No shared counter in the random part: consecutive codes agree on
    // fewer than 4 of its leading characters (random ones do so with
    // probability 62^-4).
    for pair in codes.windows(2) {
        let common = pair[0][22..]
            .bytes()
            .zip(pair[1][22..].bytes())
            .take_while(|(a, b)| a == b)
            .count();
        assert!(common < 4, "{pair:?}");
    }
    let mut unique = codes.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), codes.len());
    // The id alone opens nothing: a code with its random part changed, or
    // one intent's id with another's random part, is an unknown link.
    let changed = format!(
        "{}{}",
        &codes[0][..43],
        if codes[0].ends_with('0') { '1' } else { '0' }
    );
    let swapped = format!("{}{}", &codes[0][..22], &codes[1][22..]);
    for code in [changed, swapped, codes[0][..22].to_string()] {
        let page = app
            .client
            .get(format!("{}/c/{code}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 404, "{code}");
    }
}

/// The id a checkout code's first 22 base62 characters carry.
fn base62_id(text: &str) -> uuid::Uuid {
    const DIGITS: &str = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let n = text.chars().fold(0u128, |n, c| {
        n * 62 + DIGITS.find(c).expect("a base62 digit") as u128
    });
    uuid::Uuid::from_u128(n)
}

#[tokio::test]
async fn a_checkout_code_made_before_codes_named_their_intent_still_opens_its_page() {
    use kobo_actors::payment_intent::PaymentIntent;
    use kobo_storage::{decode, Batch, Table};
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app
        .create_intent(&m.test_key, json!({"amount": 500000, "currency": "NGN"}))
        .await;
    let id = uuid::Uuid::parse_str(pi["id"].as_str().unwrap()).unwrap();
    // The store as an older kobo left it: a code of the creation time and
    // 22 random characters, found through its `checkout_links` row.
    app.kill();
    let old = "0VcaVpy89iLq1Mdd2Sgy7xtwbP3XfP";
    {
        let store = app.open_store().unwrap();
        let read = store.read().unwrap();
        let raw = read
            .get(Table::PaymentIntents, id.as_bytes())
            .unwrap()
            .unwrap();
        let mut intent: PaymentIntent = decode(&raw).unwrap();
        drop(read);
        intent.checkout_code = old.into();
        let mut batch = Batch::new();
        batch
            .put_compact(Table::PaymentIntents, id.as_bytes().to_vec(), &intent)
            .put_raw(
                Table::CheckoutLinks,
                old.as_bytes().to_vec(),
                id.as_bytes().to_vec(),
            );
        store.apply(&batch).unwrap();
    }
    crate::operations::assert_check_clean(&mut app);
    app.start(&[]);
    let page = app
        .client
        .get(format!("{}/c/{old}", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("5,000"));
}
