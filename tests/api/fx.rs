//! Dollar rates and conversions: the preview's arithmetic, rounding down to
//! the kobo on awkward rates, `rate_changed`, short dollars, strict bodies,
//! lists, and dollar settlement (`keep`, `convert`) with the manual clock.

use serde_json::{json, Value};

use kobo_actors::calendar::Calendar;

use crate::helpers::{fund_dollars, spawn_app, Resp, TestApp};

pub async fn publish(app: &TestApp, rate: i64) -> Value {
    let r = app
        .admin_post("/admin/v1/fx_rates", json!({"rate": rate}))
        .await;
    r.assert_status(201);
    r.body
}

async fn convert(app: &TestApp, key: &str, usd: i64, rate_id: &Value) -> Resp {
    app.post(
        key,
        "/v1/fx/conversions",
        json!({"usd_amount": usd, "rate_id": rate_id}),
    )
    .await
}

#[tokio::test]
async fn rates_are_published_by_the_operator_and_the_newest_is_current() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    app.get(&m.test_key, "/v1/fx")
        .await
        .assert_error(409, "no_fx_rate", None);
    let r = publish(&app, 150_000).await;
    assert_eq!(r["object"], "fx_rate");
    assert_eq!(r["rate"], 150_000);
    assert!(r["id"].is_string() && r["published_at"].is_string());
    let newer = publish(&app, 151_250).await;
    let p = app.get(&m.test_key, "/v1/fx").await;
    p.assert_status(200);
    assert_eq!(p.body["rate"]["id"], newer["id"]);
    assert_eq!(p.body["rate"]["rate"], 151_250);
    assert_eq!(p.body["rate"]["published_at"], newer["published_at"]);

    for (body, param) in [
        (json!({"rate": 0}), "rate"),
        (json!({"rate": -5}), "rate"),
        (json!({"rate": 1.5}), "rate"),
        (json!({"rate": "150000"}), "rate"),
        (json!({"rate": 100_000_001}), "rate"),
        (json!({}), "rate"),
        (json!({"rate": 150_000, "currency": "USD"}), "currency"),
    ] {
        let r = app.admin_post("/admin/v1/fx_rates", body).await;
        assert_eq!(r.status, 400, "{}", r.text);
        assert_eq!(r.param(), Some(param), "{}", r.text);
    }
    // Only the operator publishes.
    app.post(&m.test_key, "/admin/v1/fx_rates", json!({"rate": 1}))
        .await
        .assert_status(401);
    // Rates are durable.
    let mut app = app;
    app.restart();
    let p = app.get(&m.test_key, "/v1/fx").await;
    assert_eq!(p.body["rate"]["id"], newer["id"]);
}

#[tokio::test]
async fn the_preview_shows_the_rate_the_dollars_available_and_the_naira_rounded_down() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let rate = publish(&app, 153_333).await;
    let usd = fund_dollars(&app, &m.test_key, 100_000).await;
    // USD card: 3.9% = 3,900 + VAT 293.
    assert_eq!(usd, 95_807);
    let p = app.get(&m.test_key, "/v1/fx?usd_amount=333").await;
    p.assert_status(200);
    assert_eq!(p.body["object"], "fx_preview");
    assert_eq!(p.body["livemode"], false);
    assert_eq!(p.body["rate"]["id"], rate["id"]);
    assert_eq!(p.body["rate"]["rate"], 153_333);
    assert_eq!(p.body["usd_available"], usd);
    assert_eq!(p.body["usd_amount"], 333);
    // 333 * 153,333 / 100 = 510,598.89 kobo.
    assert_eq!(p.body["ngn_amount"], 510_598);
    let p = app.get(&m.test_key, "/v1/fx").await;
    assert_eq!(p.body["usd_amount"], Value::Null);
    assert_eq!(p.body["ngn_amount"], Value::Null);
    assert_eq!(p.body["usd_available"], usd);
    // Another brand's dollars are its own.
    let brand = app
        .post(&m.test_key, "/v1/brands", json!({"name": "Second"}))
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let p = app
        .get(&m.test_key, &format!("/v1/fx?usd_amount=1&brand={brand}"))
        .await;
    assert_eq!(p.body["usd_available"], 0);
    assert_eq!(p.body["ngn_amount"], 1_533);
    for (q, param) in [
        ("usd_amount=0", "usd_amount"),
        ("usd_amount=abc", "usd_amount"),
        ("usd_amount=1000000000001", "usd_amount"),
        ("brand=nope", "brand"),
        ("brand=00000000-0000-0000-0000-000000000000", "brand"),
        ("amount=1", "amount"),
    ] {
        let r = app.get(&m.test_key, &format!("/v1/fx?{q}")).await;
        assert_eq!(r.status, 400, "{q}: {}", r.text);
        assert_eq!(r.param(), Some(param), "{q}");
    }
}

