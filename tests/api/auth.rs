//! Authentication: secret keys, modes, key rolling, live activation, client
//! secrets, test helpers in live mode, and the operator token.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{id_of, ngn, spawn_app, Resp, TestApp};

/// 401 with the spec's error body: type `authentication_error`, param null.
#[track_caller]
fn assert_unauthorized(r: &Resp) {
    r.assert_status(401);
    assert_eq!(r.error_type(), "authentication_error", "body: {}", r.text);
    assert!(!r.code().is_empty(), "body: {}", r.text);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "body: {}",
        r.text
    );
    assert!(r.body["error"].get("param").is_some(), "body: {}", r.text);
    assert!(r.body["error"]["param"].is_null(), "body: {}", r.text);
}

#[track_caller]
fn assert_not_found(r: &Resp) {
    r.assert_status(404);
    assert_eq!(r.error_type(), "invalid_request_error", "body: {}", r.text);
    assert!(!r.code().is_empty(), "body: {}", r.text);
}

async fn count_intents(app: &TestApp, key: &str) -> usize {
    app.all_intents(key).await.len()
}

#[tokio::test]
async fn a_request_without_a_key_is_refused() {
    let app = spawn_app().await;
    let m = app.merchant().await;

    let r = app
        .send(Method::GET, "/v1/payment_intents", None, None, None)
        .await;
    assert_unauthorized(&r);
    let r = app.send(Method::GET, "/v1/balance", None, None, None).await;
    assert_unauthorized(&r);

    let idem = app.next_key();
    let r = app
        .send(
            Method::POST,
            "/v1/payment_intents",
            None,
            Some(&idem),
            Some(&ngn(10_000)),
        )
        .await;
    assert_unauthorized(&r);
    assert_eq!(count_intents(&app, &m.test_key).await, 0);
}

#[tokio::test]
async fn a_malformed_authorization_header_is_refused() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let basic = format!("Basic {}", m.test_key);
    let no_scheme = m.test_key.clone();
    let cases: Vec<String> = vec![
        basic,
        no_scheme,
        "Bearer".to_string(),
        "Bearer ".to_string(),
        "Bearer svc_test_".to_string(),
        "Bearer svc_test_short".to_string(),
        "Bearer not-a-key-at-all".to_string(),
        "Bearer svc_prod_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_string(),
        format!("Bearer {}x", m.test_key),
    ];
    for auth in &cases {
        let r = app
            .send_raw(
                Method::GET,
                "/v1/payment_intents",
                &[("authorization", auth.as_str())],
                None,
            )
            .await;
        assert_unauthorized(&r);

        let body = serde_json::to_vec(&ngn(10_000)).unwrap();
        let idem = app.next_key();
        let r = app
            .send_raw(
                Method::POST,
                "/v1/payment_intents",
                &[("authorization", auth.as_str()), ("idempotency-key", &idem)],
                Some(body),
            )
            .await;
        assert_unauthorized(&r);
    }
    assert_eq!(count_intents(&app, &m.test_key).await, 0);
}

#[tokio::test]
async fn an_unknown_key_is_refused() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    // Well-formed keys of both modes that were never issued.
    let unknown_test = format!("svc_test_{}", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7");
    let unknown_live = format!("svc_live_{}", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7");
    // The merchant's own key with its last character changed.
    let mut altered = m.test_key.clone();
    let last = altered.pop().unwrap();
    altered.push(if last == 'a' { 'b' } else { 'a' });
    // A test key's random part under the live prefix.
    let swapped = m.test_key.replacen("svc_test_", "svc_live_", 1);

    for key in [&unknown_test, &unknown_live, &altered, &swapped] {
        assert_unauthorized(&app.get(key, "/v1/payment_intents").await);
        assert_unauthorized(&app.get(key, "/v1/balance").await);
        assert_unauthorized(&app.post(key, "/v1/payment_intents", ngn(10_000)).await);
    }
    assert_eq!(count_intents(&app, &m.test_key).await, 0);
}

#[tokio::test]
async fn secret_keys_carry_their_mode_prefix() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    for (key, prefix) in [(&m.test_key, "svc_test_"), (&m.live_key, "svc_live_")] {
        let rest = key
            .strip_prefix(prefix)
            .unwrap_or_else(|| panic!("{key} lacks {prefix}"));
        assert!(rest.len() >= 32, "{key}");
        assert!(rest.chars().all(|c| c.is_ascii_alphanumeric()), "{key}");
    }
    assert_ne!(m.test_key, m.live_key);
}

