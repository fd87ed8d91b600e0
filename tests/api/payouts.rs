//! Payouts: banks, bank accounts (name enquiry), payouts through every
//! sandbox destination, limits, approval, cancel, the quote, automatic
//! settlement, and concurrent payouts against one balance.

use serde_json::{json, Value};

use crate::helpers::{spawn_app, Merchant, TestApp};

/// Puts `net` naira kobo of released money in `available` (returns it).
async fn fund(app: &TestApp, key: &str, amount: i64) -> i64 {
    app.paid_intent(key, amount).await;
    app.post(key, "/v1/test_helpers/balance/release_pending", json!({}))
        .await
        .assert_status(200);
    app.balance(key, "available", "NGN").await
}

async fn account(app: &TestApp, key: &str, number: &str) -> String {
    let r = app
        .post(
            key,
            "/v1/bank_accounts",
            json!({"bank_code": "058", "account_number": number}),
        )
        .await;
    assert!(r.status == 201 || r.status == 200, "{}", r.text);
    r.body["id"].as_str().unwrap().to_string()
}

async fn payout(app: &TestApp, m: &Merchant, amount: i64, account: &str) -> crate::helpers::Resp {
    app.post(
        &m.test_key,
        "/v1/payouts",
        json!({"amount": amount, "currency": "NGN", "bank_account_id": account}),
    )
    .await
}

async fn get_payout(app: &TestApp, key: &str, id: &str) -> Value {
    let r = app.get(key, &format!("/v1/payouts/{id}")).await;
    r.assert_status(200);
    r.body
}

#[tokio::test]
async fn banks_are_listed_with_their_cbn_codes() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let r = app.get(&m.test_key, "/v1/banks").await;
    r.assert_status(200);
    let banks = r.body["data"].as_array().unwrap();
    for (code, name) in [
        ("044", "Access"),
        ("058", "Guaranty"),
        ("057", "Zenith"),
        ("011", "First Bank"),
        ("033", "United Bank"),
        ("035", "Wema"),
        ("232", "Sterling"),
        ("070", "Fidelity"),
        ("214", "First City"),
        ("221", "Stanbic"),
    ] {
        assert!(
            banks
                .iter()
                .any(|b| b["code"] == code && b["name"].as_str().unwrap().contains(name)),
            "{code}"
        );
    }
    assert!(
        banks.iter().any(|b| b["code"].as_str().unwrap().len() == 6),
        "microfinance banks"
    );
}