#[tokio::test]
async fn a_conversion_moves_dollars_to_naira_in_one_entry_rounding_down_to_the_kobo() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let rate = publish(&app, 153_333).await;
    let usd = fund_dollars(&app, &m.test_key, 100_000).await;
    let ngn = app.balance(&m.test_key, "available", "NGN").await;
    let idem = app.next_key();
    let body = json!({"usd_amount": 333, "rate_id": rate["id"]});
    let r = app
        .post_with_key(&m.test_key, "/v1/fx/conversions", &idem, body.clone())
        .await;
    r.assert_status(201);
    assert_eq!(r.body["object"], "fx_conversion");
    assert_eq!(r.body["livemode"], false);
    assert_eq!(r.body["usd_amount"], 333);
    assert_eq!(r.body["ngn_amount"], 510_598);
    assert_eq!(r.body["rate"]["id"], rate["id"]);
    assert_eq!(r.body["rate"]["rate"], 153_333);
    assert_eq!(r.body["automatic"], false);
    let id = r.body["id"].as_str().unwrap().to_string();
    assert_eq!(
        app.balance(&m.test_key, "available", "USD").await,
        usd - 333
    );
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await,
        ngn + 510_598
    );
    // One conversion entry: two lines, one per currency, both available.
    let lines = app
        .get(&m.test_key, "/v1/balance_transactions?type=conversions")
        .await;
    let lines = lines.body["data"].as_array().unwrap().clone();
    assert_eq!(lines.len(), 2);
    for l in &lines {
        assert_eq!(l["type"], "conversion");
        assert_eq!(l["source"], id.as_str());
        assert_eq!(l["bucket"], "available");
    }
    let amounts: Vec<(String, i64)> = lines
        .iter()
        .map(|l| {
            (
                l["currency"].as_str().unwrap().to_string(),
                l["amount"].as_i64().unwrap(),
            )
        })
        .collect();
    assert!(amounts.contains(&("USD".into(), -333)));
    assert!(amounts.contains(&("NGN".into(), 510_598)));
    assert_eq!(lines[0]["created_at"], lines[1]["created_at"]);

    // A replay answers the saved conversion and moves nothing again.
    let again = app
        .post_with_key(&m.test_key, "/v1/fx/conversions", &idem, body)
        .await;
    assert!(again.replayed());
    assert_eq!(again.text, r.text);
    assert_eq!(
        app.balance(&m.test_key, "available", "USD").await,
        usd - 333
    );

    // More awkward rates: every answer is floor(usd * rate / 100).
    for (rate, usd_amount, want) in [
        (100_001, 1, 1_000),
        (99_999, 7, 6_999),
        (149_950, 1_001, 1_500_999),
    ] {
        let r = publish(&app, rate).await;
        let c = convert(&app, &m.test_key, usd_amount, &r["id"]).await;
        c.assert_status(201);
        assert_eq!(c.body["ngn_amount"], want, "{rate} x {usd_amount}");
    }
    let r = app
        .get(&m.test_key, &format!("/v1/fx/conversions/{id}"))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["ngn_amount"], 510_598);
    // Other modes and merchants do not see it.
    app.get(&m.live_key, &format!("/v1/fx/conversions/{id}"))
        .await
        .assert_error(404, "resource_missing", None);
    let other = app.merchant().await;
    app.get(&other.test_key, &format!("/v1/fx/conversions/{id}"))
        .await
        .assert_error(404, "resource_missing", None);
}

#[tokio::test]
async fn a_rate_published_since_the_quote_refuses_the_conversion_and_names_the_new_rate() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let old = publish(&app, 150_000).await;
    let usd = fund_dollars(&app, &m.test_key, 10_000).await;
    let quoted = app.get(&m.test_key, "/v1/fx?usd_amount=1000").await;
    assert_eq!(quoted.body["rate"]["id"], old["id"]);
    let new = publish(&app, 148_765).await;
    let r = convert(&app, &m.test_key, 1_000, &old["id"]).await;
    r.assert_error(409, "rate_changed", None);
    let message = r.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("148765"), "{message}");
    assert!(message.contains(new["id"].as_str().unwrap()), "{message}");
    // Nothing converted.
    assert_eq!(app.balance(&m.test_key, "available", "USD").await, usd);
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, 0);
    let list = app.get(&m.test_key, "/v1/fx/conversions").await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 0);
    // With the new rate it goes through.
    let r = convert(&app, &m.test_key, 1_000, &new["id"]).await;
    r.assert_status(201);
    assert_eq!(r.body["ngn_amount"], 1_487_650);
}

