//! Running the server: start-up line, demo merchant, admin token, data dir
//! lock, graceful stop, manual clock, operator API, health and metrics.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::helpers::{spawn_app, REQUEST_TIMEOUT};

#[tokio::test]
async fn the_first_start_creates_a_demo_merchant_whose_key_works_and_later_starts_do_not_print_it()
{
    let mut app = spawn_app().await;
    // The demo line follows the listening line on the first start.
    let demo_key = loop {
        if let Some(line) = app
            .stdout_rest
            .lock()
            .unwrap()
            .iter()
            .find(|l| l.contains("svc_test_"))
        {
            break line.split_whitespace().last().unwrap().to_string();
        }
        tokio::task::yield_now().await;
    };
    app.get(&demo_key, "/v1/balance").await.assert_status(200);
    app.terminate();
    app.stdout_rest.lock().unwrap().clear();
    app.start(&[]);
    app.get(&demo_key, "/v1/balance").await.assert_status(200);
    // Talk to the restarted server once so its stdout has been produced.
    app.get("x", "/healthz").await.assert_status(200);
    assert!(app
        .stdout_rest
        .lock()
        .unwrap()
        .iter()
        .all(|l| !l.contains("svc_test_")));
}

#[tokio::test]
async fn without_an_admin_token_one_is_generated_kept_private_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let run = || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kobo"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--clock",
                "manual",
                "--data",
            ])
            .arg(dir.path())
            .env_remove("KOBO_ADMIN_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        assert!(
            line.starts_with("kobo listening on http://127.0.0.1:"),
            "{line}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::read_to_string(dir.path().join("admin-token")).unwrap()
    };
    let first = run();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("admin-token"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(run(), first);
}

