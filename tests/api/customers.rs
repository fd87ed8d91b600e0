//! Customers: find-or-create by email (also under 20 concurrent creates),
//! lists and their filters, updates and email collisions, delete and what
//! keeps a customer in use, risk actions on payments and mandate charges,
//! payment intents that find or make their customer. Identity checks:
//! `customer_identity.rs`.

use serde_json::{json, Value};

use crate::helpers::{spawn_app, Resp, TestApp};

pub(crate) fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

async fn create(app: &TestApp, key: &str, body: Value) -> Resp {
    app.post(key, "/v1/customers", body).await
}

pub(crate) async fn created(app: &TestApp, key: &str, body: Value) -> Value {
    let r = create(app, key, body).await;
    r.assert_status(201);
    r.body
}

fn existing(r: &Resp) -> bool {
    r.headers
        .get("existing-object")
        .is_some_and(|v| v == "true")
}

async fn default_brand(app: &TestApp, key: &str) -> String {
    let r = app.get(key, "/v1/brands").await;
    let brands = r.body["data"].as_array().unwrap();
    let b = brands.iter().find(|b| b["default"] == true).unwrap();
    id(b)
}

async fn list_ids(app: &TestApp, key: &str, query: &str) -> Vec<String> {
    let r = app.get(key, &format!("/v1/customers{query}")).await;
    r.assert_status(200);
    r.body["data"].as_array().unwrap().iter().map(id).collect()
}

#[tokio::test]
async fn create_validates_its_body_and_makes_a_customer() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    for (body, code, param) in [
        (json!({}), "parameter_missing", "email"),
        (json!({"name": "Ada"}), "parameter_missing", "email"),
        (json!({"email": "nope"}), "parameter_invalid", "email"),
        (
            json!({"phone": "08031234567"}),
            "parameter_invalid",
            "phone",
        ),
        (
            json!({"email": "a@example.com", "risk_action": "block"}),
            "parameter_invalid",
            "risk_action",
        ),
        (
            json!({"email": "a@example.com", "metadata": {"k": [1]}}),
            "parameter_invalid",
            "metadata.k",
        ),
        (
            json!({"email": "a@example.com", "currency": "NGN"}),
            "parameter_unknown",
            "currency",
        ),
        (
            json!({"email": "a@example.com", "brand": "x"}),
            "parameter_invalid",
            "brand",
        ),
    ] {
        create(&app, k, body.clone())
            .await
            .assert_error(400, code, Some(param));
    }
    create(
        &app,
        k,
        json!({"email": "a@example.com", "brand": uuid::Uuid::new_v4()}),
    )
    .await
    .assert_error(404, "resource_missing", Some("brand"));

    let c = created(
        &app,
        k,
        json!({"email": "Ada@Example.com", "name": "Ada Obi", "metadata": {"tier": "gold"}}),
    )
    .await;
    assert_eq!(c["object"], "customer");
    assert_eq!(c["livemode"], false);
    assert_eq!(c["email"], "Ada@Example.com");
    assert!(c["phone"].is_null());
    assert_eq!(c["name"], "Ada Obi");
    assert_eq!(c["brand"], default_brand(&app, k).await.as_str());
    assert_eq!(c["metadata"], json!({"tier": "gold"}));
    assert_eq!(c["risk_action"], "default");
    assert_eq!(c["identity"]["status"], "unverified");
    assert!(c["identity"]["bvn_last4"].is_null());
    assert_eq!(c["created_at"], c["updated_at"]);
    let got = app.get(k, &format!("/v1/customers/{}", id(&c))).await;
    got.assert_status(200);
    // Retrieve adds the credit balance (docs/api.md, Invoices).
    let mut got = got.body;
    assert_eq!(
        got.as_object_mut().unwrap().remove("credit_balance"),
        Some(0.into())
    );
    assert_eq!(got, c);
}

