//! USDT: operator wallets, the settings view, the fee and VAT arithmetic,
//! paid and failed crypto payouts with the buckets checked (the sandbox
//! partner confirms asynchronously: tests poll with a deadline), the
//! one-time code, strict bodies, restarts, and dollar settlement to the
//! settlement wallet with the manual clock.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use kobo_actors::calendar::Calendar;

use crate::helpers::{fund_dollars, spawn_app, Merchant, Resp, TestApp};

/// A well-formed TRC20 address ending in `tail` (base58 characters).
pub fn trc20(tail: &str) -> String {
    format!("T{}{tail}", "Q".repeat(33 - tail.len()))
}

/// A well-formed ERC20 address ending in `tail` (hex digits).
pub fn erc20(tail: &str) -> String {
    format!("0x{}{tail}", "a".repeat(40 - tail.len()))
}

pub async fn add_wallet(app: &TestApp, merchant: &str, body: Value) -> Resp {
    app.admin_post(
        &format!("/admin/v1/merchants/{merchant}/usdt_wallets"),
        body,
    )
    .await
}

pub async fn wallet(app: &TestApp, m: &Merchant, address: &str) -> String {
    let r = add_wallet(app, &m.id, json!({"address": address, "network": "TRC20"})).await;
    assert!(r.status == 201 || r.status == 200, "{}", r.text);
    r.body["id"].as_str().unwrap().to_string()
}

/// A merchant with USDT enabled at `fee_bps`.
pub async fn usdt_merchant(app: &TestApp, fee_bps: i64) -> Merchant {
    app.create_merchant(json!({"usdt": {"enabled": true, "fee_bps": fee_bps}}))
        .await
}

pub async fn send_usdt(app: &TestApp, key: &str, usd: i64, wallet: &str) -> Resp {
    app.post(
        key,
        "/v1/usdt/payouts",
        json!({"usd_amount": usd, "wallet": wallet, "otp": "123456"}),
    )
    .await
}

