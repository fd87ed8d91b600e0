//! The node loop against the in-memory leases, on manual time.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;

use kobo_storage::fence::{Leases, Ownership, SHARDS};
use kobo_storage::StoreError;

use super::memory::{Link, MemoryLeases};
use super::rendezvous;
use super::time::ManualTime;
use super::timing::{LEASE_TTL, SAFETY_MARGIN, TICK};
use super::{ClusterView, Node, Owner, ShardEvents};

#[derive(Default)]
struct Recorder {
    acquired: Mutex<BTreeSet<u16>>,
    /// Each shard announced served, and whether the view held it then.
    serving: Mutex<Vec<(u16, bool)>>,
    lost: Mutex<Vec<u16>>,
    view: OnceLock<Arc<ClusterView>>,
}

impl ShardEvents for Recorder {
    fn acquired(&self, shards: &[u16]) -> Result<(), StoreError> {
        self.acquired.lock().extend(shards);
        Ok(())
    }
    fn serving(&self, shards: &[u16]) {
        let view = self.view.get().expect("the recorder's view");
        self.serving
            .lock()
            .extend(shards.iter().map(|&s| (s, view.token(s).is_some())));
    }
    fn lost(&self, shards: &[u16]) {
        self.lost.lock().extend(shards);
    }
}

struct Member {
    node: Node,
    link: Arc<Link>,
    events: Arc<Recorder>,
}

struct Cluster {
    time: ManualTime,
    db: Arc<MemoryLeases>,
    members: Vec<Member>,
}

impl Cluster {
    fn new() -> Self {
        let time = ManualTime::default();
        Cluster {
            db: MemoryLeases::new(time.clone()),
            time,
            members: Vec::new(),
        }
    }

    fn join(&mut self, id: &str) -> usize {
        let link = Link::new(&self.db);
        let events = Arc::new(Recorder::default());
        let time = Arc::new(self.time.clone());
        let view = Arc::new(ClusterView::new(id, &format!("http://{id}"), time.clone()));
        events.view.set(view.clone()).ok().unwrap();
        let node = Node::new(view, link.clone(), time, events.clone());
        self.members.push(Member { node, link, events });
        self.members.len() - 1
    }

    fn view(&self, i: usize) -> &ClusterView {
        &self.members[i].node.view
    }

    fn owned(&self, i: usize) -> BTreeSet<u16> {
        (0..SHARDS)
            .filter(|&s| self.view(i).token(s).is_some())
            .collect()
    }

    /// No shard is counted as its own by two nodes, and a node that counts
    /// a shard as its own is its holder in the database.
    fn assert_one_holder(&self) {
        for s in 0..SHARDS {
            let holders: Vec<&str> = self
                .members
                .iter()
                .filter(|m| m.node.view.token(s).is_some())
                .map(|m| m.node.view.node_id())
                .collect();
            assert!(holders.len() <= 1, "shard {s} held by {holders:?}");
            if let Some(h) = holders.first() {
                assert_eq!(self.db.holder(s).as_deref(), Some(*h), "shard {s}");
            }
        }
    }

    /// One tick of each of `who`, in order, checking after each; then a
    /// second of time.
    fn round(&self, who: &[usize]) {
        for &i in who {
            self.members[i].node.tick();
            self.assert_one_holder();
        }
        self.time.advance(TICK);
        self.assert_one_holder();
    }

    fn expected(&self, i: usize, live: &[&str]) -> BTreeSet<u16> {
        rendezvous::wanted(self.view(i).node_id(), live)
            .into_iter()
            .collect()
    }
}

#[test]
fn the_weight_is_the_first_eight_bytes_of_sha256_of_node_id_and_shard() {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest([b"n1".as_slice(), &[0x01, 0x02]].concat());
    assert_eq!(
        rendezvous::weight("n1", 0x0102),
        u64::from_be_bytes(d[..8].try_into().unwrap())
    );
}

#[test]
fn a_node_leaving_moves_only_its_own_shards() {
    let three = ["a", "b", "c"];
    let two = ["a", "b"];
    for s in 0..SHARDS {
        let before = rendezvous::owner(s, three).unwrap();
        let after = rendezvous::owner(s, two).unwrap();
        if before != "c" {
            assert_eq!(before, after, "shard {s}");
        }
    }
    let counts: Vec<usize> = three
        .iter()
        .map(|n| rendezvous::wanted(n, &three).len())
        .collect();
    assert_eq!(counts.iter().sum::<usize>(), SHARDS as usize);
    assert!(counts.iter().all(|&c| c > 40), "{counts:?}");
}

