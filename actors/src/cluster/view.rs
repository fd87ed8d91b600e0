//! The node's ownership view, shared by the node loop (which keeps it) and
//! everything that asks who owns what: the writer (as its
//! [`Ownership`]: the fencing token of each shard this node holds, until
//! the lease's local deadline), HTTP routing ("here, at that node's
//! address, or nobody yet"), the timer pass and the webhook deliveries.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use serde::Serialize;
use uuid::Uuid;

use kobo_storage::fence::{shard_of, Fence, LeaseRow, NodeRow, Ownership, SHARDS};

use super::time::TimeSource;
use super::timing::VIEW_FRESH;

/// Who owns a merchant, as this node last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// This node: handle it here.
    Here,
    /// Another live node, reached at its advertised address.
    Node { id: String, address: String },
    /// Nobody (failover in progress, or the owner is not live).
    Nobody,
}

#[derive(Debug, Clone, Copy)]
struct Held {
    token: i64,
    /// Past this instant the node no longer counts the lease as its own.
    deadline: Instant,
}

#[derive(Default)]
struct State {
    held: BTreeMap<u16, Held>,
    /// Live nodes by id, from the last good tick.
    nodes: BTreeMap<String, NodeRow>,
    /// Every shard's lease row, from the last good tick.
    leases: Vec<LeaseRow>,
    /// When the last tick that read the database through ended.
    refreshed: Option<Instant>,
}

pub struct ClusterView {
    node_id: String,
    address: String,
    time: Arc<dyn TimeSource>,
    state: RwLock<State>,
    lease_changes: AtomicU64,
}

