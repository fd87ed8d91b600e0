//! Trust: the operator token, metrics labels, data at rest, logs, body
//! deadlines and caching of secrets (issue "Trust", found in review).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{spawn_app, spawn_app_with};

/// Starts `kobo serve` on a fresh data directory with these flags and
/// environment; returns the child and its base URL once it listens.
fn start(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (Child, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kobo"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--clock", "manual"])
        .arg("--data")
        .arg(dir)
        .args(args)
        .env_remove("KOBO_ADMIN_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    lines.read_line(&mut line).unwrap();
    // Keep reading: the server writes more lines (the demo key) and stops
    // when its stdout is closed.
    std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    let base = line
        .trim()
        .strip_prefix("kobo listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_string();
    (child, base)
}

#[tokio::test]
async fn an_empty_admin_token_variable_counts_as_unset_and_no_bearer_is_an_operator() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, base) = start(dir.path(), &[], &[("KOBO_ADMIN_TOKEN", "")]);
    let client = reqwest::Client::new();
    let create = |auth: Option<&'static str>| {
        let mut r = client
            .post(format!("{base}/admin/v1/merchants"))
            .body(json!({"name": "Intruder"}).to_string());
        if let Some(a) = auth {
            r = r.header("Authorization", a);
        }
        r.send()
    };
    for auth in [None, Some("Bearer "), Some("Bearer"), Some("")] {
        let r = create(auth).await.unwrap();
        assert_eq!(r.status().as_u16(), 401, "{auth:?}");
        assert!(!r.text().await.unwrap().contains("secret_key"));
    }
    // The generated token (kept in the data directory) is the operator.
    let token = std::fs::read_to_string(dir.path().join("admin-token")).unwrap();
    assert!(token.trim().len() >= 32);
    let r = client
        .post(format!("{base}/admin/v1/merchants"))
        .bearer_auth(token.trim())
        .body(json!({"name": "Operator's"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn a_short_or_empty_admin_token_flag_refuses_to_start_naming_the_flag() {
    for token in ["", "short-token", &"x".repeat(31)] {
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_kobo"))
            .args(["serve", "--listen", "127.0.0.1:0", "--admin-token", token])
            .arg("--data")
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(child.wait_with_output()));
        let out = match rx.recv_timeout(std::time::Duration::from_secs(20)) {
            Ok(out) => out.unwrap(),
            Err(_) => {
                // It started serving with a weak token: stop it and fail.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("kobo started with the admin token {token:?}");
            }
        };
        assert_eq!(out.status.code(), Some(1), "{token:?}");
        assert!(out.stdout.is_empty(), "it never listened");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("--admin-token") && stderr.contains("32"),
            "{stderr}"
        );
    }
}

#[tokio::test]
async fn unknown_http_methods_do_not_grow_the_metrics() {
    let app = spawn_app().await;
    app.get("x", "/healthz").await.assert_status(200);
    for i in 0..5 {
        let method = reqwest::Method::from_bytes(format!("XMETHOD{i}").as_bytes()).unwrap();
        app.send(method, "/healthz", None, None, None).await;
    }
    let metrics = app.get("x", "/metrics").await;
    assert!(!metrics.text.contains("XMETHOD"), "{}", metrics.text);
    assert!(metrics.text.contains("method=\"other\""));
    // Statuses are classes, routes are patterns.
    assert!(metrics.text.contains("status=\"2xx\""));
    assert!(!metrics.text.contains("status=\"200\""));
}

fn mode_of(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn the_data_directory_and_its_files_are_private_to_the_owner() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    app.paid_intent(&m.test_key, 10000).await;
    let data = app.data_dir();
    assert_eq!(mode_of(&data), 0o700);
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(mode_of(&path), 0o600, "{}", path.display());
    }
}

