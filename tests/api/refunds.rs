//! Refunds and disputes, with the buckets checked after each step.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{spawn_app, TestApp};

/// Waits (on real time: the sandbox confirms refunds asynchronously) until
/// the refund leaves `pending`.
async fn settled_refund(app: &TestApp, key: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = app.get(key, &format!("/v1/refunds/{id}")).await;
        r.assert_status(200);
        if r.body["status"] != "pending" {
            return r.body;
        }
        assert!(Instant::now() < deadline, "refund {id} was never confirmed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn refund(app: &TestApp, key: &str, pi: &str, amount: Option<i64>) -> crate::helpers::Resp {
    let mut body = json!({"payment_intent": pi});
    if let Some(a) = amount {
        body["amount"] = json!(a);
    }
    app.post(key, "/v1/refunds", body).await
}

#[tokio::test]
async fn a_partial_refund_then_the_rest_and_nothing_more() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 100_000).await; // net 98,925 in pending
    let pi = paid["id"].as_str().unwrap();
    let r = refund(&app, &m.test_key, pi, Some(30_000)).await;
    r.assert_status(201);
    assert_eq!(r.body["object"], "refund");
    assert_eq!(r.body["status"], "pending");
    assert_eq!(r.body["amount"], 30_000);
    assert_eq!(r.body["payment_intent"], pi);
    assert_eq!(
        app.balance(&m.test_key, "pending", "NGN").await,
        98_925 - 30_000
    );
    assert_eq!(
        app.balance(&m.test_key, "refund_in_flight", "NGN").await,
        30_000
    );
    let done = settled_refund(&app, &m.test_key, r.body["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded");
    assert_eq!(app.balance(&m.test_key, "refund_in_flight", "NGN").await, 0);

    // What is left of the amount (70,000) is more than what is pending
    // (68,925): the fee is not returned, so the rest comes from available.
    app.paid_intent(&m.test_key, 10_000).await;
    app.post(
        &m.test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await;
    let available = app.balance(&m.test_key, "available", "NGN").await;
    let rest = refund(&app, &m.test_key, pi, None).await;
    rest.assert_status(201);
    assert_eq!(rest.body["amount"], 70_000);
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        available - 70_000
    );
    settled_refund(&app, &m.test_key, rest.body["id"].as_str().unwrap()).await;
    refund(&app, &m.test_key, pi, Some(1)).await.assert_error(
        400,
        "amount_too_large",
        Some("amount"),
    );
    refund(&app, &m.test_key, pi, None)
        .await
        .assert_error(400, "amount_too_large", Some("amount"));
    let list = app
        .get(&m.test_key, &format!("/v1/refunds?payment_intent={pi}"))
        .await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 2);
    assert_eq!(list.body["data"][0]["id"], rest.body["id"], "newest first");
}

