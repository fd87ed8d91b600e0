//! The hosted invoice page in a real browser (the headless Chromium
//! harness of `browser.rs`), at a desktop width and on a 360-px phone: an
//! invoice taking part payments; a wrong amount (the message at its
//! field), a part paid by the hosted checkout's bank transfer (the test
//! sends the money), back on the invoice with the remainder, the rest paid
//! the same way, and "Paid". The print view (print media emulated) hides
//! the form. Screenshots: `target/checkout-screenshots/invoice-*.png`.

use serde_json::{json, Value};

use crate::browser::{Driver, Session};
use crate::helpers::{spawn_app, TestApp};
use crate::invoices::{get_inv, open_invoice};
use crate::payment_link_browser::{clear, fits};
use crate::virtual_accounts::customer;

/// Pays on the hosted checkout the browser is on, by bank transfer (the
/// test sends the money), and waits to be back on the invoice's page.
async fn pay_by_transfer(s: &Session<'_>, app: &TestApp, key: &str, inv: &Value, shot: &str) {
    s.wait_url(&format!("{}/c/", app.base)).await;
    s.wait_text(".merchant", |t| t == "Ada Foods").await;
    s.click("label[for=method-transfer]").await;
    s.wait_text("#transfer-account", |t| t.len() == 10).await;
    fits(s).await;
    s.screenshot(shot).await;
    let intents = app.all_pages(key, "/v1/payment_intents").await;
    let pi = &intents[0];
    assert_eq!(pi["status"], "processing");
    let pid = pi["id"].as_str().unwrap();
    app.post(
        key,
        &format!("/v1/test_helpers/payment_intents/{pid}/simulate_transfer"),
        json!({}),
    )
    .await
    .assert_status(200);
    s.wait_url(inv["hosted_url"].as_str().unwrap()).await;
}

/// The page is printed: print media emulated (Chrome DevTools through
/// chromedriver), the form hidden, the document kept.
async fn print_view(s: &Session<'_>, shot: &str) {
    let media = |m: &str| json!({"cmd": "Emulation.setEmulatedMedia", "params": {"media": m}});
    s.cmd(
        reqwest::Method::POST,
        "/goog/cdp/execute",
        Some(media("print")),
    )
    .await;
    let shown = s
        .script(
            "const d = (css) => { const e = document.querySelector(css); return e ? getComputedStyle(e).display : 'absent'; };
             return [d('.invoice-pay'), d('.invoice-doc'), d('.foot'), window.matchMedia('print').matches];",
            json!([]),
        )
        .await;
    assert_eq!(shown[0], "none", "the form is hidden in print: {shown}");
    assert_ne!(shown[1], "none", "the invoice is printed: {shown}");
    assert_eq!(shown[2], "none", "{shown}");
    assert_eq!(shown[3], true, "{shown}");
    s.screenshot(shot).await;
    s.cmd(reqwest::Method::POST, "/goog/cdp/execute", Some(media("")))
        .await;
}

async fn visit(s: &Session<'_>, app: &TestApp, key: &str, inv: &Value, tag: &str) {
    let url = inv["hosted_url"].as_str().unwrap();
    s.goto(url).await;
    s.wait_text("h1", |t| t == inv["number"].as_str().unwrap())
        .await;
    s.wait_text(".merchant", |t| t == "Ada Foods").await;
    s.wait_text("#amount-remaining", |t| t == "₦10,750.00")
        .await;
    s.wait_text("#invoice-status", |t| t == "Open").await;
    fits(s).await;
    s.screenshot(&format!("invoice-{tag}-01-open")).await;
    print_view(s, &format!("invoice-{tag}-02-print")).await;
    // A wrong amount: the page says so next to the field.
    clear(s, "#amount-input").await;
    s.type_into("#amount-input", "50").await;
    s.click("#pay").await;
    let message = s.wait_text("#amount-input-error", |t| !t.is_empty()).await;
    assert_eq!(message, "Enter an amount from ₦1,000.00 to ₦10,750.00.");
    s.wait_shown("#form-errors").await;
    fits(s).await;
    s.screenshot(&format!("invoice-{tag}-03-wrong-amount"))
        .await;
    // A part: 4,000.
    clear(s, "#amount-input").await;
    s.type_into("#amount-input", "4,000").await;
    s.click("#pay").await;
    pay_by_transfer(s, app, key, inv, &format!("invoice-{tag}-04-transfer")).await;
    // Back on the invoice (and after a reload): the remainder.
    s.wait_text("#amount-remaining", |t| t == "₦6,750.00").await;
    s.goto(url).await;
    s.wait_text("#amount-paid", |t| t == "₦4,000.00").await;
    s.wait_text("#amount-remaining", |t| t == "₦6,750.00").await;
    fits(s).await;
    s.screenshot(&format!("invoice-{tag}-05-part-paid")).await;
    assert_eq!(get_inv(app, key, inv).await["amount_paid"], 400_000);
    // The rest, as the form offers it.
    s.click("#pay").await;
    pay_by_transfer(s, app, key, inv, &format!("invoice-{tag}-06-transfer-rest")).await;
    s.goto(url).await;
    s.wait_text("#invoice-status", |t| t == "Paid").await;
    s.wait_shown("#paid-notice").await;
    s.wait_text("#amount-remaining", |t| t == "₦0.00").await;
    let forms = s
        .script("return document.querySelectorAll('form').length", json!([]))
        .await;
    assert_eq!(forms, 0);
    fits(s).await;
    s.screenshot(&format!("invoice-{tag}-07-paid")).await;
    let done = get_inv(app, key, inv).await;
    assert_eq!(done["status"], "paid");
    assert_eq!(done["amount_paid"], 1_075_000);
}

#[tokio::test]
async fn a_customer_pays_an_invoice_in_parts_in_a_real_browser_on_desktop_and_a_360_px_phone() {
    let driver = Driver::start().await;
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let brand = app
        .post(k, "/v1/brands", json!({"name": "Ada Foods"}))
        .await;
    let cust = customer(
        &app,
        k,
        json!({"email": "bola@example.com", "name": "Bola Ade"}),
    )
    .await;
    let body = |memo: &str| {
        json!({
            "brand": brand.body["id"],
            "allow_partial_payments": true,
            "minimum_payment": 100_000,
            "tax_rate_bps": 750,
            "memo": memo,
            "line_items": [
                {"description": "Long grain rice, 50kg bag", "quantity": 2, "unit_amount": 400_000},
                {"description": "Delivery to Lekki Phase 1, Lagos", "quantity": 1, "unit_amount": 200_000},
            ],
        })
    };
    let desktop_inv = open_invoice(&app, k, &cust, 0, 14, body("Thank you for your order.")).await;
    let phone_inv = open_invoice(&app, k, &cust, 0, 14, body("Bank transfers welcome.")).await;
    let desktop = driver.session_sized((1280, 900), false).await;
    visit(&desktop, &app, k, &desktop_inv, "desktop").await;
    desktop.close().await;
    let phone = driver.session_sized((360, 780), true).await;
    visit(&phone, &app, k, &phone_inv, "360px").await;
    phone.close().await;
}
