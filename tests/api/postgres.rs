//! The PostgreSQL store (`--store postgres://...`), whatever store the rest
//! of the suite runs on (`KOBO_TEST_STORE`): each test here starts its
//! server on a fresh database of the throw-away cluster.

use serde_json::json;

use crate::helpers::{kobo, postgres_database, unstarted_app_on, TestApp};

fn on_postgres_app() -> TestApp {
    let mut app = unstarted_app_on(&[], Some(postgres_database()));
    app.start(&[]);
    app
}

fn output(out: std::process::Output) -> (i32, String) {
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test]
async fn a_server_on_postgres_keeps_its_records_across_a_sigkill_and_keeps_no_store_file() {
    let mut app = on_postgres_app();
    let m = app.merchant().await;
    let created = app
        .post(
            &m.test_key,
            "/v1/payment_intents",
            json!({"amount": 150_000, "currency": "NGN"}),
        )
        .await;
    created.assert_status(201);
    app.restart();
    let read = app
        .get(
            &m.test_key,
            &format!(
                "/v1/payment_intents/{}",
                created.body["id"].as_str().unwrap()
            ),
        )
        .await;
    read.assert_status(200);
    for field in ["id", "amount", "status", "created_at", "fees"] {
        assert_eq!(read.body[field], created.body[field], "{field}");
    }
    assert!(
        !app.data_dir().join("kobo.redb").exists(),
        "the embedded store was not created"
    );
    // The key files still live in the data directory.
    assert!(app.data_dir().join("card-fingerprint-key").exists());
}

#[tokio::test]
async fn a_second_server_on_the_same_database_is_refused_while_the_first_runs() {
    let app = on_postgres_app();
    let url = app.store.clone().unwrap();
    let other = tempfile::tempdir().unwrap();
    let (code, text) = output(kobo([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data",
        other.path().to_str().unwrap(),
        "--store",
        &url,
    ]));
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("in use by another kobo process"), "{text}");
    // The first still serves.
    app.merchant().await;
}

#[tokio::test]
async fn kobo_migrate_creates_the_schema_once_and_says_so() {
    let url = postgres_database();
    let (code, text) = output(kobo(["migrate", "--store", &url]));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("schema version 0 -> 5"), "{text}");
    let (code, text) = output(kobo(["migrate", "--store", &url]));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("at version 5; nothing to do"), "{text}");
    let (code, text) = output(kobo(["migrate", "--store", "mysql://x"]));
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("expected a postgres://"), "{text}");
}

#[tokio::test]
async fn kobo_check_reads_a_running_servers_database_through_one_snapshot() {
    let app = on_postgres_app();
    let m = app.merchant().await;
    for amount in [10_000, 20_000] {
        app.paid_intent(&m.test_key, amount).await;
    }
    let url = app.store.clone().unwrap();
    let (code, text) = output(kobo(["check", "--store", &url]));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("kobo check: clean"), "{text}");
    assert!(!text.contains("password"), "{text}");
}

#[tokio::test]
async fn backups_of_a_postgres_store_are_refused_with_postgres_own_tools_named() {
    let app = on_postgres_app();
    let r = app.admin_post("/admin/v1/backups", json!({})).await;
    r.assert_error(409, "backup_not_available", None);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("pg_dump"));
    let url = app.store.clone().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b.kobo-backup");
    let (code, text) = output(kobo([
        "backup",
        "--data",
        app.data_dir().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--store",
        &url,
    ]));
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("pg_dump"), "{text}");
    assert!(!out.exists());
}

#[tokio::test]
async fn a_server_whose_key_files_differ_from_the_databases_first_server_is_refused() {
    let mut app = on_postgres_app();
    let m = app.merchant().await;
    app.kill();
    let url = app.store.clone().unwrap();
    let mut second = unstarted_app_on(&[], Some(url.clone()));
    let (code, text) = output(kobo([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data",
        second.data_dir().to_str().unwrap(),
        "--store",
        &url,
    ]));
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("differ from those of the kobo"), "{text}");
    assert!(text.contains("card-fingerprint-key"), "{text}");
    // With the first server's key files copied in, the second serves the
    // first's merchants.
    for name in [
        "card-fingerprint-key",
        "checkout-credential-key",
        "sandbox-form-key",
    ] {
        std::fs::copy(app.data_dir().join(name), second.data_dir().join(name)).unwrap();
    }
    second.start(&[]);
    second
        .get(&m.test_key, "/v1/payment_intents")
        .await
        .assert_status(200);
}
