//! The dashboard's webhooks and disputes pages, black-box over HTTP: each
//! renders for the signed-in merchant, its actions post with the page's
//! CSRF token and change things only through the API's own operations
//! (checked through the API afterwards), another merchant's ids answer 404
//! and change nothing, a viewer reads but is refused every action (403),
//! merchant-controlled strings are escaped and the CSP header is sent.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::dashboard::{person, Dash};
use crate::helpers::pages::location;
use crate::helpers::{spawn_app, spawn_app_with, TestApp};
use crate::webhooks::{verify, Receiver};

const WAIT: Duration = Duration::from_secs(15);

/// The API's list of the key's webhook endpoints.
async fn api_endpoints(app: &TestApp, key: &str) -> Vec<Value> {
    let r = app.get(key, "/v1/webhook_endpoints").await;
    r.assert_status(200);
    r.body["data"].as_array().unwrap().clone()
}

/// The event's delivery to `endpoint` as the API lists it, once `ok`
/// holds (deliveries are made by the webhook dispatcher, off the request).
async fn api_delivery(
    app: &TestApp,
    key: &str,
    event: &str,
    endpoint: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = app.get(key, "/v1/events?limit=100").await;
        let found = r.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == event)
            .and_then(|e| {
                e["deliveries"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|d| d["endpoint_id"] == endpoint)
                    .cloned()
            });
        if let Some(d) = found.filter(|d| ok(d)) {
            return d;
        }
        assert!(Instant::now() < deadline, "the delivery never got there");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A successful payment with an open dispute of ₦600 on it: the dispute's
/// id.
async fn disputed(app: &TestApp, key: &str) -> String {
    app.paid_intent(key, 50_000).await;
    app.post(key, "/v1/test_helpers/balance/release_pending", json!({}))
        .await
        .assert_status(200);
    let paid = app.paid_intent(key, 100_000).await;
    let pi = paid["id"].as_str().unwrap();
    let d = app
        .post(
            key,
            &format!("/v1/test_helpers/payment_intents/{pi}/dispute"),
            json!({"amount": 60_000, "reason": "fraudulent"}),
        )
        .await;
    d.assert_status(200);
    d.body["id"].as_str().unwrap().to_string()
}

async fn api_dispute(app: &TestApp, key: &str, id: &str) -> Value {
    let r = app.get(key, &format!("/v1/disputes/{id}")).await;
    r.assert_status(200);
    r.body
}

fn assert_csp(p: &crate::helpers::pages::Page) {
    let csp = p.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
}

#[tokio::test]
async fn an_owner_adds_an_endpoint_sees_its_deliveries_redelivers_reveals_the_secret_disables_and_deletes_it(
) {
    let mut rx = Receiver::start();
    let app = spawn_app_with(&rx.flags()).await;
    let m = app.merchant().await;
    let owner = person(&app, &m, "ada@example.com", "owner").await;
    let page = owner.open(&app, "/dashboard/webhooks").await;
    assert_eq!(page.status, 200);
    assert!(page.html.contains("No webhook endpoints yet."));
    assert_csp(&page);

    // A URL the API refuses is refused the same way, and nothing is added.
    let bad = owner
        .submit(
            &app,
            "/dashboard/webhooks",
            "/dashboard/webhooks/create",
            &[("url", "http://hooks.example.com/")],
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.html);
    assert!(api_endpoints(&app, &m.test_key).await.is_empty());

    let url = rx.url("/hook");
    let made = owner
        .submit(
            &app,
            "/dashboard/webhooks",
            "/dashboard/webhooks/create",
            &[("url", &url), ("events", "payment_intent.successful")],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.html);
    let listed = api_endpoints(&app, &m.test_key).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["url"], url.as_str());
    assert_eq!(listed[0]["events"], json!(["payment_intent.successful"]));
    let id = listed[0]["id"].as_str().unwrap().to_string();
    let detail = format!("/dashboard/webhooks/{id}");
    assert_eq!(location(&made), detail);
    assert!(owner
        .open(&app, "/dashboard/webhooks")
        .await
        .html
        .contains(&url));

    // A payment's event is delivered; the page shows the attempt's status.
    let pi = app.paid_intent(&m.test_key, 50_000).await;
    let first = rx.next(WAIT).await;
    assert_eq!(first.json()["data"]["object"]["id"], pi["id"]);
    let event = first.event_id();
    api_delivery(&app, &m.test_key, &event, &id, |d| {
        d["attempts"] == 1 && d["last_response_status"] == 200
    })
    .await;
    let page = owner.open(&app, &detail).await;
    assert_eq!(page.status, 200);
    assert!(page.html.contains(&event), "{}", page.html);
    assert!(page.html.contains("payment_intent.successful"));
    assert!(page.html.contains("<td>200</td>"), "{}", page.html);

    // Redeliver: through the API's redelivery, sent again.
    let again = owner
        .submit(
            &app,
            &detail,
            &format!("{detail}/redeliver"),
            &[("event", &event)],
        )
        .await;
    assert_eq!(again.status, 303, "{}", again.html);
    assert_eq!(rx.next(WAIT).await.event_id(), event);
    api_delivery(&app, &m.test_key, &event, &id, |d| d["attempts"] == 2).await;

    // The secret: only with the box ticked; it signs the deliveries.
    let unconfirmed = owner
        .submit(&app, &detail, &format!("{detail}/secret"), &[])
        .await;
    assert_eq!(unconfirmed.status, 400);
    assert!(!unconfirmed.html.contains("whsec_"));
    let shown = owner
        .submit(
            &app,
            &detail,
            &format!("{detail}/secret"),
            &[("confirm", "yes")],
        )
        .await;
    assert_eq!(shown.status, 200);
    let secret = shown
        .html
        .split(r#"<code id="signing-secret" class="wrap">"#)
        .nth(1)
        .and_then(|s| s.split("</code>").next())
        .expect("the secret is shown")
        .to_string();
    assert!(secret.starts_with("whsec_"), "{secret}");
    verify(&first, &secret);
    assert!(!owner.open(&app, &detail).await.html.contains(&secret));

    // Disable, enable, delete: each through the API's own operation.
    for (action, status) in [("disable", "disabled"), ("enable", "enabled")] {
        let p = owner
            .submit(&app, &detail, &format!("{detail}/{action}"), &[])
            .await;
        assert_eq!(p.status, 303, "{}", p.html);
        assert_eq!(api_endpoints(&app, &m.test_key).await[0]["status"], status);
    }
    let gone = owner
        .submit(&app, &detail, &format!("{detail}/delete"), &[])
        .await;
    assert_eq!(gone.status, 303);
    assert_eq!(location(&gone), "/dashboard/webhooks");
    assert!(api_endpoints(&app, &m.test_key).await.is_empty());
    assert_eq!(owner.open(&app, &detail).await.status, 404);
}

