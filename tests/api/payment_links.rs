//! Payment links through the API: create and its bounds, lists and
//! filters, slugs, the pay test helper. Counters, max_payments, expiry and
//! (de)activation: `payment_link_states.rs`; the page itself:
//! `payment_link_page.rs`; in a browser: `payment_link_browser.rs`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{spawn_app, Resp, TestApp};

pub(crate) async fn create_link(app: &TestApp, key: &str, body: Value) -> Value {
    let r = app.post(key, "/v1/payment_links", body).await;
    r.assert_status(201);
    r.body
}

pub(crate) async fn pay(app: &TestApp, key: &str, link: &Value, body: Value) -> Resp {
    let id = link["id"].as_str().unwrap();
    app.post(
        key,
        &format!("/v1/test_helpers/payment_links/{id}/pay"),
        body,
    )
    .await
}

pub(crate) async fn link_now(app: &TestApp, key: &str, link: &Value) -> Value {
    let id = link["id"].as_str().unwrap();
    let r = app.get(key, &format!("/v1/payment_links/{id}")).await;
    r.assert_status(200);
    r.body
}

/// Events of `event_type`, newest first.
pub(crate) async fn events(app: &TestApp, key: &str, event_type: &str) -> Vec<Value> {
    let r = app
        .get(key, &format!("/v1/events?type={event_type}&limit=100"))
        .await;
    r.assert_status(200);
    r.body["data"].as_array().unwrap().clone()
}

/// Waits (real time, up to 10 s) until `n` events of `event_type` exist.
pub(crate) async fn await_events(
    app: &TestApp,
    key: &str,
    event_type: &str,
    n: usize,
) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let found = events(app, key, event_type).await;
        if found.len() >= n || started.elapsed() > Duration::from_secs(10) {
            assert_eq!(found.len(), n, "{event_type}: {found:?}");
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) fn chosen() -> Value {
    json!({
        "name": "Rice by the bag",
        "description": "Long grain, 50 kg bags",
        "currency": "NGN",
        "amount_type": "customer_chosen",
        "min_amount": 100000,
        "max_amount": 5000000,
        "suggested_amounts": [250000, 500000],
        "custom_fields": [
            {"key": "size", "label": "Bag size", "type": "dropdown", "options": ["25kg", "50kg"], "required": true},
            {"key": "note", "label": "Delivery note", "type": "text"}
        ],
        "collect_phone": true,
        "success_message": "Thank you! We deliver within 2 days.",
        "metadata": {"shop": "lekki"}
    })
}

pub(crate) fn fixed(amount: i64) -> Value {
    json!({"name": "Ticket", "currency": "NGN", "amount_type": "fixed", "amount": amount})
}