#[tokio::test]
async fn a_create_of_a_known_email_answers_that_customer_unchanged() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let c = created(
        &app,
        k,
        json!({"email": "Ada@Example.com", "name": "Ada Obi"}),
    )
    .await;
    // The same email in any case: that customer, unchanged, 200.
    let idem = app.next_key();
    let body =
        json!({"email": "ADA@example.COM", "name": "Someone Else", "phone": "+2348031234567"});
    let again = app
        .post_with_key(k, "/v1/customers", &idem, body.clone())
        .await;
    again.assert_status(200);
    assert!(existing(&again));
    assert_eq!(again.body, c);
    let replay = app.post_with_key(k, "/v1/customers", &idem, body).await;
    assert!(replay.replayed());
    replay.assert_status(200);
    assert!(existing(&replay), "a replay carries Existing-Object too");
    assert_eq!(replay.body, c);
    // A new customer's answer does not carry it.
    let bola = create(&app, k, json!({"email": "bola@example.com"})).await;
    bola.assert_status(201);
    assert!(!existing(&bola));

    // Phones are not unique: each phone-only create is a new customer.
    let p1 = created(&app, k, json!({"phone": "+2348031234567"})).await;
    let p2 = created(&app, k, json!({"phone": "+2348031234567"})).await;
    assert_ne!(p1["id"], p2["id"]);
    assert!(p1["email"].is_null());

    // Another mode, another merchant: another customer.
    let live = app
        .post(
            &m.live_key,
            "/v1/customers",
            json!({"email": "ada@example.com"}),
        )
        .await;
    live.assert_status(201);
    assert_eq!(live.body["livemode"], true);
    let other = app.merchant().await;
    let theirs = created(&app, &other.test_key, json!({"email": "ada@example.com"})).await;
    assert_ne!(theirs["id"], c["id"]);
    app.get(&other.test_key, &format!("/v1/customers/{}", id(&c)))
        .await
        .assert_error(404, "resource_missing", None);
    app.get(&m.live_key, &format!("/v1/customers/{}", id(&c)))
        .await
        .assert_status(404);
    app.get(k, "/v1/customers/not-a-uuid")
        .await
        .assert_status(404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_creates_of_one_email_make_exactly_one_customer() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let mut tasks = Vec::new();
    for n in 0..20 {
        let (client, base, key) = (app.client.clone(), app.base.clone(), m.test_key.clone());
        tasks.push(tokio::spawn(async move {
            let email = if n % 2 == 0 {
                "race@example.com"
            } else {
                "RACE@example.com"
            };
            let r = client
                .post(format!("{base}/v1/customers"))
                .bearer_auth(&key)
                .header("Idempotency-Key", format!("race-{n}"))
                .json(&json!({"email": email, "name": format!("n{n}")}))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap();
            (status, body)
        }));
    }
    let mut created = 0;
    let mut ids = std::collections::HashSet::new();
    for t in tasks {
        let (status, body) = t.await.unwrap();
        assert!(status == 201 || status == 200, "{status} {body}");
        created += usize::from(status == 201);
        ids.insert(id(&body));
    }
    assert_eq!(created, 1, "exactly one create made the customer");
    assert_eq!(ids.len(), 1, "every answer is that customer");
    assert_eq!(
        list_ids(&app, &m.test_key, "?email=race@EXAMPLE.com")
            .await
            .len(),
        1
    );
    assert_eq!(list_ids(&app, &m.test_key, "").await.len(), 1);
}