#[tokio::test]
async fn a_bank_account_is_saved_after_name_enquiry_and_adding_it_again_returns_it() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let r = app
        .post(
            &m.test_key,
            "/v1/bank_accounts",
            json!({"bank_code": "058", "account_number": "0123456789"}),
        )
        .await;
    r.assert_status(201);
    assert_eq!(r.body["object"], "bank_account");
    assert_eq!(r.body["account_name"], "SANDBOX ACCOUNT 6789");
    assert_eq!(r.body["bank_name"], "Guaranty Trust Bank");
    assert_eq!(r.body["livemode"], false);
    let again = app
        .post(
            &m.test_key,
            "/v1/bank_accounts",
            json!({"bank_code": "058", "account_number": "0123456789"}),
        )
        .await;
    again.assert_status(200);
    assert_eq!(again.body["id"], r.body["id"]);
    app.post(
        &m.test_key,
        "/v1/bank_accounts",
        json!({"bank_code": "058", "account_number": "1234560000"}),
    )
    .await
    .assert_error(400, "account_verification_failed", Some("account_number"));
    for (body, param) in [
        (
            json!({"bank_code": "058", "account_number": "123456789"}),
            "account_number",
        ),
        (
            json!({"bank_code": "058", "account_number": "12345678901"}),
            "account_number",
        ),
        (
            json!({"bank_code": "058", "account_number": "12345abcde"}),
            "account_number",
        ),
        (
            json!({"bank_code": "999", "account_number": "0123456789"}),
            "bank_code",
        ),
    ] {
        let r = app.post(&m.test_key, "/v1/bank_accounts", body).await;
        assert_eq!(r.status, 400, "{}", r.text);
        assert_eq!(r.param(), Some(param));
    }
    let list = app.get(&m.test_key, "/v1/bank_accounts").await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 1);
    let live = app.get(&m.live_key, "/v1/bank_accounts").await;
    assert_eq!(live.body["data"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn a_payout_moves_money_to_in_flight_then_is_paid_at_the_first_status_query() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let available = fund(&app, &m.test_key, 1_000_000).await;
    let acct = account(&app, &m.test_key, "0123456789").await;
    let r = payout(&app, &m, 100_000, &acct).await;
    r.assert_status(201);
    assert_eq!(r.body["object"], "payout");
    assert_eq!(r.body["status"], "queued");
    assert_eq!(r.body["fee"], 1_000);
    assert_eq!(r.body["vat"], 75);
    let id = r.body["id"].as_str().unwrap().to_string();
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        available - 101_075
    );
    assert_eq!(
        app.balance(&m.test_key, "payout_in_flight", "NGN").await,
        101_075
    );
    app.advance(0).await;
    assert_eq!(
        get_payout(&app, &m.test_key, &id).await["status"],
        "processing"
    );
    app.advance(59).await;
    assert_eq!(
        get_payout(&app, &m.test_key, &id).await["status"],
        "processing"
    );
    app.advance(1).await;
    let paid = get_payout(&app, &m.test_key, &id).await;
    assert_eq!(paid["status"], "paid");
    assert!(paid["paid_at"].is_string());
    assert_eq!(app.balance(&m.test_key, "payout_in_flight", "NGN").await, 0);
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        available - 101_075
    );
    let lines = app
        .get(&m.test_key, "/v1/balance_transactions?type=payouts")
        .await;
    assert_eq!(lines.body["data"].as_array().unwrap().len(), 3);
    let list = app.get(&m.test_key, "/v1/payouts").await;
    assert_eq!(list.body["data"][0]["id"], id.as_str());
}

#[tokio::test]
async fn sandbox_destinations_fail_reject_or_stay_processing_and_failures_return_the_money() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let available = fund(&app, &m.test_key, 2_000_000).await;
    let fails = account(&app, &m.test_key, "1111119999").await;
    let rejected = account(&app, &m.test_key, "1111117777").await;
    let stays = account(&app, &m.test_key, "1111118888").await;
    let a = payout(&app, &m, 50_000, &fails).await.body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = payout(&app, &m, 50_000, &rejected).await.body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let c = payout(&app, &m, 50_000, &stays).await.body["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.advance(0).await;
    assert_eq!(
        get_payout(&app, &m.test_key, &a).await["status"],
        "processing"
    );
    let rb = get_payout(&app, &m.test_key, &b).await;
    assert_eq!(rb["status"], "failed");
    assert_eq!(rb["failure_code"], "provider_rejected");
    app.advance(3600).await;
    let ra = get_payout(&app, &m.test_key, &a).await;
    assert_eq!(ra["status"], "failed");
    assert_eq!(ra["failure_code"], "transfer_failed");
    assert_eq!(
        get_payout(&app, &m.test_key, &c).await["status"],
        "processing"
    );
    // Only the processing one is still held.
    assert_eq!(
        app.balance(&m.test_key, "payout_in_flight", "NGN").await,
        51_075
    );
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        available - 51_075
    );
}

#[tokio::test]
async fn a_payout_larger_than_the_balance_is_refused_and_writes_nothing() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let available = fund(&app, &m.test_key, 100_000).await;
    let acct = account(&app, &m.test_key, "0123456789").await;
    // amount + fee + VAT must fit: one kobo too many.
    let r = payout(&app, &m, available - 1_075 + 1, &acct).await;
    r.assert_error(409, "insufficient_funds", None);
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        available
    );
    assert!(app.get(&m.test_key, "/v1/payouts").await.body["data"]
        .as_array()
        .unwrap()
        .is_empty());
    payout(&app, &m, available - 1_075, &acct)
        .await
        .assert_status(201);
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, 0);
}

