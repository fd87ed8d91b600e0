//! The hosted invoice page (`/i/<code>`) over plain HTTP, as a browser
//! without JavaScript uses it: the invoice as a document (every merchant
//! string escaped, no script, no other origin), the form token, wrong
//! amounts shown at the field (400), the Pay redirect to the hosted
//! checkout, one payment per form, paid / void / unknown pages, the print
//! stylesheet.

use serde_json::{json, Value};

use crate::helpers::pages::{hidden, location, open, post, submit};
use crate::helpers::{spawn_app, TestApp};
use crate::invoices::{get_inv, open_invoice};
use crate::virtual_accounts::{customer, id};

/// The page's path (`/i/<code>`) of an invoice view.
pub(crate) fn page_path(inv: &Value) -> String {
    let url = inv["hosted_url"].as_str().unwrap();
    url[url.find("/i/").unwrap()..].to_string()
}

/// The merchant's payment intents, newest first.
async fn intents(app: &TestApp, k: &str) -> Vec<Value> {
    app.all_pages(k, "/v1/payment_intents").await
}

#[tokio::test]
async fn the_page_shows_the_invoice_as_a_document_escaped_with_no_script_and_prints_without_the_form(
) {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let brand = app
        .post(k, "/v1/brands", json!({"name": "Ada <Foods>"}))
        .await;
    let cust = customer(
        &app,
        k,
        json!({"email": "bola@example.com", "name": "Bola \"<b>\" Ade"}),
    )
    .await;
    let inv = open_invoice(
        &app,
        k,
        &cust,
        500_000,
        10,
        json!({
            "brand": brand.body["id"],
            "tax_rate_bps": 750,
            "memo": "<script>alert('x')</script> & thanks",
            "line_items": [
                {"description": "Rice <i>50kg</i>", "quantity": 2, "unit_amount": 500_000},
                {"description": "Delivery & handling", "quantity": 1, "unit_amount": 150_000},
            ],
        }),
    )
    .await;
    let p = open(&app, &page_path(&inv)).await;
    assert_eq!(p.status, 200, "{}", p.html);
    let csp = p.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.starts_with("default-src 'none'"), "{csp}");
    assert!(
        !csp.contains("script-src"),
        "the page runs no script: {csp}"
    );
    assert!(csp.contains("form-action 'self'"), "{csp}");
    assert_eq!(p.headers["cache-control"], "no-store");
    assert_eq!(p.headers["referrer-policy"], "no-referrer");
    let h = &p.html;
    assert!(!h.contains("<script") && !h.contains("<i>") && !h.contains("<b>"));
    for shown in [
        "Ada &lt;Foods&gt;",
        "Bola &quot;&lt;b&gt;&quot; Ade",
        "Rice &lt;i&gt;50kg&lt;/i&gt;",
        "Delivery &amp; handling",
        "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; thanks",
        inv["number"].as_str().unwrap(),
        r#"id="subtotal">₦11,500.00<"#,
        "Tax (7.5%)",
        r#"id="tax">₦862.50<"#,
        r#"id="total">₦12,362.50<"#,
        r#"id="amount-paid">₦0.00<"#,
        r#"id="amount-remaining">₦12,362.50<"#,
        r#"id="invoice-status">Open<"#,
        r#"<meta name="viewport" content="width=device-width, initial-scale=1">"#,
        "Pay this invoice",
    ] {
        assert!(h.contains(shown), "{shown} in {h}");
    }
    let due = chrono::NaiveDate::parse_from_str(inv["due_date"].as_str().unwrap(), "%Y-%m-%d")
        .unwrap()
        .format("%-d %B %Y")
        .to_string();
    assert!(h.contains(&due), "{due}");
    // Nothing from another origin: every src, href and action is a path.
    for attr in ["src=\"", "href=\"", "action=\""] {
        for part in h.split(attr).skip(1) {
            assert!(
                part.starts_with('/') || part.starts_with('"'),
                "{attr}{part:.40}"
            );
        }
    }
    // The print stylesheet hides the form.
    let css = reqwest::get(format!("{}/checkout/assets/checkout.css", app.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let print = &css[css.find("@media print").expect("a print stylesheet")..];
    assert!(print.contains(".invoice-pay"), "{print}");
    assert!(print.contains("display: none"), "{print}");
    // Unknown codes.
    assert_eq!(open(&app, "/i/nosuchcode").await.status, 404);
    assert_eq!(open(&app, "/i/%3Cx%3E").await.status, 404);
}

#[tokio::test]
async fn the_form_needs_its_token_wrong_amounts_are_400_at_the_field_and_pay_goes_to_checkout_once()
{
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let cust = customer(&app, k, json!({"email": "ada@example.com"})).await;
    // 10,000.00 with part payments of at least 2,000.00.
    let inv = open_invoice(
        &app,
        k,
        &cust,
        500_000,
        10,
        json!({"allow_partial_payments": true, "minimum_payment": 200_000}),
    )
    .await;
    let path = page_path(&inv);
    let form = open(&app, &path).await.html;
    assert!(form.contains(r#"value="10000.00""#), "what remains, typed");
    assert!(form.contains("from ₦2,000.00 to ₦10,000.00"));
    // No token, a wrong token, another form's token: 403, nothing made.
    let nonce = hidden(&form, "nonce");
    let p = post(&app, &path, &[("nonce".into(), nonce.clone())]).await;
    assert_eq!(p.status, 403);
    assert!(p.html.contains("Form expired"));
    let p = post(
        &app,
        &path,
        &[
            ("nonce".into(), nonce.clone()),
            ("form_token".into(), "00".repeat(32)),
        ],
    )
    .await;
    assert_eq!(p.status, 403);
    let other = open(&app, &path).await.html;
    let p = post(
        &app,
        &path,
        &[
            ("nonce".into(), nonce.clone()),
            ("form_token".into(), hidden(&other, "form_token")),
        ],
    )
    .await;
    assert_eq!(p.status, 403);
    assert!(intents(&app, k).await.is_empty());
    // Wrong amounts: 400, the message at the field, what was typed kept.
    for (typed, message) in [
        (
            "20000",
            "Enter at most ₦10,000.00, the amount that remains.",
        ),
        ("1000", "Enter an amount from ₦2,000.00 to ₦10,000.00."),
        ("ten", "Enter the amount in naira, like 2500 or 2,500.50."),
        ("0", "Enter an amount from ₦2,000.00 to ₦10,000.00."),
    ] {
        let p = submit(&app, &path, &form, &[("amount", typed)]).await;
        assert_eq!(p.status, 400, "{typed}");
        assert!(
            p.html
                .contains(&format!(r#"id="amount-input-error">{message}</p>"#)),
            "{typed}: {}",
            p.html
        );
        assert!(p.html.contains(&format!(r#"value="{typed}""#)));
        assert!(p.html.contains(r#"aria-invalid="true""#));
        assert!(p.html.contains(r#"role="alert""#));
        assert!(p.html.contains("Rice, 50kg"), "the invoice is still shown");
    }
    assert!(intents(&app, k).await.is_empty());
    // A right amount: 303 to the payment's hosted checkout.
    let p = submit(&app, &path, &form, &[("amount", "3,000")]).await;
    assert_eq!(p.status, 303, "{}", p.html);
    let to = location(&p);
    assert!(to.starts_with("/c/"), "{to}");
    // The same form again (a double click): the same payment.
    let again = submit(&app, &path, &form, &[("amount", "3,000")]).await;
    assert_eq!(again.status, 303);
    assert_eq!(location(&again), to);
    let all = intents(&app, k).await;
    assert_eq!(all.len(), 1, "one form, one payment");
    let pi = &all[0];
    assert_eq!(pi["amount"], 300_000);
    assert_eq!(pi["customer"], cust.as_str());
    assert_eq!(pi["status"], "created");
    assert_eq!(
        pi["description"],
        format!("Invoice {}", inv["number"].as_str().unwrap())
    );
    assert_eq!(pi["return_url"], inv["hosted_url"]);
    // Its checkout page is there.
    assert_eq!(open(&app, &to).await.status, 200);
    // Paid: the money applies to the invoice.
    app.post(
        k,
        &format!("/v1/test_helpers/payment_intents/{}/succeed", id(pi)),
        json!({}),
    )
    .await
    .assert_status(200);
    let after = get_inv(&app, k, &inv).await;
    assert_eq!(after["amount_paid"], 300_000);
    let p = open(&app, &path).await;
    assert!(p.html.contains(r#"id="amount-remaining">₦7,000.00<"#));
    assert!(p.html.contains(r#"value="7000.00""#));
    // The rest, from a new form, left as typed: pays it.
    let p = submit(&app, &path, &p.html, &[]).await;
    assert_eq!(p.status, 303);
    let all = intents(&app, k).await;
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["amount"], 700_000);
    app.post(
        k,
        &format!("/v1/test_helpers/payment_intents/{}/succeed", id(&all[0])),
        json!({}),
    )
    .await
    .assert_status(200);
    let p = open(&app, &path).await;
    assert_eq!(p.status, 200);
    assert!(p.html.contains(r#"id="invoice-status">Paid<"#));
    assert!(p.html.contains("<strong>Paid</strong> in full"));
    assert!(!p.html.contains("<form"), "nothing more to pay");
    // The old form of a paid invoice: the page as it is now, 409.
    let late = submit(&app, &path, &form, &[("amount", "2000")]).await;
    assert_eq!(late.status, 409);
    assert!(late.html.contains(r#"id="invoice-status">Paid<"#));
    assert_eq!(intents(&app, k).await.len(), 2);
}

#[tokio::test]
async fn a_whole_only_invoice_pays_what_remains_and_a_void_one_is_gone() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let cust = customer(&app, k, json!({"email": "ada@example.com"})).await;
    let inv = open_invoice(&app, k, &cust, 250_000, 3, json!({})).await;
    let path = page_path(&inv);
    let form = open(&app, &path).await.html;
    assert!(!form.contains(r#"name="amount""#), "no amount to choose");
    assert!(form.contains(r#"id="amount">₦5,000.00<"#));
    // An amount slipped into the form is not read: all that remains.
    let p = submit(&app, &path, &form, &[("amount", "1")]).await;
    assert_eq!(p.status, 303);
    let all = intents(&app, k).await;
    assert_eq!(all[0]["amount"], 500_000);
    // Void: 410, a clear message, no form.
    let other = open_invoice(&app, k, &cust, 100_000, 3, json!({})).await;
    app.post(k, &format!("/v1/invoices/{}/void", id(&other)), json!({}))
        .await
        .assert_status(200);
    let p = open(&app, &page_path(&other)).await;
    assert_eq!(p.status, 410);
    assert!(p.html.contains("This invoice was canceled"));
    assert!(!p.html.contains("<form"));
    let fresh = open(&app, &path).await.html;
    app.post(k, &format!("/v1/invoices/{}/void", id(&inv)), json!({}))
        .await
        .assert_status(200);
    assert_eq!(submit(&app, &path, &fresh, &[]).await.status, 410);
}
