//! `kobo listen` against the real server: events of payments reach a local
//! HTTP receiver signed like webhook deliveries, in order; after `kobo
//! listen` is killed and started again, the events made meanwhile arrive,
//! none lost, none twice. The signature examples of docs/examples/ (Python,
//! Node.js, PHP) accept each forwarded delivery and refuse tampered ones.

use std::path::Path;
use std::process::Command;

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::helpers::{spawn_app, TestApp};
use crate::receiver::{Received, Receiver, Running};

const SECRET: &str = "whsec_listenTestSecret0123456789abcdef";

/// The merchant's event ids, oldest first.
async fn event_ids(app: &TestApp, key: &str) -> Vec<String> {
    let r = app.get(key, "/v1/events?limit=100").await;
    r.assert_status(200);
    let mut ids: Vec<String> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    ids.reverse();
    ids
}

/// Checks one forwarded request the way a receiver must: the HMAC of
/// `<t>.<event id>.<raw body>` with the secret.
fn assert_signed(r: &Received, secret: &str) {
    assert_eq!(r.path, "/hooks");
    assert_eq!(r.header("content-type"), "application/json");
    let sig = r.header("service-signature");
    let (t, v1) = sig
        .strip_prefix("t=")
        .and_then(|s| s.split_once(",v1="))
        .unwrap_or_else(|| panic!("signature header {sig:?}"));
    assert_eq!(r.header("service-timestamp"), t);
    let event: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(event["id"], r.header("service-event-id"));
    assert_eq!(event["object"], "event");
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.{}.", r.header("service-event-id")).as_bytes());
    mac.update(&r.body);
    assert_eq!(hex::encode(mac.finalize().into_bytes()), v1);
}

fn forwarded_ids(got: &[Received]) -> Vec<String> {
    got.iter()
        .map(|r| r.header("service-event-id").to_string())
        .collect()
}

async fn cancel_intent(app: &TestApp, key: &str) {
    let pi = app
        .create_intent(key, json!({"amount": 20000, "currency": "NGN"}))
        .await;
    let id = pi["id"].as_str().unwrap();
    app.post(key, &format!("/v1/payment_intents/{id}/cancel"), json!({}))
        .await
        .assert_status(200);
}

fn listen_args<'a>(app: &'a TestApp, key: &'a str, to: &'a str, state: &'a str) -> Vec<&'a str> {
    vec![
        "listen",
        "--base",
        &app.base,
        "--key",
        key,
        "--forward-to",
        to,
        "--secret",
        SECRET,
        "--state",
        state,
    ]
}

fn forwarded_lines(lines: &[String]) -> usize {
    lines.iter().filter(|l| l.contains(" -> ")).count()
}

