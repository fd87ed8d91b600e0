//! The cluster-mode contract of the PostgreSQL engine: leases judged by the
//! database's clock, fences checked in the group commit, several node
//! stores writing one database, sequence blocks, and the writer lock
//! keeping single-process and cluster kobos apart. Each test takes a fresh
//! database of the test process's throw-away cluster ([`super::cluster`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{call, commit, Mode};
use crate::fence::{Fence, Leases, Ownership, SHARDS};
use crate::writer::{counters, u64_from, META_SEQ_HIGH_WATER};
use crate::{Batch, CommitError, Engine, Store, StoreError, Table, Writer, WriterMetrics};

const TTL: Duration = Duration::from_secs(30);

fn fresh() -> String {
    super::cluster::shared().fresh_database()
}

fn node(url: &str) -> (Store, Arc<dyn Leases>) {
    let store = Store::connect_cluster(url).unwrap();
    let leases = store.leases().expect("a cluster store has leases");
    (store, leases)
}

/// The tokens a test node holds, as its membership loop would report them.
#[derive(Default)]
struct Held(Mutex<HashMap<u16, i64>>);

impl Held {
    fn set(&self, shard: u16, token: i64) {
        self.0.lock().unwrap().insert(shard, token);
    }
}

impl Ownership for Held {
    fn token(&self, shard: u16) -> Option<i64> {
        self.0.lock().unwrap().get(&shard).copied()
    }
}

fn writer_with(store: &Store, held: &Arc<Held>) -> Writer {
    let writer = store.start_writer(WriterMetrics::new());
    writer.set_ownership(held.clone());
    writer
}

/// A merchant id in `shard`.
fn merchant(shard: u16, n: u8) -> [u8; 16] {
    let mut id = [n; 16];
    id[14..].copy_from_slice(&shard.to_be_bytes());
    assert_eq!(crate::fence::shard_of(&id), shard);
    id
}

fn key(n: u64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

/// Commits `batches` as ONE group, in one transaction, on the store's
/// writer connection (the writer thread's path, without its grouping luck).
fn commit_group(store: &Store, batches: Vec<Batch>) -> Vec<Result<(), CommitError>> {
    let Engine::Postgres(pg) = &store.engine else {
        panic!("a PostgreSQL store");
    };
    let conn = pg.writer_conn().unwrap();
    call(async move {
        let conn = conn.lock().await;
        let refs: Vec<&Batch> = batches.iter().collect();
        commit::commit(&conn, &refs).await
    })
    .unwrap()
}

#[test]
fn every_shard_has_a_lease_row_nobody_holds_at_first() {
    let (_store, leases) = node(&fresh());
    let rows = leases.leases().unwrap();
    assert_eq!(rows.len(), SHARDS as usize);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.shard as usize, i);
        assert_eq!((row.node_id.as_deref(), row.token), (None, 0));
        assert_eq!(row.remaining, Duration::ZERO);
    }
}

#[test]
fn heartbeats_register_nodes_and_live_nodes_lists_those_heard_from_within_the_ttl() {
    let (_store, leases) = node(&fresh());
    leases.heartbeat("n2", "http://127.0.0.1:2").unwrap();
    leases.heartbeat("n1", "http://127.0.0.1:9").unwrap();
    leases.heartbeat("n1", "http://127.0.0.1:1").unwrap();
    let live = leases.live_nodes(TTL).unwrap();
    let seen: Vec<(&str, &str)> = live
        .iter()
        .map(|n| (n.node_id.as_str(), n.address.as_str()))
        .collect();
    assert_eq!(
        seen,
        vec![("n1", "http://127.0.0.1:1"), ("n2", "http://127.0.0.1:2")]
    );
    assert!(live.iter().all(|n| n.heartbeat_age < TTL));
    assert!(leases.live_nodes(Duration::ZERO).unwrap().is_empty());
}

#[test]
fn a_held_lease_is_refused_to_others_and_renewing_or_reacquiring_keeps_its_token() {
    let (_store, leases) = node(&fresh());
    let token = leases.acquire(7, "n1", TTL).unwrap().unwrap();
    assert_eq!(token, 1);
    assert_eq!(leases.acquire(7, "n2", TTL).unwrap(), None);
    assert_eq!(leases.acquire(7, "n1", TTL).unwrap(), Some(token));
    let held = [Fence { shard: 7, token }];
    assert_eq!(leases.renew("n1", &held, TTL).unwrap(), held.to_vec());
    let row = &leases.leases().unwrap()[7];
    assert_eq!((row.node_id.as_deref(), row.token), (Some("n1"), token));
    assert!(row.remaining > TTL - Duration::from_secs(5));
    // Not renewed: another node's claim, or a stale token.
    assert!(leases.renew("n2", &held, TTL).unwrap().is_empty());
    let stale = [Fence {
        shard: 7,
        token: token - 1,
    }];
    assert!(leases.renew("n1", &stale, TTL).unwrap().is_empty());
}

