//! The node loop. Every [`TICK`] a node: forgets leases whose local
//! deadline passed; heartbeats; reads the live nodes; works out the shards
//! it should own by [`rendezvous`](super::rendezvous); stops serving, then
//! releases, the shards it holds but should not (a node joined); renews
//! the rest; acquires the wanted shards it lacks (free or expired ones: a
//! lease another node still holds is refused by the database, so two
//! nodes never hold a shard at once), announcing them served once its
//! view holds them; and refreshes its view of every node and lease. A
//! lease counts locally until (renewal sent + TTL - 1 s).

use std::collections::BTreeSet;
use std::sync::Arc;

use kobo_storage::fence::{Fence, Leases};
use kobo_storage::StoreError;

use super::rendezvous;
use super::time::TimeSource;
use super::timing::{local_deadline, LEASE_TTL, NODE_TTL, TICK};
use super::view::ClusterView;

/// What a node does when its ownership changes.
pub trait ShardEvents: Send + Sync + 'static {
    /// Newly acquired shards are about to be served (the sequence jumps to
    /// a fresh block here). An error gives them back.
    fn acquired(&self, shards: &[u16]) -> Result<(), StoreError>;
    /// Newly acquired shards are served now (the view holds them): work
    /// their merchants' previous owner left pending is resumed here. Must
    /// not block the loop.
    fn serving(&self, shards: &[u16]);
    /// Shards no longer served (every cache is dropped here).
    fn lost(&self, shards: &[u16]);
}

/// What one tick changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TickReport {
    pub acquired: Vec<u16>,
    pub lost: Vec<u16>,
    /// The first database error met (the tick stopped there).
    pub error: Option<String>,
}

pub struct Node {
    pub view: Arc<ClusterView>,
    leases: Arc<dyn Leases>,
    time: Arc<dyn TimeSource>,
    events: Arc<dyn ShardEvents>,
}

impl Node {
    pub fn new(
        view: Arc<ClusterView>,
        leases: Arc<dyn Leases>,
        time: Arc<dyn TimeSource>,
        events: Arc<dyn ShardEvents>,
    ) -> Self {
        Node {
            view,
            leases,
            time,
            events,
        }
    }

    /// One round of the loop.
    pub fn tick(&self) -> TickReport {
        let mut report = TickReport {
            lost: self.view.drop_lapsed(),
            ..Default::default()
        };
        if let Err(e) = self.rebalance(&mut report) {
            report.error = Some(e.to_string());
        }
        if !report.lost.is_empty() {
            report.lost.sort_unstable();
            self.events.lost(&report.lost);
        }
        report
    }

    fn rebalance(&self, report: &mut TickReport) -> Result<(), StoreError> {
        let me = self.view.node_id().to_string();
        self.leases.heartbeat(&me, self.view.address())?;
        let live = self.leases.live_nodes(NODE_TTL)?;
        let ids: Vec<&str> = live.iter().map(|n| n.node_id.as_str()).collect();
        let wanted: BTreeSet<u16> = rendezvous::wanted(&me, &ids).into_iter().collect();
        let held = self.view.held();

        // Stop serving, then release, what another node should have.
        let (keep, give): (Vec<Fence>, Vec<Fence>) =
            held.iter().partition(|f| wanted.contains(&f.shard));
        if !give.is_empty() {
            let shards: Vec<u16> = give.iter().map(|f| f.shard).collect();
            self.view.stop(&shards);
            self.events.lost(&shards);
            for f in &give {
                if let Err(e) = self.leases.release(&me, *f) {
                    // It expires by itself.
                    tracing::warn!(shard = f.shard, error = %e, "releasing a lease");
                }
            }
        }

        if !keep.is_empty() {
            let sent = self.time.now();
            let renewed = self.leases.renew(&me, &keep, LEASE_TTL)?;
            self.view.hold(&renewed, local_deadline(sent), false);
            let gone: Vec<u16> = keep
                .iter()
                .filter(|f| !renewed.contains(f))
                .map(|f| f.shard)
                .collect();
            self.view.stop(&gone);
            report.lost.extend(gone);
        }

        let holding: BTreeSet<u16> = keep.iter().map(|f| f.shard).collect();
        let mut got = Vec::new();
        let sent = self.time.now();
        let mut failed = None;
        for &shard in wanted.difference(&holding) {
            match self.leases.acquire(shard, &me, LEASE_TTL) {
                Ok(Some(token)) => got.push(Fence { shard, token }),
                Ok(None) => {}
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if !got.is_empty() {
            let shards: Vec<u16> = got.iter().map(|f| f.shard).collect();
            match self.events.acquired(&shards) {
                Ok(()) => {
                    self.view.hold(&got, local_deadline(sent), true);
                    self.events.serving(&shards);
                    report.acquired = shards;
                }
                Err(e) => {
                    for f in &got {
                        let _ = self.leases.release(&me, *f);
                    }
                    return Err(e);
                }
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let leases = self.leases.leases()?;
        self.view.refresh(live, leases);
        Ok(())
    }

    /// Runs the loop on its own thread (the `Leases` calls block), one tick
    /// every [`TICK`], for the life of the process.
    pub fn spawn(self: Arc<Self>) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new()
            .name("kobo-cluster".into())
            .spawn(move || loop {
                let started = std::time::Instant::now();
                let report = self.tick();
                if let Some(e) = &report.error {
                    tracing::warn!(error = %e, "cluster tick failed");
                }
                if !report.acquired.is_empty() || !report.lost.is_empty() {
                    tracing::info!(
                        acquired = report.acquired.len(),
                        lost = report.lost.len(),
                        owned = self.view.owned_count(),
                        "shard ownership changed"
                    );
                }
                std::thread::sleep(TICK.saturating_sub(started.elapsed()));
            })
    }
}
