//! Bounds of merchant settings (docs/api.md, "Bounds of merchant
//! settings"): out of range answers 400 `parameter_invalid` naming the
//! nested field, at creation and on update, and changes nothing.

use serde_json::{json, Value};

use crate::helpers::{spawn_app, Merchant, TestApp};

/// `patch` is refused naming `param`, on update (the merchant's settings
/// unchanged) and at creation.
async fn refused(app: &TestApp, m: &Merchant, patch: Value, param: &str) {
    let path = format!("/admin/v1/merchants/{}", m.id);
    let before = app.admin_get(&path).await.body["settings"].clone();
    app.admin_post(&path, json!({"settings": patch.clone()}))
        .await
        .assert_error(400, "parameter_invalid", Some(param));
    assert_eq!(
        app.admin_get(&path).await.body["settings"],
        before,
        "{patch}"
    );
    app.admin_post(
        "/admin/v1/merchants",
        json!({"name": "Bounded Ltd", "settings": patch}),
    )
    .await
    .assert_error(400, "parameter_invalid", Some(param));
}

/// `patch` is taken (a bound is inclusive).
async fn accepted(app: &TestApp, m: &Merchant, patch: Value) -> Value {
    let r = app
        .admin_post(
            &format!("/admin/v1/merchants/{}", m.id),
            json!({"settings": patch}),
        )
        .await;
    r.assert_status(200);
    r.body["settings"].clone()
}

#[tokio::test]
async fn a_settlement_delay_of_4294967295_days_is_refused_and_the_merchant_keeps_paying() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    refused(
        &app,
        &m,
        json!({"settlement_delay_days": {"NGN": 4_294_967_295u64, "USD": 7}}),
        "settings.settlement_delay_days.NGN",
    )
    .await;
    refused(
        &app,
        &m,
        json!({"settlement_delay_days": {"NGN": 1, "USD": 31}}),
        "settings.settlement_delay_days.USD",
    )
    .await;
    let s = accepted(
        &app,
        &m,
        json!({"settlement_delay_days": {"NGN": 30, "USD": 0}}),
    )
    .await;
    assert_eq!(s["settlement_delay_days"], json!({"NGN": 30, "USD": 0}));
    // Payments still settle on the merchant's (bounded) terms.
    let paid = app.paid_intent(&m.test_key, 50_000).await;
    let net = paid["fees"]["net"].as_i64().unwrap();
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, net);
}

#[tokio::test]
async fn pricing_beyond_its_bounds_is_refused_a_huge_customer_borne_flat_fee_included() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let card = |rule: Value| json!({"pricing": {"NGN": {"card": rule}}});
    refused(
        &app,
        &m,
        card(json!({"flat": 9_000_000_000_000_000_000u64})),
        "settings.pricing.NGN.card.flat",
    )
    .await;
    refused(
        &app,
        &m,
        card(json!({"flat": 100_000_001})),
        "settings.pricing.NGN.card.flat",
    )
    .await;
    refused(
        &app,
        &m,
        card(json!({"percent_bps": 10_001})),
        "settings.pricing.NGN.card.percent_bps",
    )
    .await;
    refused(
        &app,
        &m,
        json!({"pricing": {"USD": {"card": {"percent_bps": 390, "cap": 1_000_000_000_001i64}}}}),
        "settings.pricing.USD.card.cap",
    )
    .await;
    refused(
        &app,
        &m,
        card(json!({"flat_waived_below": 1_000_000_000_001i64})),
        "settings.pricing.NGN.card.flat_waived_below",
    )
    .await;
    let s = accepted(&app, &m, card(json!({"flat": 100_000_000, "cap": null}))).await;
    assert_eq!(s["pricing"]["NGN"]["card"]["flat"], 100_000_000);
}

#[tokio::test]
async fn payout_amount_settings_beyond_their_bounds_are_refused() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    refused(
        &app,
        &m,
        json!({"payout_limits": {"per_payout": 0, "daily": 5_000_000}}),
        "settings.payout_limits.per_payout",
    )
    .await;
    refused(
        &app,
        &m,
        json!({"payout_limits": {"per_payout": 1, "daily": 1_000_000_000_001i64}}),
        "settings.payout_limits.daily",
    )
    .await;
    refused(
        &app,
        &m,
        json!({"payout_approval_threshold": 1_000_000_000_001i64}),
        "settings.payout_approval_threshold",
    )
    .await;
    refused(
        &app,
        &m,
        json!({"auto_settlement": {"enabled": true, "minimum": 1_000_000_000_001i64}}),
        "settings.auto_settlement.minimum",
    )
    .await;
    accepted(
        &app,
        &m,
        json!({
            "payout_limits": {"per_payout": 1, "daily": 1_000_000_000_000i64},
            "payout_approval_threshold": 0,
        }),
    )
    .await;
}

#[tokio::test]
async fn reserve_and_usdt_settings_beyond_their_bounds_are_refused() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    refused(
        &app,
        &m,
        json!({"reserve": {"percent_bps": 500, "days": 181}}),
        "settings.reserve.days",
    )
    .await;
    refused(
        &app,
        &m,
        json!({"reserve": {"percent_bps": 500, "days": 30, "reason": "x".repeat(201)}}),
        "settings.reserve.reason",
    )
    .await;
    refused(
        &app,
        &m,
        json!({"reserve": {"percent_bps": 500, "days": 30, "note": "é".repeat(1001)}}),
        "settings.reserve.note",
    )
    .await;
    refused(
        &app,
        &m,
        json!({"usdt": {"enabled": true, "fee_bps": 10_001}}),
        "settings.usdt.fee_bps",
    )
    .await;
    accepted(
        &app,
        &m,
        json!({"reserve": {"percent_bps": 10_000, "days": 180, "reason": "x".repeat(200), "note": "é".repeat(1000)}}),
    )
    .await;
}

#[tokio::test]
async fn rate_limit_settings_beyond_their_bounds_are_refused() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    refused(
        &app,
        &m,
        json!({"rate_limits": {"test_per_second": 0}}),
        "settings.rate_limits.test_per_second",
    )
    .await;
    refused(
        &app,
        &m,
        json!({"rate_limits": {"live_per_second": 100_001}}),
        "settings.rate_limits.live_per_second",
    )
    .await;
    app.admin_post(
        &format!("/admin/v1/merchants/{}", m.id),
        json!({"settings": {"rate_limits": {"test_per_second": "fast"}}}),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("settings.rate_limits"));
    let s = accepted(
        &app,
        &m,
        json!({"rate_limits": {"live_per_second": 1, "test_per_second": 100_000}}),
    )
    .await;
    assert_eq!(
        s["rate_limits"],
        json!({"live_per_second": 1, "test_per_second": 100_000})
    );
}
