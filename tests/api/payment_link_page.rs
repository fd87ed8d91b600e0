//! A payment link's page (`/p/<slug>`) over plain HTTP, as a browser
//! without JavaScript uses it: the form, wrong answers shown next to their
//! fields, the form token, double submits, the slots a started payment
//! holds (freed by cancel, failure and abandonment; a late transfer still
//! counts), hygiene (CSP, escaping, no other origin).

use serde_json::{json, Value};

use crate::helpers::pages::{self, hidden, location, Page};
use crate::helpers::{spawn_app, TestApp};
use crate::payment_links::{create_link, link_now, pay};

/// The link page of `slug`.
async fn open(app: &TestApp, slug: &str) -> Page {
    pages::open(app, &format!("/p/{slug}")).await
}

/// Posts `fields` with the form's own nonce and token (from `form`).
async fn submit(app: &TestApp, slug: &str, form: &str, fields: &[(&str, &str)]) -> Page {
    pages::submit(app, &format!("/p/{slug}"), form, fields).await
}

async fn post(app: &TestApp, slug: &str, fields: &[(String, String)]) -> Page {
    pages::post(app, &format!("/p/{slug}"), fields).await
}

fn rice(slug: &str) -> Value {
    json!({
        "name": "Rice <b>by</b> the bag",
        "description": "<script>alert('x')</script> & more",
        "currency": "NGN",
        "amount_type": "customer_chosen",
        "min_amount": 100000,
        "max_amount": 5000000,
        "suggested_amounts": [250000],
        "slug": slug,
        "custom_fields": [
            {"key": "size", "label": "Bag \"size\"", "type": "dropdown", "options": ["25kg", "<50kg>"], "required": true},
            {"key": "qty", "label": "How many", "type": "number"}
        ],
        "success_message": "Thanks! <i>We deliver</i> in 2 days.",
    })
}

