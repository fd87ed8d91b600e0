//! The merchant dashboard in a real browser (the headless Chromium harness
//! of `browser.rs`), on a desktop window and a 360-px phone: an owner signs
//! in, sees a payment made through the API arrive on the payments page
//! without a reload (the page's script reading `/dashboard/live`), refunds
//! it, sends a payout after the name enquiry is shown, adds a USDT wallet
//! and a brand, rolls the test key (shown once); a viewer signs in and is refused the
//! key roll with the 403 page. Every page fits its window, labels every
//! input, and weighs under 200 KB with its script and style sheet.
//! Also the webhooks page (an endpoint, a test event and its attempt, its
//! secret revealed) and the disputes page (evidence).
//! Screenshots: `target/dashboard-screenshots/<width>-<step>.png`.

use serde_json::json;

use crate::browser::{Driver, Session};
use crate::helpers::dashboard::{invite, set_password, PASSWORD};
use crate::helpers::{spawn_app, TestApp};
use crate::payment_link_browser::fits;
use crate::usdt::trc20;

const SHOTS: &str = "dashboard-screenshots";
/// Largest page, with its script and style sheet.
const PAGE_MAX_BYTES: i64 = 200 * 1024;

/// Accepts the `confirm()` a dangerous form asks.
async fn accept(s: &Session<'_>) {
    s.cmd(reqwest::Method::POST, "/alert/accept", Some(json!({})))
        .await;
}

/// The page fits its window, every visible input and select has a label,
/// and the page with its assets is under [`PAGE_MAX_BYTES`]; then a
/// screenshot.
async fn check(s: &Session<'_>, app: &TestApp, shot: &str) {
    fits(s).await;
    // A phone's layout viewport is not widened by content.
    let widths = s
        .script("return [window.innerWidth, screen.width];", json!([]))
        .await;
    let (inner, screen) = (widths[0].as_i64().unwrap(), widths[1].as_i64().unwrap());
    assert!(
        screen > 500 || inner <= screen,
        "{shot}: {inner}px wide on a {screen}px phone"
    );
    let unlabelled = s
        .script(
            "return Array.from(document.querySelectorAll('input:not([type=hidden]), select'))
               .filter(e => !e.labels || e.labels.length === 0).map(e => e.outerHTML);",
            json!([]),
        )
        .await;
    assert_eq!(unlabelled, json!([]), "inputs without labels");
    let html = s
        .script(
            "return document.documentElement.outerHTML.length;",
            json!([]),
        )
        .await
        .as_i64()
        .unwrap();
    let mut total = html;
    for asset in [
        "/dashboard/assets/dashboard.js",
        "/dashboard/assets/dashboard.css",
    ] {
        let r = reqwest::get(format!("{}{asset}", app.base)).await.unwrap();
        total += r.bytes().await.unwrap().len() as i64;
    }
    assert!(total < PAGE_MAX_BYTES, "{shot}: {total} bytes");
    s.screenshot_to(SHOTS, shot).await;
}

async fn sign_in(s: &Session<'_>, app: &TestApp, email: &str) {
    s.goto(&format!("{}/dashboard/sign-in", app.base)).await;
    s.type_into("#email", email).await;
    s.type_into("#password", PASSWORD).await;
    s.click("main button[type=submit]").await;
    s.wait_text("h1", |t| t == "Home").await;
}

