//! Who may call, on what, and how much (issue 12, trust): Idempotency-Keys
//! are scoped by the caller's credential; the hosted checkout has its own
//! credential; live cards need `card_api_enabled` unless they come through
//! the hosted checkout; a payment takes at most five failed cards.

use serde_json::{json, Value};

use crate::helpers::{attempts, id_of, ngn, pay, spawn_app, spawn_app_with};

const SUCCESS: &str = "4084080000000409";
const DECLINED: &str = "4000000000000002";

fn card(number: &str) -> Value {
    json!({"number": number, "exp_month": 12, "exp_year": 2040, "cvc": "123"})
}

#[tokio::test]
async fn a_client_secret_cannot_burn_the_merchants_idempotency_key() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app.create_intent(&m.test_key, ngn(200_000)).await;
    let (id, secret) = (id_of(&pi), pi["client_secret"].as_str().unwrap());
    let transfer = format!("/v1/payment_intents/{id}/bank_transfer");

    // The customer uses `order-2000` first; the merchant's own create with
    // that key later is still a create.
    app.post_with_key(secret, &transfer, "order-2000", json!({}))
        .await
        .assert_status(200);
    let created = app
        .post_with_key(
            &m.test_key,
            "/v1/payment_intents",
            "order-2000",
            ngn(300_000),
        )
        .await;
    created.assert_status(201);
    assert!(!created.replayed());
    assert_eq!(created.body["amount"], 300_000);
    // Each answer replays in its own scope.
    let again = app
        .post_with_key(
            &m.test_key,
            "/v1/payment_intents",
            "order-2000",
            ngn(300_000),
        )
        .await;
    assert!(again.replayed());
    assert_eq!(again.body["id"], created.body["id"]);
    let again = app
        .post_with_key(secret, &transfer, "order-2000", json!({}))
        .await;
    again.assert_status(200);
    assert!(again.replayed());
    assert_eq!(again.body["id"], id.as_str());

    // The other way: the merchant used `order-2001` first; the customer's
    // call with it runs (it is not the merchant's saved 201, nor a 422).
    let pi2 = app
        .post_with_key(
            &m.test_key,
            "/v1/payment_intents",
            "order-2001",
            ngn(400_000),
        )
        .await;
    pi2.assert_status(201);
    let (id2, secret2) = (
        id_of(&pi2.body),
        pi2.body["client_secret"].as_str().unwrap(),
    );
    let r = app
        .post_with_key(
            secret2,
            &format!("/v1/payment_intents/{id2}/bank_transfer"),
            "order-2001",
            json!({}),
        )
        .await;
    r.assert_status(200);
    assert!(!r.replayed());
    assert_eq!(r.body["status"], "processing");
    // The checkout page's credential has a scope of its own too.
    let credential = app.checkout_credential(&pi2.body).await;
    let r = app
        .post_with_key(
            &credential,
            &format!("/v1/payment_intents/{id2}/card"),
            "order-2001",
            card(SUCCESS),
        )
        .await;
    r.assert_status(200);
    assert!(!r.replayed());
    assert_eq!(r.body["status"], "successful");
}

#[tokio::test]
async fn a_key_in_flight_for_the_merchant_does_not_block_a_customer_using_the_same_key() {
    // Every sandbox card call takes 1.5 s here.
    let app = spawn_app_with(&["--sandbox-latency-ms".into(), "1500".into()]).await;
    let m = app.merchant().await;
    // A round: two copies of the merchant's card request with key K at
    // once. One holds K; the other is refused as in use (a refusal saves
    // nothing), and that refusal tells the test the first is still running.
    // Then the customer uses K. Should the two not overlap, the round
    // proves nothing and another starts.
    for round in 0..5 {
        let key = format!("shared-{round}");
        let a = id_of(&app.create_intent(&m.test_key, ngn(100_000)).await);
        let b = app.create_intent(&m.test_key, ngn(100_000)).await;
        let send = || {
            let (client, url, bearer, key) = (
                app.client.clone(),
                format!("{}/v1/payment_intents/{a}/card", app.base),
                m.test_key.clone(),
                key.clone(),
            );
            tokio::spawn(async move {
                let res = client
                    .post(url)
                    .bearer_auth(bearer)
                    .header("Idempotency-Key", key)
                    .header("content-type", "application/json")
                    .body(card(SUCCESS).to_string())
                    .send()
                    .await
                    .unwrap();
                let status = res.status().as_u16();
                let body: Value = res.json().await.unwrap();
                (status, body["error"]["code"].as_str().map(str::to_string))
            })
        };
        let (mut one, mut two) = (send(), send());
        let (done, running) = tokio::select! {
            r = &mut one => (r.unwrap(), two),
            r = &mut two => (r.unwrap(), one),
        };
        if done != (409, Some("idempotency_key_in_use".to_string())) {
            running.await.unwrap();
            continue;
        }
        let secret = b["client_secret"].as_str().unwrap();
        let r = app
            .post_with_key(
                secret,
                &format!("/v1/payment_intents/{}/card", id_of(&b)),
                &key,
                card(SUCCESS),
            )
            .await;
        r.assert_status(200);
        assert_eq!(r.body["status"], "successful");
        assert_eq!(running.await.unwrap().0, 200);
        return;
    }
    panic!("the merchant's two requests never overlapped");
}