#[tokio::test]
async fn an_owner_reads_a_dispute_and_submits_evidence_through_the_api_shown_escaped() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let id = disputed(&app, &m.test_key).await;
    let owner = person(&app, &m, "ada@example.com", "owner").await;
    let list = owner.open(&app, "/dashboard/disputes").await;
    assert_eq!(list.status, 200);
    assert_csp(&list);
    assert!(list.html.contains(&format!("/dashboard/disputes/{id}")));
    assert!(list.html.contains("₦600.00"), "{}", list.html);
    let detail = format!("/dashboard/disputes/{id}");
    let page = owner.open(&app, &detail).await;
    assert_eq!(page.status, 200);
    assert_csp(&page);
    assert!(page.html.contains("fraudulent"));
    assert!(page.html.contains("No evidence submitted yet."));

    // No field: the API's own refusal, nothing saved.
    let empty = owner
        .submit(&app, &detail, &format!("{detail}/evidence"), &[])
        .await;
    assert_eq!(empty.status, 400, "{}", empty.html);
    assert!(api_dispute(&app, &m.test_key, &id).await["evidence"].is_null());

    let said = "<script>alert(1)</script> delivered on 2 Dec";
    let sent = owner
        .submit(
            &app,
            &detail,
            &format!("{detail}/evidence"),
            &[
                ("text", said),
                ("tracking_number", "GIG-123"),
                ("customer_name", ""),
            ],
        )
        .await;
    assert_eq!(sent.status, 303, "{}", sent.html);
    assert_eq!(location(&sent), detail);
    let d = api_dispute(&app, &m.test_key, &id).await;
    assert_eq!(
        d["evidence"],
        json!({"text": said, "tracking_number": "GIG-123"})
    );
    assert!(d["evidence_submitted_at"].is_string());
    let page = owner.open(&app, &detail).await;
    assert!(page
        .html
        .contains("&lt;script&gt;alert(1)&lt;/script&gt; delivered on 2 Dec"));
    assert!(!page.html.contains("<script>alert(1)"));

    // Once resolved, the form is gone and the API refuses evidence.
    app.post(
        &m.test_key,
        &format!("/v1/test_helpers/disputes/{id}/resolve"),
        json!({"outcome": "won"}),
    )
    .await
    .assert_status(200);
    let page = owner.open(&app, &detail).await;
    assert!(!page.html.contains("Submit evidence"));
    let late = owner
        .submit(
            &app,
            "/dashboard/disputes",
            &format!("{detail}/evidence"),
            &[("text", "more")],
        )
        .await;
    assert_eq!(late.status, 400);
    assert_eq!(
        api_dispute(&app, &m.test_key, &id).await["evidence"]["text"],
        said
    );
}