#[tokio::test]
async fn the_page_shows_the_link_escapes_everything_and_keeps_to_its_origin() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let brand = app
        .post(&m.test_key, "/v1/brands", json!({"name": "Ada <Foods>"}))
        .await;
    let mut body = rice("ada-rice");
    body["brand"] = brand.body["id"].clone();
    create_link(&app, &m.test_key, body).await;
    let p = open(&app, "ada-rice").await;
    assert_eq!(p.status, 200);
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
    assert!(
        h.contains("Ada &lt;Foods&gt;"),
        "the brand's name heads the page"
    );
    assert!(h.contains("Rice &lt;b&gt;by&lt;/b&gt; the bag"));
    assert!(h.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more"));
    assert!(h.contains("Bag &quot;size&quot;"));
    assert!(h.contains(r#"value="&lt;50kg&gt;""#));
    assert!(!h.contains("<script"), "no script at all");
    assert!(!h.contains("<b>") && !h.contains("<50kg>"));
    assert!(h.contains("From ₦1,000.00 to ₦50,000.00"));
    assert!(h.contains("₦2,500.00"), "the suggestion");
    assert!(h.contains(r#"name="email""#) && h.contains(r#"name="cf_size""#));
    assert!(h.contains(r#"<meta name="viewport" content="width=device-width, initial-scale=1">"#));
    // Nothing from another origin: every src and href is a path.
    for attr in ["src=\"", "href=\"", "action=\""] {
        for part in h.split(attr).skip(1) {
            assert!(
                part.starts_with('/') || part.starts_with('"'),
                "{attr}{part:.40}"
            );
        }
    }
    let unknown = open(&app, "no-such-link").await;
    assert_eq!(unknown.status, 404);
    assert_eq!(open(&app, "BAD").await.status, 404);
}

#[tokio::test]
async fn wrong_answers_are_shown_next_to_their_fields_and_a_right_one_goes_to_checkout() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let l = create_link(&app, &m.test_key, rice("ada-rice")).await;
    let form = open(&app, "ada-rice").await.html;
    // Everything missing.
    let p = submit(&app, "ada-rice", &form, &[]).await;
    assert_eq!(p.status, 400);
    assert!(p.html.contains(r#"role="alert""#));
    for message in [
        "Enter an amount.",
        "Enter your email address.",
        "This field is required.",
    ] {
        assert!(p.html.contains(message), "{message}");
    }
    // A wrong amount, a wrong email, a wrong number: each at its field,
    // what was typed kept.
    let p = submit(
        &app,
        "ada-rice",
        &form,
        &[
            ("amount", "20"),
            ("email", "ada@"),
            ("cf_size", "25kg"),
            ("cf_qty", "two"),
        ],
    )
    .await;
    assert_eq!(p.status, 400);
    assert!(
        p.html.contains(
            r#"id="amount-input-error">Enter an amount from ₦1,000.00 to ₦50,000.00.</p>"#
        ),
        "{}",
        p.html
    );
    assert!(p
        .html
        .contains(r#"aria-invalid="true" aria-describedby="amount-input-error""#));
    assert!(p
        .html
        .contains(r#"id="email-error">Enter a valid email address"#));
    assert!(p.html.contains(r#"id="cf-qty-error">Enter a number.</p>"#));
    assert!(p.html.contains(r#"value="ada@""#) && p.html.contains(r#"value="two""#));
    assert!(p.html.contains(r#"<option value="25kg" selected>"#));
    let p = submit(
        &app,
        "ada-rice",
        &form,
        &[("amount", "lots"), ("email", "a@b.co"), ("cf_size", "25kg")],
    )
    .await;
    assert!(p.html.contains("Enter the amount in naira"));
    assert_eq!(
        pay_count(&app, &m.test_key, &l).await,
        0,
        "no payment was made"
    );
    // Right answers: 303 to the payment's checkout; the suggestion counts
    // when no amount is typed.
    let ok = [
        ("suggested", "250000"),
        ("email", "ada@example.com"),
        ("cf_size", "<50kg>"),
        ("cf_qty", "3"),
    ];
    let p = submit(&app, "ada-rice", &form, &ok).await;
    assert_eq!(p.status, 303, "{}", p.html);
    let to = location(&p);
    assert!(to.starts_with("/c/"), "{to}");
    // The same form again (a double submit): the same payment.
    let again = submit(&app, "ada-rice", &form, &ok).await;
    assert_eq!(location(&again), to);
    assert_eq!(pay_count(&app, &m.test_key, &l).await, 1);
    let id = l["id"].as_str().unwrap();
    let pi = &app
        .all_pages(
            &m.test_key,
            &format!("/v1/payment_intents?payment_link={id}"),
        )
        .await[0];
    assert_eq!(
        (pi["amount"].clone(), pi["status"].clone()),
        (json!(250000), json!("created"))
    );
    assert_eq!(pi["customer_email"], "ada@example.com");
    assert_eq!(pi["metadata"], json!({"cf_size": "<50kg>", "cf_qty": "3"}));
    // The checkout page carries the link's success message; a typed
    // amount wins over a suggestion.
    let config = app.checkout_config(&to).await;
    assert_eq!(
        config["success_message"],
        "Thanks! <i>We deliver</i> in 2 days."
    );
    let fresh = open(&app, "ada-rice").await.html;
    let p = submit(
        &app,
        "ada-rice",
        &fresh,
        &[
            ("suggested", "250000"),
            ("amount", "3,000.50"),
            ("email", "b@example.com"),
            ("cf_size", "25kg"),
        ],
    )
    .await;
    assert_eq!(p.status, 303);
    let pi = &app
        .all_pages(
            &m.test_key,
            &format!("/v1/payment_intents?payment_link={id}"),
        )
        .await[0];
    assert_eq!(pi["amount"], 300050);
}

async fn pay_count(app: &TestApp, key: &str, link: &Value) -> usize {
    let id = link["id"].as_str().unwrap();
    app.all_pages(key, &format!("/v1/payment_intents?payment_link={id}"))
        .await
        .len()
}

#[tokio::test]
async fn a_form_needs_its_own_token_and_a_body_within_the_cap() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let l = create_link(&app, &m.test_key, json!({"name": "T", "currency": "NGN", "amount_type": "fixed", "amount": 10000, "slug": "tee"})).await;
    let form = open(&app, "tee").await.html;
    let nonce = hidden(&form, "nonce");
    let fields = |nonce: &str, token: &str| {
        vec![
            ("nonce".to_string(), nonce.to_string()),
            ("form_token".to_string(), token.to_string()),
            ("email".to_string(), "a@b.co".to_string()),
        ]
    };
    for (n, t) in [
        (nonce.clone(), String::new()),
        (nonce.clone(), "00".repeat(32)),
        ("A".repeat(22), hidden(&form, "form_token")),
    ] {
        let p = post(&app, "tee", &fields(&n, &t)).await;
        assert_eq!(p.status, 403);
        assert!(p.html.contains("Form expired"));
    }
    // Another link's form does not work here.
    create_link(&app, &m.test_key, json!({"name": "U", "currency": "NGN", "amount_type": "fixed", "amount": 10000, "slug": "you"})).await;
    let other = open(&app, "you").await.html;
    let p = post(
        &app,
        "tee",
        &fields(&hidden(&other, "nonce"), &hidden(&other, "form_token")),
    )
    .await;
    assert_eq!(p.status, 403);
    assert_eq!(pay_count(&app, &m.test_key, &l).await, 0);
    // Over 1 MiB: refused before anything else.
    let big = vec![("email".to_string(), "a".repeat(1 << 20))];
    assert_eq!(post(&app, "tee", &big).await.status, 413);
    // The page takes only GET and POST.
    let r = app
        .client
        .delete(format!("{}/p/tee", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
}

#[tokio::test]
async fn a_started_payment_holds_a_slot_until_it_fails_is_abandoned_or_canceled() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let l = create_link(
        &app,
        &m.test_key,
        json!({"name": "Seat", "currency": "NGN", "amount_type": "fixed", "amount": 200000, "slug": "seat", "max_payments": 1}),
    )
    .await;
    let start = |email: &'static str| {
        let app = &app;
        async move {
            let form = open(app, "seat").await.html;
            submit(app, "seat", &form, &[("email", email)]).await
        }
    };
    let intent_of = |p: &Page| {
        let to = location(p);
        let app = &app;
        async move { app.checkout_config(&to).await["intent"].clone() }
    };
    // One visit holds the only slot: the next visitor waits (409 page),
    // and the API says so too.
    let first = start("a@example.com").await;
    assert_eq!(first.status, 303);
    let held = intent_of(&first).await;
    let busy = start("b@example.com").await;
    assert_eq!(busy.status, 409);
    assert!(busy.html.contains("try again in a few minutes"));
    pay(&app, &m.test_key, &l, json!({"email": "c@example.com"}))
        .await
        .assert_error(409, "payment_link_full", None);
    assert_eq!(link_now(&app, &m.test_key, &l).await["status"], "active");
    // Canceled: the slot frees.
    let id = held["id"].as_str().unwrap();
    app.post(
        &m.test_key,
        &format!("/v1/payment_intents/{id}/cancel"),
        json!({}),
    )
    .await
    .assert_status(200);
    let second = start("b@example.com").await;
    assert_eq!(second.status, 303);
    // A declined card fails the payment: the slot frees.
    let pi = intent_of(&second).await;
    let id = pi["id"].as_str().unwrap();
    let card =
        json!({"number": "4000000000000002", "exp_month": 12, "exp_year": 2040, "cvc": "123"});
    let r = app
        .post(&m.test_key, &format!("/v1/payment_intents/{id}/card"), card)
        .await;
    assert_eq!(r.body["status"], "failed");
    let third = start("c@example.com").await;
    assert_eq!(third.status, 303);
    // A visit that never starts paying is abandoned after 30 minutes; one
    // paying by transfer is abandoned 30 minutes after its account.
    let pi = intent_of(&third).await;
    let id = pi["id"].as_str().unwrap().to_string();
    app.post(
        &m.test_key,
        &format!("/v1/payment_intents/{id}/bank_transfer"),
        json!({}),
    )
    .await
    .assert_status(200);
    assert_eq!(start("d@example.com").await.status, 409);
    app.advance(30 * 60).await;
    let r = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    assert_eq!(r.body["status"], "abandoned");
    let fourth = start("d@example.com").await;
    assert_eq!(fourth.status, 303);
    let untouched = intent_of(&fourth).await;
    app.advance(30 * 60).await;
    let uid = untouched["id"].as_str().unwrap();
    let r = app
        .get(&m.test_key, &format!("/v1/payment_intents/{uid}"))
        .await;
    assert_eq!(
        r.body["status"], "abandoned",
        "a visit that never started paying"
    );
    // This visitor pays: the link's one payment.
    let fifth = start("e@example.com").await;
    let paying = intent_of(&fifth).await;
    let pid = paying["id"].as_str().unwrap();
    app.post(
        &m.test_key,
        &format!("/v1/test_helpers/payment_intents/{pid}/simulate_transfer"),
        json!({}),
    )
    .await
    .assert_status(200);
    let now = link_now(&app, &m.test_key, &l).await;
    assert_eq!(
        (now["payments_count"].clone(), now["status"].clone()),
        (json!(1), json!("inactive"))
    );
    assert_eq!(open(&app, "seat").await.status, 410);
    // The abandoned transfer's late money still succeeds (the spec's
    // rule): payments_count passes max_payments.
    app.post(
        &m.test_key,
        &format!("/v1/test_helpers/payment_intents/{id}/simulate_transfer"),
        json!({}),
    )
    .await
    .assert_status(200);
    let now = link_now(&app, &m.test_key, &l).await;
    assert_eq!(
        (
            now["payments_count"].clone(),
            now["amount_collected"].clone()
        ),
        (json!(2), json!(400000))
    );
}
