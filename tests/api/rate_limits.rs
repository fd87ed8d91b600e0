//! Rate limits (docs/api.md, "Rate limits"): per secret key (100/s live,
//! 25/s test, overridable per merchant), per client secret, per client IP.
//!
//! Token buckets refill in real time, not on the manual clock, so these
//! tests cannot advance time: a burst counts how many calls passed before
//! the first refusal and allows for what refilled while it ran.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::helpers::{spawn_app, spawn_app_with, Resp, TestApp};

/// Calls `call` until it is refused with 429 (at most `max` times); returns
/// the calls that passed, the time taken and the refusal.
async fn burst<F, Fut>(max: usize, mut call: F) -> (usize, Duration, Option<Resp>)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Resp>,
{
    let started = Instant::now();
    for passed in 0..max {
        let r = call().await;
        if r.status == 429 {
            return (passed, started.elapsed(), Some(r));
        }
        assert!((200..300).contains(&r.status), "{}", r.text);
    }
    (max, started.elapsed(), None)
}

/// The burst was refused once the bucket of `rate` per second (full at the
/// start) was empty: after `rate` calls, plus at most what refilled while
/// the burst ran.
#[track_caller]
fn refused_after_the_bucket_emptied(burst: (usize, Duration, Option<Resp>), rate: usize) -> Resp {
    refused_after(burst, rate, rate)
}

/// Like [`refused_after_the_bucket_emptied`] for a bucket that held `tokens`.
#[track_caller]
fn refused_after(
    (passed, took, refusal): (usize, Duration, Option<Resp>),
    tokens: usize,
    rate: usize,
) -> Resp {
    let refusal = refusal.unwrap_or_else(|| panic!("{passed} calls passed, none was refused"));
    let refilled = (took.as_secs_f64() * rate as f64).ceil() as usize;
    assert!(
        passed >= tokens && passed <= tokens + refilled + 1,
        "{passed} calls passed in {took:?} at {rate}/s from {tokens} tokens"
    );
    assert_rate_limited(&refusal);
    refusal
}

#[track_caller]
fn assert_rate_limited(r: &Resp) {
    r.assert_error(429, "rate_limited", None);
    assert_eq!(r.error_type(), "rate_limit_error");
    assert!(r.body["error"]["param"].is_null(), "{}", r.text);
    let retry_after: u64 = r
        .headers
        .get("retry-after")
        .expect("a Retry-After header")
        .to_str()
        .unwrap()
        .parse()
        .expect("whole seconds");
    assert!(retry_after >= 1);
}

/// Calls `call` until it is refused with a proper 429 (at most 10 calls,
/// which an emptied bucket of 5 per second cannot all let through in the
/// time they take).
async fn refused_within<F, Fut>(mut call: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Resp>,
{
    for _ in 0..10 {
        let r = call().await;
        if r.status == 429 {
            assert_rate_limited(&r);
            return;
        }
    }
    panic!("10 calls in a row passed an emptied bucket");
}

/// Repeats `call` until it is not refused. The buckets refill in real time
/// (governor does not follow the manual clock), so this waits for real,
/// polling; every refusal on the way must be a proper 429.
async fn when_let_through<F, Fut>(mut call: F) -> Resp
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Resp>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = call().await;
        if r.status != 429 {
            return r;
        }
        assert_rate_limited(&r);
        assert!(Instant::now() < deadline, "the bucket never refilled");
        tokio::time::sleep(Duration::from_millis(10)).await; // poll interval
    }
}

async fn balance(app: &TestApp, key: &str) -> Resp {
    app.get(key, "/v1/balance").await
}

#[tokio::test]
async fn a_burst_beyond_25_test_mode_calls_a_second_is_refused_with_429_rate_limited_and_retry_after(
) {
    let app = spawn_app().await;
    let m = app.merchant_with_default_limits().await;
    let r = burst(200, || balance(&app, &m.test_key)).await;
    refused_after_the_bucket_emptied(r, 25);
    // Live keys get 100 a second.
    let r = burst(400, || balance(&app, &m.live_key)).await;
    refused_after_the_bucket_emptied(r, 100);
}

