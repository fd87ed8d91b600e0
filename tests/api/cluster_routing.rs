//! Routing in a cluster of two nodes on one PostgreSQL database: a
//! customer-facing page of a merchant owned by one node, opened and
//! submitted through the other, is answered by the merchant's node.

use std::time::Duration;

use serde_json::json;

use crate::cluster_failover::{node, wait_for_shards};
use crate::helpers::pages::{self, location};
use crate::helpers::{postgres_database, test_store};
use crate::payment_links::create_link;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_page_reached_through_another_node_is_answered_by_the_merchants_node() {
    if test_store().is_none() {
        eprintln!("skipped on the embedded store: runs in the PostgreSQL pass");
        return;
    }
    let url = postgres_database();
    let a = node(&url, "node-a", None, &[]);
    let b = node(&url, "node-b", Some(&a), &[]);
    wait_for_shards(&a, &["node-a", "node-b"], Duration::from_secs(30)).await;
    // Made through node a, so in one of its shards.
    let m = a.merchant().await;
    create_link(
        &a,
        &m.test_key,
        json!({"name": "Tea", "currency": "NGN", "amount_type": "fixed", "amount": 10000, "slug": "tea"}),
    )
    .await;

    let form = pages::open(&b, "/p/tea").await;
    assert_eq!(form.status, 200, "{}", form.html);
    let p = pages::submit(&b, "/p/tea", &form.html, &[("email", "ada@example.com")]).await;
    assert_eq!(p.status, 303, "{}", p.html);
    let checkout = location(&p);
    assert!(checkout.starts_with("/c/"), "{checkout}");
    let page = pages::open(&b, &checkout).await;
    assert_eq!(page.status, 200, "{}", page.html);

    // Node b handed all three to node a.
    let metrics = b.get("x", "/metrics").await.text;
    let forwarded: f64 = metrics
        .lines()
        .find(|l| l.starts_with("kobo_forwarded_requests_total{to=\"node-a\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0.0);
    assert!(forwarded >= 3.0, "{metrics}");
    let intents = a.all_intents(&m.test_key).await;
    assert_eq!(intents.len(), 1);
}
