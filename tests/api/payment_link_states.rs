//! A payment link's counters and states through the API: exact counters
//! under 50 concurrent payers, `max_payments` (and the slots of payments
//! in progress), expiry on the clock (across a restart), deactivate and
//! activate, each with its `payment_link.*` event.

use serde_json::{json, Value};

use crate::helpers::spawn_app;
use crate::payment_links::{await_events, chosen, create_link, events, fixed, link_now, pay};

#[tokio::test]
async fn counters_are_exact_under_50_concurrent_payers() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let l = create_link(&app, &m.test_key, chosen()).await;
    let amounts: Vec<i64> = (0..50).map(|i| 100000 + i * 1001).collect();
    let answers = futures_util::future::join_all(amounts.iter().map(|a| {
        pay(
            &app,
            &m.test_key,
            &l,
            json!({"amount": a, "email": "p@example.com", "phone": "08030000000",
                                        "custom_fields": {"size": "25kg"}}),
        )
    }))
    .await;
    for r in &answers {
        r.assert_status(200);
        assert_eq!(r.body["status"], "successful");
    }
    let now = link_now(&app, &m.test_key, &l).await;
    assert_eq!(now["payments_count"], 50);
    assert_eq!(now["amount_collected"], amounts.iter().sum::<i64>());
    let id = l["id"].as_str().unwrap();
    let listed = app
        .all_pages(
            &m.test_key,
            &format!("/v1/payment_intents?payment_link={id}"),
        )
        .await;
    assert_eq!(listed.len(), 50);
    // The ledger took the same money.
    let pending = app.balance(&m.test_key, "pending", "NGN").await;
    assert!(pending > 0);
}

#[tokio::test]
async fn max_payments_admits_exactly_that_many_of_50_concurrent_payers_then_deactivates() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let mut body = fixed(100000);
    body["max_payments"] = json!(10);
    let l = create_link(&app, &m.test_key, body).await;
    let answers = futures_util::future::join_all(
        (0..50).map(|_| pay(&app, &m.test_key, &l, json!({"email": "p@example.com"}))),
    )
    .await;
    let paid = answers.iter().filter(|r| r.status == 200).count();
    let refused = answers
        .iter()
        .filter(|r| {
            r.status == 409 && matches!(r.code(), "payment_link_full" | "payment_link_inactive")
        })
        .count();
    assert_eq!((paid, refused), (10, 40));
    let now = link_now(&app, &m.test_key, &l).await;
    assert_eq!(
        (
            now["payments_count"].clone(),
            now["amount_collected"].clone()
        ),
        (json!(10), json!(1000000))
    );
    assert_eq!(
        (now["status"].clone(), now["inactive_reason"].clone()),
        (json!("inactive"), json!("max_payments_reached"))
    );
    let deactivated = await_events(&app, &m.test_key, "payment_link.deactivated", 1).await;
    assert_eq!(
        deactivated[0]["data"]["object"]["inactive_reason"],
        "max_payments_reached"
    );
    pay(&app, &m.test_key, &l, json!({"email": "p@example.com"}))
        .await
        .assert_error(409, "payment_link_inactive", None);
    let r = app
        .get(&m.test_key, "/v1/payment_links?status=inactive")
        .await;
    assert_eq!(r.body["data"][0]["id"], l["id"]);
    // Activate: only once max_payments is raised.
    let id = l["id"].as_str().unwrap();
    let activate = format!("/v1/payment_links/{id}/activate");
    app.post(&m.test_key, &activate, json!({}))
        .await
        .assert_error(409, "payment_link_inactive", None);
    let r = app
        .post(
            &m.test_key,
            &format!("/v1/payment_links/{id}"),
            json!({"max_payments": 11}),
        )
        .await;
    assert_eq!(r.body["status"], "inactive");
    let r = app.post(&m.test_key, &activate, json!({})).await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "active");
    await_events(&app, &m.test_key, "payment_link.activated", 1).await;
    pay(&app, &m.test_key, &l, json!({"email": "p@example.com"}))
        .await
        .assert_status(200);
    assert_eq!(link_now(&app, &m.test_key, &l).await["status"], "inactive");
    await_events(&app, &m.test_key, "payment_link.deactivated", 2).await;
}