#[tokio::test]
async fn a_start_on_a_data_directory_others_can_read_warns() {
    let mut app = spawn_app().await;
    if app.skip_on_postgres("the embedded store's file modes") {
        return;
    }
    app.kill();
    let data = app.data_dir();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        data.join("kobo.redb"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    app.start(&[]);
    app.get("x", "/healthz").await.assert_status(200);
    let log = std::fs::read_to_string(app.log_path()).unwrap();
    assert!(log.contains("other users can access"), "{log}");
    assert!(log.contains("kobo.redb"), "{log}");
}

#[tokio::test]
async fn access_logs_name_the_route_pattern_never_a_capability_url() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app
        .create_intent(&m.test_key, json!({"amount": 10000, "currency": "NGN"}))
        .await;
    let url = pi["checkout_url"].as_str().unwrap();
    let code = url.rsplit('/').next().unwrap();
    let page = app
        .client
        .get(format!("{}/c/{code}", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    page.text().await.unwrap();
    // The served line is written before the answer is sent; /healthz after
    // it makes sure the log holds the page's line.
    app.get("x", "/healthz").await.assert_status(200);
    let log = std::fs::read_to_string(app.log_path()).unwrap();
    assert!(log.contains("/c/{code}"), "{log}");
    assert!(!log.contains(code), "the checkout code is in the log");
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_cut_off_with_408() {
    let app = spawn_app_with(&["--body-timeout-ms".into(), "300".into()]).await;
    let m = app.merchant().await;
    let addr = app.base.strip_prefix("http://").unwrap();
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/payment_intents HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Idempotency-Key: slow-1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"amount\"",
        m.test_key
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    // The rest never comes; the server must answer on its own.
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        conn.read_to_end(&mut answer),
    )
    .await;
    let text = String::from_utf8_lossy(&answer);
    assert!(read.is_ok(), "no answer within 10 s: {text}");
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("request_timeout"), "{text}");
    // Nothing was saved under the key: it works for a whole request.
    let r = app
        .post_with_key(
            &m.test_key,
            "/v1/payment_intents",
            "slow-1",
            json!({"amount": 10000, "currency": "NGN"}),
        )
        .await;
    r.assert_status(201);
}

/// The sandbox pages' form POSTs read their bodies under the same deadline
/// as the API's.
#[tokio::test]
async fn a_sandbox_form_body_that_does_not_arrive_in_time_is_cut_off_with_408() {
    let app = spawn_app_with(&["--body-timeout-ms".into(), "300".into()]).await;
    let addr = app.base.strip_prefix("http://").unwrap();
    for path in [
        "/sandbox/bank/some-reference/approve",
        "/sandbox/bank/some-reference/decline",
        "/sandbox/mandates/some-reference/approve",
        "/sandbox/mandates/some-reference/decline",
    ] {
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nform_token="
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        // The rest never comes; the server must answer on its own.
        let mut answer = Vec::new();
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            conn.read_to_end(&mut answer),
        )
        .await;
        let text = String::from_utf8_lossy(&answer);
        assert!(read.is_ok(), "{path}: no answer within 10 s: {text}");
        assert!(text.starts_with("HTTP/1.1 408"), "{path}: {text}");
        assert!(text.contains("request_timeout"), "{path}: {text}");
    }
}

#[tokio::test]
async fn answers_that_carry_secrets_are_never_cached() {
    let app = spawn_app().await;
    let no_store = |r: &crate::helpers::Resp| {
        assert_eq!(
            r.headers.get("cache-control").map(|v| v.to_str().unwrap()),
            Some("no-store"),
            "{}",
            r.text
        );
    };
    let created = app
        .admin_post("/admin/v1/merchants", json!({"name": "Cache"}))
        .await;
    created.assert_status(201);
    no_store(&created);
    let id = created.body["id"].as_str().unwrap();
    let key = created.body["test_secret_key"]
        .as_str()
        .unwrap()
        .to_string();
    let rolled = app
        .admin_post(
            &format!("/admin/v1/merchants/{id}/roll_keys"),
            json!({"mode": "test"}),
        )
        .await;
    rolled.assert_status(200);
    no_store(&rolled);
    app.get(&key, "/v1/balance").await.assert_status(401);
    let key = rolled.body["secret_key"].as_str().unwrap().to_string();
    let body = json!({"amount": 10000, "currency": "NGN"});
    let pi = app
        .post_with_key(&key, "/v1/payment_intents", "cache-1", body.clone())
        .await;
    pi.assert_status(201);
    assert!(pi.body["client_secret"].is_string());
    no_store(&pi);
    let replay = app
        .post_with_key(&key, "/v1/payment_intents", "cache-1", body)
        .await;
    assert!(replay.replayed());
    no_store(&replay);
    let ep = app
        .post(
            &key,
            "/v1/webhook_endpoints",
            json!({"url": "https://hooks.example.com/kobo", "events": ["payment_intent.successful"]}),
        )
        .await;
    ep.assert_status(201);
    assert!(ep.body["secret"].is_string());
    no_store(&ep);
}