#[tokio::test]
async fn a_second_process_on_the_same_data_directory_fails_at_once_with_a_clear_message() {
    let app = spawn_app().await;
    let out = Command::new(env!("CARGO_BIN_EXE_kobo"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(app.data_dir())
        .args(app.store.iter().flat_map(|url| ["--store", url]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("already in use by another kobo process"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The first server is unharmed.
    app.get("x", "/healthz").await.assert_status(200);
}

#[tokio::test]
async fn sigterm_stops_the_server_cleanly_and_a_restart_continues_where_it_stopped() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 100000).await;
    app.advance(3600).await;
    let before = app.now().await;
    assert_eq!(app.terminate(), Some(0));
    app.start(&[]);
    assert_eq!(
        app.now().await,
        before,
        "the manual clock continues from the stored time"
    );
    let r = app
        .get(
            &m.test_key,
            &format!("/v1/payment_intents/{}", paid["id"].as_str().unwrap()),
        )
        .await;
    assert_eq!(r.body, paid);
    assert_eq!(
        app.balance(&m.test_key, "pending", "NGN").await,
        100000 - 1075
    );
}

/// What kobo logs when it opened a store whose allocator state it had to
/// rebuild by reading every page (src/server.rs).
const REBUILT: &str = "the store was not closed cleanly";

#[tokio::test]
async fn a_store_stopped_by_sigterm_reopens_without_reading_every_page_and_one_killed_is_rebuilt() {
    let mut app = spawn_app().await;
    if app.skip_on_postgres("the allocator state is redb's") {
        return;
    }
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 100000).await;
    let path = format!("/v1/payment_intents/{}", paid["id"].as_str().unwrap());
    let rebuilds = |app: &crate::helpers::TestApp| {
        std::fs::read_to_string(app.log_path())
            .unwrap()
            .matches(REBUILT)
            .count()
    };
    // SIGTERM: the last commit records the allocator state, so the next
    // open loads it (0.02 s instead of 4.7 s on a 1M-intent store).
    assert_eq!(app.terminate(), Some(0));
    app.start(&[]);
    assert_eq!(app.get(&m.test_key, &path).await.body, paid);
    assert_eq!(rebuilds(&app), 0, "a SIGTERM stop must not leave a rebuild");
    // kill -9 after a write: nothing recorded, the open rebuilds and says so.
    let second = app.paid_intent(&m.test_key, 5000).await;
    app.kill();
    app.start(&[]);
    assert_eq!(rebuilds(&app), 1);
    assert_eq!(app.get(&m.test_key, &path).await.body, paid);
    let second_path = format!("/v1/payment_intents/{}", second["id"].as_str().unwrap());
    assert_eq!(app.get(&m.test_key, &second_path).await.body, second);
    // And a SIGTERM after that leaves a clean store again.
    assert_eq!(app.terminate(), Some(0));
    app.start(&[]);
    assert_eq!(rebuilds(&app), 1);
}

#[tokio::test]
async fn the_manual_clock_moves_only_when_advanced() {
    let app = spawn_app().await;
    let t0 = app.now().await;
    let r = app.admin_get("/admin/v1/clock").await;
    r.assert_status(200);
    assert_eq!(r.body["object"], "clock");
    assert_eq!(app.now().await, t0);
    let r = app.advance(90).await;
    assert_eq!(r["object"], "clock");
    assert_eq!(app.now().await, t0 + chrono::Duration::seconds(90));
    let to = t0 + chrono::Duration::days(2);
    let r = app
        .admin_post("/admin/v1/clock/advance", json!({"to": to.to_rfc3339()}))
        .await;
    r.assert_status(200);
    assert_eq!(app.now().await, to);
    app.admin_post("/admin/v1/clock/advance", json!({"to": t0.to_rfc3339()}))
        .await
        .assert_error(400, "parameter_invalid", Some("to"));
    app.admin_post("/admin/v1/clock/advance", json!({"seconds": -5}))
        .await
        .assert_error(400, "parameter_invalid", Some("seconds"));
}

/// Found when a clock advance renewing a thousand subscriptions on the
/// PostgreSQL store outlasted the client's 30 s in a CI run (reqwest
/// `TimedOut`, the test failed though the server was at work): an advance
/// answers when its work is done, however long that takes on a loaded
/// machine. Here the server is stalled (SIGSTOP) past the client's timeout
/// during an advance, as a loaded machine stalls it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_advance_outlasting_the_request_timeout_is_waited_for() {
    let app = spawn_app().await;
    let t0 = app.now().await;
    let pid = app.child.as_ref().expect("running").id().to_string();
    let signal = |name: &str| {
        let ok = Command::new("kill")
            .args([name, pid.as_str()])
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "kill {name} {pid}");
    };
    // The advance goes on a connection of its own (a client with an empty
    // pool): one kept alive from the request before, through the stall,
    // the server would close on waking, its keep-alive long past.
    let own_connection = reqwest::Client::new();
    signal("-STOP");
    // How long the server stays stopped: past the suite's request timeout.
    let stall = REQUEST_TIMEOUT + Duration::from_secs(5);
    let (r, ()) = tokio::join!(app.advance_on(&own_connection, 60), async {
        tokio::time::sleep(stall).await;
        signal("-CONT");
    });
    assert_eq!(r["object"], "clock");
    assert_eq!(app.now().await, t0 + chrono::Duration::seconds(60));
}

