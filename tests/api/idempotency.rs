//! Idempotency-Key rules: required on every POST, at most 255 characters,
//! replays, reuse with another body, saved 4xx answers, scope per merchant
//! and mode, concurrent first requests, and the 24-hour retention.

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::json;

use crate::helpers::{ngn, spawn_app, Resp};

#[track_caller]
fn assert_replay_of(replay: &Resp, original: &Resp) {
    assert_eq!(replay.status, original.status, "body: {}", replay.text);
    assert_eq!(replay.text, original.text, "a replay is byte-identical");
    assert!(replay.replayed(), "Idempotent-Replayed: true on a replay");
    assert_eq!(
        replay.headers.get("idempotent-replayed").unwrap(),
        "true",
        "headers: {:?}",
        replay.headers
    );
}

#[tokio::test]
async fn a_post_without_an_idempotency_key_is_refused() {
    let app = spawn_app().await;
    let m = app.merchant().await;

    let r = app
        .send(
            Method::POST,
            "/v1/payment_intents",
            Some(&m.test_key),
            None,
            Some(&ngn(10_000)),
        )
        .await;
    r.assert_error(400, "parameter_missing", Some("Idempotency-Key"));
    assert_eq!(r.error_type(), "invalid_request_error");
    assert!(app.all_intents(&m.test_key).await.is_empty());

    // Every POST, not only creates.
    let pi = app.create_intent(&m.test_key, ngn(10_000)).await;
    let id = pi["id"].as_str().unwrap();
    for action in ["cancel", "bank_transfer"] {
        let r = app
            .send(
                Method::POST,
                &format!("/v1/payment_intents/{id}/{action}"),
                Some(&m.test_key),
                None,
                Some(&json!({})),
            )
            .await;
        r.assert_error(400, "parameter_missing", Some("Idempotency-Key"));
    }
    let r = app
        .send(
            Method::POST,
            &format!("/v1/test_helpers/payment_intents/{id}/succeed"),
            Some(&m.test_key),
            None,
            None,
        )
        .await;
    r.assert_error(400, "parameter_missing", Some("Idempotency-Key"));

    let r = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    assert_eq!(r.body["status"], "created");
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 0);
}

#[tokio::test]
async fn an_idempotency_key_of_256_characters_is_refused_and_255_is_accepted() {
    let app = spawn_app().await;
    let m = app.merchant().await;

    let long = "k".repeat(256);
    let r = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &long, ngn(10_000))
        .await;
    r.assert_error(400, "parameter_invalid", Some("Idempotency-Key"));
    assert!(app.all_intents(&m.test_key).await.is_empty());

    let max = "k".repeat(255);
    let first = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &max, ngn(10_000))
        .await;
    first.assert_status(201);
    assert!(!first.replayed());
    let again = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &max, ngn(10_000))
        .await;
    assert_replay_of(&again, &first);
    assert_eq!(app.all_intents(&m.test_key).await.len(), 1);
}

#[tokio::test]
async fn the_same_key_and_body_replays_the_original_response() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let key = app.next_key();
    let body = json!({"amount": 10_000, "currency": "NGN", "reference": "order-9",
                      "metadata": {"cart": "42"}});

    let first = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, body.clone())
        .await;
    first.assert_status(201);
    assert!(!first.replayed(), "the first answer is not a replay");
    for _ in 0..3 {
        let again = app
            .post_with_key(&m.test_key, "/v1/payment_intents", &key, body.clone())
            .await;
        assert_replay_of(&again, &first);
    }
    // Even after the intent changed, the replay is the original answer.
    let id = first.body["id"].as_str().unwrap();
    app.post(
        &m.test_key,
        &format!("/v1/payment_intents/{id}/cancel"),
        json!({}),
    )
    .await
    .assert_status(200);
    let again = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, body.clone())
        .await;
    assert_replay_of(&again, &first);
    assert_eq!(again.body["status"], "created");

    let all = app.all_intents(&m.test_key).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["id"], first.body["id"]);
}

