//! The database's fence, seen from outside: a node paused past its leases
//! with a write already stamped with its lease's token wakes up and sends
//! it; the database refuses it (the lease moved on), the client is
//! answered 503 `merchant_moving`, nothing of the write exists, and a
//! retry with the same Idempotency-Key through the new owner creates it
//! once. The stamped write is held before the database by the fault the
//! server takes in debug builds, `KOBO_TEST_HOLD_COMMITS`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cluster_failover::{node, unstarted_node, wait_for_shards, FAILOVER_BOUND};
use crate::helpers::{postgres_database, TestApp};

/// Polls until `path` exists; panics past `bound`.
async fn wait_for_file(path: &Path, bound: Duration) {
    let started = Instant::now();
    while !path.exists() {
        assert!(
            started.elapsed() < bound,
            "{} did not appear within {bound:?}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The value of the counter `name{by="..."}` in `app`'s metrics (0 when
/// it has not been counted yet).
async fn fenced(app: &TestApp, by: &str) -> u64 {
    let text = app.get("x", "/metrics").await.text;
    let series = format!("kobo_cluster_batches_fenced_total{{by=\"{by}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_stamped_before_a_pause_is_refused_by_the_database_once_the_lease_moved() {
    if crate::helpers::test_store().is_none() {
        eprintln!("skipped on the embedded store: runs in the PostgreSQL pass");
        return;
    }
    let url = postgres_database();
    let mut a = node(&url, "node-a", None, &[]);
    let mut c = unstarted_node(&url, Some(&a), &[]);
    let hold = c.dir.path().join("hold");
    let held = c.dir.path().join("hold.held");
    c.envs.push((
        "KOBO_TEST_HOLD_COMMITS".into(),
        hold.to_str().unwrap().into(),
    ));
    c.start(&["--cluster", "--node-id", "node-c"]);
    wait_for_shards(&a, &["node-a", "node-c"], Duration::from_secs(30)).await;
    // A merchant made through node c is in a shard node c owns.
    let m = c.create_merchant(json!({})).await;
    assert_eq!(fenced(&c, "database").await, 0);

    // Node c's writer holds its next group, fences stamped, before the
    // database; the create waits in it.
    std::fs::write(&hold, b"").unwrap();
    let create = {
        let client = reqwest::Client::new();
        let url = format!("{}/v1/payment_intents", c.base);
        let key = m.test_key.clone();
        tokio::spawn(async move {
            let r = client
                .post(url)
                .bearer_auth(key)
                .header("Idempotency-Key", "fenced-create")
                .json(&json!({"amount": 25_000, "currency": "NGN"}))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        })
    };
    wait_for_file(&held, Duration::from_secs(10)).await;

    // Paused past its leases: node a takes every shard over.
    let c_pid = c.child.as_ref().unwrap().id() as i32;
    unsafe { libc::kill(c_pid, libc::SIGSTOP) };
    let took = wait_for_shards(&a, &["node-a"], FAILOVER_BOUND).await;
    eprintln!("node-a held every shard {took:?} after the pause");

    // Woken with the hold lifted, node c sends the stamped group: the
    // database refuses it.
    std::fs::remove_file(&hold).unwrap();
    unsafe { libc::kill(c_pid, libc::SIGCONT) };
    let (status, body) = create.await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "merchant_moving", "{body}");
    assert!(
        fenced(&c, "database").await >= 1,
        "node c counted no refusal by the database"
    );

    // Nothing of it was written; the client's retry through the new owner
    // creates it, once.
    let list = a.get(&m.test_key, "/v1/payment_intents").await;
    list.assert_status(200);
    assert_eq!(list.body["data"], json!([]), "{}", list.text);
    let again = a
        .post_with_key(
            &m.test_key,
            "/v1/payment_intents",
            "fenced-create",
            json!({"amount": 25_000, "currency": "NGN"}),
        )
        .await;
    again.assert_status(201);
    assert!(!again.replayed());
    let list = a.get(&m.test_key, "/v1/payment_intents").await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 1);

    // Node c rejoins under new leases; the store is clean.
    wait_for_shards(&a, &["node-a", "node-c"], Duration::from_secs(30)).await;
    c.kill();
    crate::operations::assert_check_clean(&mut a);
}
