//! Settlement: releases on Nigerian business days at 08:00 Lagos, the
//! rolling reserve, brands, and the settlement test helpers.

use serde_json::{json, Value};

use crate::helpers::{spawn_app, TestApp};

async fn advance_to(app: &TestApp, to: &str) {
    app.admin_post("/admin/v1/clock/advance", json!({"to": to}))
        .await
        .assert_status(200);
}

fn net(paid: &Value) -> i64 {
    paid["fees"]["net"].as_i64().unwrap()
}

#[tokio::test]
async fn friday_to_sunday_naira_is_pending_until_monday_08_00_lagos_then_available() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let mut total = 0;
    // Friday, Saturday and Sunday collections (2026-11-27 is a Friday).
    for day in [
        "2026-11-27T12:00:00+01:00",
        "2026-11-28T09:00:00+01:00",
        "2026-11-29T23:59:00+01:00",
    ] {
        advance_to(&app, day).await;
        total += net(&app.paid_intent(&m.test_key, 100000).await);
    }
    advance_to(&app, "2026-11-30T07:59:59+01:00").await;
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, total);
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, 0);
    advance_to(&app, "2026-11-30T08:00:00+01:00").await;
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 0);
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, total);

    let releases = app
        .get(
            &m.test_key,
            "/v1/balance_transactions?type=releases&limit=100",
        )
        .await;
    let lines = releases.body["data"].as_array().unwrap();
    assert_eq!(lines.len(), 6, "two lines per released payment");
    for l in lines {
        assert_eq!(l["type"], "release");
        assert_eq!(l["created_at"], "2026-11-30T07:00:00Z");
    }
    let by_source = |bucket: &str| {
        lines
            .iter()
            .filter(|l| l["bucket"] == bucket)
            .map(|l| l["amount"].as_i64().unwrap())
            .sum::<i64>()
    };
    assert_eq!(by_source("pending"), -total);
    assert_eq!(by_source("available"), total);
}

#[tokio::test]
async fn a_dollar_payment_becomes_available_on_the_seventh_business_day() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    // Wednesday 2 December 2026: T+7 business days is Friday 11 December.
    advance_to(&app, "2026-12-02T12:00:00+01:00").await;
    let paid = app
        .succeeded_intent(&m.test_key, json!({"amount": 10000, "currency": "USD"}))
        .await;
    advance_to(&app, "2026-12-11T07:59:00+01:00").await;
    assert_eq!(app.balance(&m.test_key, "pending", "USD").await, net(&paid));
    advance_to(&app, "2026-12-11T08:00:00+01:00").await;
    assert_eq!(app.balance(&m.test_key, "pending", "USD").await, 0);
    assert_eq!(
        app.balance(&m.test_key, "available", "USD").await,
        net(&paid)
    );
}

#[tokio::test]
async fn nigerian_public_holidays_push_the_release_back() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    // Thursday 25 March 2027; Good Friday 26 and Easter Monday 29 March.
    advance_to(&app, "2027-03-25T15:00:00+01:00").await;
    let paid = app.paid_intent(&m.test_key, 50000).await;
    advance_to(&app, "2027-03-29T10:00:00+01:00").await;
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, net(&paid));
    advance_to(&app, "2027-03-30T08:00:00+01:00").await;
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        net(&paid)
    );
}

#[tokio::test]
async fn a_holidays_file_replaces_the_built_in_calendar() {
    let mut app = spawn_app().await;
    let file = app.dir.path().join("holidays.txt");
    std::fs::write(&file, "# a Monday off\n2026-11-30\n").unwrap();
    app.kill();
    app.start(&["--holidays", file.to_str().unwrap()]);
    let m = app.merchant().await;
    advance_to(&app, "2026-11-27T12:00:00+01:00").await;
    let paid = app.paid_intent(&m.test_key, 50000).await;
    advance_to(&app, "2026-11-30T12:00:00+01:00").await;
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, 0);
    advance_to(&app, "2026-12-01T08:00:00+01:00").await;
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        net(&paid)
    );
}

#[tokio::test]
async fn a_merchant_with_a_longer_delay_waits_that_many_business_days() {
    let app = spawn_app().await;
    let m = app
        .create_merchant(json!({"settlement_delay_days": {"NGN": 3, "USD": 7}}))
        .await;
    // Monday 30 November 2026 -> Thursday 3 December.
    advance_to(&app, "2026-11-30T10:00:00+01:00").await;
    let paid = app.paid_intent(&m.test_key, 50000).await;
    advance_to(&app, "2026-12-03T07:59:00+01:00").await;
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, 0);
    advance_to(&app, "2026-12-03T08:00:00+01:00").await;
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        net(&paid)
    );
}