#[tokio::test]
async fn refunding_more_than_is_left_or_an_unpaid_payment_is_refused() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 50_000).await;
    let pi = paid["id"].as_str().unwrap();
    refund(&app, &m.test_key, pi, Some(50_001))
        .await
        .assert_error(400, "amount_too_large", Some("amount"));
    let unpaid = app
        .create_intent(&m.test_key, json!({"amount": 10_000, "currency": "NGN"}))
        .await;
    refund(&app, &m.test_key, unpaid["id"].as_str().unwrap(), None)
        .await
        .assert_error(409, "payment_not_refundable", None);
    refund(&app, &m.test_key, &uuid::Uuid::new_v4().to_string(), None)
        .await
        .assert_error(404, "resource_missing", Some("payment_intent"));
    app.post(&m.test_key, "/v1/refunds", json!({"amount": 5}))
        .await
        .assert_error(400, "parameter_missing", Some("payment_intent"));
    app.post(
        &m.test_key,
        "/v1/refunds",
        json!({"payment_intent": pi, "amount": 0}),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("amount"));
    assert!(app.get(&m.test_key, "/v1/refunds").await.body["data"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn sandbox_refunds_ending_13_fail_and_return_the_money_and_ending_17_stay_pending() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    // Released money of an earlier payment covers the fee part of a full refund.
    app.paid_intent(&m.test_key, 50_000).await;
    app.post(
        &m.test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await;
    let paid = app.paid_intent(&m.test_key, 100_000).await;
    let pi = paid["id"].as_str().unwrap();
    let pending = app.balance(&m.test_key, "pending", "NGN").await;
    let fails = refund(&app, &m.test_key, pi, Some(1_013)).await;
    let stays = refund(&app, &m.test_key, pi, Some(1_017)).await;
    let ok = refund(&app, &m.test_key, pi, Some(1_000)).await;
    let failed = settled_refund(&app, &m.test_key, fails.body["id"].as_str().unwrap()).await;
    assert_eq!(failed["status"], "failed");
    assert!(failed["failure_reason"].is_string());
    // Confirmations come in order of request; the one after it has arrived.
    settled_refund(&app, &m.test_key, ok.body["id"].as_str().unwrap()).await;
    let still = app
        .get(
            &m.test_key,
            &format!("/v1/refunds/{}", stays.body["id"].as_str().unwrap()),
        )
        .await;
    assert_eq!(still.body["status"], "pending");
    assert_eq!(
        app.balance(&m.test_key, "refund_in_flight", "NGN").await,
        1_017
    );
    // The failed one's money is back in pending (its release is still ahead).
    assert_eq!(
        app.balance(&m.test_key, "pending", "NGN").await,
        pending - 1_017 - 1_000
    );
    // A failed refund does not count: the rest is refundable.
    let rest = refund(&app, &m.test_key, pi, None).await;
    rest.assert_status(201);
    assert_eq!(rest.body["amount"], 100_000 - 1_017 - 1_000);
}

#[tokio::test]
async fn a_refund_of_a_released_payment_comes_out_of_available() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 100_000).await;
    app.post(
        &m.test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await;
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, 98_925);
    let r = refund(
        &app,
        &m.test_key,
        paid["id"].as_str().unwrap(),
        Some(20_000),
    )
    .await;
    r.assert_status(201);
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, 78_925);
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 0);
    settled_refund(&app, &m.test_key, r.body["id"].as_str().unwrap()).await;
    let lines = app
        .get(&m.test_key, "/v1/balance_transactions?type=refunds")
        .await;
    assert_eq!(lines.body["data"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn a_refund_from_pending_shrinks_the_release_so_nothing_is_released_twice() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 100_000).await;
    let r = refund(
        &app,
        &m.test_key,
        paid["id"].as_str().unwrap(),
        Some(40_000),
    )
    .await;
    settled_refund(&app, &m.test_key, r.body["id"].as_str().unwrap()).await;
    app.advance(5 * 86400).await;
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 0);
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        98_925 - 40_000
    );
}