/// One run of the owner's day at one window size.
/// Answers the secret key the owner rolled.
async fn owner_day(s: &Session<'_>, app: &TestApp, key: &str, tag: &str, amount: i64) -> String {
    s.goto(&format!("{}/dashboard/sign-in", app.base)).await;
    s.wait_text("h1", |t| t == "Sign in").await;
    check(s, app, &format!("{tag}-01-sign-in")).await;
    sign_in(s, app, "ada@example.com").await;
    s.wait_text(".merchant", |t| t == "Ada <Foods> & Co").await;
    check(s, app, &format!("{tag}-02-home")).await;
    // A payment arrives while the payments page is open.
    s.goto(&format!("{}/dashboard/payments", app.base)).await;
    s.wait_text("h1", |t| t == "Payments").await;
    s.wait_shown("body[data-live=open]").await;
    let shown = crate::helpers::dashboard::naira(amount);
    let pi = app.paid_intent(key, amount).await;
    let id = pi["id"].as_str().unwrap().to_string();
    s.wait_text("#payment-rows", |t| t.contains(&shown)).await;
    check(s, app, &format!("{tag}-03-payment-arrived")).await;
    // Refund part of it.
    s.click(&format!("#payment-rows a[href='/dashboard/payments/{id}']"))
        .await;
    s.wait_text("h2#sum-h", |t| t.contains(&shown)).await;
    check(s, app, &format!("{tag}-04-payment")).await;
    s.type_into("#r-amount", "100").await;
    s.type_into("#r-reason", "Broken on arrival").await;
    s.click("form[action$='/refund'] button").await;
    accept(s).await;
    s.wait_text("#refund-rows", |t| t.contains("₦100.00")).await;
    check(s, app, &format!("{tag}-05-refunded")).await;
    let refunds = app
        .get(key, &format!("/v1/refunds?payment_intent={id}"))
        .await;
    assert_eq!(refunds.body["data"][0]["amount"], 10_000);
    // A payout: the name enquiry, then the confirmation.
    s.goto(&format!("{}/dashboard/payouts", app.base)).await;
    s.wait_text("h1", |t| t == "Payouts").await;
    check(s, app, &format!("{tag}-06-payouts")).await;
    s.script(
        "document.querySelector('#p-bank').value = '058';",
        json!([]),
    )
    .await;
    s.type_into("#p-account", "0123456789").await;
    s.type_into("#p-amount", "250").await;
    s.click("form[action='/dashboard/payouts/enquire'] button")
        .await;
    let name = s.wait_text("#account-name", |t| !t.is_empty()).await;
    check(s, app, &format!("{tag}-07-name-enquiry")).await;
    s.click("form[action='/dashboard/payouts/create'] button")
        .await;
    s.wait_text("h1", |t| t == "Payouts").await;
    s.wait_text("tbody", |t| t.contains("₦250.00")).await;
    check(s, app, &format!("{tag}-08-payout-sent")).await;
    assert!(!name.is_empty());
    // A USDT wallet.
    s.goto(&format!("{}/dashboard/settings", app.base)).await;
    s.wait_text("h1", |t| t == "Settings").await;
    let address = trc20(&format!("{}w", tag.len()));
    s.type_into("#w-address", &address).await;
    s.type_into("#w-label", "Cold <wallet>").await;
    s.click("form[action='/dashboard/settings/wallets'] button")
        .await;
    s.wait_text("#wallet-rows", |t| t.contains(&address)).await;
    s.wait_text("#wallet-rows", |t| t.contains("Cold <wallet>"))
        .await;
    check(s, app, &format!("{tag}-09-settings-wallet")).await;
    // A brand, through `POST /v1/brands`' own operation.
    let brand = format!("Ada <Kitchen> {tag}");
    s.type_into("#b-name", &brand).await;
    s.click("form[action='/dashboard/settings/brands'] button")
        .await;
    s.wait_text("#brand-list", |t| t.contains(&brand)).await;
    s.script(
        "document.getElementById('b-h').scrollIntoView();",
        json!([]),
    )
    .await;
    check(s, app, &format!("{tag}-09b-settings-brand")).await;
    let brands = app.get(key, "/v1/brands?limit=1").await;
    assert_eq!(brands.body["data"][0]["name"], brand.as_str());
    // Roll the test key: confirmed, shown once.
    s.goto(&format!("{}/dashboard/developers", app.base)).await;
    s.wait_text("h1", |t| t == "Developers").await;
    check(s, app, &format!("{tag}-10-developers")).await;
    s.click("label[for=k-confirm]").await;
    s.click("form[action='/dashboard/developers/roll-key'] button")
        .await;
    accept(s).await;
    let rolled = s
        .wait_text("#new-key", |t| t.starts_with("svc_test_"))
        .await;
    check(s, app, &format!("{tag}-11-key-rolled")).await;
    app.get(&rolled, "/v1/balance").await.assert_status(200);
    assert_eq!(app.get(key, "/v1/balance").await.status, 401);
    // The brand switch and the mode switch are on every page.
    s.wait_shown("#brand-switch").await;
    s.click(".switch button[aria-describedby=mode-label]").await;
    s.wait_text("#mode-label", |t| t == "Live mode").await;
    check(s, app, &format!("{tag}-12-live-mode")).await;
    s.click(".switch button[aria-describedby=mode-label]").await;
    s.wait_text("#mode-label", |t| t == "Test mode").await;
    s.click(".signout button").await;
    s.wait_text("h1", |t| t == "Sign in").await;
    rolled
}