#[tokio::test]
async fn a_link_is_created_with_its_fields_and_listed_newest_first() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let l = create_link(&app, &m.test_key, chosen()).await;
    assert_eq!(l["object"], "payment_link");
    assert_eq!(l["livemode"], false);
    assert_eq!(l["status"], "active");
    assert_eq!(l["inactive_reason"], Value::Null);
    assert_eq!(l["amount_type"], "customer_chosen");
    assert_eq!(l["amount"], Value::Null);
    assert_eq!(
        (l["min_amount"].clone(), l["max_amount"].clone()),
        (json!(100000), json!(5000000))
    );
    assert_eq!(l["suggested_amounts"], json!([250000, 500000]));
    assert_eq!(l["payments_count"], 0);
    assert_eq!(l["amount_collected"], 0);
    assert_eq!(l["fee_bearer"], "merchant");
    assert_eq!(l["custom_fields"][0]["options"], json!(["25kg", "50kg"]));
    assert_eq!(l["custom_fields"][1]["required"], false);
    assert_eq!(l["custom_fields"][1]["options"], Value::Null);
    let slug = l["slug"].as_str().unwrap();
    assert!(slug.starts_with("rice-by-the-bag-"), "{slug}");
    assert_eq!(l["url"], format!("{}/p/{slug}", app.base));
    assert_eq!(l["metadata"]["shop"], "lekki");
    assert!(l["brand"].is_string());
    assert_eq!(link_now(&app, &m.test_key, &l).await, l);
    // The event of the creation.
    let created = events(&app, &m.test_key, "payment_link.created").await;
    assert_eq!(created[0]["data"]["object"]["id"], l["id"]);

    // A fixed link; another brand's link; the list and its filters.
    let f = create_link(&app, &m.test_key, fixed(500000)).await;
    assert_eq!(
        (f["amount"].clone(), f["min_amount"].clone()),
        (json!(500000), Value::Null)
    );
    let brand = app
        .post(&m.test_key, "/v1/brands", json!({"name": "Ada Events"}))
        .await;
    let b = brand.body["id"].as_str().unwrap();
    let mut other = fixed(20000);
    other["brand"] = json!(b);
    let o = create_link(&app, &m.test_key, other).await;
    let all = app.all_pages(&m.test_key, "/v1/payment_links").await;
    let ids: Vec<_> = all.iter().map(|x| x["id"].clone()).collect();
    assert_eq!(ids, vec![o["id"].clone(), f["id"].clone(), l["id"].clone()]);
    let r = app
        .get(&m.test_key, &format!("/v1/payment_links?brand={b}"))
        .await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1);
    let r = app.get(&m.test_key, "/v1/payment_links?limit=1").await;
    assert_eq!(r.body["has_more"], true);
    let after = r.body["data"][0]["id"].as_str().unwrap();
    let r = app
        .get(
            &m.test_key,
            &format!("/v1/payment_links?limit=5&starting_after={after}"),
        )
        .await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 2);
    let r = app
        .get(&m.test_key, "/v1/payment_links?status=paused")
        .await;
    r.assert_error(400, "parameter_invalid", Some("status"));
    let stranger = uuid::Uuid::new_v4();
    let r = app
        .get(&m.test_key, &format!("/v1/payment_links?brand={stranger}"))
        .await;
    r.assert_error(400, "parameter_invalid", Some("brand"));

    // Another merchant, the live key: 404; the live list is empty.
    let other = app.merchant().await;
    let id = l["id"].as_str().unwrap();
    let r = app
        .get(&other.test_key, &format!("/v1/payment_links/{id}"))
        .await;
    r.assert_error(404, "resource_missing", None);
    let r = app
        .get(&m.live_key, &format!("/v1/payment_links/{id}"))
        .await;
    r.assert_error(404, "resource_missing", None);
    let r = app.get(&m.live_key, "/v1/payment_links").await;
    assert_eq!(r.body["data"], json!([]));
    // Live links need live payments turned on; test helpers are test only.
    let r = app
        .post(&m.live_key, "/v1/payment_links", fixed(1000))
        .await;
    r.assert_error(403, "account_not_activated", None);
    let live = app.live_merchant().await;
    let ll = create_link(&app, &live.live_key, fixed(1000)).await;
    assert_eq!(ll["livemode"], true);
    let r = pay(&app, &live.live_key, &ll, json!({"email": "a@b.co"})).await;
    r.assert_error(404, "resource_missing", None);
}