#[tokio::test]
async fn the_checkout_pages_credential_acts_on_its_own_payment_only() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app.create_intent(&m.test_key, ngn(150_000)).await;
    let other = app.create_intent(&m.test_key, ngn(150_000)).await;
    let (id, other_id) = (id_of(&pi), id_of(&other));
    let config = app
        .checkout_config(pi["checkout_url"].as_str().unwrap())
        .await;
    // The page never carries the client secret, only its own credential.
    assert!(config.get("client_secret").is_none());
    let credential = config["credential"].as_str().unwrap().to_string();
    assert!(credential.starts_with("kobo_checkout_"), "{credential}");
    assert_ne!(credential, pi["client_secret"].as_str().unwrap());

    // Its own payment: retrieve, bank transfer, card, authenticate.
    let got = app
        .get(&credential, &format!("/v1/payment_intents/{id}"))
        .await;
    got.assert_status(200);
    assert_eq!(got.body["id"], id.as_str());
    app.post(
        &credential,
        &format!("/v1/payment_intents/{id}/bank_transfer"),
        json!({}),
    )
    .await
    .assert_status(200);
    let r = pay(&app, &credential, &id, card("5060990580000217499")).await;
    assert_eq!(r.body["next_action"]["input"], "pin");
    app.post(
        &credential,
        &format!("/v1/payment_intents/{id}/authenticate"),
        json!({"pin": "1234"}),
    )
    .await
    .assert_status(200);

    // Anything else: 401.
    app.get(&credential, &format!("/v1/payment_intents/{other_id}"))
        .await
        .assert_error(401, "invalid_api_key", None);
    pay(&app, &credential, &other_id, card(SUCCESS))
        .await
        .assert_error(401, "invalid_api_key", None);
    app.post(
        &credential,
        &format!("/v1/payment_intents/{other_id}/bank_transfer"),
        json!({}),
    )
    .await
    .assert_error(401, "invalid_api_key", None);
    app.get(
        &credential,
        &format!("/v1/payment_intents/{id}/charge_attempts"),
    )
    .await
    .assert_error(401, "invalid_api_key", None);
    app.get(&credential, "/v1/payment_intents")
        .await
        .assert_error(401, "invalid_api_key", None);
    app.post(&credential, "/v1/payment_intents", ngn(100_000))
        .await
        .assert_error(401, "invalid_api_key", None);
    app.post(
        &credential,
        &format!("/v1/payment_intents/{id}/cancel"),
        json!({}),
    )
    .await
    .assert_error(401, "invalid_api_key", None);
    // Forged: another payment's id with this MAC, a changed MAC.
    let forged = credential.replace(&id.replace('-', ""), &other_id.replace('-', ""));
    assert_ne!(forged, credential);
    app.get(&forged, &format!("/v1/payment_intents/{other_id}"))
        .await
        .assert_error(401, "invalid_api_key", None);
    let mut tampered = credential.clone();
    let last = if tampered.ends_with('0') { "1" } else { "0" };
    tampered.replace_range(tampered.len() - 1.., last);
    app.get(&tampered, &format!("/v1/payment_intents/{id}"))
        .await
        .assert_error(401, "invalid_api_key", None);

    // Its key lives in the data directory: the page's credential still
    // works after a restart, and it is not in the store file.
    let key_file = app.data_dir().join("checkout-credential-key");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    app.restart();
    app.get(&credential, &format!("/v1/payment_intents/{id}"))
        .await
        .assert_status(200);
    assert_eq!(app.checkout_credential(&pi).await, credential);
}

