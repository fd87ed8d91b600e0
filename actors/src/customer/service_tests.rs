//! The one-shot customer index backfill on a store made before the
//! indexes: done by a single process, refused (with what to do) in a
//! cluster, where one batch may not write every merchant's rows.

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use super::service::backfill_indexes;
use super::{Customer, Identity, RiskAction};
use crate::cluster::time::ManualTime;
use crate::cluster::ClusterView;
use crate::ids::Mode;

/// Stores a customer as the stores before the indexes had it: its row and
/// nothing else.
async fn legacy_customer(kobo: &crate::Kobo) -> Customer {
    let merchant = Uuid::now_v7();
    let c = Customer {
        id: Uuid::now_v7(),
        merchant,
        mode: Mode::Test,
        seq: 1,
        email: Some("ada@example.com".into()),
        name: None,
        created_at: Utc.with_ymd_and_hms(2026, 1, 5, 9, 0, 0).unwrap(),
        phone: None,
        brand: None,
        metadata: Default::default(),
        risk_action: RiskAction::Default,
        identity: Identity::default(),
        updated_at: None,
        deleted_at: None,
    };
    let mut b = Batch::new();
    b.put(Table::Customers, c.id.as_bytes().to_vec(), &c);
    kobo.writer.commit(b).await.unwrap();
    c
}

#[tokio::test]
async fn a_single_process_indexes_customers_stored_before_the_indexes_once() {
    let dir = tempfile::tempdir().unwrap();
    let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
    // A fresh store marks the backfill done on its first run.
    assert_eq!(backfill_indexes(&kobo).await.unwrap(), 0);
    let dir = tempfile::tempdir().unwrap();
    let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
    let c = legacy_customer(&kobo).await;
    assert_eq!(backfill_indexes(&kobo).await.unwrap(), 1);
    let read = kobo.store.read().unwrap();
    let key = c.email_key().unwrap();
    assert_eq!(
        read.get(Table::CustomerEmails, &key).unwrap().as_deref(),
        Some(c.id.as_bytes().as_slice())
    );
    drop(read);
    assert_eq!(backfill_indexes(&kobo).await.unwrap(), 0);
}

#[tokio::test]
async fn a_cluster_node_refuses_to_backfill_and_says_how() {
    let dir = tempfile::tempdir().unwrap();
    let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
    legacy_customer(&kobo).await;
    let view = Arc::new(ClusterView::new(
        "a",
        "http://a",
        Arc::new(ManualTime::default()),
    ));
    kobo.env.cluster.set(view.clone()).ok().unwrap();
    kobo.writer.set_ownership(view);
    let e = backfill_indexes(&kobo).await.unwrap_err();
    assert!(e.message.contains("without --cluster"), "{}", e.message);
    let read = kobo.store.read().unwrap();
    let mut rows = 0;
    read.scan_prefix(Table::CustomerEmails, &[], None, |_, _| {
        rows += 1;
        Ok(true)
    })
    .unwrap();
    assert_eq!(rows, 0, "nothing was written");
}