#[tokio::test]
async fn every_bound_of_a_link_is_checked_and_named() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let refused = |patch: Value, code: &'static str, param: &'static str| {
        let mut body = chosen();
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        let app = &app;
        let key = m.test_key.clone();
        async move {
            let r = app.post(&key, "/v1/payment_links", body).await;
            r.assert_error(400, code, Some(param));
        }
    };
    refused(json!({"min_amount": 99}), "parameter_invalid", "min_amount").await;
    refused(
        json!({"max_amount": 1000}),
        "parameter_invalid",
        "max_amount",
    )
    .await;
    refused(json!({"amount": 5000}), "parameter_invalid", "amount").await;
    refused(
        json!({"suggested_amounts": [200000, 300000, 400000, 500000, 600000]}),
        "parameter_invalid",
        "suggested_amounts",
    )
    .await;
    refused(
        json!({"suggested_amounts": [9000000]}),
        "parameter_invalid",
        "suggested_amounts",
    )
    .await;
    refused(
        json!({"amount_type": "whatever"}),
        "parameter_invalid",
        "amount_type",
    )
    .await;
    refused(json!({"slug": "No Spaces"}), "parameter_invalid", "slug").await;
    refused(json!({"slug": "ab"}), "parameter_invalid", "slug").await;
    refused(
        json!({"max_payments": 0}),
        "parameter_invalid",
        "max_payments",
    )
    .await;
    refused(
        json!({"expires_at": "2001-01-01T00:00:00Z"}),
        "parameter_invalid",
        "expires_at",
    )
    .await;
    refused(
        json!({"expires_at": "tomorrow"}),
        "parameter_invalid",
        "expires_at",
    )
    .await;
    refused(
        json!({"success_message": "x".repeat(501)}),
        "parameter_invalid",
        "success_message",
    )
    .await;
    refused(json!({"colour": "red"}), "parameter_unknown", "colour").await;
    let six: Vec<Value> = (0..6)
        .map(|i| json!({"key": format!("f{i}"), "label": "F", "type": "text"}))
        .collect();
    refused(
        json!({"custom_fields": six}),
        "parameter_invalid",
        "custom_fields",
    )
    .await;
    refused(
        json!({"custom_fields": [{"key": "size", "label": "Size", "type": "dropdown"}]}),
        "parameter_missing",
        "custom_fields[0].options",
    )
    .await;
    refused(
        json!({"custom_fields": [{"key": "a", "label": "A", "type": "text"}, {"key": "a", "label": "B", "type": "number"}]}),
        "parameter_invalid",
        "custom_fields[1].key",
    )
    .await;
    refused(
        json!({"custom_fields": [{"key": "a", "label": "A", "type": "colour"}]}),
        "parameter_invalid",
        "custom_fields[0].type",
    )
    .await;
    refused(
        json!({"custom_fields": [{"key": "a", "label": "A", "type": "text", "hint": "x"}]}),
        "parameter_unknown",
        "custom_fields[0].hint",
    )
    .await;
    let r = app
        .post(
            &m.test_key,
            "/v1/payment_links",
            json!({"name": "X", "currency": "NGN", "amount_type": "fixed"}),
        )
        .await;
    r.assert_error(400, "parameter_missing", Some("amount"));
    let mut body = fixed(1000);
    body["brand"] = json!(uuid::Uuid::new_v4());
    let r = app.post(&m.test_key, "/v1/payment_links", body).await;
    r.assert_error(404, "resource_missing", Some("brand"));
    // The spec's minimum is the default lower bound.
    let mut open = chosen();
    open.as_object_mut().unwrap().remove("min_amount");
    open.as_object_mut().unwrap().remove("max_amount");
    open.as_object_mut().unwrap().remove("suggested_amounts");
    let l = create_link(&app, &m.test_key, open).await;
    assert_eq!(
        (l["min_amount"].clone(), l["max_amount"].clone()),
        (json!(100), Value::Null)
    );
}

