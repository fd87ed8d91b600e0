//! Cluster mode in the binary (`kobo serve --cluster`, issue 21): starting
//! this node's membership loop over the store's leases, and routing each
//! request to the node owning its merchant ([`forward`]). The membership
//! itself (leases, rendezvous, the ownership view) is
//! `kobo_actors::cluster`.

pub mod forward;
pub mod pages;

use std::sync::Arc;

use anyhow::{Context, Result};

use kobo_actors::cluster::time::SystemTime;
use kobo_actors::cluster::{ClusterView, Node};
use kobo_actors::Kobo;
use kobo_storage::fence::Leases;
use kobo_storage::{Store, Writer};

/// The store's shared leases, `None` when the store has none (redb, or
/// PostgreSQL opened for one process).
pub fn store_leases(store: &Store) -> Option<Arc<dyn Leases>> {
    store.leases()
}

/// Joins the cluster as `node_id`, reachable at `advertise`: the sequence
/// switches to reserved blocks, the writer fences every merchant's batch
/// with this node's leases, and the membership loop runs (its first tick
/// here, so the node owns its share before it serves).
pub fn start(
    kobo: &Arc<Kobo>,
    writer: &Writer,
    leases: Arc<dyn Leases>,
    node_id: &str,
    advertise: &str,
) -> Result<Arc<ClusterView>> {
    let time = Arc::new(SystemTime);
    let view = Arc::new(ClusterView::new(node_id, advertise, time.clone()));
    if kobo.env.cluster.set(view.clone()).is_err() {
        anyhow::bail!("the cluster view is set once");
    }
    kobo.seq
        .use_blocks(leases.clone())
        .context("reserving the first block of sequence numbers")?;
    writer.set_ownership(view.clone());
    let node = Arc::new(Node::new(view.clone(), leases, time, kobo.clone()));
    let first = node.tick();
    if let Some(e) = first.error {
        anyhow::bail!("joining the cluster: {e}");
    }
    tracing::info!(
        node = node_id,
        address = advertise,
        owned = view.owned_count(),
        "joined the cluster"
    );
    node.spawn().context("starting the cluster loop")?;
    Ok(view)
}