#[tokio::test]
async fn deactivate_and_activate() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let l = create_link(&app, &m.test_key, fixed(5000)).await;
    let id = l["id"].as_str().unwrap();
    let r = app
        .post(
            &m.test_key,
            &format!("/v1/payment_links/{id}/deactivate"),
            json!({}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(
        (r.body["status"].clone(), r.body["inactive_reason"].clone()),
        (json!("inactive"), json!("deactivated"))
    );
    let r = app
        .post(
            &m.test_key,
            &format!("/v1/payment_links/{id}/deactivate"),
            json!({}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(
        events(&app, &m.test_key, "payment_link.deactivated")
            .await
            .len(),
        1
    );
    pay(&app, &m.test_key, &l, json!({"email": "a@b.co"}))
        .await
        .assert_error(409, "payment_link_inactive", None);
    let page = app
        .client
        .get(l["url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 410);
    let text = page.text().await.unwrap();
    assert!(text.contains("No longer accepting payments"), "{text}");
    let r = app
        .get(&m.test_key, "/v1/payment_links?status=active")
        .await;
    assert_eq!(r.body["data"], json!([]));
    let r = app
        .post(
            &m.test_key,
            &format!("/v1/payment_links/{id}/activate"),
            json!({}),
        )
        .await;
    assert_eq!(
        (r.body["status"].clone(), r.body["inactive_reason"].clone()),
        (json!("active"), Value::Null)
    );
    pay(&app, &m.test_key, &l, json!({"email": "a@b.co"}))
        .await
        .assert_status(200);
    let r = app
        .post(
            &m.test_key,
            "/v1/payment_links/not-an-id/activate",
            json!({}),
        )
        .await;
    r.assert_error(404, "resource_missing", None);
}

#[tokio::test]
async fn a_link_expires_on_the_clock_even_across_a_restart() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let at = app.now().await + chrono::Duration::hours(1);
    let mut body = fixed(5000);
    body["expires_at"] = json!(at.to_rfc3339());
    let l = create_link(&app, &m.test_key, body).await;
    app.restart();
    app.advance(3599).await;
    assert_eq!(link_now(&app, &m.test_key, &l).await["status"], "active");
    pay(&app, &m.test_key, &l, json!({"email": "a@b.co"}))
        .await
        .assert_status(200);
    app.advance(1).await;
    let now = link_now(&app, &m.test_key, &l).await;
    assert_eq!(
        (now["status"].clone(), now["inactive_reason"].clone()),
        (json!("inactive"), json!("expired"))
    );
    let e = events(&app, &m.test_key, "payment_link.deactivated").await;
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0]["created_at"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap(),
        at
    );
    pay(&app, &m.test_key, &l, json!({"email": "a@b.co"}))
        .await
        .assert_error(409, "payment_link_inactive", None);
    // The page, at this start's address.
    let page = format!("{}/p/{}", app.base, l["slug"].as_str().unwrap());
    assert_eq!(app.client.get(page).send().await.unwrap().status(), 410);
    // Activate only once expires_at is later; the new expiry runs too.
    let id = l["id"].as_str().unwrap();
    let activate = format!("/v1/payment_links/{id}/activate");
    app.post(&m.test_key, &activate, json!({}))
        .await
        .assert_error(409, "payment_link_inactive", None);
    let path = format!("/v1/payment_links/{id}");
    let past = (at - chrono::Duration::seconds(1)).to_rfc3339();
    app.post(&m.test_key, &path, json!({"expires_at": past}))
        .await
        .assert_error(400, "parameter_invalid", Some("expires_at"));
    let later = at + chrono::Duration::hours(2);
    app.post(
        &m.test_key,
        &path,
        json!({"expires_at": later.to_rfc3339()}),
    )
    .await
    .assert_status(200);
    let r = app.post(&m.test_key, &activate, json!({})).await;
    assert_eq!(r.body["status"], "active");
    app.advance(7200).await;
    assert_eq!(
        link_now(&app, &m.test_key, &l).await["inactive_reason"],
        "expired"
    );
    assert_eq!(
        events(&app, &m.test_key, "payment_link.deactivated")
            .await
            .len(),
        2
    );
}