#[tokio::test]
async fn a_rolled_key_is_refused_and_the_new_key_works() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let before = app.create_intent(&m.test_key, ngn(10_000)).await;

    let r = app
        .admin_post(
            &format!("/admin/v1/merchants/{}/roll_keys", m.id),
            json!({"mode": "test"}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["object"], "merchant_key");
    assert_eq!(r.body["mode"], "test");
    let new_key = r.body["secret_key"].as_str().unwrap().to_string();
    assert!(new_key.starts_with("svc_test_"), "{new_key}");
    assert_ne!(new_key, m.test_key);

    // The old key answers 401 everywhere from now on.
    assert_unauthorized(&app.get(&m.test_key, "/v1/payment_intents").await);
    assert_unauthorized(
        &app.get(
            &m.test_key,
            &format!("/v1/payment_intents/{}", id_of(&before)),
        )
        .await,
    );
    assert_unauthorized(&app.get(&m.test_key, "/v1/balance").await);
    assert_unauthorized(
        &app.post(&m.test_key, "/v1/payment_intents", ngn(10_000))
            .await,
    );

    // The new key sees the same test data and can create.
    let r = app
        .get(&new_key, &format!("/v1/payment_intents/{}", id_of(&before)))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["id"], before["id"]);
    let after = app.create_intent(&new_key, ngn(20_000)).await;
    assert_eq!(after["livemode"], false);
    assert_eq!(count_intents(&app, &new_key).await, 2);

    // Rolling the test key leaves the live key alone.
    app.get(&m.live_key, "/v1/payment_intents")
        .await
        .assert_status(200);
}

#[tokio::test]
async fn rolling_the_live_key_leaves_the_test_key_working() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let r = app
        .admin_post(
            &format!("/admin/v1/merchants/{}/roll_keys", m.id),
            json!({"mode": "live"}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["mode"], "live");
    let new_live = r.body["secret_key"].as_str().unwrap().to_string();
    assert!(new_live.starts_with("svc_live_"), "{new_live}");

    assert_unauthorized(&app.get(&m.live_key, "/v1/payment_intents").await);
    app.get(&new_live, "/v1/payment_intents")
        .await
        .assert_status(200);
    app.get(&m.test_key, "/v1/payment_intents")
        .await
        .assert_status(200);
}

#[tokio::test]
async fn a_key_rolled_twice_leaves_only_the_newest_working() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let path = format!("/admin/v1/merchants/{}/roll_keys", m.id);
    let first = app.admin_post(&path, json!({"mode": "test"})).await;
    first.assert_status(200);
    let first = first.body["secret_key"].as_str().unwrap().to_string();
    let second = app.admin_post(&path, json!({"mode": "test"})).await;
    second.assert_status(200);
    let second = second.body["secret_key"].as_str().unwrap().to_string();

    assert_unauthorized(&app.get(&m.test_key, "/v1/payment_intents").await);
    assert_unauthorized(&app.get(&first, "/v1/payment_intents").await);
    app.get(&second, "/v1/payment_intents")
        .await
        .assert_status(200);
}