#[tokio::test]
async fn a_replayed_payment_moves_money_once() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app.create_intent(&m.test_key, ngn(100_000)).await;
    let id = pi["id"].as_str().unwrap();
    let net = pi["fees"]["net"].as_i64().unwrap();
    let path = format!("/v1/test_helpers/payment_intents/{id}/simulate_transfer");
    let key = app.next_key();

    let first = app.post_with_key(&m.test_key, &path, &key, json!({})).await;
    first.assert_status(200);
    assert_eq!(first.body["status"], "successful");
    let lines = app.all_lines(&m.test_key).await.len();
    let pending = app.balance(&m.test_key, "pending", "NGN").await;
    assert!(
        pending > 0 && pending <= 100_000,
        "pending {pending}, net {net}"
    );

    let again = app.post_with_key(&m.test_key, &path, &key, json!({})).await;
    assert_replay_of(&again, &first);
    assert_eq!(app.all_lines(&m.test_key).await.len(), lines);
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, pending);
}

#[tokio::test]
async fn the_same_key_with_a_different_body_is_refused_with_422() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let key = app.next_key();
    let first = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(10_000))
        .await;
    first.assert_status(201);

    let other_bodies = [
        ngn(10_001),
        json!({"amount": 10_000, "currency": "USD"}),
        json!({"amount": 10_000, "currency": "NGN", "reference": "x"}),
        json!({"amount": 99, "currency": "NGN"}),
    ];
    for body in other_bodies {
        let r = app
            .post_with_key(&m.test_key, "/v1/payment_intents", &key, body.clone())
            .await;
        r.assert_error(422, "idempotency_key_reused", None);
        assert_eq!(r.error_type(), "idempotency_error", "{body}");
        assert!(r.body["error"]["param"].is_null(), "body: {}", r.text);
        assert!(!r.replayed());
    }
    // The original is still replayed for the original body.
    let again = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(10_000))
        .await;
    assert_replay_of(&again, &first);
    assert_eq!(app.all_intents(&m.test_key).await.len(), 1);
}

#[tokio::test]
async fn a_4xx_answer_is_saved_and_replayed() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let key = app.next_key();

    let first = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(99))
        .await;
    first.assert_error(400, "parameter_invalid", Some("amount"));
    assert!(!first.replayed());

    let again = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(99))
        .await;
    assert_replay_of(&again, &first);

    // A fixed request needs a new key.
    let fixed = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(100))
        .await;
    fixed.assert_error(422, "idempotency_key_reused", None);
    assert!(app.all_intents(&m.test_key).await.is_empty());

    let fresh = app.post(&m.test_key, "/v1/payment_intents", ngn(100)).await;
    fresh.assert_status(201);
    assert_eq!(app.all_intents(&m.test_key).await.len(), 1);
}

#[tokio::test]
async fn a_409_answer_is_saved_and_replayed_even_after_the_conflict_is_gone() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app.create_intent(&m.test_key, ngn(10_000)).await;
    let id = pi["id"].as_str().unwrap();
    app.post(
        &m.test_key,
        &format!("/v1/test_helpers/payment_intents/{id}/succeed"),
        json!({}),
    )
    .await
    .assert_status(200);

    // A successful payment cannot be canceled: 409, saved under the key.
    let key = app.next_key();
    let path = format!("/v1/payment_intents/{id}/cancel");
    let first = app.post_with_key(&m.test_key, &path, &key, json!({})).await;
    first.assert_status(409);
    assert_eq!(first.error_type(), "state_error");
    let again = app.post_with_key(&m.test_key, &path, &key, json!({})).await;
    assert_replay_of(&again, &first);

    // Duplicate reference: the 409 replays as well.
    let body = json!({"amount": 10_000, "currency": "NGN", "reference": "r-1"});
    app.create_intent(&m.test_key, body.clone()).await;
    let key = app.next_key();
    let first = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, body.clone())
        .await;
    first.assert_error(409, "duplicate_reference", None);
    let again = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, body.clone())
        .await;
    assert_replay_of(&again, &first);
    assert_eq!(app.all_intents(&m.test_key).await.len(), 2);
}

