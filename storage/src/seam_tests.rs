//! The seam's contract, run on both engines: every test here is one body
//! and two `#[tokio::test]`s, `..._on_redb` and `..._on_postgres` (a fresh
//! database of the test process's throw-away cluster, [`crate::pg::cluster`]).

use std::time::Duration;

use crate::writer::{counters, u64_from, META_SEQ_HIGH_WATER};
use crate::{Batch, CommitError, Store, Table, WriterMetrics};

/// A fresh store of each engine; the redb one's directory lives as long
/// as the test.
enum Fresh {
    Redb,
    Postgres,
}

fn open(fresh: Fresh) -> (Store, Option<tempfile::TempDir>) {
    match fresh {
        Fresh::Redb => {
            let dir = tempfile::tempdir().unwrap();
            (Store::open(dir.path()).unwrap(), Some(dir))
        }
        Fresh::Postgres => {
            let url = crate::pg::cluster::shared().fresh_database();
            (Store::connect(&url).unwrap(), None)
        }
    }
}

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod on_redb {
            $(
                #[tokio::test]
                async fn $name() {
                    let (store, _dir) = super::open(super::Fresh::Redb);
                    super::$name(store).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    let (store, _dir) = super::open(super::Fresh::Postgres);
                    super::$name(store).await;
                }
            )*
        }
    };
}

on_both!(
    a_batch_whose_precondition_fails_is_refused_whole,
    a_refused_batch_in_a_group_does_not_take_the_group_down,
    concurrent_adds_to_one_counter_are_all_counted,
    the_sequence_high_water_mark_only_rises,
    prefix_scans_run_both_ways_from_a_bound_and_stop_when_told,
    a_read_snapshot_does_not_see_later_commits,
    a_watched_table_wakes_its_watcher_after_the_commit,
    an_applied_batch_is_durable_without_a_writer_thread,
);