/// The cluster as this node sees it (`GET /admin/v1/cluster`).
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub node_id: String,
    pub address: String,
    pub shards_owned: usize,
    pub ready: bool,
    pub nodes: Vec<NodeSnapshot>,
    pub leases: Vec<LeaseSnapshot>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeSnapshot {
    pub node_id: String,
    pub address: String,
    pub heartbeat_age_ms: u64,
    pub shards_held: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct LeaseSnapshot {
    pub shard: u16,
    pub node_id: Option<String>,
    pub token: i64,
    pub remaining_ms: u64,
}

impl ClusterView {
    pub fn new(node_id: &str, address: &str, time: Arc<dyn TimeSource>) -> Self {
        ClusterView {
            node_id: node_id.to_string(),
            address: address.to_string(),
            time,
            state: RwLock::new(State::default()),
            lease_changes: AtomicU64::new(0),
        }
    }

    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    fn now(&self) -> Instant {
        self.time.now()
    }

    /// Whether this node owns `merchant` right now.
    pub fn owns(&self, merchant: &Uuid) -> bool {
        self.token(shard_of(merchant.as_bytes())).is_some()
    }

    /// Who owns `merchant`.
    pub fn owner(&self, merchant: &Uuid) -> Owner {
        self.owner_of_shard(shard_of(merchant.as_bytes()))
    }

    pub fn owner_of_shard(&self, shard: u16) -> Owner {
        if self.token(shard).is_some() {
            return Owner::Here;
        }
        let state = self.state.read();
        let holder = state
            .leases
            .iter()
            .find(|l| l.shard == shard && !l.remaining.is_zero())
            .and_then(|l| l.node_id.clone());
        match holder {
            Some(id) if id != self.node_id => match state.nodes.get(&id) {
                Some(n) => Owner::Node {
                    id,
                    address: n.address.clone(),
                },
                None => Owner::Nobody,
            },
            _ => Owner::Nobody,
        }
    }

    /// Shards this node holds (and whose local deadline has not passed).
    pub fn owned_count(&self) -> usize {
        let now = self.now();
        let state = self.state.read();
        state.held.values().filter(|h| h.deadline > now).count()
    }

    /// Registered and its view of the leases refreshed within
    /// [`VIEW_FRESH`].
    pub fn is_fresh(&self) -> bool {
        let state = self.state.read();
        state.nodes.contains_key(&self.node_id)
            && state
                .refreshed
                .is_some_and(|r| self.now().saturating_duration_since(r) < VIEW_FRESH)
    }

    /// Total shards acquired and lost by this node since it started.
    pub fn lease_changes(&self) -> u64 {
        self.lease_changes.load(Ordering::Relaxed)
    }

    pub fn snapshot(&self) -> Snapshot {
        let ready = self.is_fresh();
        let shards_owned = self.owned_count();
        let state = self.state.read();
        let held_by = |id: &str| {
            state
                .leases
                .iter()
                .filter(|l| l.node_id.as_deref() == Some(id) && !l.remaining.is_zero())
                .count()
        };
        Snapshot {
            node_id: self.node_id.clone(),
            address: self.address.clone(),
            shards_owned,
            ready,
            nodes: state
                .nodes
                .values()
                .map(|n| NodeSnapshot {
                    node_id: n.node_id.clone(),
                    address: n.address.clone(),
                    heartbeat_age_ms: millis(n.heartbeat_age),
                    shards_held: held_by(&n.node_id),
                })
                .collect(),
            leases: state
                .leases
                .iter()
                .map(|l| LeaseSnapshot {
                    shard: l.shard,
                    node_id: l.node_id.clone(),
                    token: l.token,
                    remaining_ms: millis(l.remaining),
                })
                .collect(),
        }
    }

    // The node loop's side.

    /// Fences of the leases held (deadline not passed).
    pub(super) fn held(&self) -> Vec<Fence> {
        let now = self.now();
        let state = self.state.read();
        state
            .held
            .iter()
            .filter(|(_, h)| h.deadline > now)
            .map(|(&shard, h)| Fence {
                shard,
                token: h.token,
            })
            .collect()
    }

    /// Forgets the leases whose local deadline passed; returns their shards.
    pub(super) fn drop_lapsed(&self) -> Vec<u16> {
        let now = self.now();
        let mut state = self.state.write();
        let lapsed: Vec<u16> = state
            .held
            .iter()
            .filter(|(_, h)| h.deadline <= now)
            .map(|(&s, _)| s)
            .collect();
        for s in &lapsed {
            state.held.remove(s);
        }
        self.count_changes(lapsed.len());
        lapsed
    }

    /// Stops counting `shards` as held (before releasing them, or when a
    /// renewal says they are gone).
    pub(super) fn stop(&self, shards: &[u16]) {
        let mut state = self.state.write();
        let n = shards
            .iter()
            .filter(|s| state.held.remove(s).is_some())
            .count();
        self.count_changes(n);
    }

    /// Holds (newly acquired or renewed) leases until `deadline`.
    pub(super) fn hold(&self, fences: &[Fence], deadline: Instant, acquired: bool) {
        let mut state = self.state.write();
        for f in fences {
            state.held.insert(
                f.shard,
                Held {
                    token: f.token,
                    deadline,
                },
            );
        }
        if acquired {
            self.count_changes(fences.len());
        }
    }

    pub(super) fn refresh(&self, nodes: Vec<NodeRow>, mut leases: Vec<LeaseRow>) {
        leases.sort_by_key(|l| l.shard);
        let mut state = self.state.write();
        state.nodes = nodes.into_iter().map(|n| (n.node_id.clone(), n)).collect();
        state.leases = leases;
        state.refreshed = Some(self.now());
    }

    fn count_changes(&self, n: usize) {
        self.lease_changes.fetch_add(n as u64, Ordering::Relaxed);
    }
}

impl Ownership for ClusterView {
    fn token(&self, shard: u16) -> Option<i64> {
        debug_assert!(shard < SHARDS);
        let now = self.now();
        let state = self.state.read();
        state
            .held
            .get(&shard)
            .filter(|h| h.deadline > now)
            .map(|h| h.token)
    }
}

fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}