#[tokio::test]
async fn lists_are_newest_first_with_filters_and_cursors() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let brand = app
        .post(k, "/v1/brands", json!({"name": "Shoes"}))
        .await
        .body;
    let a = created(
        &app,
        k,
        json!({"email": "a@example.com", "phone": "+2348030000001"}),
    )
    .await;
    let b = created(
        &app,
        k,
        json!({"email": "b@example.com", "brand": id(&brand), "risk_action": "deny"}),
    )
    .await;
    let c = created(
        &app,
        k,
        json!({"phone": "+2348030000001", "brand": id(&brand)}),
    )
    .await;
    assert_eq!(list_ids(&app, k, "").await, vec![id(&c), id(&b), id(&a)]);
    assert_eq!(
        list_ids(&app, k, "?email=A@EXAMPLE.COM").await,
        vec![id(&a)]
    );
    assert_eq!(
        list_ids(&app, k, "?email=none@example.com").await,
        Vec::<String>::new()
    );
    assert_eq!(
        list_ids(&app, k, "?phone=%2B2348030000001").await,
        vec![id(&c), id(&a)]
    );
    assert_eq!(
        list_ids(&app, k, &format!("?brand={}", id(&brand))).await,
        vec![id(&c), id(&b)]
    );
    assert_eq!(list_ids(&app, k, "?risk_action=deny").await, vec![id(&b)]);
    assert_eq!(
        list_ids(&app, k, "?risk_action=default").await,
        vec![id(&c), id(&a)]
    );
    assert_eq!(
        list_ids(
            &app,
            k,
            &format!("?brand={}&risk_action=default", id(&brand))
        )
        .await,
        vec![id(&c)]
    );
    // Cursors.
    let page = app.get(k, "/v1/customers?limit=2").await;
    assert_eq!(page.body["has_more"], true);
    let next = list_ids(&app, k, &format!("?limit=2&starting_after={}", id(&b))).await;
    assert_eq!(next, vec![id(&a)]);
    assert_eq!(
        list_ids(
            &app,
            k,
            &format!("?email=a@example.com&starting_after={}", id(&a))
        )
        .await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn list_queries_are_checked() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    for (q, param) in [
        ("?phone=0803", "phone"),
        ("?risk_action=block", "risk_action"),
        ("?brand=x", "brand"),
        ("?limit=0", "limit"),
        ("?name=x", "name"),
    ] {
        let r = app.get(k, &format!("/v1/customers{q}")).await;
        assert_eq!(r.status, 400, "{q}");
        assert_eq!(r.param(), Some(param), "{q}");
    }
    let other = app.merchant().await;
    let theirs = created(&app, &other.test_key, json!({"email": "t@example.com"})).await;
    app.get(k, &format!("/v1/customers?starting_after={}", id(&theirs)))
        .await
        .assert_error(400, "parameter_invalid", Some("starting_after"));
    assert_eq!(list_ids(&app, &m.live_key, "").await.len(), 0);
}

#[tokio::test]
async fn updates_change_only_what_is_sent_and_emails_stay_unique() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = created(
        &app,
        k,
        json!({"email": "ada@example.com", "name": "Ada", "metadata": {"a": "1", "b": 2}}),
    )
    .await;
    let bola = created(&app, k, json!({"email": "bola@example.com"})).await;
    let path = format!("/v1/customers/{}", id(&ada));
    app.advance(60).await;
    let r = app
        .post(k, &path, json!({"phone": "+2348031234567", "name": "", "metadata": {"a": "", "c": true}, "risk_action": "allow"}))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["email"], "ada@example.com");
    assert_eq!(r.body["phone"], "+2348031234567");
    assert!(r.body["name"].is_null());
    assert_eq!(r.body["metadata"], json!({"b": 2, "c": true}));
    assert_eq!(r.body["risk_action"], "allow");
    assert_ne!(r.body["updated_at"], ada["updated_at"]);
    assert_eq!(r.body["created_at"], ada["created_at"]);
    // Another customer's email, in any case: 409; nothing changes.
    app.post(k, &path, json!({"email": "BOLA@example.com", "name": "x"}))
        .await
        .assert_error(409, "customer_exists", None);
    assert!(app.get(k, &path).await.body["name"].is_null());
    // Its own email in another case is fine.
    let r = app
        .post(k, &path, json!({"email": "ADA@example.com"}))
        .await;
    r.assert_status(200);
    assert_eq!(r.body["email"], "ADA@example.com");
    // A customer keeps an email or a phone.
    app.post(k, &path, json!({"email": "", "phone": ""}))
        .await
        .assert_error(400, "parameter_invalid", Some("email"));
    // A new email frees the old one.
    let r = app
        .post(k, &path, json!({"email": "ada.obi@example.com"}))
        .await;
    r.assert_status(200);
    let again = create(&app, k, json!({"email": "ada.obi@example.com"})).await;
    again.assert_status(200);
    assert_eq!(id(&again.body), id(&ada));
    let fresh = create(&app, k, json!({"email": "ada@example.com"})).await;
    fresh.assert_status(201);
    assert_ne!(id(&fresh.body), id(&ada));
    // Bad bodies and ids.
    app.post(k, &path, json!({"brand": id(&bola)}))
        .await
        .assert_error(400, "parameter_unknown", Some("brand"));
    app.post(
        k,
        &format!("/v1/customers/{}", uuid::Uuid::new_v4()),
        json!({"name": "x"}),
    )
    .await
    .assert_error(404, "resource_missing", None);
    let other = app.merchant().await;
    app.post(&other.test_key, &path, json!({"name": "x"}))
        .await
        .assert_status(404);
}