#[tokio::test]
async fn keys_are_per_merchant() {
    let app = spawn_app().await;
    let a = app.merchant().await;
    let b = app.merchant().await;
    let key = app.next_key();

    let ra = app
        .post_with_key(&a.test_key, "/v1/payment_intents", &key, ngn(10_000))
        .await;
    ra.assert_status(201);
    // Another merchant, same key, another body: runs normally.
    let rb = app
        .post_with_key(&b.test_key, "/v1/payment_intents", &key, ngn(20_000))
        .await;
    rb.assert_status(201);
    assert!(!rb.replayed());
    assert_eq!(rb.body["amount"], 20_000);
    // And with the same body as A's: still not A's answer.
    let key2 = app.next_key();
    let ra2 = app
        .post_with_key(&a.test_key, "/v1/payment_intents", &key2, ngn(30_000))
        .await;
    ra2.assert_status(201);
    let rb2 = app
        .post_with_key(&b.test_key, "/v1/payment_intents", &key2, ngn(30_000))
        .await;
    rb2.assert_status(201);
    assert!(!rb2.replayed());
    assert_ne!(rb2.body["id"], ra2.body["id"]);

    let list_a = app.all_intents(&a.test_key).await;
    let list_b = app.all_intents(&b.test_key).await;
    assert_eq!(list_a.len(), 2);
    assert_eq!(list_b.len(), 2);
    assert_eq!(list_b[1]["id"], rb.body["id"]);
}

#[tokio::test]
async fn keys_are_per_mode() {
    let app = spawn_app().await;
    let m = app.live_merchant().await;
    let key = app.next_key();

    let test = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(10_000))
        .await;
    test.assert_status(201);
    assert_eq!(test.body["livemode"], false);

    // The live key with the same key and the same body runs normally.
    let live = app
        .post_with_key(&m.live_key, "/v1/payment_intents", &key, ngn(10_000))
        .await;
    live.assert_status(201);
    assert!(!live.replayed());
    assert_eq!(live.body["livemode"], true);
    assert_ne!(live.body["id"], test.body["id"]);
    // ... and with a different body too.
    let key2 = app.next_key();
    app.post_with_key(&m.test_key, "/v1/payment_intents", &key2, ngn(10_000))
        .await
        .assert_status(201);
    let live2 = app
        .post_with_key(&m.live_key, "/v1/payment_intents", &key2, ngn(50_000))
        .await;
    live2.assert_status(201);
    assert!(!live2.replayed());

    // Within the live mode, the key replays.
    let again = app
        .post_with_key(&m.live_key, "/v1/payment_intents", &key, ngn(10_000))
        .await;
    assert_replay_of(&again, &live);

    assert_eq!(app.all_intents(&m.test_key).await.len(), 2);
    assert_eq!(app.all_intents(&m.live_key).await.len(), 2);
}

#[tokio::test]
async fn concurrent_requests_with_one_key_create_one_intent() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let key = app.next_key();
    let body = json!({"amount": 25_000, "currency": "NGN", "reference": "concurrent-1"});

    let answers: Vec<Resp> = join_all(
        (0..20).map(|_| app.post_with_key(&m.test_key, "/v1/payment_intents", &key, body.clone())),
    )
    .await;

    let originals: Vec<&Resp> = answers
        .iter()
        .filter(|r| r.status == 201 && !r.replayed())
        .collect();
    assert_eq!(
        originals.len(),
        1,
        "exactly one original answer: {:?}",
        answers
            .iter()
            .map(|r| (r.status, r.replayed()))
            .collect::<Vec<_>>()
    );
    let original = originals[0];
    for r in &answers {
        match r.status {
            201 => assert_eq!(r.text, original.text, "every 201 is the same answer"),
            409 => {
                r.assert_error(409, "idempotency_key_in_use", None);
                assert_eq!(r.error_type(), "state_error");
                assert!(r.body["error"]["param"].is_null(), "body: {}", r.text);
                assert!(!r.replayed());
            }
            other => panic!("unexpected {other}: {}", r.text),
        }
    }

    let all = app.all_intents(&m.test_key).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["id"], original.body["id"]);

    // Once it has finished, the key replays.
    let again = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, body.clone())
        .await;
    assert_replay_of(&again, original);
}