#[tokio::test]
async fn short_dollars_convert_nothing() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let rate = publish(&app, 150_000).await;
    let usd = fund_dollars(&app, &m.test_key, 10_000).await;
    convert(&app, &m.test_key, usd + 1, &rate["id"])
        .await
        .assert_error(409, "insufficient_funds", None);
    assert_eq!(app.balance(&m.test_key, "available", "USD").await, usd);
    assert_eq!(app.balance(&m.test_key, "available", "NGN").await, 0);
    assert!(app
        .get(&m.test_key, "/v1/balance_transactions?type=conversions")
        .await
        .body["data"]
        .as_array()
        .unwrap()
        .is_empty());
    // Pending dollars are not available to convert.
    let other = app.merchant().await;
    let pi = app
        .create_intent(
            &other.test_key,
            json!({"amount": 10_000, "currency": "USD"}),
        )
        .await;
    app.post(
        &other.test_key,
        &format!(
            "/v1/test_helpers/payment_intents/{}/succeed",
            pi["id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await
    .assert_status(200);
    convert(&app, &other.test_key, 1, &rate["id"])
        .await
        .assert_error(409, "insufficient_funds", None);
    // Exactly everything is fine.
    convert(&app, &m.test_key, usd, &rate["id"])
        .await
        .assert_status(201);
    assert_eq!(app.balance(&m.test_key, "available", "USD").await, 0);
}

#[tokio::test]
async fn the_conversion_body_is_strict() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let rate = publish(&app, 50).await;
    fund_dollars(&app, &m.test_key, 10_000).await;
    let id = rate["id"].clone();
    for (body, status, code, param) in [
        (
            json!({"usd_amount": 100, "rate_id": id, "currency": "USD"}),
            400,
            "parameter_unknown",
            "currency",
        ),
        (
            json!({"usd_amount": 100, "rate_id": id, "ngn_amount": 1}),
            400,
            "parameter_unknown",
            "ngn_amount",
        ),
        (
            json!({"rate_id": id}),
            400,
            "parameter_missing",
            "usd_amount",
        ),
        (
            json!({"usd_amount": 100}),
            400,
            "parameter_missing",
            "rate_id",
        ),
        (
            json!({"usd_amount": 0, "rate_id": id}),
            400,
            "parameter_invalid",
            "usd_amount",
        ),
        (
            json!({"usd_amount": 1.5, "rate_id": id}),
            400,
            "parameter_invalid",
            "usd_amount",
        ),
        (
            json!({"usd_amount": 100, "rate_id": "x"}),
            400,
            "parameter_invalid",
            "rate_id",
        ),
        (
            json!({"usd_amount": 100, "rate_id": id, "brand": "x"}),
            400,
            "parameter_invalid",
            "brand",
        ),
        // 1 cent at 50 kobo per dollar is half a kobo: nothing to give.
        (
            json!({"usd_amount": 1, "rate_id": id}),
            400,
            "parameter_invalid",
            "usd_amount",
        ),
        (
            json!({"usd_amount": 100, "rate_id": uuid::Uuid::new_v4()}),
            404,
            "resource_missing",
            "rate_id",
        ),
        (
            json!({"usd_amount": 100, "rate_id": id, "brand": uuid::Uuid::new_v4()}),
            404,
            "resource_missing",
            "brand",
        ),
    ] {
        let r = app
            .post(&m.test_key, "/v1/fx/conversions", body.clone())
            .await;
        r.assert_error(status, code, Some(param));
    }
    // A POST needs its Idempotency-Key.
    app.send(
        reqwest::Method::POST,
        "/v1/fx/conversions",
        Some(&m.test_key),
        None,
        Some(&json!({"usd_amount": 100, "rate_id": id})),
    )
    .await
    .assert_error(400, "parameter_missing", Some("Idempotency-Key"));
    assert!(
        app.get(&m.test_key, "/v1/fx/conversions").await.body["data"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn conversions_are_listed_newest_first_with_cursors() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let rate = publish(&app, 150_000).await;
    fund_dollars(&app, &m.test_key, 10_000).await;
    let mut ids = Vec::new();
    for usd in [100, 200, 300] {
        let r = convert(&app, &m.test_key, usd, &rate["id"]).await;
        ids.push(r.body["id"].as_str().unwrap().to_string());
    }
    let page = app.get(&m.test_key, "/v1/fx/conversions?limit=2").await;
    page.assert_status(200);
    assert_eq!(page.body["object"], "list");
    let data = page.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["id"], ids[2].as_str());
    assert_eq!(data[1]["id"], ids[1].as_str());
    assert_eq!(page.body["has_more"], true);
    let next = app
        .get(
            &m.test_key,
            &format!("/v1/fx/conversions?limit=2&starting_after={}", ids[1]),
        )
        .await;
    let data = next.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["id"], ids[0].as_str());
    assert_eq!(next.body["has_more"], false);
    app.get(
        &m.test_key,
        &format!("/v1/fx/conversions?starting_after={}", uuid::Uuid::new_v4()),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("starting_after"));
    app.get(&m.test_key, "/v1/fx/conversions?colour=red")
        .await
        .assert_error(400, "parameter_unknown", Some("colour"));
    let live = app.get(&m.live_key, "/v1/fx/conversions").await;
    assert!(live.body["data"].as_array().unwrap().is_empty());
}

/// Pays a dollar intent now (captured into `pending`); answers its net and
/// when its release comes (08:00 Lagos on the 7th business day).
async fn dollar_payment(
    app: &TestApp,
    key: &str,
    amount: i64,
) -> (i64, chrono::DateTime<chrono::Utc>) {
    let now = app.now().await;
    let paid = app
        .succeeded_intent(key, json!({"amount": amount, "currency": "USD"}))
        .await;
    let net = paid["fees"]["net"].as_i64().unwrap();
    (net, Calendar::nigeria().release_instant(now, 7).unwrap())
}

async fn advance_to(app: &TestApp, to: chrono::DateTime<chrono::Utc>) {
    app.admin_post("/admin/v1/clock/advance", json!({"to": to.to_rfc3339()}))
        .await
        .assert_status(200);
}

#[tokio::test]
async fn dollar_settlement_converts_released_dollars_at_the_current_rate_at_08_00() {
    let app = spawn_app().await;
    let m = app
        .create_merchant(json!({"auto_settlement": {"enabled": true, "usd": "convert"}}))
        .await;
    let (net, release) = dollar_payment(&app, &m.test_key, 12_345).await;
    publish(&app, 140_000).await;
    // The rate current at settlement time applies, not an older one.
    let current = publish(&app, 153_333).await;
    advance_to(&app, release - chrono::Duration::seconds(1)).await;
    assert_eq!(app.balance(&m.test_key, "pending", "USD").await, net);
    advance_to(&app, release).await;
    assert_eq!(app.balance(&m.test_key, "pending", "USD").await, 0);
    assert_eq!(app.balance(&m.test_key, "available", "USD").await, 0);
    let ngn = net as i128 * 153_333 / 100;
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await as i128,
        ngn
    );
    let list = app.get(&m.test_key, "/v1/fx/conversions").await;
    let data = list.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["automatic"], true);
    assert_eq!(data[0]["usd_amount"], net);
    assert_eq!(data[0]["rate"]["id"], current["id"]);
    // Running settlement again that morning finds nothing more.
    let r = app
        .post(&m.test_key, "/v1/test_helpers/settlements/run", json!({}))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["conversions"], json!([]));
    // The helper converts what is available now, and says so.
    let usd = fund_dollars(&app, &m.test_key, 10_000).await;
    let r = app
        .post(&m.test_key, "/v1/test_helpers/settlements/run", json!({}))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["conversions"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["payouts"], json!([]));
    assert_eq!(app.balance(&m.test_key, "available", "USD").await, 0);
    assert_eq!(
        app.balance(&m.test_key, "available", "NGN").await as i128,
        ngn + usd as i128 * 153_333 / 100
    );
}

