//! `kobo load`, the load tester's tool, run as a user runs it: the real
//! binary, briefly and at a small rate, against a spawned server whose
//! webhooks reach the tool's own HTTPS receiver. Its reports are read back
//! and checked against what the server itself lists.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;

use rand::Rng;
use serde_json::Value;

use crate::helpers::spawn_app_with;

fn kobo_load(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kobo"))
        .arg("load")
        .args(args)
        .env_remove("KOBO_URL")
        .env_remove("KOBO_SECRET_KEY")
        .env_remove("KOBO_ADMIN_TOKEN")
        .output()
        .expect("run kobo load")
}

/// A loopback address whose port 8443 is free now (the receiver binds it
/// right after; webhook URLs allow only ports 443 and 8443).
fn free_loopback() -> Ipv4Addr {
    let mut rng = rand::thread_rng();
    for _ in 0..200 {
        let ip = Ipv4Addr::new(127, rng.gen_range(1..255), rng.gen(), rng.gen_range(2..255));
        if std::net::TcpListener::bind(SocketAddr::from((ip, 8443))).is_ok() {
            return ip;
        }
    }
    panic!("no free loopback address for port 8443");
}

#[tokio::test]
async fn an_open_loop_run_of_every_operation_reports_each_and_its_money_audit_passes() {
    let dir = tempfile::tempdir().unwrap();
    let tls = dir.path().join("tls");
    let ip = free_loopback();
    let listen = format!("{ip}:8443");
    let out = kobo_load(&["--write-webhook-tls", tls.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let app = spawn_app_with(&[
        "--webhook-resolve".into(),
        format!("hooks.kobo-load.ng={ip}"),
        "--webhook-ca".into(),
        tls.join("ca.pem").to_string_lossy().into_owned(),
    ])
    .await;
    let m = app.merchant().await;
    let json = dir.path().join("report.json");
    let html = dir.path().join("report.html");
    let out = kobo_load(&[
        "--url",
        &app.base,
        "--key",
        &m.test_key,
        "--rate",
        "30",
        "--duration",
        "3",
        "--mix",
        "create=1,transfer=1,card=2,refund=1,payout=1,webhook=1,healthz=1",
        "--webhook-tls",
        tls.to_str().unwrap(),
        "--webhook-listen",
        &listen,
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--admin-token",
        &app.admin_token,
        "--quiet",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("audit: passed"), "{stdout}");

    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["mode"], "open");
    assert_eq!(report["errors"], 0, "{report:#}");
    assert_eq!(report["unsent"], 0, "{report:#}");
    let ops = &report["operations"];
    let ok = |op: &str| ops[op]["ok"].as_u64().unwrap_or(0);
    for op in [
        "healthz", "create", "transfer", "card", "refund", "payout", "webhook",
    ] {
        assert!(ok(op) > 0, "{op}: {}", ops[op]);
        for p in ["p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"] {
            assert!(ops[op][p].as_f64().unwrap() > 0.0, "{op} {p}");
        }
        assert!(!ops[op]["timeline"].as_array().unwrap().is_empty());
    }
    // 30/s for 3 s, on a fixed schedule.
    let total: u64 = ops
        .as_object()
        .unwrap()
        .values()
        .map(|o| o["ok"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 90, "{report:#}");
    assert_eq!(report["audit"]["passed"], true, "{:#}", report["audit"]);
    assert_eq!(report["audit"]["findings"].as_array().unwrap().len(), 0);
    let hooks = &report["webhooks"];
    assert_eq!(hooks["bad_signature"], 0);
    assert!(hooks["verified"].as_u64().unwrap() >= ok("webhook"));

    // The server agrees with the report: one payment per create, transfer,
    // card, refund and webhook operation, and the one that funded the
    // payouts; one payout and one refund per operation.
    let intents = app.all_pages(&m.test_key, "/v1/payment_intents").await;
    let paying = ok("create") + ok("transfer") + ok("card") + ok("refund") + ok("webhook");
    assert_eq!(intents.len() as u64, paying + 1);
    let payouts = app.all_pages(&m.test_key, "/v1/payouts").await;
    assert_eq!(payouts.len() as u64, ok("payout"));
    // With the admin token the tool moved the manual clock on after the
    // run: every payout was paid before the audit read the books.
    assert!(payouts.iter().all(|p| p["status"] == "paid"), "{payouts:?}");
    let refunds = app.all_pages(&m.test_key, "/v1/refunds").await;
    assert_eq!(refunds.len() as u64, ok("refund"));
    let successful = intents
        .iter()
        .filter(|i| i["status"] == "successful")
        .count() as u64;
    assert_eq!(successful, paying - ok("create") + 1);
    assert_eq!(report["audit"]["successful_payments"], successful);

    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!doctype html>"));
    assert!(page.contains("<svg"));
    for op in ["create", "payout", "webhook"] {
        assert!(page.contains(&format!("{op}: latency per second")), "{op}");
    }
    assert!(page.contains("Audit: <span class=\"good\">passed"));
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "the HTML report refers to something outside itself"
    );
}

#[tokio::test]
async fn a_closed_loop_run_past_its_error_threshold_exits_1_and_counts_errors_by_code() {
    let app = spawn_app_with(&[]).await;
    // The default limit (25 requests a second in test mode) refuses most
    // of 8 connections' creates.
    let m = app.merchant_with_default_limits().await;
    let out = kobo_load(&[
        "--url",
        &app.base,
        "--key",
        &m.test_key,
        "--connections",
        "8",
        "--duration",
        "1",
        "--mix",
        "create",
        "--json",
        "-",
        "--max-error-rate",
        "0.05",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("of operations failed (--max-error-rate 0.05)"),
        "{stderr}"
    );
    // The report is one JSON line on stdout (the text report and the
    // progress went to stderr), with the totals' field names of the
    // retired kobo-loadgen.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["mode"], "closed");
    assert_eq!(report["connections"], 8);
    assert_eq!(report["scenario"], "create");
    let refused = report["operations"]["create"]["errors_by"]["429 rate_limited"]
        .as_u64()
        .unwrap();
    assert!(refused > 0);
    assert_eq!(report["errors"].as_u64().unwrap(), refused);
    assert!(report["error_rate"].as_f64().unwrap() > 0.05);
    for field in [
        "ops",
        "ops_per_sec",
        "p50_ms",
        "p99_ms",
        "p999_ms",
        "max_ms",
    ] {
        assert!(report[field].is_number(), "{field}");
    }
    // Every create the server acknowledged is there: the audit passed.
    assert_eq!(report["audit"]["passed"], true, "{:#}", report["audit"]);
    let intents = app.all_pages(&m.test_key, "/v1/payment_intents").await;
    assert_eq!(intents.len() as u64, report["ops"].as_u64().unwrap());
}

#[tokio::test]
async fn an_open_loop_beyond_its_in_flight_cap_accounts_for_every_scheduled_start() {
    let app = spawn_app_with(&[]).await;
    let m = app.merchant().await;
    // 300 flows due in one second, one at a time: most wait for room.
    let out = kobo_load(&[
        "--url",
        &app.base,
        "--key",
        &m.test_key,
        "--rate",
        "300",
        "--max-in-flight",
        "1",
        "--duration",
        "1",
        "--mix",
        "transfer",
        "--json",
        "-",
        "--quiet",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = |k: &str| report[k].as_u64().unwrap();
    assert_eq!(n("errors"), 0);
    // Each scheduled start was made (ok) or counted as not sent; the
    // starts that waited for room are late.
    assert_eq!(n("ops") + n("unsent"), 300, "{report:#}");
    assert!(n("late") <= n("ops"));
    let intents = app.all_pages(&m.test_key, "/v1/payment_intents").await;
    assert_eq!(intents.len() as u64, n("ops"));
    if n("unsent") > 0 {
        // Latency counts from the intended start: the queue shows.
        assert!(report["max_ms"].as_f64().unwrap() > 0.0);
        assert!(n("late") > 0);
    }
}

#[tokio::test]
async fn a_run_with_time_ordered_idempotency_keys_creates_one_intent_per_acknowledged_create() {
    let app = spawn_app_with(&[]).await;
    let m = app.merchant().await;
    let out = kobo_load(&[
        "--url",
        &app.base,
        "--key",
        &m.test_key,
        "--connections",
        "4",
        "--max-ops",
        "200",
        "--duration",
        "30",
        "--mix",
        "create",
        "--idempotency-keys",
        "time-ordered",
        "--json",
        "-",
        "--quiet",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["errors"], 0, "{report:#}");
    assert_eq!(report["audit"]["passed"], true, "{:#}", report["audit"]);
    let intents = app.all_pages(&m.test_key, "/v1/payment_intents").await;
    assert_eq!(intents.len() as u64, report["ops"].as_u64().unwrap());
    assert!(intents.len() >= 200, "{}", intents.len());
}

#[tokio::test]
async fn bad_arguments_are_refused_with_a_clear_message_before_any_request() {
    for (args, message) in [
        (
            vec!["--mix", "creat=1", "--key", "svc_test_x"],
            "unknown operation \"creat\"",
        ),
        (
            vec!["--mix", "create"],
            "--key (or KOBO_SECRET_KEY) is needed",
        ),
        (
            vec!["--rate", "0", "--key", "svc_test_x"],
            "--rate must be above 0",
        ),
        (
            vec![
                "--mix",
                "webhook",
                "--key",
                "svc_test_x",
                "--url",
                "http://127.0.0.1:1",
            ],
            "needs --webhook-tls",
        ),
    ] {
        let out = kobo_load(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    // An unknown key style is a usage error (exit 2, as every flag's bad
    // value), naming the ones there are.
    let out = kobo_load(&["--idempotency-keys", "sorted", "--key", "svc_test_x"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("invalid value 'sorted' for '--idempotency-keys")
            && stderr.contains("random, time-ordered"),
        "{stderr}"
    );
}