#[tokio::test]
async fn test_and_live_keys_see_separate_data() {
    let app = spawn_app().await;
    let m = app.live_merchant().await;

    let test_pi = app.create_intent(&m.test_key, ngn(10_000)).await;
    let live_pi = app.create_intent(&m.live_key, ngn(20_000)).await;
    assert_eq!(test_pi["livemode"], false);
    assert_eq!(live_pi["livemode"], true);

    // Each key reads its own intent, with the right livemode.
    let r = app
        .get(
            &m.test_key,
            &format!("/v1/payment_intents/{}", id_of(&test_pi)),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["livemode"], false);
    let r = app
        .get(
            &m.live_key,
            &format!("/v1/payment_intents/{}", id_of(&live_pi)),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["livemode"], true);

    // Ids of the other mode are not found.
    assert_not_found(
        &app.get(
            &m.live_key,
            &format!("/v1/payment_intents/{}", id_of(&test_pi)),
        )
        .await,
    );
    assert_not_found(
        &app.get(
            &m.test_key,
            &format!("/v1/payment_intents/{}", id_of(&live_pi)),
        )
        .await,
    );
    assert_not_found(
        &app.post(
            &m.live_key,
            &format!("/v1/payment_intents/{}/cancel", id_of(&test_pi)),
            json!({}),
        )
        .await,
    );
    assert_not_found(
        &app.post(
            &m.test_key,
            &format!("/v1/payment_intents/{}/cancel", id_of(&live_pi)),
            json!({}),
        )
        .await,
    );
    assert_not_found(
        &app.get(
            &m.live_key,
            &format!("/v1/payment_intents/{}/charge_attempts", id_of(&test_pi)),
        )
        .await,
    );

    // Lists show only the key's mode, every item with the mode's livemode.
    let test_list = app.all_intents(&m.test_key).await;
    assert_eq!(test_list.len(), 1);
    assert_eq!(test_list[0]["id"], test_pi["id"]);
    assert!(test_list.iter().all(|i| i["livemode"] == false));
    let live_list = app.all_intents(&m.live_key).await;
    assert_eq!(live_list.len(), 1);
    assert_eq!(live_list[0]["id"], live_pi["id"]);
    assert!(live_list.iter().all(|i| i["livemode"] == true));

    // The cross-mode cancels changed nothing.
    let r = app
        .get(
            &m.test_key,
            &format!("/v1/payment_intents/{}", id_of(&test_pi)),
        )
        .await;
    assert_eq!(r.body["status"], "created");
    let r = app
        .get(
            &m.live_key,
            &format!("/v1/payment_intents/{}", id_of(&live_pi)),
        )
        .await;
    assert_eq!(r.body["status"], "created");
}

#[tokio::test]
async fn another_merchants_intent_is_not_found() {
    let app = spawn_app().await;
    let a = app.merchant().await;
    let b = app.merchant().await;
    let pi = app.create_intent(&a.test_key, ngn(10_000)).await;
    let id = id_of(&pi);

    assert_not_found(
        &app.get(&b.test_key, &format!("/v1/payment_intents/{id}"))
            .await,
    );
    assert_not_found(
        &app.get(
            &b.test_key,
            &format!("/v1/payment_intents/{id}/charge_attempts"),
        )
        .await,
    );
    assert_not_found(
        &app.post(
            &b.test_key,
            &format!("/v1/payment_intents/{id}/cancel"),
            json!({}),
        )
        .await,
    );
    assert_not_found(
        &app.post(
            &b.test_key,
            &format!("/v1/payment_intents/{id}/bank_transfer"),
            json!({}),
        )
        .await,
    );
    assert_not_found(
        &app.post(
            &b.test_key,
            &format!("/v1/test_helpers/payment_intents/{id}/succeed"),
            json!({}),
        )
        .await,
    );
    assert_eq!(count_intents(&app, &b.test_key).await, 0);

    // Merchant A's intent is untouched.
    let r = app
        .get(&a.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "created");
    assert_eq!(app.balance(&a.test_key, "pending", "NGN").await, 0);
}