#[tokio::test]
async fn a_rolling_reserve_holds_its_share_and_releases_it_on_its_date() {
    let app = spawn_app().await;
    let m = app
        .create_merchant(json!({"reserve": {"percent_bps": 1000, "days": 30, "reason": "new_account", "note": "first 90 days"}}))
        .await;
    advance_to(&app, "2026-12-01T10:00:00+01:00").await;
    let paid = app.paid_intent(&m.test_key, 100000).await; // net 98,925
    assert_eq!(net(&paid), 98925);
    assert_eq!(app.balance(&m.test_key, "reserve", "NGN").await, 9893);
    assert_eq!(
        app.balance(&m.test_key, "pending", "NGN").await,
        98925 - 9893
    );

    let r = app.get(&m.test_key, "/v1/reserve").await;
    r.assert_status(200);
    assert_eq!(r.body["object"], "reserve");
    assert_eq!(r.body["livemode"], false);
    assert_eq!(r.body["terms"]["percent_bps"], 1000);
    assert_eq!(r.body["terms"]["days"], 30);
    assert_eq!(r.body["terms"]["reason"], "new_account");
    assert!(r.body["terms"]["reason_text"].as_str().unwrap().len() > 10);
    assert_eq!(r.body["terms"]["note"], "first 90 days");
    assert!(r.body["terms"]["since"].is_string());
    assert_eq!(
        r.body["held"],
        json!([{"currency": "NGN", "amount": 9893, "payments": 1, "next_release_at": "2026-12-31T07:00:00Z"}])
    );
    assert_eq!(
        r.body["releases"],
        json!([{"date": "2026-12-31", "currency": "NGN", "amount": 9893}])
    );

    // Pending goes on 2 December; the reserve stays until 31 December 08:00.
    advance_to(&app, "2026-12-31T07:59:00+01:00").await;
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        98925 - 9893
    );
    assert_eq!(app.balance(&m.test_key, "reserve", "NGN").await, 9893);
    advance_to(&app, "2026-12-31T08:00:00+01:00").await;
    assert_eq!(app.balance(&m.test_key, "reserve", "NGN").await, 0);
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, 98925);
    let r = app.get(&m.test_key, "/v1/reserve").await;
    assert_eq!(r.body["held"], json!([]));

    let plain = app.merchant().await;
    let r = app.get(&plain.test_key, "/v1/reserve").await;
    assert!(r.body["terms"].is_null());
}

#[tokio::test]
async fn release_pending_skips_the_delay_once_and_only_in_test_mode() {
    let app = spawn_app().await;
    let m = app
        .create_merchant(
            json!({"live_approved": true, "reserve": {"percent_bps": 500, "days": 10}}),
        )
        .await;
    let mut total = 0;
    for amount in [10000, 20000, 30000] {
        total += net(&app.paid_intent(&m.test_key, amount).await);
    }
    let reserve = app.balance(&m.test_key, "reserve", "NGN").await;
    let r = app
        .post(
            &m.test_key,
            "/v1/test_helpers/balance/release_pending",
            json!({}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(
        r.body,
        json!({"object": "test_helper_result", "livemode": false, "released": 3})
    );
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 0);
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        total - reserve
    );
    assert_eq!(app.balance(&m.test_key, "reserve", "NGN").await, reserve);
    let again = app
        .post(
            &m.test_key,
            "/v1/test_helpers/balance/release_pending",
            json!({}),
        )
        .await;
    assert_eq!(again.body["released"], 0);
    // The timers find nothing left to release; the reserve goes on its date
    // (08:00 Lagos ten days on, within eleven days).
    app.advance(11 * 86400).await;
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, total);
    assert_eq!(
        app.all_lines(&m.test_key)
            .await
            .iter()
            .filter(|l| l["type"] == "release")
            .count(),
        3 * 2 + 3 * 2
    );
    app.post(
        &m.live_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await
    .assert_error(404, "resource_missing", None);
}

#[tokio::test]
async fn settlements_run_releases_only_what_is_due() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    app.paid_intent(&m.test_key, 10000).await;
    let r = app
        .post(&m.test_key, "/v1/test_helpers/settlements/run", json!({}))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["object"], "test_helper_result");
    assert_eq!(r.body["released"], 0);
    assert_eq!(r.body["payouts"], json!([]));
    assert!(app.balance(&m.test_key, "pending", "NGN").await > 0);
}