#[test]
fn an_expired_lease_goes_to_the_next_node_with_a_higher_token_and_cannot_be_renewed() {
    let (_store, leases) = node(&fresh());
    // A TTL of zero: expired at once by the database's clock.
    let old = leases.acquire(3, "n1", Duration::ZERO).unwrap().unwrap();
    assert_eq!(leases.leases().unwrap()[3].remaining, Duration::ZERO);
    assert!(leases
        .renew(
            "n1",
            &[Fence {
                shard: 3,
                token: old
            }],
            TTL
        )
        .unwrap()
        .is_empty());
    let new = leases.acquire(3, "n2", TTL).unwrap().unwrap();
    assert!(new > old);
    // Its own expired lease taken again by the same node is a new holding.
    let again = leases.acquire(4, "n1", Duration::ZERO).unwrap().unwrap();
    assert!(leases.acquire(4, "n1", TTL).unwrap().unwrap() > again);
}

#[test]
fn a_short_lease_expires_by_the_databases_clock() {
    let (_store, leases) = node(&fresh());
    let ttl = Duration::from_millis(300);
    let first = leases.acquire(9, "n1", ttl).unwrap().unwrap();
    assert_eq!(leases.acquire(9, "n2", TTL).unwrap(), None);
    let deadline = Instant::now() + Duration::from_secs(10);
    let taken = loop {
        if let Some(token) = leases.acquire(9, "n2", TTL).unwrap() {
            break token;
        }
        assert!(Instant::now() < deadline, "the lease never expired");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(taken, first + 1);
}

#[test]
fn a_released_lease_is_taken_by_another_node_at_once() {
    let (_store, leases) = node(&fresh());
    let token = leases.acquire(5, "n1", TTL).unwrap().unwrap();
    assert_eq!(leases.acquire(5, "n2", TTL).unwrap(), None);
    // A release with a stale token or by another node changes nothing.
    leases.release("n2", Fence { shard: 5, token }).unwrap();
    leases
        .release(
            "n1",
            Fence {
                shard: 5,
                token: token + 1,
            },
        )
        .unwrap();
    assert_eq!(leases.acquire(5, "n2", TTL).unwrap(), None);
    leases.release("n1", Fence { shard: 5, token }).unwrap();
    assert_eq!(leases.acquire(5, "n2", TTL).unwrap(), Some(token + 1));
}

#[test]
fn a_group_refuses_only_its_batch_with_a_stale_token() {
    let (store, leases) = node(&fresh());
    let stale = leases.acquire(1, "n1", Duration::ZERO).unwrap().unwrap();
    let current = leases.acquire(1, "n2", TTL).unwrap().unwrap();
    let other = leases.acquire(2, "n2", TTL).unwrap().unwrap();
    let mut old = Batch::new();
    old.put_raw(Table::Events, key(1), b"old".to_vec())
        .set_fence(Fence {
            shard: 1,
            token: stale,
        });
    let mut new = Batch::new();
    new.put_raw(Table::Events, key(2), b"new".to_vec())
        .set_fence(Fence {
            shard: 1,
            token: current,
        });
    let mut second = Batch::new();
    second
        .put_raw(Table::Events, key(3), b"two".to_vec())
        .set_fence(Fence {
            shard: 2,
            token: other,
        });
    let mut global = Batch::new();
    global.put_raw(Table::Meta, key(4), b"global".to_vec());
    let outcomes = commit_group(&store, vec![old, new, second, global]);
    assert_eq!(outcomes[0], Err(CommitError::NotOwner { shard: 1 }));
    assert_eq!(outcomes[1..], [Ok(()), Ok(()), Ok(())]);
    let r = store.read().unwrap();
    assert_eq!(r.get(Table::Events, &key(1)).unwrap(), None);
    assert_eq!(
        r.get(Table::Events, &key(2)).unwrap(),
        Some(b"new".to_vec())
    );
    assert_eq!(
        r.get(Table::Events, &key(3)).unwrap(),
        Some(b"two".to_vec())
    );
    assert!(r.get(Table::Meta, &key(4)).unwrap().is_some());
}

#[tokio::test]
async fn after_a_takeover_the_old_holders_batches_are_refused_and_the_new_holders_commit() {
    let url = fresh();
    let (a, leases_a) = node(&url);
    let (b, leases_b) = node(&url);
    let (held_a, held_b) = (Arc::new(Held::default()), Arc::new(Held::default()));
    let (writer_a, writer_b) = (writer_with(&a, &held_a), writer_with(&b, &held_b));
    let m = merchant(11, 1);
    // A short lease, so the takeover needs no waiting.
    let t1 = leases_a.acquire(11, "a", Duration::ZERO).unwrap().unwrap();
    held_a.set(11, t1);
    let mut first = Batch::new();
    first
        .owned_by(&m)
        .put_raw(Table::Events, key(1), b"a".to_vec());
    writer_a.commit(first).await.unwrap();

    let t2 = leases_b.acquire(11, "b", TTL).unwrap().unwrap();
    assert!(t2 > t1);
    held_b.set(11, t2);
    // Node a still believes it holds token t1 (paused, partitioned).
    let mut late = Batch::new();
    late.owned_by(&m)
        .put_raw(Table::Events, key(2), b"a, late".to_vec());
    assert_eq!(
        writer_a.commit(late).await,
        Err(CommitError::NotOwner { shard: 11 })
    );
    let mut next = Batch::new();
    next.owned_by(&m)
        .put_raw(Table::Events, key(3), b"b".to_vec());
    writer_b.commit(next).await.unwrap();
    let r = a.read().unwrap();
    assert_eq!(r.get(Table::Events, &key(2)).unwrap(), None);
    assert_eq!(r.get(Table::Events, &key(3)).unwrap(), Some(b"b".to_vec()));
    // A batch of a shard the node holds no lease on never reaches the database.
    let mut unowned = Batch::new();
    unowned
        .owned_by(&merchant(12, 1))
        .put_raw(Table::Events, key(4), vec![1]);
    assert_eq!(
        writer_b.commit(unowned).await,
        Err(CommitError::NotOwner { shard: 12 })
    );
}

#[tokio::test]
async fn two_nodes_commit_disjoint_shards_concurrently_and_a_shared_counter_counts_every_add() {
    let url = fresh();
    let (a, leases_a) = node(&url);
    let (b, leases_b) = node(&url);
    let (held_a, held_b) = (Arc::new(Held::default()), Arc::new(Held::default()));
    for shard in 0..8u16 {
        let (leases, held, name) = if shard % 2 == 0 {
            (&leases_a, &held_a, "a")
        } else {
            (&leases_b, &held_b, "b")
        };
        held.set(shard, leases.acquire(shard, name, TTL).unwrap().unwrap());
    }
    let (writer_a, writer_b) = (writer_with(&a, &held_a), writer_with(&b, &held_b));
    const EACH: u64 = 300;
    let mut acks = Vec::new();
    for n in 0..EACH {
        for (writer, parity) in [(&writer_a, 0u16), (&writer_b, 1)] {
            let shard = (n as u16 % 4) * 2 + parity;
            let mut batch = Batch::new();
            batch
                .owned_by(&merchant(shard, 1))
                .require_absent(Table::Events, key(n * 2 + u64::from(parity)))
                .put_raw(
                    Table::Events,
                    key(n * 2 + u64::from(parity)),
                    vec![parity as u8],
                )
                .add(Table::Meta, b"counted".to_vec(), &[1]);
            acks.push(writer.submit(batch));
        }
    }
    for ack in acks {
        ack.await.unwrap().unwrap();
    }
    let r = b.read().unwrap();
    for n in 0..EACH * 2 {
        assert_eq!(
            r.get(Table::Events, &key(n)).unwrap(),
            Some(vec![(n % 2) as u8])
        );
    }
    let count = r.get(Table::Meta, b"counted").unwrap().unwrap();
    assert_eq!(counters(&count), vec![(EACH * 2) as i64]);
}

#[tokio::test]
async fn a_global_key_required_absent_by_two_nodes_at_once_is_won_by_exactly_one() {
    let url = fresh();
    let (a, _) = node(&url);
    let (b, _) = node(&url);
    let writer_a = a.start_writer(WriterMetrics::new());
    let writer_b = b.start_writer(WriterMetrics::new());
    const KEYS: u64 = 200;
    let mut acks = Vec::new();
    for n in 0..KEYS {
        for (writer, name) in [(&writer_a, b"a"), (&writer_b, b"b")] {
            let mut batch = Batch::new();
            batch
                .require_absent(Table::Meta, key(n))
                .put_raw(Table::Meta, key(n), name.to_vec());
            acks.push((n, name, writer.submit(batch)));
        }
    }
    let mut winners = HashMap::new();
    for (n, name, ack) in acks {
        match ack.await.unwrap() {
            Ok(()) => assert!(winners.insert(n, name.to_vec()).is_none(), "two winners"),
            Err(CommitError::Conflict { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(winners.len() as u64, KEYS, "every key has one winner");
    let r = a.read().unwrap();
    for (n, name) in winners {
        assert_eq!(r.get(Table::Meta, &key(n)).unwrap(), Some(name));
    }
}

#[test]
fn sequence_blocks_of_two_nodes_never_overlap_and_start_above_the_noted_high_water() {
    let url = fresh();
    {
        let single = Store::connect(&url).unwrap();
        let mut batch = Batch::new();
        batch.put_raw(Table::Meta, key(1), vec![1]).note_seq(70_000);
        single.apply(&batch).unwrap();
    }
    let (_a, leases_a) = node(&url);
    let (_b, leases_b) = node(&url);
    let reserve = |leases: Arc<dyn Leases>| {
        std::thread::spawn(move || {
            (0..40)
                .map(|_| leases.reserve_sequence(65_536).unwrap())
                .collect::<Vec<_>>()
        })
    };
    let (ta, tb) = (reserve(leases_a), reserve(leases_b));
    let mut blocks: Vec<_> = ta.join().unwrap();
    blocks.extend(tb.join().unwrap());
    blocks.sort_by_key(|r| r.start);
    assert_eq!(blocks.len(), 80);
    assert!(blocks[0].start > 70_000);
    for pair in blocks.windows(2) {
        assert_eq!(pair[0].end - pair[0].start, 65_536);
        assert!(pair[0].end <= pair[1].start, "{pair:?} overlap");
    }
}

#[tokio::test]
async fn a_cluster_node_keeps_no_high_water_mark_and_a_later_single_process_starts_above_its_blocks(
) {
    let url = fresh();
    let end = {
        let (store, leases) = node(&url);
        let block = leases.reserve_sequence(65_536).unwrap();
        let writer = store.start_writer(WriterMetrics::new());
        let mut batch = Batch::new();
        batch
            .put_raw(Table::Meta, key(1), vec![1])
            .note_seq(block.start + 10);
        writer.commit(batch).await.unwrap();
        let r = store.read().unwrap();
        assert_eq!(r.get(Table::Meta, META_SEQ_HIGH_WATER).unwrap(), None);
        block.end
    };
    // The node's connections close as it is dropped; the single process
    // waits for its writer lock up to the usual 5 s.
    let deadline = Instant::now() + Duration::from_secs(20);
    let single = loop {
        match Store::connect(&url) {
            Ok(store) => break store,
            Err(StoreError::DatabaseLocked(_)) if Instant::now() < deadline => {}
            Err(e) => panic!("{e}"),
        }
    };
    let r = single.read().unwrap();
    let hw = r.get(Table::Meta, META_SEQ_HIGH_WATER).unwrap().unwrap();
    assert_eq!(u64_from(&hw), end - 1);
}

#[test]
fn a_single_process_store_and_a_cluster_store_refuse_to_share_a_database() {
    let url = fresh();
    let single = Store::connect(&url).unwrap();
    match Store::connect_cluster(&url) {
        Err(StoreError::DatabaseLocked(m)) => assert!(m.contains("single-process"), "{m}"),
        Err(e) => panic!("expected DatabaseLocked, got {e}"),
        Ok(_) => panic!("a cluster node opened a single process's database"),
    }
    drop(single);

    let url = fresh();
    let (_a, _) = node(&url);
    let (_b, _) = node(&url);
    match Store::connect(&url) {
        Err(StoreError::DatabaseLocked(m)) => assert!(m.contains("cluster"), "{m}"),
        Err(e) => panic!("expected DatabaseLocked, got {e}"),
        Ok(_) => panic!("a single process opened a cluster's database"),
    }
}

#[test]
fn a_cluster_groups_read_set_is_split_into_transactions_the_lock_table_can_hold() {
    let mut batches = Vec::new();
    for n in 0..3000u64 {
        let mut b = Batch::new();
        b.require_absent(Table::Meta, key(n));
        batches.push(b);
    }
    let refs: Vec<&Batch> = batches.iter().collect();
    assert_eq!(commit::chunks(&refs, Mode::Single).len(), 1);
    let runs = commit::chunks(&refs, Mode::Cluster);
    assert_eq!(runs.iter().map(|r| r.len()).sum::<usize>(), 3000);
    assert!(runs.iter().all(|r| r.len() <= commit::MAX_LOCKED_KEYS));
    assert_eq!(runs.len(), 3);
}