async fn pending_mandate(app: &TestApp, key: &str, customer: &str) -> Value {
    let r = app
        .post(key, "/v1/mandates", json!({"customer": customer}))
        .await;
    r.assert_status(201);
    r.body
}

#[tokio::test]
async fn delete_removes_a_customer_unless_something_uses_it() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = created(&app, k, json!({"email": "ada@example.com"})).await;
    let path = format!("/v1/customers/{}", id(&ada));
    let pi = app
        .create_intent(
            k,
            json!({"amount": 10_000, "currency": "NGN", "customer": id(&ada)}),
        )
        .await;
    // A pending mandate keeps it.
    let mandate = pending_mandate(&app, k, &id(&ada)).await;
    app.post(k, &format!("{path}/delete"), json!({}))
        .await
        .assert_error(409, "customer_in_use", None);
    app.post(
        k,
        &format!("/v1/mandates/{}/cancel", id(&mandate)),
        json!({}),
    )
    .await
    .assert_status(200);
    let r = app.post(k, &format!("{path}/delete"), json!({})).await;
    r.assert_status(200);
    assert_eq!(
        r.body,
        json!({"id": id(&ada), "object": "customer", "livemode": false, "deleted": true})
    );
    // Gone: 404, not listed, not found by email; a second delete is 404.
    app.get(k, &path)
        .await
        .assert_error(404, "resource_missing", None);
    assert!(list_ids(&app, k, "").await.is_empty());
    assert!(list_ids(&app, k, "?email=ada@example.com").await.is_empty());
    app.post(k, &format!("{path}/delete"), json!({}))
        .await
        .assert_status(404);
    app.post(k, &path, json!({"name": "x"}))
        .await
        .assert_status(404);
    // Objects keep naming it; it can be named by no new one.
    let kept = app
        .get(k, &format!("/v1/payment_intents/{}", id(&pi)))
        .await;
    assert_eq!(kept.body["customer"], id(&ada).as_str());
    let listed = app
        .get(k, &format!("/v1/payment_intents?customer={}", id(&ada)))
        .await;
    assert_eq!(listed.body["data"].as_array().unwrap().len(), 1);
    app.post(
        k,
        "/v1/payment_intents",
        json!({"amount": 10_000, "currency": "NGN", "customer": id(&ada)}),
    )
    .await
    .assert_error(404, "resource_missing", Some("customer"));
    app.post(k, "/v1/mandates", json!({"customer": id(&ada)}))
        .await
        .assert_error(404, "resource_missing", Some("customer"));
    // The email is free again.
    let again = created(&app, k, json!({"email": "ADA@example.com"})).await;
    assert_ne!(id(&again), id(&ada));
}