#[tokio::test]
async fn a_post_refused_by_the_rate_limit_saves_nothing_under_its_idempotency_key() {
    let app = spawn_app().await;
    let m = app.merchant_with_default_limits().await;
    let body = json!({"amount": 50_000, "currency": "NGN"});
    // Creates, each with a new key, until one is refused: its key is `idem`.
    let keys = std::cell::RefCell::new(Vec::new());
    let create = || {
        let idem = app.next_key();
        keys.borrow_mut().push(idem.clone());
        let body = body.clone();
        let key = m.test_key.clone();
        let app = &app;
        async move {
            app.post_with_key(&key, "/v1/payment_intents", &idem, body)
                .await
        }
    };
    refused_after_the_bucket_emptied(burst(200, create).await, 25);
    let idem = keys.borrow().last().unwrap().clone();

    // Retried with the same key once the bucket has a token again: a fresh
    // create, so the refused tries saved nothing.
    let post = || app.post_with_key(&m.test_key, "/v1/payment_intents", &idem, body.clone());
    let created = when_let_through(post).await;
    created.assert_status(201);
    assert!(!created.replayed(), "a fresh create, not a replay");
    // From now on the key replays that create (a replay counts too).
    let again = when_let_through(post).await;
    assert_eq!(again.status, 201, "{}", again.text);
    assert!(again.replayed());
    assert_eq!(again.body["id"], created.body["id"]);
}

#[tokio::test]
async fn an_operator_override_changes_the_limit_without_a_restart() {
    let app = spawn_app().await;
    let m = app.merchant_with_default_limits().await;
    let path = format!("/admin/v1/merchants/{}", m.id);
    let view = app.admin_get(&path).await;
    assert_eq!(
        view.body["settings"]["rate_limits"],
        json!({"live_per_second": null, "test_per_second": null})
    );
    refused_after_the_bucket_emptied(burst(200, || balance(&app, &m.test_key)).await, 25);

    let r = app
        .admin_post(
            &path,
            json!({"settings": {"rate_limits": {"test_per_second": 60}}}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(
        r.body["settings"]["rate_limits"],
        json!({"live_per_second": null, "test_per_second": 60})
    );
    // Raised: more than twice the default's 25 pass before the refusal (a
    // rate the calls outrun on either store engine; at 300/s the calls on
    // PostgreSQL under a busy machine came slower than the refill).
    refused_after_the_bucket_emptied(burst(1000, || balance(&app, &m.test_key)).await, 60);

    // Lowered, and back to the default with null.
    app.admin_post(
        &path,
        json!({"settings": {"rate_limits": {"test_per_second": 3}}}),
    )
    .await
    .assert_status(200);
    refused_after_the_bucket_emptied(burst(200, || balance(&app, &m.test_key)).await, 3);
    let r = app
        .admin_post(&path, json!({"settings": {"rate_limits": null}}))
        .await;
    r.assert_status(200);
    assert_eq!(
        r.body["settings"]["rate_limits"]["test_per_second"],
        json!(null)
    );
}

#[tokio::test]
async fn two_merchants_buckets_and_a_merchants_two_modes_and_client_secrets_are_independent() {
    let app = spawn_app().await;
    let a = app.merchant_with_default_limits().await;
    let b = app.merchant_with_default_limits().await;
    let pi = app
        .create_intent(&a.test_key, json!({"amount": 50_000, "currency": "NGN"}))
        .await;
    let secret = pi["client_secret"].as_str().unwrap().to_string();
    let pi_path = format!("/v1/payment_intents/{}", pi["id"].as_str().unwrap());

    // The create took one of the 25 tokens.
    refused_after(burst(200, || balance(&app, &a.test_key)).await, 24, 25);
    balance(&app, &b.test_key).await.assert_status(200);
    balance(&app, &a.live_key).await.assert_status(200);
    app.get(&secret, &pi_path).await.assert_status(200);
}

#[tokio::test]
async fn the_per_ip_limit_covers_unauthenticated_and_operator_routes_but_not_probes() {
    let app = spawn_app_with(&["--ip-rate-limit".to_string(), "5".to_string()]).await;
    let openapi = || app.send(Method::GET, "/v1/openapi.json", None, None, None);
    refused_after_the_bucket_emptied(burst(100, openapi).await, 5);

    // No key, a wrong route, the operator API: refused before anything
    // else, once the bucket is empty. The bucket refills in real time
    // (one token per 200 ms), so a slow machine may let a call through
    // between two refusals: each route must be refused within a few calls.
    refused_within(|| app.send(Method::GET, "/v1/balance", None, None, None)).await;
    refused_within(|| app.send(Method::GET, "/nowhere", None, None, None)).await;
    refused_within(|| app.admin_get("/admin/v1/clock")).await;
    // X-Forwarded-For is not trusted: the peer address is the caller.
    refused_within(|| {
        app.send_raw(
            Method::GET,
            "/v1/openapi.json",
            &[("x-forwarded-for", "203.0.113.9")],
            None,
        )
    })
    .await;

    for _ in 0..20 {
        for probe in ["/healthz", "/readyz", "/metrics"] {
            app.send(Method::GET, probe, None, None, None)
                .await
                .assert_status(200);
        }
    }
}