#[tokio::test]
async fn bad_payout_requests_are_refused_with_their_param() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let other = app.merchant().await;
    let acct = account(&app, &other.test_key, "0123456789").await;
    for (body, status, param) in [
        (
            json!({"currency": "NGN", "bank_account_id": acct}),
            400,
            "amount",
        ),
        (
            json!({"amount": 99, "currency": "NGN", "bank_account_id": acct}),
            400,
            "amount",
        ),
        (
            json!({"amount": 1000, "currency": "USD", "bank_account_id": acct}),
            400,
            "currency",
        ),
        (
            json!({"amount": 1000, "currency": "NGN"}),
            400,
            "bank_account_id",
        ),
        (
            json!({"amount": 1000, "currency": "NGN", "bank_account_id": "x"}),
            400,
            "bank_account_id",
        ),
        (
            json!({"amount": 1000, "currency": "NGN", "bank_account_id": acct, "x": 1}),
            400,
            "x",
        ),
        // another merchant's account is not found
        (
            json!({"amount": 1000, "currency": "NGN", "bank_account_id": acct}),
            404,
            "bank_account_id",
        ),
    ] {
        let r = app.post(&m.test_key, "/v1/payouts", body).await;
        assert_eq!(r.status, status, "{}", r.text);
        assert_eq!(r.param(), Some(param), "{}", r.text);
    }
}

#[tokio::test]
async fn payout_limits_hold_exactly_at_the_edge_and_failed_payouts_stop_counting() {
    let app = spawn_app().await;
    let m = app
        .create_merchant(json!({"payout_limits": {"per_payout": 100_000, "daily": 250_000}}))
        .await;
    fund(&app, &m.test_key, 1_000_000).await;
    let ok = account(&app, &m.test_key, "0123456789").await;
    let fails = account(&app, &m.test_key, "1111119999").await;
    payout(&app, &m, 100_001, &ok)
        .await
        .assert_error(409, "payout_limit_exceeded", None);
    payout(&app, &m, 100_000, &ok).await.assert_status(201);
    payout(&app, &m, 100_000, &fails).await.assert_status(201);
    payout(&app, &m, 50_000, &ok).await.assert_status(201); // exactly 250,000 today
    payout(&app, &m, 1_000, &ok)
        .await
        .assert_error(409, "payout_limit_exceeded", None);
    let q = app.get(&m.test_key, "/v1/payouts/quote?amount=1000").await;
    assert_eq!(q.body["limits"]["used_today"], 250_000);
    assert_eq!(q.body["limits"]["custom"], true);
    assert_eq!(q.body["within_limits"], false);
    assert_eq!(q.body["max_amount"], 0);
    assert_eq!(q.body["max_reason"], "daily");
    // The failing one fails at its first status query; its amount is freed.
    app.advance(60).await;
    payout(&app, &m, 100_000, &ok).await.assert_status(201);
    payout(&app, &m, 1, &ok).await.assert_status(400);
}

#[tokio::test]
async fn the_starter_tier_allows_exactly_one_million_naira_per_payout() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    fund(&app, &m.test_key, 300_000_000).await;
    let ok = account(&app, &m.test_key, "0123456789").await;
    payout(&app, &m, 100_000_001, &ok)
        .await
        .assert_error(409, "payout_limit_exceeded", None);
    payout(&app, &m, 100_000_000, &ok).await.assert_status(201);
}