#[tokio::test]
async fn a_denied_customer_cannot_pay_but_an_allowed_one_can() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    // An active mandate of a customer made by the mandate.
    let mandate = app
        .post(
            k,
            "/v1/mandates",
            json!({"customer_email": "ada@example.com", "customer_name": "Ada"}),
        )
        .await
        .body;
    let customer = mandate["customer"].as_str().unwrap().to_string();
    let url = mandate["authorization_url"].as_str().unwrap();
    app.client
        .post(format!("{url}/approve"))
        .send()
        .await
        .unwrap();
    let mid = id(&mandate);
    let r = app
        .post(k, &format!("/v1/mandates/{mid}/refresh"), json!({}))
        .await;
    assert_eq!(r.body["status"], "active");
    // The mandate's customer is the customer of that email.
    let found = create(&app, k, json!({"email": "ADA@example.com"})).await;
    found.assert_status(200);
    assert_eq!(id(&found.body), customer);

    let path = format!("/v1/customers/{customer}");
    app.post(k, &path, json!({"risk_action": "deny"}))
        .await
        .assert_status(200);
    let charge = json!({"amount": 10_000, "currency": "NGN"});
    app.post(k, &format!("/v1/mandates/{mid}/charge"), charge.clone())
        .await
        .assert_error(409, "customer_blocked", None);
    app.post(
        k,
        "/v1/payment_intents",
        json!({"amount": 10_000, "currency": "NGN", "customer": customer}),
    )
    .await
    .assert_error(409, "customer_blocked", None);
    app.post(
        k,
        "/v1/payment_intents",
        json!({"amount": 10_000, "currency": "NGN", "customer_email": "Ada@Example.com"}),
    )
    .await
    .assert_error(409, "customer_blocked", None);
    assert!(app.all_intents(k).await.is_empty(), "nothing was made");
    // Allowed (or default) again: payments go through.
    app.post(k, &path, json!({"risk_action": "allow"}))
        .await
        .assert_status(200);
    app.post(k, &format!("/v1/mandates/{mid}/charge"), charge)
        .await
        .assert_status(201);
    let pi = app
        .create_intent(
            k,
            json!({"amount": 10_000, "currency": "NGN", "customer_email": "ada@EXAMPLE.com"}),
        )
        .await;
    assert_eq!(pi["customer"], customer.as_str());
}

#[tokio::test]
async fn payment_intents_find_or_make_the_customer_of_their_email() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let brand = app
        .post(k, "/v1/brands", json!({"name": "Shoes"}))
        .await
        .body;
    let first = app
        .create_intent(
            k,
            json!({"amount": 10_000, "currency": "NGN", "customer_email": "Chi@Example.com", "brand": id(&brand)}),
        )
        .await;
    let customer = first["customer"]
        .as_str()
        .expect("a customer was made")
        .to_string();
    let c = app.get(k, &format!("/v1/customers/{customer}")).await.body;
    assert_eq!(c["email"], "Chi@Example.com");
    assert_eq!(
        c["brand"],
        id(&brand).as_str(),
        "made under the payment's brand"
    );
    let second = app
        .create_intent(
            k,
            json!({"amount": 20_000, "currency": "NGN", "customer_email": "chi@example.COM"}),
        )
        .await;
    assert_eq!(second["customer"], customer.as_str());
    assert_eq!(second["customer_email"], "chi@example.COM");
    let listed = app
        .get(k, &format!("/v1/payment_intents?customer={customer}"))
        .await;
    assert_eq!(listed.body["data"].as_array().unwrap().len(), 2);
    assert_eq!(list_ids(&app, k, "").await, vec![customer.clone()]);
    // An explicit customer wins over the email.
    let other = created(&app, k, json!({"phone": "+2348031234567"})).await;
    let third = app
        .create_intent(
            k,
            json!({"amount": 10_000, "currency": "NGN", "customer": id(&other), "customer_email": "chi@example.com"}),
        )
        .await;
    assert_eq!(third["customer"], id(&other).as_str());
    // A request that fails makes no customer.
    app.post(
        k,
        "/v1/payment_intents",
        json!({"amount": 10_000, "currency": "NGN", "customer_email": "new@example.com", "brand": uuid::Uuid::new_v4()}),
    )
    .await
    .assert_error(404, "resource_missing", Some("brand"));
    assert!(list_ids(&app, k, "?email=new@example.com").await.is_empty());
    // Another merchant's customer: 404 on customer.
    let them = app.merchant().await;
    let theirs = created(&app, &them.test_key, json!({"email": "t@example.com"})).await;
    app.post(
        k,
        "/v1/payment_intents",
        json!({"amount": 10_000, "currency": "NGN", "customer": id(&theirs)}),
    )
    .await
    .assert_error(404, "resource_missing", Some("customer"));
    // Mandates with an email find the same customer.
    let mandate = app
        .post(
            k,
            "/v1/mandates",
            json!({"customer_email": "CHI@example.com"}),
        )
        .await;
    mandate.assert_status(201);
    assert_eq!(mandate.body["customer"], customer.as_str());
    assert_eq!(mandate.body["customer_email"], "Chi@Example.com");
}