#[tokio::test]
async fn a_dispute_holds_money_and_winning_it_gives_the_money_back() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 100_000).await;
    app.post(
        &m.test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await;
    let pi = paid["id"].as_str().unwrap();
    let d = app
        .post(
            &m.test_key,
            &format!("/v1/test_helpers/payment_intents/{pi}/dispute"),
            json!({"amount": 60_000, "reason": "fraudulent"}),
        )
        .await;
    d.assert_status(200);
    assert_eq!(d.body["object"], "dispute");
    assert_eq!(d.body["status"], "open");
    assert!(d.body["respond_by"].is_string());
    let id = d.body["id"].as_str().unwrap();
    assert_eq!(
        app.balance(&m.test_key, "dispute_hold", "NGN").await,
        60_000
    );
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, 38_925);
    // No refunds while the dispute is open.
    refund(&app, &m.test_key, pi, Some(1))
        .await
        .assert_error(409, "payment_disputed", None);
    let e = app
        .post(
            &m.test_key,
            &format!("/v1/disputes/{id}/evidence"),
            json!({"text": "delivered on 2 Dec, signed"}),
        )
        .await;
    e.assert_status(200);
    assert_eq!(e.body["evidence"]["text"], "delivered on 2 Dec, signed");
    let won = app
        .post(
            &m.test_key,
            &format!("/v1/test_helpers/disputes/{id}/resolve"),
            json!({"outcome": "won"}),
        )
        .await;
    won.assert_status(200);
    assert_eq!(won.body["status"], "won");
    assert_eq!(app.balance(&m.test_key, "dispute_hold", "NGN").await, 0);
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, 98_925);
    app.post(
        &m.test_key,
        &format!("/v1/test_helpers/disputes/{id}/resolve"),
        json!({"outcome": "lost"}),
    )
    .await
    .assert_error(409, "dispute_not_open", None);
    // Refunds work again, of the whole amount.
    assert_eq!(refund(&app, &m.test_key, pi, Some(1_000)).await.status, 201);
    let list = app.get(&m.test_key, "/v1/disputes").await;
    assert_eq!(list.body["data"][0]["id"], id);
    let lines = app
        .get(&m.test_key, "/v1/balance_transactions?type=disputes")
        .await;
    assert_eq!(lines.body["data"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn a_lost_dispute_takes_the_money_and_limits_a_later_refund() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    app.paid_intent(&m.test_key, 50_000).await;
    app.post(
        &m.test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await;
    let paid = app.paid_intent(&m.test_key, 100_000).await;
    let pi = paid["id"].as_str().unwrap();
    // Unreleased: the hold comes from pending.
    let d = app
        .post(
            &m.test_key,
            &format!("/v1/test_helpers/payment_intents/{pi}/dispute"),
            json!({"amount": 30_000}),
        )
        .await;
    assert_eq!(
        app.balance(&m.test_key, "pending", "NGN").await,
        98_925 - 30_000
    );
    assert_eq!(
        app.balance(&m.test_key, "dispute_hold", "NGN").await,
        30_000
    );
    let id = d.body["id"].as_str().unwrap();
    let lost = app
        .post(
            &m.test_key,
            &format!("/v1/test_helpers/disputes/{id}/resolve"),
            json!({"outcome": "lost"}),
        )
        .await;
    assert_eq!(lost.body["status"], "lost");
    assert_eq!(app.balance(&m.test_key, "dispute_hold", "NGN").await, 0);
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 68_925);
    refund(&app, &m.test_key, pi, Some(70_001))
        .await
        .assert_error(400, "amount_too_large", Some("amount"));
    let r = refund(&app, &m.test_key, pi, None).await;
    r.assert_status(201);
    assert_eq!(r.body["amount"], 70_000);
    // The release moves only what is left in pending.
    settled_refund(&app, &m.test_key, r.body["id"].as_str().unwrap()).await;
    app.advance(5 * 86400).await;
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 0);
}

#[tokio::test]
async fn evidence_after_respond_by_is_refused() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 10_000).await;
    let d = app
        .post(
            &m.test_key,
            &format!(
                "/v1/test_helpers/payment_intents/{}/dispute",
                paid["id"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    assert_eq!(d.body["amount"], 10_000);
    app.advance(7 * 86400).await;
    app.post(
        &m.test_key,
        &format!("/v1/disputes/{}/evidence", d.body["id"].as_str().unwrap()),
        json!({"text": "late"}),
    )
    .await
    .assert_error(409, "dispute_response_late", None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_refunds_never_exceed_the_payment() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 100_000).await;
    app.paid_intent(&m.test_key, 1_000_000).await;
    app.post(
        &m.test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await;
    let pi = paid["id"].as_str().unwrap().to_string();
    let results = futures_util::future::join_all(
        (0..20).map(|_| refund(&app, &m.test_key, &pi, Some(15_000))),
    )
    .await;
    let mut accepted = 0;
    for r in &results {
        match r.status {
            201 => accepted += r.body["amount"].as_i64().unwrap(),
            400 => assert_eq!(r.code(), "amount_too_large"),
            s => panic!("unexpected {s}: {}", r.text),
        }
    }
    assert_eq!(accepted, 90_000, "six refunds of 15,000 fit in 100,000");
    let list = app
        .get(
            &m.test_key,
            &format!("/v1/refunds?payment_intent={pi}&limit=100"),
        )
        .await;
    let total: i64 = list.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["amount"].as_i64().unwrap())
        .sum();
    assert_eq!(total, 90_000);
}

#[tokio::test]
async fn a_full_refund_needs_the_fee_part_from_available_since_fees_are_not_returned() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 100_000).await; // 98,925 pending, 0 available
    let pi = paid["id"].as_str().unwrap();
    refund(&app, &m.test_key, pi, None)
        .await
        .assert_error(409, "insufficient_funds", None);
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 98_925);
    assert_eq!(app.balance(&m.test_key, "refund_in_flight", "NGN").await, 0);
    // Up to what is pending works.
    refund(&app, &m.test_key, pi, Some(98_925))
        .await
        .assert_status(201);
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 0);
}