/// A viewer sees the developers page without the roll form, and a roll
/// posted anyway is refused with the 403 page.
async fn viewer_refused(s: &Session<'_>, app: &TestApp, tag: &str) {
    sign_in(s, app, "vee@example.com").await;
    s.goto(&format!("{}/dashboard/developers", app.base)).await;
    s.wait_text("h1", |t| t == "Developers").await;
    let forms = s
        .script(
            "return document.querySelectorAll(\"form[action='/dashboard/developers/roll-key']\").length",
            json!([]),
        )
        .await;
    assert_eq!(forms, 0);
    // The form an owner would have, posted by hand with this session's
    // token.
    s.script(
        "var f = document.createElement('form'); f.method = 'post'; f.action = '/dashboard/developers/roll-key';
         var c = document.querySelector('input[name=csrf]').cloneNode(); f.appendChild(c);
         var k = document.createElement('input'); k.name = 'confirm'; k.value = 'yes'; f.appendChild(k);
         document.body.appendChild(f); f.submit();",
        json!([]),
    )
    .await;
    s.wait_text("h1", |t| t == "Not allowed").await;
    s.wait_text(".error", |t| t == "Only an owner can roll keys.")
        .await;
    check(s, app, &format!("{tag}-13-viewer-refused")).await;
    s.click(".signout button").await;
    s.wait_text("h1", |t| t == "Sign in").await;
}

#[tokio::test]
async fn an_owner_works_the_dashboard_in_a_real_browser_and_a_viewer_is_refused_on_desktop_and_a_360_px_phone(
) {
    let driver = Driver::start().await;
    let app = spawn_app().await;
    // A merchant-controlled name with markup: shown as text.
    let r = app
        .admin_post(
            "/admin/v1/merchants",
            json!({"name": "Ada <Foods> & Co", "settings": {"usdt": {"enabled": true}}}),
        )
        .await;
    r.assert_status(201);
    let m = r.body["id"].as_str().unwrap().to_string();
    let mut key = r.body["test_secret_key"].as_str().unwrap().to_string();
    app.paid_intent(&key, 5_000_000).await;
    app.post(&key, "/v1/test_helpers/balance/release_pending", json!({}))
        .await
        .assert_status(200);
    for (email, role) in [("ada@example.com", "owner"), ("vee@example.com", "viewer")] {
        let link = invite(&app, &m, email, role).await;
        assert_eq!(set_password(&app, &link, PASSWORD).await.status, 303);
    }
    for (tag, window, mobile, amount) in [
        ("desktop", (1280, 900), false, 123_400),
        ("phone", (360, 780), true, 234_500),
    ] {
        let s = driver.session_sized(window, mobile).await;
        // The owner rolls the test key: the API calls go on with the new one.
        key = owner_day(&s, &app, &key, tag, amount).await;
        viewer_refused(&s, &app, tag).await;
        s.close().await;
    }
}

