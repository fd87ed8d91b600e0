//! Cluster mode, as far as one node without PostgreSQL leases shows it:
//! readiness, the operator's cluster view, and `--cluster` refused on the
//! embedded store; and, in the PostgreSQL pass, work a dead node left
//! pending finished by the node taking its shards over. (Several nodes
//! under traffic: the failover test.)

use std::process::Command;
use std::time::Duration;

use crate::cluster_failover::{node, wait_for_shards};
use crate::helpers::{fund_dollars, postgres_database, spawn_app, test_store};
use crate::usdt::{send_usdt, settled, trc20, usdt_merchant, wallet};

#[tokio::test]
async fn a_single_node_is_ready_and_owns_every_shard() {
    let app = spawn_app().await;
    let r = app.get("x", "/readyz").await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "ready");
    assert_eq!(r.body["store"], true);
    assert_eq!(r.body["shards_owned"], 256);
    assert!(r.body["cluster"].is_null(), "{}", r.body);
    let metrics = app.get("x", "/metrics").await;
    assert!(
        metrics.text.contains("kobo_cluster_shards_owned 256"),
        "{}",
        metrics.text
    );
}

#[tokio::test]
async fn the_cluster_view_of_a_single_process_has_one_owner_of_every_shard_and_no_nodes() {
    let app = spawn_app().await;
    let c = app.admin_get("/admin/v1/cluster").await;
    c.assert_status(200);
    assert_eq!(c.body["object"], "cluster");
    assert_eq!(c.body["clustered"], false);
    assert!(c.body["node_id"].is_null());
    assert_eq!(c.body["shards"], 256);
    assert_eq!(c.body["shards_owned"], 256);
    assert_eq!(c.body["ready"], true);
    assert_eq!(c.body["nodes"], serde_json::json!([]));
    assert_eq!(c.body["leases"], serde_json::json!([]));
    app.get("x", "/admin/v1/cluster")
        .await
        .assert_error(401, "invalid_api_key", None);
}

#[test]
fn serve_with_cluster_on_the_embedded_store_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kobo"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store", "redb"])
        .args(["--cluster", "--node-id", "n1", "--data"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--cluster needs a shared PostgreSQL store"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Nothing was created in the data directory.
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    // The same through the environment.
    let out = Command::new(env!("CARGO_BIN_EXE_kobo"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            "redb",
            "--data",
        ])
        .arg(dir.path())
        .env("KOBO_CLUSTER", "1")
        .env("KOBO_NODE_ID", "n1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--cluster needs a shared PostgreSQL store"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_taking_over_a_dead_nodes_shards_asks_again_about_the_crypto_payouts_it_left_unconfirmed(
) {
    if test_store().is_none() {
        eprintln!("skipped on the embedded store: runs in the PostgreSQL pass");
        return;
    }
    let url = postgres_database();
    let mut a = node(&url, "node-a", None, &[]);
    wait_for_shards(&a, &["node-a"], Duration::from_secs(30)).await;
    let m = usdt_merchant(&a, 100).await;
    let usd = fund_dollars(&a, &m.test_key, 100_000).await;
    let ok = wallet(&a, &m, &trc20("Again")).await;
    let dead = wallet(&a, &m, &trc20("dead")).await;
    let paid = send_usdt(&a, &m.test_key, 10_000, &ok).await;
    let failed = send_usdt(&a, &m.test_key, 20_000, &dead).await;
    // Killed before the confirmations (a few hundred ms away) arrive; the
    // manual clock never brings the payouts' check timers due.
    a.kill();
    let b = node(&url, "node-b", Some(&a), &[]);
    wait_for_shards(&b, &["node-b"], Duration::from_secs(30)).await;
    let (paid, _) = settled(&b, &m.test_key, paid.body["id"].as_str().unwrap()).await;
    let (failed, _) = settled(&b, &m.test_key, failed.body["id"].as_str().unwrap()).await;
    assert_eq!(paid["status"], "paid");
    assert_eq!(failed["status"], "failed");
    let log = std::fs::read_to_string(b.log_path()).unwrap();
    assert!(
        log.contains("re-asking the USDT partner about unconfirmed payouts (shards taken over)"),
        "node-b's takeover found nothing to re-ask"
    );
    assert_eq!(
        b.balance(&m.test_key, "available", "USD").await,
        usd - 10_000
    );
    assert_eq!(b.balance(&m.test_key, "payout_in_flight", "USD").await, 0);
}
