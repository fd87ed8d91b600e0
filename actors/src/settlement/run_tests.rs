//! The daily settlement runs' anchors, merchant filter and schedule, in a
//! single process and on a cluster node (an in-memory lease table).

use std::collections::BTreeSet;

use kobo_storage::fence::{shard_of, Ownership, SHARDS};
use kobo_storage::Table;
use uuid::Uuid;

use super::*;
use crate::runtime::Kobo;

#[test]
fn each_shards_anchor_falls_in_that_shard_and_shard_zeros_is_the_nil_id() {
    for s in 0..SHARDS {
        assert_eq!(shard_of(anchor(s).as_bytes()), s);
    }
    assert_eq!(anchor(0), Uuid::nil());
    assert_eq!(run_meta_key(Uuid::nil()), META_SETTLEMENT_RUN);
    let keys: BTreeSet<Vec<u8>> = (0..SHARDS).map(|s| run_meta_key(anchor(s))).collect();
    assert_eq!(keys.len(), SHARDS as usize);
}

#[test]
fn a_single_process_run_settles_every_merchant_and_a_shards_run_only_its_own() {
    let merchants: Vec<Uuid> = (0..64).map(|_| Uuid::new_v4()).collect();
    assert!(merchants.iter().all(|&m| settles(false, Uuid::nil(), m)));
    for s in [0, 1, 77, SHARDS - 1] {
        for &m in &merchants {
            assert_eq!(
                settles(true, anchor(s), m),
                shard_of(m.as_bytes()) == s,
                "merchant {m}, shard {s}"
            );
        }
    }
}

/// Every scheduled settlement run: (due, anchor), with its meta row's due.
fn runs(kobo: &Kobo) -> Vec<(DateTime<Utc>, Uuid)> {
    let read = kobo.store.read().unwrap();
    let mut out = Vec::new();
    read.scan_prefix(Table::Timers, &[], None, |k, v| {
        let t: Timer = kobo_storage::decode(v)?;
        if t.kind == TimerKind::SettlementRun {
            assert_eq!(t.target, t.merchant);
            out.push((crate::timer::due_of(k), t.target));
        }
        Ok(true)
    })
    .unwrap();
    for (due, anchor) in &out {
        let meta = read.get(Table::Meta, &run_meta_key(*anchor)).unwrap();
        let meta = crate::clock::from_micros(kobo_storage::writer::u64_from(&meta.unwrap()) as i64);
        assert_eq!(meta, *due);
    }
    out
}

#[tokio::test]
async fn a_single_process_keeps_one_run_under_the_nil_anchor() {
    let dir = tempfile::tempdir().unwrap();
    let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
    ensure_daily_run(&kobo).await.unwrap();
    ensure_daily_run(&kobo).await.unwrap();
    let due: DateTime<Utc> = "2026-11-26T07:00:00Z".parse().unwrap();
    assert_eq!(runs(&kobo), vec![(due, Uuid::nil())]);
}

#[tokio::test]
async fn a_cluster_node_schedules_one_run_per_shard_it_acquires_and_reschedules_that_shard() {
    let dir = tempfile::tempdir().unwrap();
    let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
    // b takes everything, then hands a its share once a is live.
    let crate::runtime::TwoNodes { view, report, .. } = crate::runtime::two_nodes(&kobo);
    let mine: BTreeSet<u16> = (0..SHARDS).filter(|&s| view.token(s).is_some()).collect();
    assert!(!mine.is_empty() && mine.len() < SHARDS as usize);
    assert_eq!(
        report.acquired.iter().copied().collect::<BTreeSet<_>>(),
        mine
    );

    // The acquired shards' runs are scheduled by the next timer pass.
    assert!(runs(&kobo).is_empty());
    ensure_acquired(&kobo.settlement).await;
    let due: DateTime<Utc> = "2026-11-26T07:00:00Z".parse().unwrap();
    let expected: Vec<(DateTime<Utc>, Uuid)> = mine.iter().map(|&s| (due, anchor(s))).collect();
    let mut scheduled = runs(&kobo);
    scheduled.sort();
    assert_eq!(scheduled, expected);

    // A restart ensures the owned shards' runs again: nothing duplicates.
    ensure_daily_run(&kobo).await.unwrap();
    ensure_acquired(&kobo.settlement).await;
    let mut again = runs(&kobo);
    again.sort();
    assert_eq!(again, expected);

    // One shard's run reschedules that shard's next run only.
    let shard = *mine.iter().next().unwrap();
    kobo.clock.set(due);
    let key = Timer::key(due, TimerKind::SettlementRun, anchor(shard));
    run_daily(&kobo.settlement, key, anchor(shard))
        .await
        .unwrap();
    let next: DateTime<Utc> = "2026-11-27T07:00:00Z".parse().unwrap();
    let after = runs(&kobo);
    assert_eq!(after.len(), expected.len());
    assert!(after.contains(&(next, anchor(shard))));
    assert!(!after.contains(&(due, anchor(shard))));
    assert!(after
        .iter()
        .filter(|(_, a)| *a != anchor(shard))
        .all(|(d, _)| *d == due));
}