#[tokio::test]
async fn a_live_key_cannot_take_payments_before_the_account_is_approved() {
    let app = spawn_app().await;
    let m = app.merchant().await;

    let r = app
        .post(&m.live_key, "/v1/payment_intents", ngn(10_000))
        .await;
    r.assert_error(403, "account_not_activated", None);
    assert_eq!(r.error_type(), "authentication_error");
    // Nothing was created, and reading live data is allowed.
    assert_eq!(count_intents(&app, &m.live_key).await, 0);
    // The test key works for everyone.
    app.create_intent(&m.test_key, ngn(10_000)).await;

    let r = app
        .admin_post(
            &format!("/admin/v1/merchants/{}", m.id),
            json!({"settings": {"live_approved": true}}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["settings"]["live_approved"], true);

    let r = app
        .post(&m.live_key, "/v1/payment_intents", ngn(10_000))
        .await;
    r.assert_status(201);
    assert_eq!(r.body["livemode"], true);
    assert_eq!(r.body["status"], "created");
    let live = app.all_intents(&m.live_key).await;
    assert_eq!(live.len(), 1);
    assert_eq!(live[0]["id"], r.body["id"]);
    assert_eq!(count_intents(&app, &m.test_key).await, 1);
}

#[tokio::test]
async fn a_client_secret_acts_only_on_its_own_intent() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let a = app.create_intent(&m.test_key, ngn(10_000)).await;
    let b = app.create_intent(&m.test_key, ngn(20_000)).await;
    let (a_id, b_id) = (id_of(&a), id_of(&b));
    let secret = a["client_secret"].as_str().unwrap().to_string();
    assert!(!secret.is_empty());
    assert!(b["client_secret"].as_str().is_some_and(|s| s != secret));

    // Its own intent: retrieve and bank transfer.
    let r = app
        .get(&secret, &format!("/v1/payment_intents/{a_id}"))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["id"], a["id"]);
    let r = app
        .post(
            &secret,
            &format!("/v1/payment_intents/{a_id}/bank_transfer"),
            json!({}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["id"], a["id"]);
    assert_eq!(r.body["status"], "processing");
    assert!(r.body["bank_transfer"]["account_number"].is_string());

    // Another intent's id.
    assert_unauthorized(
        &app.get(&secret, &format!("/v1/payment_intents/{b_id}"))
            .await,
    );
    assert_unauthorized(
        &app.post(
            &secret,
            &format!("/v1/payment_intents/{b_id}/bank_transfer"),
            json!({}),
        )
        .await,
    );
    // Anything else, its own intent included.
    assert_unauthorized(&app.get(&secret, "/v1/payment_intents").await);
    assert_unauthorized(&app.get(&secret, "/v1/balance").await);
    assert_unauthorized(&app.get(&secret, "/v1/balance_transactions").await);
    assert_unauthorized(&app.post(&secret, "/v1/payment_intents", ngn(10_000)).await);
    assert_unauthorized(
        &app.post(
            &secret,
            &format!("/v1/payment_intents/{a_id}/cancel"),
            json!({}),
        )
        .await,
    );
    assert_unauthorized(
        &app.post(
            &secret,
            &format!("/v1/payment_intents/{b_id}/cancel"),
            json!({}),
        )
        .await,
    );
    assert_unauthorized(
        &app.get(
            &secret,
            &format!("/v1/payment_intents/{a_id}/charge_attempts"),
        )
        .await,
    );
    assert_unauthorized(
        &app.post(
            &secret,
            &format!("/v1/test_helpers/payment_intents/{a_id}/succeed"),
            json!({}),
        )
        .await,
    );

    // B is untouched; nothing new was created; nothing was paid.
    let r = app
        .get(&m.test_key, &format!("/v1/payment_intents/{b_id}"))
        .await;
    assert_eq!(r.body["status"], "created");
    assert!(r.body["bank_transfer"].is_null());
    let r = app
        .get(&m.test_key, &format!("/v1/payment_intents/{a_id}"))
        .await;
    assert_eq!(r.body["status"], "processing");
    assert_eq!(count_intents(&app, &m.test_key).await, 2);
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 0);
}

