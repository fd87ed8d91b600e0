//! Membership of a kobo cluster (issue 21, cluster mode on PostgreSQL):
//! which node owns which merchant shard, kept by leases in the shared
//! database ([`kobo_storage::fence::Leases`]).
//!
//! - [`timing`]: the tick, the TTLs and the local safety margin, in one place.
//! - [`rendezvous`]: which live node should own each shard.
//! - [`view`]: the node's shared ownership view: the writer's
//!   [`kobo_storage::fence::Ownership`], and "who owns merchant X" for
//!   routing, timers and webhooks.
//! - [`node`]: the node loop (heartbeat, acquire, release, renew).
//! - [`time`]: the loop's monotonic time source (manual in tests).

pub mod node;
pub mod rendezvous;
pub mod time;
pub mod timing;
pub mod view;

#[cfg(test)]
mod memory;
#[cfg(test)]
mod tests;

pub use node::{Node, ShardEvents, TickReport};
pub use view::{ClusterView, Owner};
