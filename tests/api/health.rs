//! Actor health: `/admin/v1/actors` carries every field of the health data,
//! the history ring fills with samples that show traffic, and `/metrics`
//! has the same data as gauges.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::spawn_app;

/// The history's samples, waiting (real time: the sampler takes one a
/// second) until `done` holds for them.
async fn history_until(
    app: &crate::helpers::TestApp,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = app.admin_get("/admin/v1/health/history?seconds=600").await;
        r.assert_status(200);
        assert_eq!(r.body["object"], "health_history");
        let samples = r.body["samples"].as_array().unwrap().clone();
        if done(&samples) {
            return samples;
        }
        assert!(
            Instant::now() < deadline,
            "no sample showed {what}: {samples:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn the_actor_health_report_carries_every_field_of_the_health_data() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    app.paid_intent(&m.test_key, 10000).await;
    let r = app.admin_get("/admin/v1/actors").await;
    r.assert_status(200);
    let b = &r.body;
    assert_eq!(b["object"], "actor_health");
    let kinds = b["kinds"].as_array().unwrap();
    assert!(kinds.len() >= 12);
    for k in kinds {
        for field in [
            "kind",
            "live",
            "mailbox_depth",
            "mailbox_depth_max",
            "mailbox_capacity",
            "activations",
            "passivations",
            "restarts",
            "messages",
            "last_panic",
        ] {
            assert!(k.get(field).is_some(), "{field} in {k}");
        }
        assert!(k["last_panic"].is_null(), "nothing panicked: {k}");
    }
    let pi = kinds
        .iter()
        .find(|k| k["kind"] == "payment_intent")
        .unwrap();
    assert!(pi["activations"].as_u64().unwrap() >= 1);
    for field in ["queue_depth", "commits", "batches"] {
        assert!(b["store_writer"][field].is_number(), "store_writer.{field}");
    }
    assert!(b["store_writer"]["commits"].as_u64().unwrap() >= 1);
    for field in [
        "in_flight",
        "attempts",
        "delivered",
        "failed_attempts",
        "dropped",
        "streams_open",
    ] {
        assert!(b["webhooks"][field].is_number(), "webhooks.{field}");
    }
    assert!(b["webhook_endpoints"]["data"].is_array());
    assert!(b["webhook_endpoints"]["truncated"].is_boolean());
    assert_eq!(b["timers"]["overdue_after_seconds"], 60);
    assert!(b["timers"]["due"].is_number() && b["timers"]["overdue"].is_number());
    assert_eq!(b["event_stream"]["subscribers"], 0);
    assert!(b.get("latest").is_some());
}

#[tokio::test]
async fn activations_show_up_in_the_health_history_after_traffic() {
    let app = spawn_app().await;
    // A first sample, so the next ones measure rates.
    history_until(&app, "a first sample", |s| !s.is_empty()).await;
    let m = app.merchant().await;
    for _ in 0..3 {
        app.paid_intent(&m.test_key, 10000).await;
    }
    let samples = history_until(&app, "payment intent activations", |s| {
        s.iter().any(|x| {
            x["kinds"].as_array().unwrap().iter().any(|k| {
                k["kind"] == "payment_intent" && k["activations_per_second"].as_f64().unwrap() > 0.0
            })
        })
    })
    .await;
    let busy = samples
        .iter()
        .find(|x| x["writer"]["commits_per_second"].as_f64().unwrap() > 0.0)
        .expect("a sample with commits");
    assert!(busy["writer"]["batches_per_commit"].as_f64().unwrap() >= 1.0);
    let l = &busy["writer"]["commit_latency_ms"];
    let (p50, p90, p99, max) = (
        l["p50"].as_f64().unwrap(),
        l["p90"].as_f64().unwrap(),
        l["p99"].as_f64().unwrap(),
        l["max"].as_f64().unwrap(),
    );
    assert!(p50 <= p90 && p90 <= p99 && p99 <= max, "{l}");
    for x in &samples {
        for field in [
            "at",
            "seconds",
            "kinds",
            "writer",
            "timers",
            "webhooks",
            "stream_subscribers",
        ] {
            assert!(x.get(field).is_some(), "{field} in {x}");
        }
        for field in ["waiting", "in_flight", "failing"] {
            assert!(x["webhooks"][field].is_number(), "webhooks.{field}");
        }
        for field in ["due", "overdue"] {
            assert!(x["timers"][field].is_number(), "timers.{field}");
        }
        assert!(x["writer"]["queue_depth"].is_number());
    }
    // The latest sample is in the report, and its data in the metrics.
    let r = app.admin_get("/admin/v1/actors").await;
    assert!(r.body["latest"]["kinds"].is_array());
    let metrics = app.get("x", "/metrics").await;
    for name in [
        "kobo_actor_mailbox_depth",
        "kobo_timers_overdue",
        "kobo_webhook_queue",
        "kobo_event_stream_subscribers",
        "kobo_actor_rate_per_second",
        "kobo_store_writer_recent{what=\"commits_per_second\"}",
        "kobo_store_writer_recent{what=\"commit_seconds_p99\"}",
    ] {
        assert!(metrics.text.contains(name), "missing {name}");
    }
}

#[tokio::test]
async fn the_history_takes_one_to_six_hundred_seconds() {
    let app = spawn_app().await;
    for bad in ["0", "601", "x", ""] {
        app.admin_get(&format!("/admin/v1/health/history?seconds={bad}"))
            .await
            .assert_error(400, "parameter_invalid", Some("seconds"));
    }
    app.admin_get("/admin/v1/health/history?minutes=1")
        .await
        .assert_error(400, "parameter_unknown", Some("minutes"));
    app.get("x", "/admin/v1/health/history")
        .await
        .assert_error(401, "invalid_api_key", None);
}

#[tokio::test]
async fn liveness_answers_a_constant_json_body_with_a_request_id() {
    let app = spawn_app().await;
    let r = app.get("x", "/healthz").await;
    r.assert_status(200);
    assert_eq!(r.text, r#"{"status":"ok"}"#);
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(r.headers["cache-control"], "no-store");
    assert!(r.headers.contains_key("request-id"));
}

/// The `messages` count of the payment intent actors.
async fn intent_actor_messages(app: &crate::helpers::TestApp) -> u64 {
    let r = app.admin_get("/admin/v1/actors").await;
    r.assert_status(200);
    let kinds = r.body["kinds"].as_array().unwrap();
    let pi = kinds
        .iter()
        .find(|k| k["kind"] == "payment_intent")
        .unwrap();
    pi["messages"].as_u64().unwrap()
}

/// Another merchant's action on an intent is answered 404 before any actor
/// hears of it: it never waits in (or fills) the owner's live actor's
/// mailbox, nor holds the owner's payment busy.
#[tokio::test]
async fn another_merchants_action_on_an_intent_never_reaches_its_actor() {
    let app = spawn_app().await;
    let (owner, stranger) = (app.merchant().await, app.merchant().await);
    let pi = app.paid_intent(&owner.test_key, 10000).await;
    let id = pi["id"].as_str().unwrap();
    let before = intent_actor_messages(&app).await;
    for action in ["cancel", "bank_transfer"] {
        app.post(
            &stranger.test_key,
            &format!("/v1/payment_intents/{id}/{action}"),
            serde_json::json!({}),
        )
        .await
        .assert_error(404, "resource_missing", None);
    }
    assert_eq!(intent_actor_messages(&app).await, before);
    // The owner's own action reaches it.
    app.post(
        &owner.test_key,
        &format!("/v1/payment_intents/{id}/cancel"),
        serde_json::json!({}),
    )
    .await
    .assert_status(409);
    assert_eq!(intent_actor_messages(&app).await, before + 1);
}