/// The webhooks and disputes pages in the browser on both windows: an
/// owner opens an endpoint, sends it a test event (received by a real
/// HTTPS receiver) and sees the attempt with its response code, reveals
/// its signing secret after confirming, and submits evidence on a dispute
/// (shown as text).
#[tokio::test]
async fn the_webhooks_and_disputes_pages_work_in_a_real_browser_on_desktop_and_a_360_px_phone() {
    let driver = Driver::start().await;
    let mut rx = crate::webhooks::Receiver::start();
    let app = crate::helpers::spawn_app_with(&rx.flags()).await;
    let m = app.merchant().await;
    let key = m.test_key.clone();
    let made = app
        .post(
            &key,
            "/v1/webhook_endpoints",
            json!({"url": rx.url("/kobo/a-rather-long-path-for-a-phone"), "events": ["dispute.won"]}),
        )
        .await;
    made.assert_status(201);
    let ep = made.body["id"].as_str().unwrap().to_string();
    let secret = made.body["secret"].as_str().unwrap().to_string();
    app.paid_intent(&key, 50_000).await;
    app.post(&key, "/v1/test_helpers/balance/release_pending", json!({}))
        .await
        .assert_status(200);
    let paid = app.paid_intent(&key, 100_000).await;
    let d = app
        .post(
            &key,
            &format!(
                "/v1/test_helpers/payment_intents/{}/dispute",
                paid["id"].as_str().unwrap()
            ),
            json!({"amount": 60_000, "reason": "fraudulent"}),
        )
        .await;
    d.assert_status(200);
    let dispute = d.body["id"].as_str().unwrap().to_string();
    let link = invite(&app, &m.id, "ada@example.com", "owner").await;
    assert_eq!(set_password(&app, &link, PASSWORD).await.status, 303);
    for (tag, window, mobile) in [("desktop", (1280, 900), false), ("phone", (360, 780), true)] {
        let s = driver.session_sized(window, mobile).await;
        sign_in(&s, &app, "ada@example.com").await;
        s.goto(&format!("{}/dashboard/webhooks", app.base)).await;
        s.wait_text("h1", |t| t == "Webhooks").await;
        check(&s, &app, &format!("{tag}-20-webhooks")).await;
        s.click(&format!("a[href='/dashboard/webhooks/{ep}']"))
            .await;
        s.wait_text("h1", |t| t == "Webhook endpoint").await;
        check(&s, &app, &format!("{tag}-21-webhook-endpoint")).await;
        // A test event, through the API's operation, to the receiver.
        s.click("form[action$='/test'] button").await;
        let got = rx.next(std::time::Duration::from_secs(15)).await;
        crate::webhooks::verify(&got, &secret);
        assert_eq!(got.json()["type"], "webhook_endpoint.test");
        let event = got.event_id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        while app
            .get(&key, &format!("/v1/events/{event}/delivery_attempts"))
            .await
            .body["data"]
            .as_array()
            .unwrap()
            .is_empty()
        {
            assert!(std::time::Instant::now() < deadline, "no attempt recorded");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        s.goto(&format!("{}/dashboard/webhooks/{ep}", app.base))
            .await;
        s.wait_text("#del-h + p + .scroll tbody", |t| {
            t.contains(&event) && t.contains("webhook_endpoint.test") && t.contains("200")
        })
        .await;
        s.script(
            "document.getElementById('del-h').scrollIntoView();",
            json!([]),
        )
        .await;
        check(&s, &app, &format!("{tag}-25-webhook-test-sent")).await;
        s.click("form[action$='/secret'] label").await;
        s.click("form[action$='/secret'] button").await;
        accept(&s).await;
        let shown = s
            .wait_text("#signing-secret", |t| t.starts_with("whsec_"))
            .await;
        assert_eq!(shown, secret);
        check(&s, &app, &format!("{tag}-22-webhook-secret")).await;
        s.goto(&format!("{}/dashboard/disputes", app.base)).await;
        s.wait_text("h1", |t| t == "Disputes").await;
        check(&s, &app, &format!("{tag}-23-disputes")).await;
        s.click(&format!("a[href='/dashboard/disputes/{dispute}']"))
            .await;
        s.wait_text("h1", |t| t == "Dispute").await;
        let said = format!("Delivered <signed> ({tag})");
        s.script("document.querySelector('#e-text').value = '';", json!([]))
            .await;
        s.type_into("#e-text", &said).await;
        s.click("form[action$='/evidence'] button").await;
        s.wait_text("#evidence-h + dl", |t| t.contains(&said)).await;
        check(&s, &app, &format!("{tag}-24-dispute-evidence")).await;
        let api = app.get(&key, &format!("/v1/disputes/{dispute}")).await;
        assert_eq!(api.body["evidence"]["text"], said.as_str());
        s.click(".signout button").await;
        s.wait_text("h1", |t| t == "Sign in").await;
        s.close().await;
    }
}

#[tokio::test]
async fn the_customer_and_billing_pages_fit_a_desktop_and_a_360_px_phone_and_an_owner_cancels_a_subscription_at_period_end(
) {
    let driver = Driver::start().await;
    let app = spawn_app().await;
    let m = app.merchant().await;
    let made = crate::dashboard_pages_billing::make(&app, &m).await;
    let link = invite(&app, &m.id, "ada@example.com", "owner").await;
    assert_eq!(set_password(&app, &link, PASSWORD).await.status, 303);
    let details = crate::dashboard_pages_billing::pages(&made);
    for (tag, window, mobile) in [("desktop", (1280, 900), false), ("phone", (360, 780), true)] {
        let s = driver.session_sized(window, mobile).await;
        sign_in(&s, &app, "ada@example.com").await;
        let lists = [
            ("customers", "Customers"),
            ("mandates", "Mandates"),
            ("payment_links", "Payment links"),
            ("invoices", "Invoices"),
            ("subscriptions", "Subscriptions"),
            ("plans", "Plans"),
        ];
        for (i, (path, title)) in lists.iter().enumerate() {
            s.goto(&format!("{}/dashboard/{path}", app.base)).await;
            s.wait_text("h1", |t| t == *title).await;
            check(&s, &app, &format!("{tag}-2{i}-{path}")).await;
        }
        for (i, path) in details.iter().enumerate() {
            s.goto(&format!("{}{path}", app.base)).await;
            s.wait_shown("h2#sum-h").await;
            check(&s, &app, &format!("{tag}-3{i}-detail")).await;
        }
        // The customer's name with markup is shown as text.
        s.goto(&format!("{}{}", app.base, details[0])).await;
        s.wait_text("h2#sum-h", |t| t == "Ada <b>Obi</b> & Sons")
            .await;
        if tag == "phone" {
            // Cancel at period end, confirmed.
            s.goto(&format!("{}{}", app.base, details[4])).await;
            s.click("form[action$='/cancel'] button[type=submit]").await;
            accept(&s).await;
            s.wait_text("main dl", |t| t.contains("Cancels at period endyes"))
                .await;
            check(&s, &app, &format!("{tag}-40-subscription-canceling")).await;
        }
        s.close().await;
    }
    let s = crate::subscriptions::get_sub(&app, &m.test_key, &made.subscription).await;
    assert_eq!(s["cancel_at_period_end"], true);
}
