//! A payment link's page in a real browser (the headless Chromium harness
//! of `browser.rs`), at a desktop width and on a 360-px phone: a
//! customer-chosen amount, a wrong amount (the message at its field), then
//! a right one with the custom fields, the hosted checkout's bank
//! transfer (the test sends the money), and the link's success message.
//! Screenshots: `target/checkout-screenshots/link-*.png`.

use serde_json::{json, Value};

use crate::browser::{Driver, Session};
use crate::helpers::{spawn_app, TestApp};
use crate::payment_links::{create_link, link_now};

const SUCCESS: &str = "Thank you! Your rice leaves the warehouse within 2 days.";

/// Clicks the element `css` matches, shown or not (an `<option>`).
async fn click_any(s: &Session<'_>, css: &str) {
    let e = s.find(css).await;
    s.cmd(
        reqwest::Method::POST,
        &format!("/element/{e}/click"),
        Some(json!({})),
    )
    .await;
}

pub(crate) async fn clear(s: &Session<'_>, css: &str) {
    let e = s.wait_shown(css).await;
    s.cmd(
        reqwest::Method::POST,
        &format!("/element/{e}/clear"),
        Some(json!({})),
    )
    .await;
}

/// The page fits its window: nothing wider than the viewport.
pub(crate) async fn fits(s: &Session<'_>) {
    let v = s
        .script(
            "return [document.documentElement.scrollWidth, window.innerWidth];",
            json!([]),
        )
        .await;
    let (content, viewport) = (v[0].as_i64().unwrap(), v[1].as_i64().unwrap());
    assert!(
        content <= viewport,
        "{content}px of content in a {viewport}px window"
    );
}

/// One visit: the form, a wrong amount, a right one with the answers, the
/// checkout's transfer, the money, the success message. `tag` names the
/// screenshots.
async fn visit(s: &Session<'_>, app: &TestApp, key: &str, link: &Value, tag: &str, paid: usize) {
    s.goto(link["url"].as_str().unwrap()).await;
    s.wait_text("h1", |t| t.contains("Rice by the bag")).await;
    s.wait_text(".merchant", |t| t == "Ada Foods").await;
    fits(s).await;
    s.screenshot(&format!("link-{tag}-01-form")).await;
    // A wrong amount: the page says so next to the field.
    s.type_into("#amount-input", "20").await;
    s.type_into("#email", "ada@example.com").await;
    click_any(s, "#cf-size option[value='50kg']").await;
    s.type_into("#cf-address", "12 Admiralty Way, Lekki").await;
    s.click("#pay").await;
    let message = s.wait_text("#amount-input-error", |t| !t.is_empty()).await;
    assert_eq!(message, "Enter an amount from ₦1,000.00 to ₦50,000.00.");
    s.wait_shown("#form-errors").await;
    let kept = s
        .script("return document.querySelector('#email').value", json!([]))
        .await;
    assert_eq!(kept, "ada@example.com", "what was typed is kept");
    s.script(
        "document.querySelector('#amount-input').scrollIntoView({block: 'center'});",
        json!([]),
    )
    .await;
    fits(s).await;
    s.screenshot(&format!("link-{tag}-02-wrong-amount")).await;
    // The right amount, with the answers: on to the hosted checkout.
    clear(s, "#amount-input").await;
    s.type_into("#amount-input", "2,500").await;
    s.click("#pay").await;
    s.wait_url(&format!("{}/c/", app.base)).await;
    s.wait_text(".merchant", |t| t == "Ada Foods").await;
    s.click("label[for=method-transfer]").await;
    s.wait_text("#transfer-account", |t| t.len() == 10).await;
    fits(s).await;
    s.screenshot(&format!("link-{tag}-03-transfer")).await;
    let id = link["id"].as_str().unwrap();
    let intents = app
        .all_pages(key, &format!("/v1/payment_intents?payment_link={id}"))
        .await;
    let pi = &intents[0];
    assert_eq!(pi["amount"], 250000);
    assert_eq!(pi["status"], "processing");
    assert_eq!(pi["metadata"]["cf_size"], "50kg");
    assert_eq!(pi["metadata"]["cf_address"], "12 Admiralty Way, Lekki");
    let pid = pi["id"].as_str().unwrap();
    app.post(
        key,
        &format!("/v1/test_helpers/payment_intents/{pid}/simulate_transfer"),
        json!({}),
    )
    .await
    .assert_status(200);
    s.wait_shown("#done").await;
    s.wait_text("#done-message", |t| t == SUCCESS).await;
    fits(s).await;
    s.screenshot(&format!("link-{tag}-04-paid")).await;
    let now = link_now(app, key, link).await;
    assert_eq!(now["payments_count"], paid);
}

#[tokio::test]
async fn a_customer_pays_a_payment_link_in_a_real_browser_on_desktop_and_a_360_px_phone() {
    let driver = Driver::start().await;
    let app = spawn_app().await;
    let m = app.merchant().await;
    let brand = app
        .post(&m.test_key, "/v1/brands", json!({"name": "Ada Foods"}))
        .await;
    let link = create_link(
        &app,
        &m.test_key,
        json!({
            "name": "Rice by the bag",
            "description": "Long grain rice, delivered in Lagos.",
            "currency": "NGN",
            "amount_type": "customer_chosen",
            "min_amount": 100000,
            "max_amount": 5000000,
            "suggested_amounts": [250000, 500000, 1000000],
            "custom_fields": [
                {"key": "size", "label": "Bag size", "type": "dropdown", "options": ["25kg", "50kg"], "required": true},
                {"key": "address", "label": "Delivery address", "type": "text", "required": true}
            ],
            "success_message": SUCCESS,
            "brand": brand.body["id"],
        }),
    )
    .await;
    let desktop = driver.session_sized((1280, 900), false).await;
    visit(&desktop, &app, &m.test_key, &link, "desktop", 1).await;
    desktop.close().await;
    let phone = driver.session_sized((360, 780), true).await;
    visit(&phone, &app, &m.test_key, &link, "360px", 2).await;
    phone.close().await;
}