#[tokio::test]
async fn dollar_settlement_keeps_dollars_by_default_and_without_a_rate() {
    let app = spawn_app().await;
    let keep = app
        .create_merchant(json!({"auto_settlement": {"enabled": true}}))
        .await;
    let merchant = app
        .admin_get(&format!("/admin/v1/merchants/{}", keep.id))
        .await;
    assert_eq!(merchant.body["settings"]["auto_settlement"]["usd"], "keep");
    let no_rate = app
        .create_merchant(json!({"auto_settlement": {"enabled": true, "usd": "convert"}}))
        .await;
    let (net, release) = dollar_payment(&app, &keep.test_key, 20_000).await;
    let (net2, _) = dollar_payment(&app, &no_rate.test_key, 20_000).await;
    advance_to(&app, release).await;
    assert_eq!(app.balance(&keep.test_key, "available", "USD").await, net);
    assert_eq!(app.balance(&keep.test_key, "available", "NGN").await, 0);
    // No rate published yet: the dollars stay, nothing breaks.
    assert_eq!(
        app.balance(&no_rate.test_key, "available", "USD").await,
        net2
    );
    assert!(
        app.get(&keep.test_key, "/v1/fx/conversions").await.body["data"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    // `keep` stays kept after a rate exists too.
    publish(&app, 150_000).await;
    let r = app
        .post(
            &keep.test_key,
            "/v1/test_helpers/settlements/run",
            json!({}),
        )
        .await;
    assert_eq!(r.body["conversions"], json!([]));
    assert_eq!(app.balance(&keep.test_key, "available", "USD").await, net);
}
