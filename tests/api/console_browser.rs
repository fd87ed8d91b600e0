//! The operator console in a real browser (the headless Chromium harness
//! of `browser.rs`), at a desktop width and on a 360-px phone: the operator
//! signs in with the admin token, reads actor health (the charts refresh
//! by themselves), finds a merchant, approves a payout waiting for
//! approval, publishes an FX rate and looks at the clock; every page fits
//! its window. Screenshots of each page: `target/console-screenshots/`.

use serde_json::json;

use crate::browser::{Driver, Session};
use crate::console_pages::waiting_payouts;
use crate::helpers::{spawn_app, TestApp};
use crate::payment_link_browser::fits;

const DIR: &str = "console-screenshots";

async fn shot(s: &Session<'_>, tag: &str, name: &str) {
    fits(s).await;
    s.screenshot_to(DIR, &format!("{tag}-{name}")).await;
}

/// Clicks the submit button inside the form whose action is `action`.
async fn submit(s: &Session<'_>, action: &str) {
    s.click(&format!(r#"form[action="{action}"] button[type=submit]"#))
        .await;
}

/// Presses Tab and answers the focused element's text (or its id).
async fn tab(s: &Session<'_>) -> String {
    let keys = json!({"actions": [{"type": "key", "id": "keyboard", "actions": [
        {"type": "keyDown", "value": "\u{E004}"}, {"type": "keyUp", "value": "\u{E004}"}
    ]}]});
    s.cmd(reqwest::Method::POST, "/actions", Some(keys)).await;
    let v = s
        .script(
            "const e = document.activeElement; return e.id || e.textContent.trim();",
            json!([]),
        )
        .await;
    v.as_str().unwrap().to_string()
}

async fn operator_visit(s: &Session<'_>, app: &TestApp, merchant: &str, payout: &str, tag: &str) {
    let base = &app.base;
    s.goto(&format!("{base}/console/health")).await;
    s.wait_url(&format!("{base}/console/sign-in")).await;
    s.wait_text("h1", |t| t == "Sign in").await;
    shot(s, tag, "01-sign-in").await;
    s.type_into("#token", "not-the-token").await;
    submit(s, "/console/sign-in").await;
    s.wait_text("#problem", |t| t.contains("not the admin token"))
        .await;
    s.type_into("#token", &app.admin_token).await;
    submit(s, "/console/sign-in").await;
    s.wait_url(&format!("{base}/console/health")).await;
    s.wait_text("h1", |t| t == "Actor health").await;
    // Keyboard: the first Tab reaches the skip link, the next the navigation.
    assert_eq!(tab(s).await, "Skip to content");
    assert_eq!(tab(s).await, "Actor health");
    assert_eq!(tab(s).await, "Merchants");
    // Actor health: the table shows the payment intents' activations, and
    // the script swaps in a fresh drawing by itself.
    let kinds = s
        .wait_text("#kinds-title + .scroll", |t| t.contains("payment_intent"))
        .await;
    assert!(kinds.contains("ledger"), "{kinds}");
    s.wait_shown("#health-live[data-refreshed] svg polyline")
        .await;
    s.wait_shown("#health-live[data-refreshed] .chart").await;
    shot(s, tag, "02-health").await;

    s.click(r#"nav a[href="/console/merchants"]"#).await;
    s.wait_text("h1", |t| t == "Merchants").await;
    s.type_into("#q", "Ada").await;
    submit(s, "/console/merchants").await;
    s.wait_url(&format!("{base}/console/merchants?q=Ada")).await;
    shot(s, tag, "03-merchants").await;
    s.click(&format!(r#"a[href="/console/merchants/{merchant}"]"#))
        .await;
    s.wait_text("h1", |t| t == "Ada Foods").await;
    shot(s, tag, "04-merchant").await;

    s.click(r#"nav a[href="/console/payouts"]"#).await;
    s.wait_text("h1", |t| t == "Payout approvals").await;
    shot(s, tag, "05-payouts").await;
    submit(s, &format!("/console/payouts/{payout}/approve")).await;
    s.wait_text(".notice", |t| t.contains("Payout approved"))
        .await;
    shot(s, tag, "06-payout-approved").await;

    s.click(r#"nav a[href="/console/fx"]"#).await;
    s.wait_text("h1", |t| t == "FX rates").await;
    s.type_into("#rate", "161000").await;
    submit(s, "/console/fx").await;
    s.wait_text(".notice", |t| t.contains("Rate published"))
        .await;
    s.wait_shown(".chart svg polyline").await;
    shot(s, tag, "07-fx").await;

    s.click(r#"nav a[href="/console/clock"]"#).await;
    s.wait_text("h1", |t| t == "Clock").await;
    shot(s, tag, "08-clock").await;

    submit(s, "/console/sign-out").await;
    s.wait_url(&format!("{base}/console/sign-in")).await;
}

#[tokio::test]
async fn an_operator_signs_in_reads_actor_health_and_approves_a_payout_at_desktop_and_phone_widths()
{
    let app = spawn_app().await;
    let (m, payouts) = waiting_payouts(&app, 2).await;
    app.admin_post(
        &format!("/admin/v1/merchants/{}", m.id),
        json!({"settings": {}}),
    )
    .await
    .assert_status(200);
    // The merchant's name, for the search.
    let named = app
        .admin_post("/admin/v1/merchants", json!({"name": "Ada Foods"}))
        .await;
    named.assert_status(201);
    let ada = named.body["id"].as_str().unwrap().to_string();
    // Rates so the chart has a line.
    for rate in [158_000, 160_000] {
        app.admin_post("/admin/v1/fx_rates", json!({"rate": rate}))
            .await
            .assert_status(201);
    }
    let driver = Driver::start().await;
    for ((size, mobile, tag), payout) in
        [((1280, 900), false, "desktop"), ((360, 780), true, "phone")]
            .into_iter()
            .zip(&payouts)
    {
        let s = driver.session_sized(size, mobile).await;
        operator_visit(&s, &app, &ada, payout, tag).await;
        s.close().await;
        let r = app.get(&m.test_key, &format!("/v1/payouts/{payout}")).await;
        assert_eq!(r.body["status"], "queued", "{tag}: approved in the console");
    }
}