#[tokio::test]
async fn concurrent_requests_with_distinct_keys_all_run() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let keys: Vec<String> = (0..20).map(|_| app.next_key()).collect();
    let answers: Vec<Resp> = join_all(
        keys.iter()
            .map(|k| app.post_with_key(&m.test_key, "/v1/payment_intents", k, ngn(10_000))),
    )
    .await;
    for r in &answers {
        r.assert_status(201);
        assert!(!r.replayed());
    }
    assert_eq!(app.all_intents(&m.test_key).await.len(), 20);
}

#[tokio::test]
async fn keys_expire_after_24_hours() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let key = app.next_key();

    let first = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(10_000))
        .await;
    first.assert_status(201);

    // Still remembered just before 24 hours.
    app.advance(24 * 3600 - 60).await;
    app.post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(20_000))
        .await
        .assert_error(422, "idempotency_key_reused", None);
    let again = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(10_000))
        .await;
    assert_replay_of(&again, &first);

    // Forgotten after 24 hours: a different body runs normally.
    app.advance(61).await;
    let later = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(20_000))
        .await;
    later.assert_status(201);
    assert!(!later.replayed());
    assert_eq!(later.body["amount"], 20_000);
    assert_ne!(later.body["id"], first.body["id"]);
    assert_eq!(app.all_intents(&m.test_key).await.len(), 2);

    // And the new request is remembered under the key from now on.
    let replay = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(20_000))
        .await;
    assert_replay_of(&replay, &later);
}

#[tokio::test]
async fn a_key_expires_24_hours_after_its_first_use() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let key = app.next_key();
    let first = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(10_000))
        .await;
    first.assert_status(201);
    app.advance(24 * 3600 + 1).await;
    // The same body after expiry is a new request, not a replay.
    let r = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(10_000))
        .await;
    r.assert_status(201);
    assert!(!r.replayed());
    assert_ne!(r.body["id"], first.body["id"]);
    assert_eq!(app.all_intents(&m.test_key).await.len(), 2);
}

#[tokio::test]
async fn a_key_used_on_another_endpoint_is_refused_with_422() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let key = app.next_key();
    let created = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, json!({}))
        .await;
    // `{}` is a 400 (amount missing), saved under the key.
    created.assert_error(400, "parameter_missing", Some("amount"));

    let pi = app.create_intent(&m.test_key, ngn(10_000)).await;
    let id = pi["id"].as_str().unwrap();
    // The same key and the same (empty) body on cancel is a different request:
    // it must neither replay the create's answer nor run.
    let r = app
        .post_with_key(
            &m.test_key,
            &format!("/v1/payment_intents/{id}/cancel"),
            &key,
            json!({}),
        )
        .await;
    r.assert_error(422, "idempotency_key_reused", None);
    assert!(!r.replayed());
    let r = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    assert_eq!(r.body["status"], "created");
}

#[tokio::test]
async fn a_replay_survives_a_restart() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let key = app.next_key();
    let first = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(10_000))
        .await;
    first.assert_status(201);

    app.restart();
    let again = app
        .post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(10_000))
        .await;
    assert_replay_of(&again, &first);
    app.post_with_key(&m.test_key, "/v1/payment_intents", &key, ngn(20_000))
        .await
        .assert_error(422, "idempotency_key_reused", None);
    assert_eq!(app.all_intents(&m.test_key).await.len(), 1);
}