#[tokio::test]
async fn listen_forwards_signed_events_in_order_and_resumes_without_loss_or_duplicates() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let key = m.test_key.as_str();
    let receiver = Receiver::start().await;
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path().join("listen-state");
    let state = state.to_str().unwrap();

    let mut listen = Running::start(&listen_args(&app, key, &receiver.url, state));
    let lines = listen
        .wait_until("ready", |l| l.iter().any(|l| l.starts_with("ready:")))
        .await;
    assert!(lines
        .iter()
        .any(|l| l == &format!("signing secret: {SECRET}")));

    // Three events while it listens.
    app.paid_intent(key, 100_000).await;
    cancel_intent(&app, key).await;
    app.paid_intent(key, 250_000).await;
    let got = receiver.wait_for(3).await;
    let lines = listen
        .wait_until("three forwarded lines", |l| forwarded_lines(l) == 3)
        .await;
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("payment_intent.canceled ")
                && l.contains(" -> 200 OK (")
                && l.ends_with(" ms)")),
        "{lines:?}"
    );
    let expected = event_ids(&app, key).await;
    assert_eq!(expected.len(), 3);
    assert_eq!(forwarded_ids(&got), expected, "every event, in order");
    for r in &got {
        assert_signed(r, SECRET);
    }
    let types: Vec<Value> = got
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["type"].clone())
        .collect();
    assert_eq!(
        types,
        [
            "payment_intent.successful",
            "payment_intent.canceled",
            "payment_intent.successful"
        ]
    );

    // Stopped: events happen meanwhile (one through the manual clock: a
    // bank transfer left unpaid for 30 minutes is abandoned).
    listen.kill();
    app.paid_intent(key, 300_000).await;
    let waiting = app
        .create_intent(key, json!({"amount": 40000, "currency": "NGN"}))
        .await;
    app.post(
        key,
        &format!(
            "/v1/payment_intents/{}/bank_transfer",
            waiting["id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await
    .assert_status(200);
    app.advance(31 * 60).await;
    cancel_intent(&app, key).await;
    let expected = event_ids(&app, key).await;
    assert_eq!(expected.len(), 6, "three more events while stopped");
    assert_eq!(receiver.received().len(), 3);

    // Started again: it resumes after the last event it forwarded.
    let mut listen = Running::start(&listen_args(&app, key, &receiver.url, state));
    let lines = listen
        .wait_until("three forwarded lines", |l| forwarded_lines(l) == 3)
        .await;
    assert!(
        lines
            .iter()
            .any(|l| l.contains("resuming after stream position")),
        "{lines:?}"
    );
    let got = receiver.wait_for(6).await;
    assert_eq!(forwarded_ids(&got), expected, "no loss, no duplicate");
    for r in &got {
        assert_signed(r, SECRET);
    }
    // One more live event after the catch-up.
    app.paid_intent(key, 50_000).await;
    let got = receiver.wait_for(7).await;
    assert_eq!(forwarded_ids(&got), event_ids(&app, key).await);
    listen
        .wait_until("the live event's line", |l| forwarded_lines(l) == 4)
        .await;
    listen.kill();

    // --events forwards only the types named; the others still advance
    // the position.
    let mut listen = Running::start(
        &[
            listen_args(&app, key, &receiver.url, state),
            vec!["--events", "payment_intent.canceled"],
        ]
        .concat(),
    );
    listen
        .wait_until("ready", |l| l.iter().any(|l| l.starts_with("ready:")))
        .await;
    app.paid_intent(key, 60_000).await;
    cancel_intent(&app, key).await;
    let got = receiver.wait_for(8).await;
    listen
        .wait_until("the canceled event's line", |l| forwarded_lines(l) == 1)
        .await;
    let last: Value = serde_json::from_slice(&got[7].body).unwrap();
    assert_eq!(last["type"], "payment_intent.canceled");
    assert_eq!(got.len(), 8);
}

#[tokio::test]
async fn listen_refuses_a_wrong_key_and_an_unknown_event_type() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s");
    let m = app.merchant().await;
    for (key, extra, says) in [
        ("svc_test_nope", vec![], "401"),
        (
            m.test_key.as_str(),
            vec!["--events", "payment.done"],
            "not an event type",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_kobo"))
            .args(listen_args(
                &app,
                key,
                &receiver.url,
                state.to_str().unwrap(),
            ))
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
    }
}

// ---- the signature examples ----

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/examples"))
}

/// Runs one example on a delivery saved as files; its exit code.
fn run_example(program: &str, script: &str, r: &Received, body: &[u8], secret: &str) -> i32 {
    let dir = tempfile::tempdir().unwrap();
    let headers = dir.path().join("headers");
    let body_file = dir.path().join("body");
    let text: String = r
        .headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    std::fs::write(&headers, text).unwrap();
    std::fs::write(&body_file, body).unwrap();
    let out = Command::new(program)
        .arg(examples().join(script))
        .arg(&headers)
        .arg(&body_file)
        .env("KOBO_WEBHOOK_SECRET", secret)
        .output()
        .unwrap_or_else(|e| {
            panic!("{program} is needed to run docs/examples/{script} (scripts/test.sh installs it): {e}")
        });
    out.status.code().unwrap_or(-1)
}

#[tokio::test]
async fn the_signature_examples_accept_a_real_delivery_and_refuse_tampered_ones() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let receiver = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s");
    let mut listen = Running::start(&listen_args(
        &app,
        &m.test_key,
        &receiver.url,
        state.to_str().unwrap(),
    ));
    listen
        .wait_until("ready", |l| l.iter().any(|l| l.starts_with("ready:")))
        .await;
    app.paid_intent(&m.test_key, 123_400).await;
    let got = receiver.wait_for(1).await;
    let delivery = &got[0];
    assert_signed(delivery, SECRET);

    let mut tampered_body = delivery.body.clone();
    let at = tampered_body
        .windows(6)
        .position(|w| w == b"123400")
        .expect("the amount is in the body");
    tampered_body[at] = b'9';
    for (program, script) in [
        ("python3", "verify.py"),
        ("node", "verify.js"),
        ("php", "verify.php"),
    ] {
        assert_eq!(
            run_example(program, script, delivery, &delivery.body, SECRET),
            0,
            "{script} accepts the delivery"
        );
        assert_eq!(
            run_example(program, script, delivery, &tampered_body, SECRET),
            1,
            "{script} refuses a changed body"
        );
        assert_eq!(
            run_example(
                program,
                script,
                delivery,
                &delivery.body,
                "whsec_anotherSecret"
            ),
            1,
            "{script} refuses another secret"
        );
    }
}