#[tokio::test]
async fn live_cards_need_card_api_enabled_unless_they_come_through_the_hosted_checkout() {
    let app = spawn_app().await;
    let live = app.live_merchant().await;
    let pi = app.create_intent(&live.live_key, ngn(100_000)).await;
    let id = id_of(&pi);
    let secret = pi["client_secret"].as_str().unwrap();
    // The client secret reaches the merchant's own pages and server: the
    // same rule as the secret key.
    pay(&app, secret, &id, card(SUCCESS))
        .await
        .assert_error(403, "card_api_not_enabled", None);
    app.post(
        secret,
        &format!("/v1/payment_intents/{id}/authenticate"),
        json!({"otp": "123456"}),
    )
    .await
    .assert_error(403, "card_api_not_enabled", None);
    // The hosted checkout passes that check; this server has no live card
    // provider.
    let credential = app.checkout_credential(&pi).await;
    pay(&app, &credential, &id, card(SUCCESS))
        .await
        .assert_error(409, "card_api_unavailable", None);
    // Bank transfer needs no card_api_enabled, with either (this server
    // has no live provider either).
    for bearer in [secret, &credential] {
        app.post(
            bearer,
            &format!("/v1/payment_intents/{id}/bank_transfer"),
            json!({}),
        )
        .await
        .assert_error(409, "provider_not_configured", None);
    }
}

#[tokio::test]
async fn the_sixth_failed_card_on_a_payment_is_refused() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app.create_intent(&m.test_key, ngn(250_000)).await;
    let id = id_of(&pi);
    let credential = app.checkout_credential(&pi).await;
    let secret = pi["client_secret"].as_str().unwrap().to_string();
    // Five declines, whoever sends them.
    for bearer in [&credential, &secret, &m.test_key, &credential, &credential] {
        let r = pay(&app, bearer, &id, card(DECLINED)).await;
        r.assert_status(200);
        assert_eq!(r.body["status"], "failed");
    }
    let r = pay(&app, &credential, &id, card(DECLINED)).await;
    r.assert_error(409, "card_attempts_exceeded", None);
    assert_eq!(r.error_type(), "state_error");
    // Nothing was recorded; a good card, the merchant's key, a restart
    // change nothing.
    pay(&app, &m.test_key, &id, card(SUCCESS))
        .await
        .assert_error(409, "card_attempts_exceeded", None);
    app.restart();
    pay(&app, &credential, &id, card(SUCCESS))
        .await
        .assert_error(409, "card_attempts_exceeded", None);
    let data = attempts(&app, &m.test_key, &id).await;
    assert_eq!(data.len(), 5);
    assert!(data.iter().all(|a| a["status"] == "failed"));
    let got = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    assert_eq!(got.body["status"], "failed");
    // The customer may still pay by bank transfer.
    let r = app
        .post(
            &credential,
            &format!("/v1/payment_intents/{id}/bank_transfer"),
            json!({}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "processing");
    // Another payment is not affected.
    let fresh = app.create_intent(&m.test_key, ngn(250_000)).await;
    let r = pay(&app, &m.test_key, &id_of(&fresh), card(SUCCESS)).await;
    assert_eq!(r.body["status"], "successful");
}

#[tokio::test]
async fn ten_concurrent_declined_cards_at_a_time_never_record_more_than_five() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app.create_intent(&m.test_key, ngn(250_000)).await;
    let id = id_of(&pi);
    let credential = app.checkout_credential(&pi).await;
    let url = format!("{}/v1/payment_intents/{id}/card", app.base);
    let mut declined = 0;
    // Waves of 10 at once until every answer is the refusal (at most 20
    // waves: without the cap they never end).
    for _ in 0..20 {
        let wave: Vec<_> = (0..10)
            .map(|_| {
                let (client, url, bearer, idem) = (
                    app.client.clone(),
                    url.clone(),
                    credential.clone(),
                    app.next_key(),
                );
                tokio::spawn(async move {
                    let res = client
                        .post(url)
                        .bearer_auth(bearer)
                        .header("Idempotency-Key", idem)
                        .header("content-type", "application/json")
                        .body(card(DECLINED).to_string())
                        .send()
                        .await
                        .unwrap();
                    let status = res.status().as_u16();
                    let body: Value = res.json().await.unwrap();
                    (status, body)
                })
            })
            .collect();
        let mut refused = 0;
        for task in wave {
            let (status, body) = task.await.unwrap();
            match (status, body["error"]["code"].as_str()) {
                (200, _) => {
                    assert_eq!(body["status"], "failed");
                    declined += 1;
                }
                (409, Some("card_attempts_exceeded")) => refused += 1,
                (409, Some("payment_in_progress")) => {}
                other => panic!("unexpected answer {other:?}: {body}"),
            }
        }
        if refused == 10 {
            break;
        }
    }
    assert_eq!(declined, 5);
    assert_eq!(attempts(&app, &m.test_key, &id).await.len(), 5);
}
