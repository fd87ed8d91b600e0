//! The cluster's timing, in one place. Failover bound: a dead node's
//! shards are taken over within `LEASE_TTL + TICK` (6 s) of its last
//! renewal.

use std::time::Duration;

/// How often a node heartbeats, renews its leases and rebalances.
pub const TICK: Duration = Duration::from_secs(1);
/// A node not heard from this long is no longer live.
pub const NODE_TTL: Duration = Duration::from_secs(5);
/// How long a lease lasts from its last acquisition or renewal (by the
/// database's clock).
pub const LEASE_TTL: Duration = Duration::from_secs(5);
/// A node treats its own lease as lost this long before the database
/// would: at (time it sent the renewal + `LEASE_TTL` - `SAFETY_MARGIN`),
/// so it stops writing before another node can take the shard.
pub const SAFETY_MARGIN: Duration = Duration::from_secs(1);
/// How long a node's lease view stays fresh after its last good tick
/// (`/readyz`): past it, every lease the node held has lapsed locally.
pub const VIEW_FRESH: Duration = Duration::from_secs(4);
/// Sequence numbers a node reserves at a time in cluster mode.
pub const SEQUENCE_BLOCK: u64 = 65_536;

/// The local deadline of a lease whose acquisition or renewal was sent at
/// `sent`.
pub fn local_deadline(sent: std::time::Instant) -> std::time::Instant {
    sent + LEASE_TTL - SAFETY_MARGIN
}