#[tokio::test]
async fn a_server_down_at_settlement_time_releases_once_when_it_comes_back() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    advance_to(&app, "2026-11-27T12:00:00+01:00").await;
    let paid = app.paid_intent(&m.test_key, 100000).await;
    assert_eq!(app.terminate(), Some(0));
    // Back on Monday at 10:00, two hours after settlement time.
    app.start(&["--clock-start", "2026-11-30T10:00:00+01:00"]);
    // A zero advance returns after the start-up pass over overdue timers.
    app.advance(0).await;
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        net(&paid)
    );
    app.terminate();
    app.start(&[]);
    app.advance(3 * 86400).await;
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        net(&paid)
    );
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 0);
    let releases = app
        .get(&m.test_key, "/v1/balance_transactions?type=releases")
        .await;
    assert_eq!(releases.body["data"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn each_brand_holds_its_own_money_and_the_business_total_is_their_sum() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let other = app.merchant().await;
    let b = app
        .post(&m.test_key, "/v1/brands", json!({"name": "Ada Kitchen"}))
        .await;
    b.assert_status(201);
    assert_eq!(b.body["object"], "brand");
    assert_eq!(b.body["default"], false);
    assert_eq!(b.body["livemode"], false);
    let brand = b.body["id"].as_str().unwrap().to_string();
    app.post(&m.test_key, "/v1/brands", json!({}))
        .await
        .assert_error(400, "parameter_missing", Some("name"));

    let list = app.get(&m.test_key, "/v1/brands").await;
    let brands = list.body["data"].as_array().unwrap();
    assert_eq!(brands.len(), 2);
    assert_eq!(brands[0]["id"], brand.as_str(), "newest first");
    assert_eq!(brands[1]["default"], true);
    let default_brand = brands[1]["id"].as_str().unwrap().to_string();
    app.get(&m.test_key, &format!("/v1/brands/{brand}"))
        .await
        .assert_status(200);
    app.get(&other.test_key, &format!("/v1/brands/{brand}"))
        .await
        .assert_error(404, "resource_missing", None);
    app.get(&m.live_key, &format!("/v1/brands/{brand}"))
        .await
        .assert_error(404, "resource_missing", None);

    let a = app.paid_intent(&m.test_key, 100000).await; // default brand
    let pi = app
        .create_intent(
            &m.test_key,
            json!({"amount": 50000, "currency": "NGN", "brand": brand}),
        )
        .await;
    assert_eq!(pi["brand"], brand.as_str());
    let paid = app
        .post(
            &m.test_key,
            &format!(
                "/v1/test_helpers/payment_intents/{}/simulate_transfer",
                pi["id"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    let pending = |body: &Value| {
        body["pending"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["currency"] == "NGN")
            .unwrap()["amount"]
            .as_i64()
            .unwrap()
    };
    let of_brand = app
        .get(&m.test_key, &format!("/v1/balance?brand={brand}"))
        .await;
    let of_default = app
        .get(&m.test_key, &format!("/v1/balance?brand={default_brand}"))
        .await;
    let total = app.get(&m.test_key, "/v1/balance").await;
    assert_eq!(pending(&of_brand.body), net(&paid.body));
    assert_eq!(pending(&of_default.body), net(&a));
    assert_eq!(
        pending(&total.body),
        pending(&of_brand.body) + pending(&of_default.body)
    );
    let lines = app
        .get(
            &m.test_key,
            &format!("/v1/balance_transactions?brand={brand}"),
        )
        .await;
    let lines = lines.body["data"].as_array().unwrap();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["brand"], brand.as_str());
    // Another merchant's brand is not yours.
    let r = app
        .post(
            &other.test_key,
            "/v1/payment_intents",
            json!({"amount": 10000, "currency": "NGN", "brand": brand}),
        )
        .await;
    r.assert_error(404, "resource_missing", Some("brand"));
}

#[tokio::test]
async fn a_new_manual_clock_starts_at_clock_start_and_a_stored_one_never_moves_back() {
    // In the past on purpose: a new clock starts exactly there.
    let mut app = crate::helpers::spawn_app_with(&[
        "--clock-start".to_string(),
        "2020-02-03T09:00:00+01:00".to_string(),
    ])
    .await;
    assert_eq!(app.now().await.to_rfc3339(), "2020-02-03T08:00:00+00:00");
    app.advance(60).await;
    app.terminate();
    // Restarted with an earlier start: the stored time stands.
    app.start(&["--clock-start", "2020-01-01T00:00:00Z"]);
    assert_eq!(app.now().await.to_rfc3339(), "2020-02-03T08:01:00+00:00");
}

#[test]
fn a_clock_start_that_is_not_a_date_time_stops_the_start_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = crate::helpers::kobo([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--clock",
        "manual",
        "--clock-start",
        "last friday",
        "--data",
        dir.path().to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--clock-start last friday is not an RFC 3339 date-time"),
        "{stderr}"
    );
}
