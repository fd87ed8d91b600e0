//! Cluster mode, as far as one node without PostgreSQL leases shows it:
//! readiness, the operator's cluster view, and `--cluster` refused on the
//! embedded store. (Several nodes on one PostgreSQL: the cluster test.)

use std::process::Command;

use crate::helpers::spawn_app;

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