#[tokio::test]
async fn payouts_at_the_threshold_wait_for_approval_and_can_be_approved_rejected_or_canceled() {
    let app = spawn_app().await;
    let m = app
        .create_merchant(json!({"payout_approval_threshold": 50_000}))
        .await;
    let available = fund(&app, &m.test_key, 1_000_000).await;
    let acct = account(&app, &m.test_key, "0123456789").await;
    let small = payout(&app, &m, 49_999, &acct).await;
    assert_eq!(small.body["status"], "queued");
    let a = payout(&app, &m, 50_000, &acct).await;
    assert_eq!(a.body["status"], "awaiting_approval");
    let b = payout(&app, &m, 60_000, &acct).await;
    let c = payout(&app, &m, 70_000, &acct).await;
    let (a, b, c) = (
        a.body["id"].as_str().unwrap(),
        b.body["id"].as_str().unwrap(),
        c.body["id"].as_str().unwrap(),
    );
    // Held money already left available.
    let held = 49_999 + 50_000 + 60_000 + 70_000 + 4 * 1_075;
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        available - held
    );
    app.advance(600).await;
    assert_eq!(
        get_payout(&app, &m.test_key, a).await["status"],
        "awaiting_approval"
    );

    let r = app
        .admin_post(&format!("/admin/v1/payouts/{a}/approve"), json!({}))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "queued");
    let r = app
        .admin_post(&format!("/admin/v1/payouts/{b}/reject"), json!({}))
        .await;
    assert_eq!(r.body["status"], "canceled");
    let r = app
        .post(&m.test_key, &format!("/v1/payouts/{c}/cancel"), json!({}))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "canceled");
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        available - 49_999 - 50_000 - 2 * 1_075
    );
    app.admin_post(&format!("/admin/v1/payouts/{a}/approve"), json!({}))
        .await
        .assert_error(409, "payout_unexpected_state", None);
    app.advance(0).await;
    assert_eq!(
        get_payout(&app, &m.test_key, a).await["status"],
        "processing"
    );
    app.post(&m.test_key, &format!("/v1/payouts/{a}/cancel"), json!({}))
        .await
        .assert_error(409, "payout_unexpected_state", None);
    app.send(
        reqwest::Method::POST,
        &format!("/admin/v1/payouts/{a}/approve"),
        Some(&m.test_key),
        None,
        Some(&json!({})),
    )
    .await
    .assert_status(401);
}

#[tokio::test]
async fn the_quote_matches_hand_computed_fees_and_the_largest_payable_amount() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let available = fund(&app, &m.test_key, 1_000_000).await; // 989,250 after the 1% + VAT fee
    assert_eq!(available, 1_000_000 - 10_000 - 750);
    let q = app
        .get(&m.test_key, "/v1/payouts/quote?amount=500000&currency=NGN")
        .await;
    q.assert_status(200);
    assert_eq!(q.body["object"], "payout_quote");
    assert_eq!(q.body["fee"], 1_000);
    assert_eq!(q.body["vat"], 75);
    assert_eq!(q.body["total_debited"], 501_075);
    assert_eq!(q.body["available"], available);
    assert_eq!(q.body["sufficient"], true);
    assert_eq!(q.body["within_limits"], true);
    // 989,250 - ₦25 - ₦1.88 VAT = 986,562
    assert_eq!(q.body["max_amount"], 986_562);
    assert_eq!(q.body["max_reason"], "balance");
    assert_eq!(
        q.body["limits"],
        json!({"tier": "starter", "custom": false, "per_payout": 100_000_000, "daily": 500_000_000, "used_today": 0})
    );
    let q = app
        .get(&m.test_key, "/v1/payouts/quote?amount=500001")
        .await;
    assert_eq!(
        (q.body["fee"].as_i64(), q.body["vat"].as_i64()),
        (Some(2_500), Some(188))
    );
    let q = app
        .get(&m.test_key, "/v1/payouts/quote?amount=5000001")
        .await;
    assert_eq!(
        (q.body["fee"].as_i64(), q.body["vat"].as_i64()),
        (Some(5_000), Some(375))
    );
    assert_eq!(q.body["sufficient"], false);
    // The quote reserves nothing.
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        available
    );
    app.get(&m.test_key, "/v1/payouts/quote")
        .await
        .assert_error(400, "parameter_missing", Some("amount"));
    app.get(&m.test_key, "/v1/payouts/quote?amount=0")
        .await
        .assert_error(400, "parameter_invalid", Some("amount"));
    app.get(&m.test_key, "/v1/payouts/quote?amount=10&currency=USD")
        .await
        .assert_error(400, "parameter_invalid", Some("currency"));
}

