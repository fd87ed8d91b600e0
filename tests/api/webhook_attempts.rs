//! Each attempt of a webhook delivery, kept and shown
//! (`GET /v1/events/{id}/delivery_attempts`, the dashboard's endpoint
//! page), and the test event sent to one endpoint
//! (`POST /v1/webhook_endpoints/{id}/test`, the dashboard's button), with
//! the real HTTPS receiver of `webhooks.rs`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::dashboard::person;
use crate::helpers::{spawn_app_with, TestApp};
use crate::webhooks::{verify, Answer, Receiver};

const WAIT: Duration = Duration::from_secs(15);

/// Creates an endpoint; returns (id, secret).
async fn endpoint(app: &TestApp, key: &str, url: &str) -> (String, String) {
    let r = app
        .post(key, "/v1/webhook_endpoints", json!({"url": url}))
        .await;
    r.assert_status(201);
    (
        r.body["id"].as_str().unwrap().to_string(),
        r.body["secret"].as_str().unwrap().to_string(),
    )
}

/// The event's attempts (to `endpoint`) once there are `n` of them.
async fn attempts(app: &TestApp, key: &str, event: &str, endpoint: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = app
            .get(
                key,
                &format!("/v1/events/{event}/delivery_attempts?endpoint={endpoint}"),
            )
            .await;
        r.assert_status(200);
        let data = r.body["data"].as_array().unwrap().clone();
        if data.len() >= n {
            assert_eq!(data.len(), n, "{data:?}");
            return data;
        }
        assert!(Instant::now() < deadline, "only {} attempts", data.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_endpoint_that_answers_500_then_200_shows_two_attempts_with_those_codes() {
    let mut rx = Receiver::start();
    rx.answer("/flaky", Answer::Status(500));
    let app = spawn_app_with(&rx.flags()).await;
    let m = app.merchant().await;
    let key = &m.test_key;
    let (ep, _) = endpoint(&app, key, &rx.url("/flaky")).await;
    let (other, _) = endpoint(&app, key, &rx.url("/other")).await;
    app.paid_intent(key, 50_000).await;
    let event = rx.next(WAIT).await.event_id();
    rx.next(WAIT).await;
    attempts(&app, key, &event, &ep, 1).await;

    rx.answer("/flaky", Answer::Status(200));
    app.advance(60).await;
    assert_eq!(rx.next(WAIT).await.path, "/flaky");
    let two = attempts(&app, key, &event, &ep, 2).await;
    assert_eq!(
        two.iter()
            .map(|a| a["response_status"].clone())
            .collect::<Vec<_>>(),
        vec![json!(500), json!(200)]
    );
    assert_eq!(
        two.iter()
            .map(|a| a["succeeded"].clone())
            .collect::<Vec<_>>(),
        vec![json!(false), json!(true)]
    );
    for (i, a) in two.iter().enumerate() {
        assert_eq!(a["object"], "delivery_attempt");
        assert_eq!(a["livemode"], false);
        assert_eq!(a["event_id"], event.as_str());
        assert_eq!(a["endpoint_id"], ep.as_str());
        assert_eq!(a["number"], i as u64 + 1);
        assert!(a["error"].is_null());
        assert!(a["duration_ms"].is_u64());
    }
    // The retry was made 60 s (on the clock) after the first attempt.
    let at = |a: &Value| {
        a["attempted_at"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap()
    };
    assert_eq!((at(&two[1]) - at(&two[0])).num_seconds(), 60);

    // Every endpoint's attempts, oldest first, a page at a time (once the
    // other endpoint's attempt is recorded: the receiver sees the request
    // before kobo writes the attempt with its answer).
    attempts(&app, key, &event, &other, 1).await;
    let all = app
        .get(key, &format!("/v1/events/{event}/delivery_attempts"))
        .await;
    all.assert_status(200);
    assert_eq!(all.body["object"], "list");
    assert_eq!(all.body["data"].as_array().unwrap().len(), 3);
    assert_eq!(all.body["data"][2]["id"], two[1]["id"]);
    assert!(all.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["endpoint_id"] == other.as_str() && a["response_status"] == 200));
    let first = app
        .get(
            key,
            &format!("/v1/events/{event}/delivery_attempts?limit=2"),
        )
        .await;
    assert_eq!(first.body["has_more"], true);
    let last = first.body["data"][1]["id"].as_str().unwrap().to_string();
    let rest = app
        .get(
            key,
            &format!("/v1/events/{event}/delivery_attempts?limit=2&starting_after={last}"),
        )
        .await;
    assert_eq!(rest.body["has_more"], false);
    assert_eq!(rest.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(rest.body["data"][0]["id"], two[1]["id"]);

    // Bad queries and someone else's event.
    app.get(
        key,
        &format!("/v1/events/{event}/delivery_attempts?starting_after={event}"),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("starting_after"));
    app.get(
        key,
        &format!("/v1/events/{event}/delivery_attempts?endpoint=nope"),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("endpoint"));
    let stranger = app.merchant().await;
    app.get(
        &stranger.test_key,
        &format!("/v1/events/{event}/delivery_attempts"),
    )
    .await
    .assert_error(404, "resource_missing", None);

    // The dashboard's endpoint page shows the delivery with both attempts.
    let owner = person(&app, &m, "ada@example.com", "owner").await;
    let page = owner.open(&app, &format!("/dashboard/webhooks/{ep}")).await;
    assert_eq!(page.status, 200);
    let row = page
        .html
        .split(&event)
        .nth(1)
        .expect("the delivery's row")
        .split("</tr>")
        .next()
        .unwrap()
        .to_string();
    let codes: Vec<&str> = row
        .split(r#"<span class="attempt-status">"#)
        .skip(1)
        .map(|s| s.split('<').next().unwrap())
        .collect();
    assert_eq!(codes, vec!["500", "200"], "{row}");
}

#[tokio::test]
async fn a_test_event_is_signed_and_sent_to_that_one_endpoint_only_with_its_attempts_recorded() {
    let mut rx = Receiver::start();
    let app = spawn_app_with(&rx.flags()).await;
    let m = app.merchant().await;
    let key = &m.test_key;
    let (a, secret) = endpoint(&app, key, &rx.url("/a")).await;
    let (b, _) = endpoint(&app, key, &rx.url("/b")).await;

    let path = format!("/v1/webhook_endpoints/{a}/test");
    let r = app.post_with_key(key, &path, "test-1", json!({})).await;
    r.assert_status(200);
    assert_eq!(r.body["object"], "webhook_endpoint_test");
    assert_eq!(r.body["endpoint_id"], a.as_str());
    assert_eq!(r.body["type"], "webhook_endpoint.test");
    assert_eq!(r.body["livemode"], false);
    let event = r.body["event_id"].as_str().unwrap().to_string();

    let got = rx.next(WAIT).await;
    assert_eq!(got.path, "/a");
    assert_eq!(got.event_id(), event);
    verify(&got, &secret);
    let body = got.json();
    assert_eq!(body["type"], "webhook_endpoint.test");
    assert_eq!(body["object"], "event");
    assert_eq!(body["livemode"], false);
    assert_eq!(body["data"]["object"]["id"], a.as_str());
    assert!(body["data"]["object"].get("secret").is_none());
    assert!(body.get("deliveries").is_none());
    let made = attempts(&app, key, &event, &a, 1).await;
    assert_eq!(made[0]["response_status"], 200);

    // The same key answers the same test; nothing is sent again.
    let again = app.post_with_key(key, &path, "test-1", json!({})).await;
    again.assert_status(200);
    assert_eq!(again.body["event_id"], event.as_str());

    // A payment's event goes to both; the test event never went to b and
    // is in no event list.
    app.paid_intent(key, 50_000).await;
    let mut paths = vec![rx.next(WAIT).await.path, rx.next(WAIT).await.path];
    paths.sort();
    assert_eq!(paths, vec!["/a", "/b"]);
    let log = rx.log.lock().unwrap().clone();
    assert_eq!(
        log.len(),
        3,
        "{:?}",
        log.iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    assert_eq!(log.iter().filter(|r| r.event_id() == event).count(), 1);
    let listed = app.get(key, "/v1/events?limit=100").await;
    assert!(listed.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["id"] != event.as_str() && e["type"] != "webhook_endpoint.test"));
    let to_b = app
        .get(
            key,
            &format!("/v1/events/{event}/delivery_attempts?endpoint={b}"),
        )
        .await;
    assert_eq!(to_b.body["data"], json!([]));

    // Redelivering a test event sends it to its endpoint only.
    let re = app
        .post(key, &format!("/v1/events/{event}/redeliver"), json!({}))
        .await;
    re.assert_status(200);
    assert_eq!(re.body["queued"], 1);
    let got = rx.next(WAIT).await;
    assert_eq!((got.path.as_str(), got.event_id()), ("/a", event.clone()));
    attempts(&app, key, &event, &a, 2).await;

    // The store's own check knows test events and attempt rows.
    let mut app = app;
    crate::operations::assert_check_clean(&mut app);
}

#[tokio::test]
async fn a_test_event_for_an_unknown_foreign_or_disabled_endpoint_is_refused_and_sends_nothing() {
    let mut rx = Receiver::start();
    let app = spawn_app_with(&rx.flags()).await;
    let m = app.merchant().await;
    let other = app.merchant().await;
    let (ep, _) = endpoint(&app, &m.test_key, &rx.url("/a")).await;
    let test = |id: &str| format!("/v1/webhook_endpoints/{id}/test");

    app.post(&other.test_key, &test(&ep), json!({}))
        .await
        .assert_error(404, "resource_missing", None);
    app.post(&m.live_key, &test(&ep), json!({}))
        .await
        .assert_error(404, "resource_missing", None);
    app.post(&m.test_key, &test("not-an-id"), json!({}))
        .await
        .assert_error(404, "resource_missing", None);
    app.post(&m.test_key, &test(&ep), json!({"extra": 1}))
        .await
        .assert_error(400, "parameter_unknown", Some("extra"));
    app.post(
        &m.test_key,
        &format!("/v1/webhook_endpoints/{ep}/disable"),
        json!({}),
    )
    .await
    .assert_status(200);
    app.post(&m.test_key, &test(&ep), json!({}))
        .await
        .assert_error(409, "webhook_endpoint_disabled", None);
    app.post(
        &m.test_key,
        &format!("/v1/webhook_endpoints/{ep}/enable"),
        json!({}),
    )
    .await
    .assert_status(200);
    // Enabled again, a test goes out: the first request the receiver saw.
    let r = app.post(&m.test_key, &test(&ep), json!({})).await;
    r.assert_status(200);
    assert_eq!(
        rx.next(WAIT).await.event_id(),
        r.body["event_id"].as_str().unwrap()
    );
    assert!(rx.try_next().is_none());
}

#[tokio::test]
async fn an_owner_sends_a_test_event_from_the_dashboard_and_sees_its_attempt_while_a_viewer_is_refused(
) {
    let mut rx = Receiver::start();
    let app = spawn_app_with(&rx.flags()).await;
    let m = app.merchant().await;
    let (ep, secret) = endpoint(&app, &m.test_key, &rx.url("/a")).await;
    let detail = format!("/dashboard/webhooks/{ep}");
    let viewer = person(&app, &m, "vi@example.com", "viewer").await;
    let refused = viewer
        .submit(&app, &detail, &format!("{detail}/test"), &[])
        .await;
    assert_eq!(refused.status, 403, "{}", refused.html);
    assert!(!viewer
        .open(&app, &detail)
        .await
        .html
        .contains("Send test event"));

    let owner = person(&app, &m, "ada@example.com", "owner").await;
    assert!(owner
        .open(&app, &detail)
        .await
        .html
        .contains("Send test event"));
    let sent = owner
        .submit(&app, &detail, &format!("{detail}/test"), &[])
        .await;
    assert_eq!(sent.status, 303, "{}", sent.html);
    let got = rx.next(WAIT).await;
    verify(&got, &secret);
    assert_eq!(got.json()["type"], "webhook_endpoint.test");
    let event = got.event_id();
    attempts(&app, &m.test_key, &event, &ep, 1).await;
    // Only the owner's test was sent: the viewer's made nothing.
    assert_eq!(rx.log.lock().unwrap().len(), 1);
    let page = owner.open(&app, &detail).await;
    let row = page
        .html
        .split(&event)
        .nth(1)
        .expect("the test delivery's row")
        .split("</tr>")
        .next()
        .unwrap()
        .to_string();
    assert!(
        row.contains(r#"<span class="attempt-status">200</span>"#),
        "{row}"
    );
    assert!(page.html.contains("webhook_endpoint.test"));
}

#[tokio::test]
async fn revealing_a_signing_secret_on_the_dashboard_is_written_to_the_audit_log_without_the_secret(
) {
    let app = crate::helpers::spawn_app().await;
    let m = app.merchant().await;
    let (ep, secret) = endpoint(&app, &m.test_key, "https://hooks.example.com/k").await;
    let owner = person(&app, &m, "ada@example.com", "owner").await;
    let detail = format!("/dashboard/webhooks/{ep}");
    let audit = "/admin/v1/audit?action=webhook_endpoint.secret_revealed";

    // Not confirmed: not shown, nothing recorded.
    let unconfirmed = owner
        .submit(&app, &detail, &format!("{detail}/secret"), &[])
        .await;
    assert_eq!(unconfirmed.status, 400);
    assert_eq!(app.admin_get(audit).await.body["data"], json!([]));

    let shown = owner
        .submit(
            &app,
            &detail,
            &format!("{detail}/secret"),
            &[("confirm", "yes")],
        )
        .await;
    assert_eq!(shown.status, 200);
    assert!(shown.html.contains(&secret));
    let r = app.admin_get(audit).await;
    r.assert_status(200);
    let entries = r.body["data"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{}", r.text);
    let e = &entries[0];
    assert_eq!(e["action"], "webhook_endpoint.secret_revealed");
    assert_eq!(e["origin"], "dashboard");
    assert_eq!(e["merchant"], m.id.as_str());
    assert_eq!(e["target"], json!({"type": "webhook_endpoint", "id": ep}));
    assert_eq!(e["detail"]["livemode"], false);
    assert!(e["detail"]["dashboard_user"].is_string());
    assert!(e["request_id"].is_string());
    assert!(!r.text.contains(&secret));
}