#[tokio::test]
async fn a_client_secret_is_not_accepted_by_another_merchant_or_the_operator_api() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let a = app.create_intent(&m.test_key, ngn(10_000)).await;
    let secret = a["client_secret"].as_str().unwrap().to_string();
    assert_unauthorized(
        &app.send(Method::GET, "/admin/v1/clock", Some(&secret), None, None)
            .await,
    );
    assert_unauthorized(
        &app.send(
            Method::GET,
            &format!("/admin/v1/merchants/{}", m.id),
            Some(&secret),
            None,
            None,
        )
        .await,
    );
}

#[tokio::test]
async fn test_helpers_answer_404_to_a_live_key() {
    let app = spawn_app().await;
    let m = app.live_merchant().await;
    let live_pi = app.create_intent(&m.live_key, ngn(10_000)).await;
    let test_pi = app.create_intent(&m.test_key, ngn(10_000)).await;

    for id in [id_of(&live_pi), id_of(&test_pi)] {
        for helper in ["succeed", "simulate_transfer"] {
            let r = app
                .post(
                    &m.live_key,
                    &format!("/v1/test_helpers/payment_intents/{id}/{helper}"),
                    json!({}),
                )
                .await;
            assert_not_found(&r);
        }
    }
    // Also before approval, for a merchant whose live key is not activated.
    let other = app.merchant().await;
    let r = app
        .post(
            &other.live_key,
            &format!(
                "/v1/test_helpers/payment_intents/{}/succeed",
                id_of(&live_pi)
            ),
            json!({}),
        )
        .await;
    assert_not_found(&r);

    // Nothing moved.
    let r = app
        .get(
            &m.live_key,
            &format!("/v1/payment_intents/{}", id_of(&live_pi)),
        )
        .await;
    assert_eq!(r.body["status"], "created");
    assert_eq!(app.balance(&m.live_key, "pending", "NGN").await, 0);
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 0);
}

#[tokio::test]
async fn the_operator_api_needs_the_admin_token() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let clock_before = app.now().await;
    let wrong = format!("{}x", app.admin_token);
    let bearers: Vec<Option<&str>> = vec![
        None,
        Some(&m.test_key),
        Some(&m.live_key),
        Some(&wrong),
        Some(""),
    ];
    let merchant_path = format!("/admin/v1/merchants/{}", m.id);
    let roll_path = format!("/admin/v1/merchants/{}/roll_keys", m.id);
    for bearer in bearers {
        let calls: Vec<(Method, &str, Option<Value>)> = vec![
            (Method::GET, "/admin/v1/clock", None),
            (
                Method::POST,
                "/admin/v1/clock/advance",
                Some(json!({"seconds": 3600})),
            ),
            (
                Method::POST,
                "/admin/v1/merchants",
                Some(json!({"name": "Intruder"})),
            ),
            (Method::GET, &merchant_path, None),
            (
                Method::POST,
                &merchant_path,
                Some(json!({"settings": {"live_approved": true}})),
            ),
            (Method::POST, &roll_path, Some(json!({"mode": "test"}))),
            (Method::GET, "/admin/v1/actors", None),
        ];
        for (method, path, body) in calls {
            let r = app
                .send(method.clone(), path, bearer, None, body.as_ref())
                .await;
            assert_unauthorized(&r);
        }
    }

    // None of the refused calls did anything.
    assert_eq!(app.now().await, clock_before);
    app.get(&m.test_key, "/v1/payment_intents")
        .await
        .assert_status(200);
    let r = app.admin_get(&merchant_path).await;
    r.assert_status(200);
    assert_eq!(r.body["settings"]["live_approved"], false);
    assert!(r.body.get("test_secret_key").is_none_or(|v| v.is_null()));
    app.post(&m.live_key, "/v1/payment_intents", ngn(10_000))
        .await
        .assert_error(403, "account_not_activated", None);
}
