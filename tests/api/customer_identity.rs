//! Customer identity checks (BVN) on the manual clock: verified, failed
//! and pending at the next check, their events, live mode, and the BVN
//! never kept.

use serde_json::{json, Value};

use crate::customers::{created, id};
use crate::helpers::{spawn_app, Resp, TestApp};

async fn verify(app: &TestApp, key: &str, customer: &str, bvn: &str) -> Resp {
    app.post(
        key,
        &format!("/v1/customers/{customer}/verify_identity"),
        json!({"bvn": bvn, "bank_code": "058", "account_number": "0123456789"}),
    )
    .await
}

async fn events_of(app: &TestApp, key: &str, kind: &str) -> Vec<Value> {
    let r = app.get(key, &format!("/v1/events?type={kind}")).await;
    r.assert_status(200);
    r.body["data"].as_array().unwrap().clone()
}

#[tokio::test]
async fn verify_identity_validates_its_body_and_never_echoes_the_bvn() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = id(&created(&app, k, json!({"email": "ada@example.com"})).await);
    let path = format!("/v1/customers/{ada}/verify_identity");
    for (body, param) in [
        (
            json!({"bvn": "1234567890", "bank_code": "058", "account_number": "0123456789"}),
            "bvn",
        ),
        (
            json!({"bvn": 22233344455_i64, "bank_code": "058", "account_number": "0123456789"}),
            "bvn",
        ),
        (
            json!({"bvn": "22233344455", "bank_code": "999", "account_number": "0123456789"}),
            "bank_code",
        ),
        (
            json!({"bvn": "22233344455", "bank_code": "058", "account_number": "012345678"}),
            "account_number",
        ),
        (
            json!({"bank_code": "058", "account_number": "0123456789"}),
            "bvn",
        ),
    ] {
        let r = app.post(k, &path, body).await;
        r.assert_status(400);
        assert_eq!(r.param(), Some(param));
        assert!(!r.text.contains("22233344455") && !r.text.contains("1234567890"));
    }
    app.post(
        k,
        &format!("/v1/customers/{}/verify_identity", uuid::Uuid::new_v4()),
        json!({"bvn": "22233344455", "bank_code": "058", "account_number": "0123456789"}),
    )
    .await
    .assert_error(404, "resource_missing", None);
}

/// The BVNs are nowhere in the server's log.
fn assert_not_logged(app: &TestApp, bvns: &[&str]) {
    let log = std::fs::read_to_string(app.log_path()).unwrap();
    for bvn in bvns {
        assert!(!log.contains(bvn), "{bvn} in the log");
    }
}

#[tokio::test]
async fn a_bvn_verifies_at_the_next_check_and_only_its_last_four_are_kept() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = id(&created(&app, k, json!({"email": "ada@example.com"})).await);
    // Verifies at the next check, 5 minutes of clock time later.
    let r = verify(&app, k, &ada, "22233344455").await;
    r.assert_status(200);
    let i = &r.body["identity"];
    assert_eq!(i["status"], "pending");
    assert_eq!(i["bvn_last4"], "4455");
    assert_eq!(i["bank_code"], "058");
    assert_eq!(i["account_number_last4"], "6789");
    assert!(!r.text.contains("22233344455"));
    app.advance(299).await;
    let c = app.get(k, &format!("/v1/customers/{ada}")).await.body;
    assert_eq!(c["identity"]["status"], "pending");
    app.advance(1).await;
    let c = app.get(k, &format!("/v1/customers/{ada}")).await.body;
    assert_eq!(c["identity"]["status"], "verified");
    let at: chrono::DateTime<chrono::Utc> = c["identity"]["verified_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(at, app.now().await);
    let verified = events_of(&app, k, "customer.identity_verified").await;
    assert_eq!(verified.len(), 1);
    assert_eq!(verified[0]["data"]["object"]["id"], ada.as_str());
    assert_eq!(
        verified[0]["data"]["object"]["identity"]["status"],
        "verified"
    );
    // A verified customer is answered unchanged.
    let again = verify(&app, k, &ada, "99988877766").await;
    again.assert_status(200);
    let mut c = c;
    c.as_object_mut().unwrap().remove("credit_balance");
    assert_eq!(again.body, c);
    assert_not_logged(&app, &["22233344455", "99988877766"]);
}

#[tokio::test]
async fn a_bvn_ending_0000_fails_and_one_ending_1111_stays_pending() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    // Ending 0000: fails at the check; a new request starts again.
    let bola = id(&created(&app, k, json!({"email": "bola@example.com"})).await);
    verify(&app, k, &bola, "12345670000")
        .await
        .assert_status(200);
    app.advance(300).await;
    let c = app.get(k, &format!("/v1/customers/{bola}")).await.body;
    assert_eq!(c["identity"]["status"], "failed");
    assert_eq!(c["identity"]["failure_reason"], "bvn_mismatch");
    let failed = events_of(&app, k, "customer.identity_failed").await;
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["data"]["object"]["id"], bola.as_str());
    let r = verify(&app, k, &bola, "12345670001").await;
    assert_eq!(r.body["identity"]["status"], "pending");
    assert!(r.body["identity"]["failure_reason"].is_null());
    app.advance(300).await;
    let c = app.get(k, &format!("/v1/customers/{bola}")).await.body;
    assert_eq!(c["identity"]["status"], "verified");

    // Ending 1111: stays pending, whatever the clock does.
    let chi = id(&created(&app, k, json!({"email": "chi@example.com"})).await);
    verify(&app, k, &chi, "12345671111")
        .await
        .assert_status(200);
    app.advance(2 * 24 * 3600).await;
    let c = app.get(k, &format!("/v1/customers/{chi}")).await.body;
    assert_eq!(c["identity"]["status"], "pending");
    assert_eq!(
        events_of(&app, k, "customer.identity_verified").await.len(),
        1
    );
    assert_not_logged(&app, &["12345670000", "12345670001", "12345671111"]);
}

#[tokio::test]
async fn identity_checks_in_live_mode_need_activation_and_a_provider() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let c = created(&app, &m.live_key, json!({"email": "ada@example.com"})).await;
    let body = json!({"bvn": "22233344455", "bank_code": "058", "account_number": "0123456789"});
    app.post(
        &m.live_key,
        &format!("/v1/customers/{}/verify_identity", id(&c)),
        body.clone(),
    )
    .await
    .assert_error(403, "account_not_activated", None);
    let live = app.live_merchant().await;
    let c = created(&app, &live.live_key, json!({"email": "ada@example.com"})).await;
    app.post(
        &live.live_key,
        &format!("/v1/customers/{}/verify_identity", id(&c)),
        body,
    )
    .await
    .assert_error(409, "provider_not_configured", None);
}