#[tokio::test]
async fn slugs_are_unique_across_kobo_and_fixed_after_the_first_payment() {
    let app = spawn_app().await;
    let m = app.live_merchant().await;
    let other = app.merchant().await;
    let mut body = fixed(150000);
    body["slug"] = json!("ada-rice");
    let l = create_link(&app, &m.test_key, body.clone()).await;
    assert_eq!(l["slug"], "ada-rice");
    // Another merchant, and the same merchant's other mode.
    let r = app
        .post(&other.test_key, "/v1/payment_links", body.clone())
        .await;
    r.assert_error(409, "slug_taken", None);
    let r = app
        .post(&m.live_key, "/v1/payment_links", body.clone())
        .await;
    r.assert_error(409, "slug_taken", None);
    // Ten merchants race for one slug: one wins.
    let mut racers = Vec::new();
    for _ in 0..10 {
        racers.push(app.merchant().await);
    }
    let mut race = body.clone();
    race["slug"] = json!("contested");
    let answers = futures_util::future::join_all(
        racers
            .iter()
            .map(|r| app.post(&r.test_key, "/v1/payment_links", race.clone())),
    )
    .await;
    let won = answers.iter().filter(|r| r.status == 201).count();
    let lost = answers.iter().filter(|r| r.code() == "slug_taken").count();
    assert_eq!((won, lost), (1, 9));
    // An update to a taken slug; a free one moves the page.
    let id = l["id"].as_str().unwrap();
    let path = format!("/v1/payment_links/{id}");
    let r = app
        .post(&m.test_key, &path, json!({"slug": "contested"}))
        .await;
    r.assert_error(409, "slug_taken", None);
    let r = app
        .post(&m.test_key, &path, json!({"slug": "ada-rice-2"}))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["url"], format!("{}/p/ada-rice-2", app.base));
    let page = app
        .client
        .get(format!("{}/p/ada-rice", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 404);
    // The old slug is free again.
    create_link(&app, &other.test_key, body.clone()).await;
    // After the first payment the slug is fixed; other fields still change.
    pay(&app, &m.test_key, &l, json!({"email": "ada@example.com"}))
        .await
        .assert_status(200);
    let r = app
        .post(&m.test_key, &path, json!({"slug": "ada-rice-3"}))
        .await;
    r.assert_error(409, "slug_locked", None);
    let r = app
        .post(
            &m.test_key,
            &path,
            json!({"slug": "ada-rice-2", "name": "Rice, 2025"}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["name"], "Rice, 2025");
    assert_eq!(
        events(&app, &m.test_key, "payment_link.updated")
            .await
            .len(),
        2
    );
}

#[tokio::test]
async fn paying_a_link_makes_a_payment_with_the_answers_and_moves_the_counters() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let l = create_link(&app, &m.test_key, chosen()).await;
    let answers = json!({"amount": 250000, "email": "ada@example.com", "phone": "0803 000 0000",
                         "custom_fields": {"size": "50kg", "note": "Gate 2"}});
    let r = pay(&app, &m.test_key, &l, answers.clone()).await;
    r.assert_status(200);
    let pi = &r.body;
    assert_eq!(pi["status"], "successful");
    assert_eq!(pi["amount"], 250000);
    assert_eq!(pi["payment_link"], l["id"]);
    assert_eq!(pi["customer_email"], "ada@example.com");
    assert_eq!(pi["description"], "Rice by the bag");
    assert_eq!(pi["brand"], l["brand"]);
    assert_eq!(
        pi["metadata"],
        json!({"cf_size": "50kg", "cf_note": "Gate 2", "customer_phone": "08030000000"})
    );
    let now = link_now(&app, &m.test_key, &l).await;
    assert_eq!(
        (
            now["payments_count"].clone(),
            now["amount_collected"].clone()
        ),
        (json!(1), json!(250000))
    );
    // The page's rules, as errors of the API.
    let mut wrong = answers.clone();
    wrong["amount"] = json!(99999);
    pay(&app, &m.test_key, &l, wrong).await.assert_error(
        400,
        "amount_out_of_range",
        Some("amount"),
    );
    let mut wrong = answers.clone();
    wrong["amount"] = json!(5000001);
    pay(&app, &m.test_key, &l, wrong).await.assert_error(
        400,
        "amount_out_of_range",
        Some("amount"),
    );
    let mut wrong = answers.clone();
    wrong["custom_fields"] = json!({"note": "x"});
    pay(&app, &m.test_key, &l, wrong).await.assert_error(
        400,
        "parameter_missing",
        Some("custom_fields.size"),
    );
    let mut wrong = answers.clone();
    wrong["custom_fields"]["size"] = json!("70kg");
    pay(&app, &m.test_key, &l, wrong).await.assert_error(
        400,
        "parameter_invalid",
        Some("custom_fields.size"),
    );
    let mut wrong = answers.clone();
    wrong.as_object_mut().unwrap().remove("phone");
    pay(&app, &m.test_key, &l, wrong)
        .await
        .assert_error(400, "parameter_missing", Some("phone"));
    let mut wrong = answers.clone();
    wrong.as_object_mut().unwrap().remove("email");
    pay(&app, &m.test_key, &l, wrong)
        .await
        .assert_error(400, "parameter_missing", Some("email"));
    // A fixed link's amount is its own; a dollar link is paid by card.
    let f = create_link(&app, &m.test_key, fixed(300000)).await;
    let r = pay(&app, &m.test_key, &f, json!({"email": "b@example.com"})).await;
    assert_eq!(
        (r.body["amount"].clone(), r.body["status"].clone()),
        (json!(300000), json!("successful"))
    );
    let r = pay(
        &app,
        &m.test_key,
        &f,
        json!({"email": "b@example.com", "amount": 300001}),
    )
    .await;
    r.assert_error(400, "amount_out_of_range", Some("amount"));
    let mut usd = fixed(2500);
    usd["currency"] = json!("USD");
    let u = create_link(&app, &m.test_key, usd).await;
    let r = pay(&app, &m.test_key, &u, json!({"email": "c@example.com"})).await;
    assert_eq!(
        (r.body["currency"].clone(), r.body["status"].clone()),
        (json!("USD"), json!("successful"))
    );
    // The link's payments, by the payment_link filter.
    let id = l["id"].as_str().unwrap();
    let listed = app
        .all_pages(
            &m.test_key,
            &format!("/v1/payment_intents?payment_link={id}"),
        )
        .await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], pi["id"]);
    let r = app
        .get(
            &m.test_key,
            &format!("/v1/payment_intents?payment_link={id}&status=successful"),
        )
        .await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1);
    // The idempotent replay makes no second payment.
    let path = format!(
        "/v1/test_helpers/payment_links/{}/pay",
        f["id"].as_str().unwrap()
    );
    let key = app.next_key();
    let first = app
        .post_with_key(&m.test_key, &path, &key, json!({"email": "d@example.com"}))
        .await;
    let again = app
        .post_with_key(&m.test_key, &path, &key, json!({"email": "d@example.com"}))
        .await;
    assert!(again.replayed());
    assert_eq!(first.body, again.body);
    assert_eq!(link_now(&app, &m.test_key, &f).await["payments_count"], 2);
}