/// Polls the crypto payout until it is final; the sandbox confirms within
/// 2 real seconds (the deadline leaves room for a loaded machine). Answers
/// the payout and how long the confirmation took.
pub async fn settled(app: &TestApp, key: &str, id: &str) -> (Value, Duration) {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(10);
    loop {
        let r = app.get(key, &format!("/v1/usdt/payouts/{id}")).await;
        r.assert_status(200);
        let status = r.body["status"].as_str().unwrap();
        if status == "paid" || status == "failed" {
            return (r.body, start.elapsed());
        }
        assert!(
            Instant::now() < deadline,
            "crypto payout {id} still {status} after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn the_operator_adds_and_clears_wallets_and_get_usdt_shows_them() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let r = app.get(&m.test_key, "/v1/usdt").await;
    r.assert_status(200);
    assert_eq!(r.body["object"], "usdt");
    assert_eq!(r.body["enabled"], false);
    assert_eq!(r.body["settle_wallet"], Value::Null);
    assert_eq!(r.body["wallets"], json!([]));
    assert_eq!(
        r.body["settings"],
        json!({"enabled": false, "settle_wallet": null, "fee_bps": 0})
    );

    let tron = trc20("Ab1");
    let r = add_wallet(
        &app,
        &m.id,
        json!({"address": tron, "network": "TRC20", "label": "Treasury"}),
    )
    .await;
    r.assert_status(201);
    assert_eq!(r.body["object"], "usdt_wallet");
    assert_eq!(r.body["network"], "TRC20");
    assert_eq!(r.body["address"], tron.as_str());
    assert_eq!(r.body["label"], "Treasury");
    assert_eq!(r.body["livemode"], false);
    let tron_id = r.body["id"].as_str().unwrap().to_string();
    // The same wallet again is the same wallet.
    let again = add_wallet(&app, &m.id, json!({"address": tron, "network": "TRC20"})).await;
    again.assert_status(200);
    assert_eq!(again.body["id"], tron_id.as_str());
    // ERC20 hex is case-insensitive.
    let eth = add_wallet(
        &app,
        &m.id,
        json!({"address": erc20("BEEF"), "network": "ERC20"}),
    )
    .await;
    eth.assert_status(201);
    let eth_again = add_wallet(
        &app,
        &m.id,
        json!({"address": erc20("beef"), "network": "ERC20"}),
    )
    .await;
    eth_again.assert_status(200);
    assert_eq!(eth_again.body["id"], eth.body["id"]);
    // A live wallet is seen only in live mode.
    let live = add_wallet(
        &app,
        &m.id,
        json!({"address": trc20("Live"), "network": "TRC20", "mode": "live"}),
    )
    .await;
    live.assert_status(201);
    assert_eq!(live.body["livemode"], true);

    app.admin_post(
        &format!("/admin/v1/merchants/{}", m.id),
        json!({"settings": {"usdt": {"enabled": true, "settle_wallet": tron_id, "fee_bps": 75}}}),
    )
    .await
    .assert_status(200);
    let r = app.get(&m.test_key, "/v1/usdt").await;
    assert_eq!(r.body["enabled"], true);
    assert_eq!(r.body["settle_wallet"], tron_id.as_str());
    assert_eq!(r.body["settings"]["fee_bps"], 75);
    let wallets = r.body["wallets"].as_array().unwrap();
    assert_eq!(wallets.len(), 2);
    assert_eq!(wallets[0]["id"], eth.body["id"], "newest first");
    let r = app.get(&m.live_key, "/v1/usdt").await;
    assert_eq!(r.body["livemode"], true);
    assert_eq!(r.body["wallets"].as_array().unwrap().len(), 1);
    // The settle wallet is a test wallet: not this mode's.
    assert_eq!(r.body["settle_wallet"], Value::Null);

    let del = app
        .send(
            reqwest::Method::DELETE,
            &format!("/admin/v1/merchants/{}/usdt_wallets/{tron_id}", m.id),
            Some(&app.admin_token.clone()),
            None,
            None,
        )
        .await;
    del.assert_status(200);
    assert_eq!(del.body["deleted"], true);
    assert_eq!(del.body["id"], tron_id.as_str());
    let del = app
        .send(
            reqwest::Method::DELETE,
            &format!("/admin/v1/merchants/{}/usdt_wallets/{tron_id}", m.id),
            Some(&app.admin_token.clone()),
            None,
            None,
        )
        .await;
    del.assert_error(404, "resource_missing", None);
    let r = app.get(&m.test_key, "/v1/usdt").await;
    assert_eq!(r.body["wallets"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["settle_wallet"], Value::Null);
    // Cleared, it can be added again (a new wallet).
    let back = add_wallet(&app, &m.id, json!({"address": tron, "network": "TRC20"})).await;
    back.assert_status(201);
    assert_ne!(back.body["id"], tron_id.as_str());

    for (body, param) in [
        (json!({"address": "TXYZ", "network": "TRC20"}), "address"),
        (
            json!({"address": trc20("0"), "network": "TRC20"}),
            "address",
        ),
        (
            json!({"address": erc20("xyz"), "network": "ERC20"}),
            "address",
        ),
        (json!({"address": tron, "network": "ERC20"}), "address"),
        (json!({"address": tron, "network": "BEP20"}), "network"),
        (json!({"network": "TRC20"}), "address"),
        (json!({"address": tron}), "network"),
        (
            json!({"address": tron, "network": "TRC20", "mode": "prod"}),
            "mode",
        ),
        (
            json!({"address": tron, "network": "TRC20", "colour": 1}),
            "colour",
        ),
    ] {
        let r = add_wallet(&app, &m.id, body).await;
        assert_eq!(r.status, 400, "{}", r.text);
        assert_eq!(r.param(), Some(param), "{}", r.text);
    }
    add_wallet(
        &app,
        &uuid::Uuid::new_v4().to_string(),
        json!({"address": tron, "network": "TRC20"}),
    )
    .await
    .assert_error(404, "resource_missing", None);
    app.post(
        &m.test_key,
        &format!("/admin/v1/merchants/{}/usdt_wallets", m.id),
        json!({"address": tron, "network": "TRC20"}),
    )
    .await
    .assert_status(401);
}

#[tokio::test]
async fn the_preview_shows_the_fee_its_vat_and_the_usdt_received() {
    let app = spawn_app().await;
    let m = usdt_merchant(&app, 150).await;
    let usd = fund_dollars(&app, &m.test_key, 100_000).await;
    let r = app
        .get(&m.test_key, "/v1/usdt/preview?usd_amount=10050")
        .await;
    r.assert_status(200);
    assert_eq!(r.body["object"], "usdt_preview");
    assert_eq!(r.body["livemode"], false);
    assert_eq!(r.body["usd_available"], usd);
    assert_eq!(r.body["fee_bps"], 150);
    assert_eq!(r.body["usd_amount"], 10_050);
    // 1.5% of 10,050 = 150.75 -> 151 (half up); VAT 7.5% of 151 = 11.325 -> 11.
    assert_eq!(r.body["fee"], 151);
    assert_eq!(r.body["vat"], 11);
    assert_eq!(r.body["usdt_amount"], 10_050 - 151 - 11);
    assert_eq!(r.body["sufficient"], true);
    // Exactly half a cent rounds up: 1.5% of 100 = 1.5 -> 2; VAT 0.15 -> 0.
    let r = app
        .get(&m.test_key, "/v1/usdt/preview?usd_amount=100")
        .await;
    assert_eq!(
        (r.body["fee"].clone(), r.body["vat"].clone()),
        (json!(2), json!(0))
    );
    assert_eq!(r.body["usdt_amount"], 98);
    let r = app
        .get(
            &m.test_key,
            &format!("/v1/usdt/preview?usd_amount={}", usd + 1),
        )
        .await;
    assert_eq!(r.body["sufficient"], false);
    let r = app.get(&m.test_key, "/v1/usdt/preview").await;
    assert_eq!(r.body["usd_amount"], Value::Null);
    assert_eq!(r.body["fee"], Value::Null);
    assert_eq!(r.body["usdt_amount"], Value::Null);
    assert_eq!(r.body["usd_available"], usd);
    app.get(&m.test_key, "/v1/usdt/preview?usd_amount=0")
        .await
        .assert_error(400, "parameter_invalid", Some("usd_amount"));
    app.get(&m.test_key, "/v1/usdt/preview?wallet=x")
        .await
        .assert_error(400, "parameter_unknown", Some("wallet"));
}

#[tokio::test]
async fn a_paid_crypto_payout_holds_the_dollars_then_they_leave() {
    let app = spawn_app().await;
    let m = usdt_merchant(&app, 100).await;
    let usd = fund_dollars(&app, &m.test_key, 100_000).await;
    let w = wallet(&app, &m, &trc20("Paid1")).await;
    let r = send_usdt(&app, &m.test_key, 12_345, &w).await;
    r.assert_status(201);
    assert_eq!(r.body["object"], "crypto_payout");
    assert_eq!(r.body["status"], "queued");
    assert_eq!(r.body["usd_amount"], 12_345);
    // 1% of 12,345 = 123.45 -> 123; VAT 9.225 -> 9.
    assert_eq!(r.body["fee"], 123);
    assert_eq!(r.body["vat"], 9);
    assert_eq!(r.body["usdt_amount"], 12_213);
    assert_eq!(r.body["wallet"], w.as_str());
    assert_eq!(r.body["network"], "TRC20");
    assert_eq!(r.body["automatic"], false);
    assert_eq!(r.body["transaction_hash"], Value::Null);
    let id = r.body["id"].as_str().unwrap().to_string();
    // Held in the same step that recorded it (the confirmation takes a
    // moment of real time; the clock never moves in this test).
    let (paid, took) = settled(&app, &m.test_key, &id).await;
    println!("crypto payout confirmed {took:?} after the first poll");
    assert_eq!(paid["status"], "paid");
    assert!(paid["paid_at"].is_string());
    assert_eq!(paid["transaction_hash"].as_str().unwrap().len(), 64);
    assert_eq!(
        app.balance(&m.test_key, "available", "USD").await,
        usd - 12_345
    );
    assert_eq!(app.balance(&m.test_key, "payout_in_flight", "USD").await, 0);
    // The lines: available -amount (fee + VAT noted), in flight +, in flight -.
    let lines: Vec<Value> = app
        .all_lines(&m.test_key)
        .await
        .into_iter()
        .filter(|l| l["source"] == id.as_str())
        .collect();
    let got: Vec<(String, i64)> = lines
        .iter()
        .rev()
        .map(|l| {
            assert_eq!(l["type"], "payout");
            assert_eq!(l["currency"], "USD");
            (
                l["bucket"].as_str().unwrap().to_string(),
                l["amount"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("available".into(), -12_345),
            ("payout_in_flight".into(), 12_345),
            ("payout_in_flight".into(), -12_345),
        ]
    );
    assert_eq!(lines.last().unwrap()["fee"], 132);
    let events = app
        .get(&m.test_key, "/v1/events?type=crypto_payout.paid")
        .await;
    let events = events.body["data"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["data"]["object"]["id"], id.as_str());
    assert_eq!(events[0]["data"]["object"]["status"], "paid");
    let list = app.get(&m.test_key, "/v1/usdt/payouts").await;
    assert_eq!(list.body["data"][0]["id"], id.as_str());
}

#[tokio::test]
async fn a_failed_crypto_payout_returns_the_dollars() {
    let app = spawn_app().await;
    let m = usdt_merchant(&app, 100).await;
    let usd = fund_dollars(&app, &m.test_key, 100_000).await;
    let dead = wallet(&app, &m, &trc20("dead")).await;
    let r = send_usdt(&app, &m.test_key, 50_000, &dead).await;
    r.assert_status(201);
    let id = r.body["id"].as_str().unwrap().to_string();
    let (failed, _) = settled(&app, &m.test_key, &id).await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["failure_code"], "transfer_failed");
    assert_eq!(failed["paid_at"], Value::Null);
    assert_eq!(app.balance(&m.test_key, "available", "USD").await, usd);
    assert_eq!(app.balance(&m.test_key, "payout_in_flight", "USD").await, 0);
    let events = app
        .get(&m.test_key, "/v1/events?type=crypto_payout.failed")
        .await;
    let events = events.body["data"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["data"]["object"]["status"], "failed");
    // ERC20 wallets ending dead fail too; others are paid.
    let eth_dead = add_wallet(
        &app,
        &m.id,
        json!({"address": erc20("DEAD"), "network": "ERC20"}),
    )
    .await
    .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let eth_ok = add_wallet(
        &app,
        &m.id,
        json!({"address": erc20("beef"), "network": "ERC20"}),
    )
    .await
    .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let a = send_usdt(&app, &m.test_key, 1_000, &eth_dead).await;
    let b = send_usdt(&app, &m.test_key, 2_000, &eth_ok).await;
    let (a, _) = settled(&app, &m.test_key, a.body["id"].as_str().unwrap()).await;
    let (b, _) = settled(&app, &m.test_key, b.body["id"].as_str().unwrap()).await;
    assert_eq!(a["status"], "failed");
    assert_eq!(b["status"], "paid");
    assert!(b["transaction_hash"].as_str().unwrap().starts_with("0x"));
    assert_eq!(
        app.balance(&m.test_key, "available", "USD").await,
        usd - 2_000
    );
}

#[tokio::test]
async fn crypto_payouts_refuse_what_they_cannot_do_and_move_nothing() {
    let app = spawn_app().await;
    let off = app.merchant().await;
    let w_off = wallet(&app, &off, &trc20("Xff")).await;
    fund_dollars(&app, &off.test_key, 10_000).await;
    send_usdt(&app, &off.test_key, 1_000, &w_off)
        .await
        .assert_error(403, "usdt_not_enabled", None);

    let m = usdt_merchant(&app, 100).await;
    let usd = fund_dollars(&app, &m.test_key, 10_000).await;
    let w = wallet(&app, &m, &trc20("Gd1")).await;
    for (body, status, code, param) in [
        (
            json!({"usd_amount": 1000, "wallet": w, "note": "x"}),
            400,
            "parameter_unknown",
            "note",
        ),
        (
            json!({"usd_amount": 1000, "wallet": w, "currency": "USD"}),
            400,
            "parameter_unknown",
            "currency",
        ),
        (json!({"wallet": w}), 400, "parameter_missing", "usd_amount"),
        (
            json!({"usd_amount": 1000}),
            400,
            "parameter_missing",
            "wallet",
        ),
        (
            json!({"usd_amount": 0, "wallet": w}),
            400,
            "parameter_invalid",
            "usd_amount",
        ),
        (
            json!({"usd_amount": 1000, "wallet": "x"}),
            400,
            "parameter_invalid",
            "wallet",
        ),
        (
            json!({"usd_amount": 1000, "wallet": w, "otp": "654321"}),
            400,
            "incorrect_otp",
            "otp",
        ),
        (
            json!({"usd_amount": 1000, "wallet": uuid::Uuid::new_v4()}),
            404,
            "resource_missing",
            "wallet",
        ),
        (
            json!({"usd_amount": 1000, "wallet": w_off}),
            404,
            "resource_missing",
            "wallet",
        ),
        (
            json!({"usd_amount": 1000, "wallet": w, "brand": uuid::Uuid::new_v4()}),
            404,
            "resource_missing",
            "brand",
        ),
    ] {
        app.post(&m.test_key, "/v1/usdt/payouts", body)
            .await
            .assert_error(status, code, Some(param));
    }
    send_usdt(&app, &m.test_key, usd + 1, &w)
        .await
        .assert_error(409, "insufficient_funds", None);
    // The whole fee: nothing would reach the wallet.
    app.admin_post(
        &format!("/admin/v1/merchants/{}", m.id),
        json!({"settings": {"usdt": {"fee_bps": 10000}}}),
    )
    .await
    .assert_status(200);
    send_usdt(&app, &m.test_key, 100, &w).await.assert_error(
        400,
        "parameter_invalid",
        Some("usd_amount"),
    );
    app.admin_post(
        &format!("/admin/v1/merchants/{}", m.id),
        json!({"settings": {"usdt": {"fee_bps": 10001}}}),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("settings.usdt.fee_bps"));
    app.admin_post(
        &format!("/admin/v1/merchants/{}", m.id),
        json!({"settings": {"usdt": {"fee_bps": 0}}}),
    )
    .await
    .assert_status(200);
    // A cleared wallet takes nothing more.
    app.send(
        reqwest::Method::DELETE,
        &format!("/admin/v1/merchants/{}/usdt_wallets/{w}", m.id),
        Some(&app.admin_token.clone()),
        None,
        None,
    )
    .await
    .assert_status(200);
    send_usdt(&app, &m.test_key, 1_000, &w).await.assert_error(
        404,
        "resource_missing",
        Some("wallet"),
    );
    // Nothing moved, nothing was recorded.
    assert_eq!(app.balance(&m.test_key, "available", "USD").await, usd);
    assert_eq!(app.balance(&m.test_key, "payout_in_flight", "USD").await, 0);
    assert!(app.get(&m.test_key, "/v1/usdt/payouts").await.body["data"]
        .as_array()
        .unwrap()
        .is_empty());
    // Without the one-time code in test mode: accepted.
    let w2 = wallet(&app, &m, &trc20("Gd2")).await;
    app.post(
        &m.test_key,
        "/v1/usdt/payouts",
        json!({"usd_amount": 1, "wallet": w2}),
    )
    .await
    .assert_status(201);

    // Live mode needs the one-time code, and a live partner this server
    // does not have.
    let live_wallet = add_wallet(
        &app,
        &m.id,
        json!({"address": trc20("Live"), "network": "TRC20", "mode": "live"}),
    )
    .await
    .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.post(
        &m.live_key,
        "/v1/usdt/payouts",
        json!({"usd_amount": 100, "wallet": live_wallet}),
    )
    .await
    .assert_error(400, "parameter_missing", Some("otp"));
    app.post(
        &m.live_key,
        "/v1/usdt/payouts",
        json!({"usd_amount": 100, "wallet": live_wallet, "otp": "123456"}),
    )
    .await
    .assert_error(409, "provider_not_configured", None);
    // A test wallet is not a live one.
    app.post(
        &m.live_key,
        "/v1/usdt/payouts",
        json!({"usd_amount": 100, "wallet": w2, "otp": "123456"}),
    )
    .await
    .assert_error(404, "resource_missing", Some("wallet"));
}

#[tokio::test]
async fn crypto_payouts_are_listed_newest_first_and_replays_create_nothing() {
    let app = spawn_app().await;
    let m = usdt_merchant(&app, 0).await;
    let usd = fund_dollars(&app, &m.test_key, 100_000).await;
    let w = wallet(&app, &m, &trc20("List")).await;
    let idem = app.next_key();
    let body = json!({"usd_amount": 1_000, "wallet": w});
    let first = app
        .post_with_key(&m.test_key, "/v1/usdt/payouts", &idem, body.clone())
        .await;
    first.assert_status(201);
    let replay = app
        .post_with_key(&m.test_key, "/v1/usdt/payouts", &idem, body)
        .await;
    assert!(replay.replayed());
    assert_eq!(replay.text, first.text);
    let mut ids = vec![first.body["id"].as_str().unwrap().to_string()];
    for usd in [2_000, 3_000] {
        let r = send_usdt(&app, &m.test_key, usd, &w).await;
        ids.push(r.body["id"].as_str().unwrap().to_string());
    }
    assert_eq!(
        app.balance(&m.test_key, "available", "USD").await,
        usd - 6_000
    );
    let page = app.get(&m.test_key, "/v1/usdt/payouts?limit=2").await;
    let data = page.body["data"].as_array().unwrap();
    assert_eq!(
        (data[0]["id"].clone(), data[1]["id"].clone()),
        (json!(ids[2]), json!(ids[1]))
    );
    assert_eq!(page.body["has_more"], true);
    let rest = app
        .get(
            &m.test_key,
            &format!("/v1/usdt/payouts?limit=2&starting_after={}", ids[1]),
        )
        .await;
    assert_eq!(rest.body["data"][0]["id"], ids[0].as_str());
    assert_eq!(rest.body["has_more"], false);
    for id in &ids {
        settled(&app, &m.test_key, id).await;
    }
    app.get(&m.live_key, &format!("/v1/usdt/payouts/{}", ids[0]))
        .await
        .assert_error(404, "resource_missing", None);
}

#[tokio::test]
async fn an_unconfirmed_crypto_payout_is_asked_about_again_after_a_restart() {
    let mut app = spawn_app().await;
    let m = usdt_merchant(&app, 100).await;
    let usd = fund_dollars(&app, &m.test_key, 100_000).await;
    let ok = wallet(&app, &m, &trc20("Again")).await;
    let dead = wallet(&app, &m, &trc20("dead")).await;
    let a = send_usdt(&app, &m.test_key, 10_000, &ok).await;
    let b = send_usdt(&app, &m.test_key, 20_000, &dead).await;
    // Killed before the confirmations (a few hundred ms away) arrive.
    app.kill();
    app.start(&[]);
    let (a, _) = settled(&app, &m.test_key, a.body["id"].as_str().unwrap()).await;
    let (b, _) = settled(&app, &m.test_key, b.body["id"].as_str().unwrap()).await;
    assert_eq!(a["status"], "paid");
    assert_eq!(b["status"], "failed");
    let log = std::fs::read_to_string(app.log_path()).unwrap();
    assert!(
        log.contains("re-asking the USDT partner about unconfirmed payouts"),
        "the restart found nothing to re-ask"
    );
    assert_eq!(
        app.balance(&m.test_key, "available", "USD").await,
        usd - 10_000
    );
    assert_eq!(app.balance(&m.test_key, "payout_in_flight", "USD").await, 0);
    // Each applied once.
    for t in ["crypto_payout.paid", "crypto_payout.failed"] {
        let e = app.get(&m.test_key, &format!("/v1/events?type={t}")).await;
        assert_eq!(e.body["data"].as_array().unwrap().len(), 1, "{t}");
    }
}

#[tokio::test]
async fn dollar_settlement_sends_released_dollars_to_the_settle_wallet_as_usdt() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let w = wallet(&app, &m, &trc20("Stash")).await;
    app.admin_post(
        &format!("/admin/v1/merchants/{}", m.id),
        json!({"settings": {
            "auto_settlement": {"enabled": true, "usd": "usdt"},
            "usdt": {"enabled": true, "settle_wallet": w, "fee_bps": 50},
        }}),
    )
    .await
    .assert_status(200);
    let now = app.now().await;
    let pi = app
        .create_intent(&m.test_key, json!({"amount": 54_321, "currency": "USD"}))
        .await;
    let r = app
        .post(
            &m.test_key,
            &format!(
                "/v1/test_helpers/payment_intents/{}/succeed",
                pi["id"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    let net = r.body["fees"]["net"].as_i64().unwrap();
    let release = Calendar::nigeria().release_instant(now, 7).unwrap();
    app.admin_post(
        "/admin/v1/clock/advance",
        json!({"to": release.to_rfc3339()}),
    )
    .await
    .assert_status(200);
    // At 08:00 the release lands and settlement sends it all.
    assert_eq!(app.balance(&m.test_key, "available", "USD").await, 0);
    let list = app.get(&m.test_key, "/v1/usdt/payouts").await;
    let data = list.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["automatic"], true);
    assert_eq!(data[0]["usd_amount"], net);
    assert_eq!(data[0]["wallet"], w.as_str());
    let fee = (net * 50 + 5_000) / 10_000;
    let vat = (fee * 750 + 5_000) / 10_000;
    assert_eq!(data[0]["fee"], fee);
    assert_eq!(data[0]["usdt_amount"], net - fee - vat);
    let id = data[0]["id"].as_str().unwrap().to_string();
    let (paid, _) = settled(&app, &m.test_key, &id).await;
    assert_eq!(paid["status"], "paid");
    assert_eq!(app.balance(&m.test_key, "payout_in_flight", "USD").await, 0);
    // The helper reports the crypto payouts it creates among `payouts`.
    let usd = fund_dollars(&app, &m.test_key, 10_000).await;
    let r = app
        .post(&m.test_key, "/v1/test_helpers/settlements/run", json!({}))
        .await;
    r.assert_status(200);
    let made = r.body["payouts"].as_array().unwrap();
    assert_eq!(made.len(), 1);
    let (paid, _) = settled(&app, &m.test_key, made[0].as_str().unwrap()).await;
    assert_eq!(paid["usd_amount"], usd);
    assert_eq!(paid["automatic"], true);
    // USDT switched off: dollars are kept.
    app.admin_post(
        &format!("/admin/v1/merchants/{}", m.id),
        json!({"settings": {"usdt": {"enabled": false}}}),
    )
    .await
    .assert_status(200);
    let usd = fund_dollars(&app, &m.test_key, 10_000).await;
    let r = app
        .post(&m.test_key, "/v1/test_helpers/settlements/run", json!({}))
        .await;
    assert_eq!(r.body["payouts"], json!([]));
    assert_eq!(app.balance(&m.test_key, "available", "USD").await, usd);
}

/// Measurements (ignored; run with `cargo test --release --test api --
/// --ignored usdt::measure --nocapture`): conversions per second on one
/// merchant's ledger with 16 clients, and how long crypto payouts take from
/// the create's answer to `paid` (polled every 5 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure_conversion_throughput_and_usdt_confirmation_latency() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    let app = spawn_app().await;
    let m = usdt_merchant(&app, 100).await;
    for _ in 0..4 {
        fund_dollars(&app, &m.test_key, 100_000_000).await;
    }
    let rate = crate::fx::publish(&app, 150_000).await;
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..16 {
        let (client, base, key, stop, done, rate_id) = (
            app.client.clone(),
            app.base.clone(),
            m.test_key.clone(),
            stop.clone(),
            done.clone(),
            rate["id"].clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let r = client
                    .post(format!("{base}/v1/fx/conversions"))
                    .bearer_auth(&key)
                    .header("Idempotency-Key", format!("m-{w}-{n}"))
                    .json(&json!({"usd_amount": 100 + n, "rate_id": rate_id}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status().as_u16(), 201);
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let seconds = 5;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    println!(
        "conversions: {:.0}/s with 16 clients on one merchant",
        done.load(Ordering::Relaxed) as f64 / seconds as f64
    );

    let w = wallet(&app, &m, &trc20("Measure")).await;
    let mut took = Vec::new();
    for _ in 0..50 {
        let r = send_usdt(&app, &m.test_key, 1_000, &w).await;
        r.assert_status(201);
        let id = r.body["id"].as_str().unwrap().to_string();
        let start = Instant::now();
        loop {
            let p = app
                .get(&m.test_key, &format!("/v1/usdt/payouts/{id}"))
                .await;
            if p.body["status"] == "paid" {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        took.push(start.elapsed());
    }
    took.sort();
    println!(
        "USDT confirmation after the create's answer: p50 {:?}, p99 {:?}, max {:?} (sandbox delay 300 ms)",
        took[took.len() / 2],
        took[took.len() * 99 / 100],
        took[took.len() - 1]
    );
}