#[tokio::test]
async fn another_merchants_endpoints_events_and_disputes_answer_404_and_change_nothing() {
    let app = spawn_app().await;
    let a = app.merchant().await;
    let b = app.merchant().await;
    let theirs = app
        .post(
            &b.test_key,
            "/v1/webhook_endpoints",
            json!({"url": "https://hooks.example.com/b"}),
        )
        .await;
    theirs.assert_status(201);
    let ep = theirs.body["id"].as_str().unwrap().to_string();
    let secret = theirs.body["secret"].as_str().unwrap().to_string();
    let dispute = disputed(&app, &b.test_key).await;
    let event = app.get(&b.test_key, "/v1/events?limit=1").await.body["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mine = app
        .post(
            &a.test_key,
            "/v1/webhook_endpoints",
            json!({"url": "https://hooks.example.com/a"}),
        )
        .await;
    let my_ep = mine.body["id"].as_str().unwrap().to_string();
    let owner = person(&app, &a, "ada@example.com", "owner").await;

    let list = owner.open(&app, "/dashboard/webhooks").await;
    assert!(!list.html.contains("hooks.example.com/b"));
    assert!(!owner
        .open(&app, "/dashboard/disputes")
        .await
        .html
        .contains(&dispute));
    for path in [
        format!("/dashboard/webhooks/{ep}"),
        format!("/dashboard/disputes/{dispute}"),
    ] {
        assert_eq!(owner.open(&app, &path).await.status, 404, "{path}");
    }
    for (path, fields) in [
        (format!("/dashboard/webhooks/{ep}/disable"), vec![]),
        (format!("/dashboard/webhooks/{ep}/delete"), vec![]),
        (
            format!("/dashboard/webhooks/{ep}/secret"),
            vec![("confirm", "yes")],
        ),
        (
            format!("/dashboard/webhooks/{my_ep}/redeliver"),
            vec![("event", event.as_str())],
        ),
        (
            format!("/dashboard/disputes/{dispute}/evidence"),
            vec![("text", "not mine")],
        ),
    ] {
        let p = owner
            .submit(&app, "/dashboard/webhooks", &path, &fields)
            .await;
        assert_eq!(p.status, 404, "{path}: {}", p.html);
        assert!(!p.html.contains(&secret));
    }
    let still = api_endpoints(&app, &b.test_key).await;
    assert_eq!(still.len(), 1);
    assert_eq!(still[0]["status"], "enabled");
    assert!(api_dispute(&app, &b.test_key, &dispute).await["evidence"].is_null());
}

#[tokio::test]
async fn a_viewer_reads_the_webhook_and_dispute_pages_but_every_action_is_refused_with_a_403_page()
{
    let app = spawn_app().await;
    let m = app.merchant().await;
    let made = app
        .post(
            &m.test_key,
            "/v1/webhook_endpoints",
            json!({"url": "https://hooks.example.com/k"}),
        )
        .await;
    let ep = made.body["id"].as_str().unwrap().to_string();
    let secret = made.body["secret"].as_str().unwrap().to_string();
    let dispute = disputed(&app, &m.test_key).await;
    let viewer: Dash = person(&app, &m, "vi@example.com", "viewer").await;
    let owner = person(&app, &m, "ada@example.com", "owner").await;

    let hooks = viewer.open(&app, "/dashboard/webhooks").await;
    assert_eq!(hooks.status, 200);
    assert!(hooks.html.contains("hooks.example.com/k"));
    assert!(!hooks.html.contains("Add endpoint"));
    let detail = viewer
        .open(&app, &format!("/dashboard/webhooks/{ep}"))
        .await;
    assert_eq!(detail.status, 200);
    assert!(!detail.html.contains("Reveal signing secret"));
    let d = viewer
        .open(&app, &format!("/dashboard/disputes/{dispute}"))
        .await;
    assert_eq!(d.status, 200);
    assert!(!d.html.contains("Submit evidence"));

    for (path, fields) in [
        (
            "/dashboard/webhooks/create".to_string(),
            vec![("url", "https://hooks.example.com/v")],
        ),
        (format!("/dashboard/webhooks/{ep}/disable"), vec![]),
        (format!("/dashboard/webhooks/{ep}/delete"), vec![]),
        (
            format!("/dashboard/webhooks/{ep}/secret"),
            vec![("confirm", "yes")],
        ),
        (
            format!("/dashboard/disputes/{dispute}/evidence"),
            vec![("text", "a viewer's word")],
        ),
    ] {
        let p = viewer
            .submit(&app, "/dashboard/webhooks", &path, &fields)
            .await;
        assert_eq!(p.status, 403, "{path}: {}", p.html);
        assert!(!p.html.contains(&secret));
    }
    // Without the CSRF token even an owner changes nothing.
    let p = owner
        .post(
            &app,
            &format!("/dashboard/webhooks/{ep}/disable"),
            &[("nonce", "abcdefgh12")],
        )
        .await;
    assert_eq!(p.status, 403);
    let listed = api_endpoints(&app, &m.test_key).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["status"], "enabled");
    assert!(api_dispute(&app, &m.test_key, &dispute).await["evidence"].is_null());
}