#[test]
fn two_nodes_split_the_shards_by_rendezvous() {
    let mut c = Cluster::new();
    let (a, b) = (c.join("node-a"), c.join("node-b"));
    for _ in 0..3 {
        c.round(&[a, b]);
    }
    let live = ["node-a", "node-b"];
    assert_eq!(c.owned(a), c.expected(a, &live));
    assert_eq!(c.owned(b), c.expected(b, &live));
    assert_eq!(c.owned(a).len() + c.owned(b).len(), SHARDS as usize);
    assert!(!c.owned(a).is_empty() && !c.owned(b).is_empty());
    // Each answers "who owns it" the same way.
    let shard = *c.owned(b).iter().next().unwrap();
    assert_eq!(c.view(b).owner_of_shard(shard), Owner::Here);
    assert_eq!(
        c.view(a).owner_of_shard(shard),
        Owner::Node {
            id: "node-b".into(),
            address: "http://node-b".into()
        }
    );
}

#[test]
fn a_node_that_stops_heartbeating_loses_its_shards_to_the_other_within_ttl_and_a_tick() {
    let mut c = Cluster::new();
    let (a, b) = (c.join("node-a"), c.join("node-b"));
    for _ in 0..3 {
        c.round(&[a, b]);
    }
    let a_had = c.owned(a);
    // node-a ticks one last time, then dies (no more ticks).
    c.members[a].node.tick();
    let died = c.time.now_for_tests();
    let mut taken_after = None;
    for _ in 0..10 {
        c.round(&[b]);
        if c.owned(b).len() == SHARDS as usize {
            taken_after = Some(c.time.now_for_tests() - died);
            break;
        }
    }
    let taken_after = taken_after.expect("node-b took every shard");
    assert!(
        taken_after <= LEASE_TTL + TICK,
        "took {taken_after:?}, more than TTL + tick"
    );
    assert!(c.owned(a).is_empty());
    let acquired = c.members[b].events.acquired.lock().clone();
    assert!(a_had.is_subset(&acquired));
}

#[test]
fn shards_taken_over_are_announced_served_once_and_only_once_the_view_holds_them() {
    let mut c = Cluster::new();
    let (a, b) = (c.join("node-a"), c.join("node-b"));
    for _ in 0..3 {
        c.round(&[a, b]);
    }
    let served = |i: usize| -> Vec<(u16, bool)> { c.members[i].events.serving.lock().clone() };
    let as_set = |v: &[(u16, bool)]| v.iter().map(|&(s, _)| s).collect::<BTreeSet<u16>>();
    // Each node announced every shard it acquired, once, already held.
    for i in [a, b] {
        let announced = served(i);
        assert!(announced.iter().all(|&(_, held)| held), "{announced:?}");
        assert_eq!(as_set(&announced).len(), announced.len());
        assert_eq!(as_set(&announced), *c.members[i].events.acquired.lock());
    }
    // node-a dies: node-b announces node-a's shards when it takes them.
    let a_had = c.owned(a);
    let before = served(b).len();
    for _ in 0..10 {
        c.round(&[b]);
    }
    assert_eq!(c.owned(b).len(), SHARDS as usize);
    let later = served(b)[before..].to_vec();
    assert!(later.iter().all(|&(_, held)| held));
    assert_eq!(as_set(&later), a_had);
    assert_eq!(later.len(), a_had.len());
}

#[test]
fn a_joining_node_receives_its_share_by_release_never_by_two_holders_at_once() {
    let mut c = Cluster::new();
    let a = c.join("node-a");
    for _ in 0..2 {
        c.round(&[a]);
    }
    assert_eq!(c.owned(a).len(), SHARDS as usize);
    let tokens_before: Vec<i64> = (0..SHARDS).map(|s| c.view(a).token(s).unwrap()).collect();
    let b = c.join("node-b");
    let share = c.expected(b, &["node-a", "node-b"]);
    // Three rounds: far less than a lease's TTL, so nothing expired.
    for _ in 0..3 {
        c.round(&[b, a]);
    }
    assert_eq!(c.owned(b), share);
    let lost: BTreeSet<u16> = c.members[a].events.lost.lock().iter().copied().collect();
    assert_eq!(lost, share, "node-a gave up exactly node-b's share");
    for s in share {
        assert!(c.view(b).token(s).unwrap() > tokens_before[s as usize]);
    }
}