#[tokio::test]
async fn automatic_settlement_pays_what_is_available_once_each_business_morning() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let acct = account(&app, &m.test_key, "0123456789").await;
    app.admin_post(
        &format!("/admin/v1/merchants/{}", m.id),
        json!({"settings": {"auto_settlement": {"enabled": true, "bank_account_id": acct, "minimum": 10_000}}}),
    )
    .await
    .assert_status(200);
    // Friday 27 November 2026 noon: collect; Monday 08:00 releases then settles.
    app.admin_post(
        "/admin/v1/clock/advance",
        json!({"to": "2026-11-27T12:00:00+01:00"}),
    )
    .await
    .assert_status(200);
    let paid = app.paid_intent(&m.test_key, 1_000_000).await;
    let net = paid["fees"]["net"].as_i64().unwrap();
    app.admin_post(
        "/admin/v1/clock/advance",
        json!({"to": "2026-11-30T08:00:00+01:00"}),
    )
    .await
    .assert_status(200);
    let list = app.get(&m.test_key, "/v1/payouts").await;
    let payouts = list.body["data"].as_array().unwrap();
    assert_eq!(payouts.len(), 1, "{}", list.text);
    let p = &payouts[0];
    assert_eq!(p["automatic"], true);
    assert_eq!(p["bank_account"], acct.as_str());
    assert_eq!(
        p["amount"].as_i64().unwrap() + p["fee"].as_i64().unwrap() + p["vat"].as_i64().unwrap(),
        net
    );
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, 0);
    // Running settlement again that morning finds nothing more to pay.
    let r = app
        .post(&m.test_key, "/v1/test_helpers/settlements/run", json!({}))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["payouts"], json!([]));
    // Below the minimum: nothing is paid.
    app.paid_intent(&m.test_key, 5_000).await;
    app.post(
        &m.test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await;
    let r = app
        .post(&m.test_key, "/v1/test_helpers/settlements/run", json!({}))
        .await;
    assert_eq!(r.body["payouts"], json!([]));
    // settlements/run creates and returns payouts when there is enough.
    app.paid_intent(&m.test_key, 50_000).await;
    app.post(
        &m.test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await;
    let r = app
        .post(&m.test_key, "/v1/test_helpers/settlements/run", json!({}))
        .await;
    assert_eq!(r.body["payouts"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_payouts_never_spend_more_than_the_balance() {
    let app = spawn_app().await;
    let m = app
        .create_merchant(json!({"payout_tier": "enterprise"}))
        .await;
    let available = fund(&app, &m.test_key, 2_000_000).await;
    let acct = account(&app, &m.test_key, "0123456789").await;
    let each = 100_000; // 101,075 with fee: about 19 fit
    let requests = (0..50).map(|_| payout(&app, &m, each, &acct));
    let results = futures_util::future::join_all(requests).await;
    let mut accepted = 0;
    for r in &results {
        match r.status {
            201 => accepted += 1,
            409 => assert_eq!(r.code(), "insufficient_funds"),
            s => panic!("unexpected {s}: {}", r.text),
        }
    }
    assert_eq!(accepted, available / 101_075);
    let left = app.balance(&m.test_key, "available", "NGN").await;
    assert_eq!(left, available - accepted * 101_075);
    assert!(left >= 0);
    let lines = app.all_lines(&m.test_key).await;
    let sum = |bucket: &str| {
        lines
            .iter()
            .filter(|l| l["bucket"] == bucket)
            .map(|l| l["amount"].as_i64().unwrap())
            .sum::<i64>()
    };
    assert_eq!(sum("available"), left);
    assert_eq!(sum("payout_in_flight"), accepted * 101_075);
    assert_eq!(
        app.balance(&m.test_key, "payout_in_flight", "NGN").await,
        accepted * 101_075
    );
}