fn key(n: u64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

async fn a_batch_whose_precondition_fails_is_refused_whole(store: Store) {
    let writer = store.start_writer(WriterMetrics::new());
    let mut a = Batch::new();
    a.require_absent(Table::Meta, key(1))
        .put_raw(Table::Meta, key(1), b"a".to_vec());
    writer.commit(a).await.unwrap();

    let mut b = Batch::new();
    b.require_absent(Table::Meta, key(1))
        .put_raw(Table::Meta, key(2), b"b".to_vec())
        .put_raw(Table::Meta, key(1), b"b".to_vec());
    match writer.commit(b).await {
        Err(CommitError::Conflict { table, key: k }) => {
            assert_eq!(table, "meta");
            assert_eq!(k, key(1));
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let r = store.read().unwrap();
    assert_eq!(r.get(Table::Meta, &key(1)).unwrap(), Some(b"a".to_vec()));
    assert_eq!(r.get(Table::Meta, &key(2)).unwrap(), None);
}

async fn a_refused_batch_in_a_group_does_not_take_the_group_down(store: Store) {
    let writer = store.start_writer(WriterMetrics::new());
    // Submitted together, so they share commits: every odd batch claims
    // the key its even neighbour claimed just before it.
    let mut waits = Vec::new();
    for n in 0..400u64 {
        let claim = n / 2;
        let mut b = Batch::new();
        b.require_absent(Table::Idempotency, key(claim))
            .put_raw(Table::Idempotency, key(claim), n.to_be_bytes().to_vec())
            .put_raw(Table::Events, key(n), vec![1])
            .delete(Table::Events, key(10_000 + n));
        waits.push(writer.submit(b));
    }
    let mut refused = 0;
    for (n, w) in waits.into_iter().enumerate() {
        match w.await.unwrap() {
            Ok(()) => assert_eq!(n % 2, 0, "batch {n} committed"),
            Err(CommitError::Conflict { .. }) => {
                assert_eq!(n % 2, 1, "batch {n} refused");
                refused += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(refused, 200);
    assert!(writer.commits() < 400, "the batches shared commits");
    let r = store.read().unwrap();
    for n in 0..400u64 {
        let event = r.get(Table::Events, &key(n)).unwrap();
        assert_eq!(event.is_some(), n % 2 == 0, "event {n}");
    }
    for claim in 0..200u64 {
        let v = r.get(Table::Idempotency, &key(claim)).unwrap().unwrap();
        assert_eq!(u64_from(&v), claim * 2, "the first claimant won");
    }
}

async fn concurrent_adds_to_one_counter_are_all_counted(store: Store) {
    let writer = store.start_writer(WriterMetrics::new());
    let mut waits = Vec::new();
    for n in 0..300i64 {
        let mut b = Batch::new();
        b.add(Table::Meta, key(7), &[1, n, -1]);
        waits.push(writer.submit(b));
    }
    let mut claim = Batch::new();
    claim
        .require_absent(Table::Meta, key(8))
        .put_raw(Table::Meta, key(8), vec![1]);
    waits.push(writer.submit(claim));
    // Refused: its add counts for nothing.
    let mut conflicting = Batch::new();
    conflicting
        .require_absent(Table::Meta, key(8))
        .add(Table::Meta, key(7), &[1000, 1000, 1000]);
    waits.push(writer.submit(conflicting));
    for w in waits {
        let _ = w.await.unwrap();
    }
    // A shorter delta row leaves the later counters alone; a longer one
    // extends the row.
    let mut b = Batch::new();
    b.add(Table::Meta, key(7), &[1]);
    writer.commit(b).await.unwrap();
    let mut b = Batch::new();
    b.add(Table::Meta, key(7), &[0, 0, 0, i64::MAX])
        .add(Table::Meta, key(7), &[0, 0, 0, 5]);
    writer.commit(b).await.unwrap();
    let r = store.read().unwrap();
    let row = r.get(Table::Meta, &key(7)).unwrap().unwrap();
    assert_eq!(counters(&row), vec![301, 44850, -300, i64::MAX]);
}

async fn the_sequence_high_water_mark_only_rises(store: Store) {
    let writer = store.start_writer(WriterMetrics::new());
    let mut waits = Vec::new();
    for n in 0..500u64 {
        let mut b = Batch::new();
        b.put_raw(Table::Meta, key(1000 + n), vec![1]).note_seq(n);
        waits.push(writer.submit(b));
    }
    for w in waits {
        w.await.unwrap().unwrap();
    }
    let high = |store: &Store| {
        u64_from(
            &store
                .read()
                .unwrap()
                .get(Table::Meta, META_SEQ_HIGH_WATER)
                .unwrap()
                .unwrap(),
        )
    };
    assert_eq!(high(&store), 499);
    let mut lower = Batch::new();
    lower.put_raw(Table::Meta, key(1), vec![1]).note_seq(3);
    writer.commit(lower).await.unwrap();
    assert_eq!(high(&store), 499);
    // A refused batch's sequence numbers are not kept.
    let mut refused = Batch::new();
    refused.require_absent(Table::Meta, key(1)).note_seq(10_000);
    assert!(writer.commit(refused).await.is_err());
    assert_eq!(high(&store), 499);
}

async fn prefix_scans_run_both_ways_from_a_bound_and_stop_when_told(store: Store) {
    let writer = store.start_writer(WriterMetrics::new());
    // 300 keys under prefix 5 (more than one page of the PostgreSQL scan),
    // neighbours under prefixes 4 and 6 and in another table.
    let mut b = Batch::new();
    for n in 0..300u16 {
        let mut k = vec![5u8];
        k.extend_from_slice(&n.to_be_bytes());
        b.put_raw(Table::Events, k, n.to_be_bytes().to_vec());
    }
    b.put_raw(Table::Events, vec![4, 0xff, 0xff], vec![])
        .put_raw(Table::Events, vec![6], vec![])
        .put_raw(Table::EventIndex, vec![5, 0, 1], vec![]);
    writer.commit(b).await.unwrap();
    let r = store.read().unwrap();
    let n_of = |k: &[u8]| u16::from_be_bytes([k[1], k[2]]);

    let mut all = Vec::new();
    r.scan_prefix(Table::Events, &[5], None, |k, v| {
        assert_eq!(&k[1..], v);
        all.push(n_of(k));
        Ok(true)
    })
    .unwrap();
    assert_eq!(all, (0..300).collect::<Vec<_>>());

    let mut from = Vec::new();
    r.scan_prefix(Table::Events, &[5], Some(&[5, 0, 250]), |k, _| {
        from.push(n_of(k));
        Ok(true)
    })
    .unwrap();
    assert_eq!(from, (250..300).collect::<Vec<_>>());

    let mut rev = Vec::new();
    r.scan_prefix_rev(Table::Events, &[5], None, |k, _| {
        rev.push(n_of(k));
        Ok(true)
    })
    .unwrap();
    assert_eq!(rev, (0..300).rev().collect::<Vec<_>>());

    let mut before = Vec::new();
    r.scan_prefix_rev(Table::Events, &[5], Some(&[5, 0, 100]), |k, _| {
        before.push(n_of(k));
        Ok(before.len() < 70)
    })
    .unwrap();
    assert_eq!(before, (30..100).rev().collect::<Vec<_>>());

    let mut none = 0;
    r.scan_prefix(Table::Events, &[7], None, |_, _| {
        none += 1;
        Ok(true)
    })
    .unwrap();
    assert_eq!(none, 0);
}

async fn a_read_snapshot_does_not_see_later_commits(store: Store) {
    let writer = store.start_writer(WriterMetrics::new());
    let mut b = Batch::new();
    b.put_raw(Table::Events, vec![1, 1], b"old".to_vec());
    writer.commit(b).await.unwrap();
    let before = store.read().unwrap();
    // The snapshot is the store as of its first read (PostgreSQL begins
    // the transaction with it; redb at `read`).
    assert!(before.get(Table::Events, &[1, 9]).unwrap().is_none());
    let mut b = Batch::new();
    b.put_raw(Table::Events, vec![1, 1], b"new".to_vec())
        .put_raw(Table::Events, vec![1, 2], b"added".to_vec());
    writer.commit(b).await.unwrap();
    assert_eq!(
        before.get(Table::Events, &[1, 1]).unwrap(),
        Some(b"old".to_vec())
    );
    let mut seen = 0;
    before
        .scan_prefix(Table::Events, &[1], None, |_, _| {
            seen += 1;
            Ok(true)
        })
        .unwrap();
    assert_eq!(seen, 1, "the snapshot's scan sees its own state");
    let after = store.read().unwrap();
    assert_eq!(
        after.get(Table::Events, &[1, 1]).unwrap(),
        Some(b"new".to_vec())
    );
    assert!(after.get(Table::Events, &[1, 2]).unwrap().is_some());
}

async fn a_watched_table_wakes_its_watcher_after_the_commit(store: Store) {
    let writer = store.start_writer(WriterMetrics::new());
    let notify = writer.watch(Table::Events);
    let mut other = Batch::new();
    other.put_raw(Table::Meta, key(1), vec![1]);
    writer.commit(other).await.unwrap();
    let woke = tokio::time::timeout(Duration::from_millis(50), notify.notified());
    assert!(woke.await.is_err(), "a write elsewhere does not wake");
    let mut b = Batch::new();
    b.put_raw(Table::Events, key(1), vec![1]);
    writer.commit(b).await.unwrap();
    notify.notified().await;
    assert!(store
        .read()
        .unwrap()
        .get(Table::Events, &key(1))
        .unwrap()
        .is_some());
}

async fn an_applied_batch_is_durable_without_a_writer_thread(store: Store) {
    let mut b = Batch::new();
    b.require_absent(Table::Meta, key(3))
        .put_raw(Table::Meta, key(3), vec![3])
        .note_seq(42);
    store.apply(&b).unwrap();
    assert!(store.apply(&b).is_err(), "its precondition now fails");
    let r = store.read().unwrap();
    assert_eq!(r.get(Table::Meta, &key(3)).unwrap(), Some(vec![3]));
    let hw = r.get(Table::Meta, META_SEQ_HIGH_WATER).unwrap().unwrap();
    assert_eq!(u64_from(&hw), 42);
}

mod postgres_only {
    use crate::pg::{cluster, schema};
    use crate::{Store, StoreError};

    #[test]
    fn a_second_kobo_on_the_same_database_is_refused_as_locked() {
        let url = cluster::shared().fresh_database();
        let _first = Store::connect(&url).unwrap();
        match Store::connect(&url) {
            Err(StoreError::DatabaseLocked(_)) => {}
            Err(e) => panic!("expected DatabaseLocked, got {e}"),
            Ok(_) => panic!("expected DatabaseLocked, got a second store"),
        }
    }

    #[test]
    fn the_schema_is_versioned_and_a_migration_runs_once() {
        let url = cluster::shared().fresh_database();
        assert_eq!(crate::pg::migrate(&url).unwrap(), (0, schema::latest()));
        assert_eq!(
            crate::pg::migrate(&url).unwrap(),
            (schema::latest(), schema::latest())
        );
        drop(Store::connect(&url).unwrap());
    }

    #[test]
    fn a_database_of_a_later_schema_is_refused() {
        let url = cluster::shared().fresh_database();
        crate::pg::migrate(&url).unwrap();
        crate::pg::execute(&url, "UPDATE kobo_schema SET version = version + 1").unwrap();
        match Store::connect(&url) {
            Err(StoreError::Postgres(m)) => assert!(m.contains("later kobo"), "{m}"),
            Err(e) => panic!("expected the version refusal, got {e}"),
            Ok(_) => panic!("a later schema was opened"),
        }
    }
}

/// Rough costs of the seam's calls on each engine (debug build; run by
/// hand: `cargo test -p kobo-storage costs -- --ignored --nocapture`).
mod costs {
    use std::time::Instant;

    use crate::{Batch, Store, Table, WriterMetrics};

    async fn measure(name: &str, store: Store) {
        let writer = store.start_writer(WriterMetrics::new());
        let t = Instant::now();
        for n in 0..500u64 {
            let mut b = Batch::new();
            b.put_raw(Table::Events, n.to_be_bytes().to_vec(), vec![1; 200]);
            writer.commit(b).await.unwrap();
        }
        let commits = t.elapsed() / 500;
        let t = Instant::now();
        for n in 0..2000u64 {
            let r = store.read().unwrap();
            r.get(Table::Events, &(n % 500).to_be_bytes()).unwrap();
        }
        let reads = t.elapsed() / 2000;
        let r = store.read().unwrap();
        let t = Instant::now();
        for n in 0..2000u64 {
            r.get(Table::Events, &(n % 500).to_be_bytes()).unwrap();
        }
        let gets = t.elapsed() / 2000;
        eprintln!("{name}: sequential commit {commits:?}, read()+get {reads:?}, get {gets:?}");
    }

    #[tokio::test]
    #[ignore]
    async fn costs() {
        let (store, _dir) = super::open(super::Fresh::Redb);
        measure("redb", store).await;
        let (store, _dir) = super::open(super::Fresh::Postgres);
        measure("postgres", store).await;
    }
}