#[test]
fn a_node_whose_renewals_fail_stops_owning_at_its_local_deadline() {
    let mut c = Cluster::new();
    let a = c.join("node-a");
    c.round(&[a]);
    c.members[a].node.tick();
    assert_eq!(c.owned(a).len(), SHARDS as usize);
    assert!(c.view(a).is_fresh());
    // The last renewal went out now; the database is then unreachable.
    let renewed = c.time.now_for_tests();
    c.members[a].link.cut.store(true, Ordering::SeqCst);
    let deadline = LEASE_TTL - SAFETY_MARGIN;
    while c.time.now_for_tests() - renewed < deadline {
        assert_eq!(c.owned(a).len(), SHARDS as usize);
        let report = c.members[a].node.tick();
        assert!(report.error.is_some());
        assert!(report.lost.is_empty());
        c.time.advance(Duration::from_millis(500));
    }
    assert!(c.owned(a).is_empty(), "no token past the local deadline");
    let report = c.members[a].node.tick();
    assert_eq!(report.lost.len(), SHARDS as usize);
    assert_eq!(c.members[a].events.lost.lock().len(), SHARDS as usize);
    assert!(!c.view(a).is_fresh());
    // The database still counts them as node-a's for another second: no
    // other node could have taken them while node-a still wrote.
    assert_eq!(c.db.holder(0).as_deref(), Some("node-a"));
    assert!(c.members[a].link.reserve_sequence(1).is_err());
}

#[test]
fn a_cluster_sequence_comes_in_blocks_and_jumps_above_every_other_nodes_numbers() {
    use super::timing::SEQUENCE_BLOCK;
    let dir = tempfile::tempdir().unwrap();
    let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
    let db = MemoryLeases::new(ManualTime::default());
    let (here, other) = (Link::new(&db), Link::new(&db));
    kobo.seq.use_blocks(here.clone()).unwrap();
    assert_eq!(kobo.seq.next(), 1);
    assert_eq!(kobo.seq.next(), 2);
    // Another node reserves the next block; acquiring a shard jumps past it.
    let theirs = other.reserve_sequence(SEQUENCE_BLOCK).unwrap();
    kobo.seq.jump().unwrap();
    let n = kobo.seq.next();
    assert!(n >= theirs.end, "{n} not above {theirs:?}");
    // A used-up block is followed by a fresh one.
    for _ in 1..SEQUENCE_BLOCK {
        kobo.seq.next();
    }
    let after = kobo.seq.next();
    assert!(after > n + SEQUENCE_BLOCK - 1);
    // No node can get these numbers any more.
    assert!(other.reserve_sequence(1).unwrap().start > after);
}

#[tokio::test]
async fn a_due_timer_fires_only_on_the_node_owning_its_merchant() {
    use crate::ids::Mode;
    use crate::timer::{next_due_group, Timer, TimerKind};
    let dir = tempfile::tempdir().unwrap();
    let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
    let time = ManualTime::default();
    let db = MemoryLeases::new(time.clone());
    let view = Arc::new(ClusterView::new("n1", "http://n1", Arc::new(time.clone())));
    assert!(kobo.env.cluster.set(view.clone()).is_ok());
    let mut batch = kobo_storage::Batch::new();
    let merchant = uuid::Uuid::new_v4();
    Timer::new(
        TimerKind::PayoutSend,
        uuid::Uuid::new_v4(),
        merchant,
        Mode::Test,
    )
    .schedule(&mut batch, kobo.clock.now());
    kobo.writer.commit(batch).await.unwrap();
    // Not (yet) this node's merchant: the timer stays due, untouched.
    assert!(!kobo.owns(&merchant));
    assert!(next_due_group(&kobo.env, kobo.clock.now())
        .unwrap()
        .is_none());
    // The node takes every shard (alone in the cluster): now it runs it.
    let node = Node::new(view, Link::new(&db), Arc::new(time), kobo.clone());
    assert_eq!(node.tick().acquired.len(), SHARDS as usize);
    let (_, group) = next_due_group(&kobo.env, kobo.clock.now())
        .unwrap()
        .expect("due here now");
    assert_eq!(group[0].1.merchant, merchant);
}
