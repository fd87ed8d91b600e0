//! An in-memory [`Leases`] for the node loop's tests, with the database's
//! semantics: expiry by its own (manual) clock, tokens raised whenever a
//! lease changes holder, a lease another node holds refused. Each node
//! gets a [`Link`] that can be cut (its calls then fail, like a lost
//! database connection).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use kobo_storage::fence::{Fence, LeaseRow, Leases, NodeRow, SHARDS};
use kobo_storage::StoreError;

use super::node::ShardEvents;
use super::time::{ManualTime, TimeSource};

struct Lease {
    holder: Option<String>,
    token: i64,
    expires: Instant,
}

struct State {
    nodes: BTreeMap<String, (String, Instant)>,
    leases: Vec<Lease>,
    seq: u64,
}

pub struct MemoryLeases {
    time: ManualTime,
    state: Mutex<State>,
}

impl MemoryLeases {
    pub fn new(time: ManualTime) -> Arc<Self> {
        let now = time.now();
        Arc::new(MemoryLeases {
            time,
            state: Mutex::new(State {
                nodes: BTreeMap::new(),
                leases: (0..SHARDS)
                    .map(|_| Lease {
                        holder: None,
                        token: 0,
                        expires: now,
                    })
                    .collect(),
                seq: 0,
            }),
        })
    }

    /// The holder of `shard` by the database's clock.
    pub fn holder(&self, shard: u16) -> Option<String> {
        let now = self.time.now();
        let s = self.state.lock();
        let l = &s.leases[shard as usize];
        l.holder.clone().filter(|_| l.expires > now)
    }
}

/// One node's connection to the [`MemoryLeases`].
pub struct Link {
    db: Arc<MemoryLeases>,
    pub cut: AtomicBool,
}

impl Link {
    pub fn new(db: &Arc<MemoryLeases>) -> Arc<Self> {
        Arc::new(Link {
            db: db.clone(),
            cut: AtomicBool::new(false),
        })
    }

    fn up(&self) -> Result<(&MemoryLeases, Instant), StoreError> {
        if self.cut.load(Ordering::SeqCst) {
            return Err(StoreError::Postgres("connection refused".into()));
        }
        Ok((&self.db, self.db.time.now()))
    }
}

impl Leases for Link {
    fn heartbeat(&self, node_id: &str, address: &str) -> Result<(), StoreError> {
        let (db, now) = self.up()?;
        let mut s = db.state.lock();
        s.nodes
            .insert(node_id.to_string(), (address.to_string(), now));
        Ok(())
    }

    fn live_nodes(&self, ttl: Duration) -> Result<Vec<NodeRow>, StoreError> {
        let (db, now) = self.up()?;
        let s = db.state.lock();
        Ok(s.nodes
            .iter()
            .filter(|(_, (_, at))| now.saturating_duration_since(*at) < ttl)
            .map(|(id, (address, at))| NodeRow {
                node_id: id.clone(),
                address: address.clone(),
                heartbeat_age: now.saturating_duration_since(*at),
            })
            .collect())
    }

    fn acquire(&self, shard: u16, node_id: &str, ttl: Duration) -> Result<Option<i64>, StoreError> {
        let (db, now) = self.up()?;
        let mut s = db.state.lock();
        let l = &mut s.leases[shard as usize];
        let live = l.expires > now;
        match &l.holder {
            Some(h) if h != node_id && live => return Ok(None),
            Some(h) if h == node_id => {}
            _ => {
                l.token += 1;
                l.holder = Some(node_id.to_string());
            }
        }
        l.expires = now + ttl;
        Ok(Some(l.token))
    }

    fn renew(
        &self,
        node_id: &str,
        held: &[Fence],
        ttl: Duration,
    ) -> Result<Vec<Fence>, StoreError> {
        let (db, now) = self.up()?;
        let mut s = db.state.lock();
        let mut kept = Vec::new();
        for f in held {
            let l = &mut s.leases[f.shard as usize];
            if l.holder.as_deref() == Some(node_id) && l.token == f.token && l.expires > now {
                l.expires = now + ttl;
                kept.push(*f);
            }
        }
        Ok(kept)
    }

    fn release(&self, node_id: &str, fence: Fence) -> Result<(), StoreError> {
        let (db, now) = self.up()?;
        let mut s = db.state.lock();
        let l = &mut s.leases[fence.shard as usize];
        if l.holder.as_deref() == Some(node_id) && l.token == fence.token {
            l.holder = None;
            l.expires = now;
        }
        Ok(())
    }

    fn leases(&self) -> Result<Vec<LeaseRow>, StoreError> {
        let (db, now) = self.up()?;
        let s = db.state.lock();
        Ok(s.leases
            .iter()
            .enumerate()
            .map(|(shard, l)| LeaseRow {
                shard: shard as u16,
                node_id: l.holder.clone(),
                token: l.token,
                remaining: l.expires.saturating_duration_since(now),
            })
            .collect())
    }

    fn reserve_sequence(&self, n: u64) -> Result<Range<u64>, StoreError> {
        let (db, _) = self.up()?;
        let mut s = db.state.lock();
        let start = s.seq + 1;
        s.seq += n;
        Ok(start..start + n)
    }
}

/// A node's shard events that do nothing (for the nodes of a test that
/// only take and give shards).
pub struct Quiet;

impl ShardEvents for Quiet {
    fn acquired(&self, _: &[u16]) -> Result<(), StoreError> {
        Ok(())
    }
    fn serving(&self, _: &[u16]) {}
    fn lost(&self, _: &[u16]) {}
}