#[tokio::test]
async fn merchants_are_created_read_and_partially_updated_by_the_operator() {
    let app = spawn_app().await;
    let r = app
        .admin_post(
            "/admin/v1/merchants",
            json!({"name": "Chidi Foods", "settings": {"payout_tier": "verified"}}),
        )
        .await;
    r.assert_status(201);
    assert_eq!(r.body["object"], "merchant");
    assert!(r.body["test_secret_key"]
        .as_str()
        .unwrap()
        .starts_with("svc_test_"));
    assert!(r.body["live_secret_key"]
        .as_str()
        .unwrap()
        .starts_with("svc_live_"));
    assert_eq!(r.body["settings"]["payout_tier"], "verified");
    assert_eq!(r.body["settings"]["payment_methods"]["card"], true);
    let id = r.body["id"].as_str().unwrap();
    let got = app.admin_get(&format!("/admin/v1/merchants/{id}")).await;
    got.assert_status(200);
    assert!(got.body.get("test_secret_key").is_none());
    let upd = app
        .admin_post(
            &format!("/admin/v1/merchants/{id}"),
            json!({"settings": {"live_approved": true}}),
        )
        .await;
    upd.assert_status(200);
    assert_eq!(upd.body["settings"]["live_approved"], true);
    assert_eq!(upd.body["settings"]["payout_tier"], "verified");
    app.admin_post(
        &format!("/admin/v1/merchants/{id}"),
        json!({"settings": {"payout_tier": "gold"}}),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("settings.payout_tier"));
    app.admin_post("/admin/v1/merchants", json!({}))
        .await
        .assert_error(400, "parameter_missing", Some("name"));
    app.admin_get(&format!("/admin/v1/merchants/{}", uuid::Uuid::new_v4()))
        .await
        .assert_error(404, "resource_missing", None);
}

#[tokio::test]
async fn health_readiness_metrics_and_actor_health_are_served() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    app.paid_intent(&m.test_key, 10000).await;
    let h = app.get("x", "/healthz").await;
    h.assert_status(200);
    let r = app.get("x", "/readyz").await;
    r.assert_status(200);
    let metrics = app.get("x", "/metrics").await;
    metrics.assert_status(200);
    for name in [
        "kobo_http_requests_total",
        "kobo_http_request_duration_seconds_bucket",
        "kobo_store_commits_total",
        "kobo_store_batches_per_commit_bucket",
        "kobo_actors_live",
        "kobo_timers_due",
    ] {
        assert!(metrics.text.contains(name), "missing {name}");
    }
    assert!(metrics.text.contains("route=\"/v1/payment_intents\""));
    let actors = app.admin_get("/admin/v1/actors").await;
    actors.assert_status(200);
    let kinds = actors.body["kinds"].as_array().unwrap();
    let pi = kinds
        .iter()
        .find(|k| k["kind"] == "payment_intent")
        .unwrap();
    assert!(pi["activations"].as_u64().unwrap() >= 1);
    for field in ["live", "mailbox_depth", "restarts", "passivations"] {
        assert!(pi.get(field).is_some(), "{field}");
    }
    app.get("x", "/admin/v1/actors")
        .await
        .assert_error(401, "invalid_api_key", None);
}

#[tokio::test]
async fn idle_actors_are_passivated_and_reactivated_from_the_store() {
    let mut app = spawn_app().await;
    app.kill();
    app.start(&["--actor-idle-secs", "1"]);
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 10000).await;
    // Passivation runs on real time (it is about memory, not the domain):
    // poll the health endpoint until the idle actors are gone.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let r = app.admin_get("/admin/v1/actors").await;
        let kinds = r.body["kinds"].as_array().unwrap().clone();
        let pi = kinds
            .iter()
            .find(|k| k["kind"] == "payment_intent")
            .unwrap();
        if pi["live"] == 0 && pi["passivations"].as_u64().unwrap() >= 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "actors were not passivated: {kinds:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The next message reactivates it from its snapshot.
    let id = paid["id"].as_str().unwrap();
    app.post(
        &m.test_key,
        &format!("/v1/test_helpers/payment_intents/{id}/succeed"),
        json!({}),
    )
    .await
    .assert_error(409, "payment_intent_unexpected_state", None);
}

#[tokio::test]
async fn a_small_store_cache_is_accepted_and_serves_payments() {
    let mut app = spawn_app().await;
    app.kill();
    app.start(&["--store-cache-mb", "32"]);
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 10_000).await;
    assert_eq!(paid["status"], "successful");
}