#[tokio::test]
async fn a_link_payment_finds_or_makes_the_customer_of_its_email() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let l = create_link(&app, &m.test_key, chosen()).await;
    let answers = |email: &str| {
        json!({"amount": 250000, "email": email, "phone": "0803 000 0000",
               "custom_fields": {"size": "50kg"}})
    };
    let first = pay(&app, &m.test_key, &l, answers("Ada@Example.com")).await;
    first.assert_status(200);
    let customer = first.body["customer"].clone();
    assert!(customer.is_string(), "{}", first.text);
    // The same email in another case is the same customer.
    let again = pay(&app, &m.test_key, &l, answers("ada@example.com")).await;
    again.assert_status(200);
    assert_eq!(again.body["customer"], customer);
    let listed = app
        .get(&m.test_key, "/v1/customers?email=ada@example.com")
        .await;
    listed.assert_status(200);
    let data = listed.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{}", listed.text);
    assert_eq!(data[0]["id"], customer);
    // A denied customer's visit is refused and makes no payment.
    let id = customer.as_str().unwrap();
    app.post(
        &m.test_key,
        &format!("/v1/customers/{id}"),
        json!({"risk_action": "deny"}),
    )
    .await
    .assert_status(200);
    pay(&app, &m.test_key, &l, answers("ada@example.com"))
        .await
        .assert_error(409, "customer_blocked", None);
    let now = link_now(&app, &m.test_key, &l).await;
    assert_eq!(now["payments_count"], 2);
}
