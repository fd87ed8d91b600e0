//! Ownership of merchants' rows across kobo nodes (issue 21): shards,
//! fencing tokens, and the hook through which the writer learns them.
//!
//! Every merchant belongs to one of [`SHARDS`] shards ([`shard_of`]). A
//! batch that writes a merchant's rows says so ([`crate::Batch::owned_by`]).
//! When the writer has an [`Ownership`] (cluster mode on PostgreSQL), it
//! stamps each such batch with the [`Fence`] of the lease this node holds
//! on the shard, or refuses it on the spot with
//! [`crate::CommitError::NotOwner`] when the node holds none. The
//! PostgreSQL group commit then refuses, alone, every batch whose token is
//! no longer the lease's current one, in the same transaction that would
//! commit it: a paused or partitioned old owner cannot write after a new
//! owner took the shard over. A single process (redb, or PostgreSQL
//! without `--cluster`) has no `Ownership`, and its batches carry no fence.

/// How many shards merchants are spread over. Fixed forever: a merchant's
/// shard is part of every lease row.
pub const SHARDS: u16 = 256;

/// The shard of a merchant, from its 16-byte id. The tail of a kobo id is
/// random (UUIDv4 and UUIDv7 alike), so shards fill evenly.
pub fn shard_of(owner: &[u8; 16]) -> u16 {
    u16::from_be_bytes([owner[14], owner[15]]) % SHARDS
}

/// A lease's fencing token for one shard, as the committing node holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    pub shard: u16,
    pub token: i64,
}

/// What this node holds: the token of its lease on a shard, `None` when
/// another node (or nobody) owns it.
pub trait Ownership: Send + Sync + 'static {
    fn token(&self, shard: u16) -> Option<i64>;
}

/// An ownership holding every shard with token 1: a single process that
/// checks, as a cluster node would, that every batch writing a merchant's
/// rows names it (the black-box suite runs under it with
/// `KOBO_TEST_OWN_ALL_SHARDS=1`, debug builds only).
pub struct OwnsEveryShard;

impl Ownership for OwnsEveryShard {
    fn token(&self, _shard: u16) -> Option<i64> {
        Some(1)
    }
}

/// A registered kobo node, as the database last heard from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    pub node_id: String,
    /// Where other nodes reach it (`http://host:port`, from `--advertise`).
    pub address: String,
    /// Time since its last heartbeat, by the database's clock.
    pub heartbeat_age: std::time::Duration,
}

/// One shard's lease row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    pub shard: u16,
    /// The holder; `None` when released or never taken.
    pub node_id: Option<String>,
    /// The fencing token: raised every time the lease changes holder.
    pub token: i64,
    /// Time left on the lease by the database's clock (zero once expired).
    pub remaining: std::time::Duration,
}

/// The cluster's membership and leases, kept in the shared database
/// (PostgreSQL: `storage::pg`), always judged by the database's clock so
/// that nodes' clocks never matter.
pub trait Leases: Send + Sync + 'static {
    /// Registers `node_id` (or refreshes its address) and records a
    /// heartbeat now.
    fn heartbeat(&self, node_id: &str, address: &str) -> Result<(), crate::StoreError>;
    /// Nodes heard from within `ttl`, ordered by id.
    fn live_nodes(&self, ttl: std::time::Duration) -> Result<Vec<NodeRow>, crate::StoreError>;
    /// Takes the lease on `shard` for `ttl` when it is free, expired or
    /// already `node_id`'s. Returns its token: unchanged when `node_id`
    /// already held it, raised (above every token the shard ever had) when
    /// the holder changes. `None`: another node holds an unexpired lease.
    fn acquire(
        &self,
        shard: u16,
        node_id: &str,
        ttl: std::time::Duration,
    ) -> Result<Option<i64>, crate::StoreError>;
    /// Extends, by `ttl` from now, each lease in `held` that `node_id`
    /// still holds with that token; returns those it still holds.
    fn renew(
        &self,
        node_id: &str,
        held: &[Fence],
        ttl: std::time::Duration,
    ) -> Result<Vec<Fence>, crate::StoreError>;
    /// Gives a lease up (when `fence` is still current), so another node
    /// can take it at once instead of waiting for it to expire.
    fn release(&self, node_id: &str, fence: Fence) -> Result<(), crate::StoreError>;
    /// Every shard's lease row, by shard.
    fn leases(&self) -> Result<Vec<LeaseRow>, crate::StoreError>;
    /// Reserves `n` sequence numbers above every number any node reserved
    /// or any batch noted before ([`crate::Batch::note_seq`]).
    fn reserve_sequence(&self, n: u64) -> Result<std::ops::Range<u64>, crate::StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_come_from_the_random_tail_and_stay_in_range() {
        let mut id = [0u8; 16];
        id[14] = 0x01;
        id[15] = 0x02;
        assert_eq!(shard_of(&id), 0x0102 % SHARDS);
        id[15] = 0xff;
        id[14] = 0xff;
        assert!(shard_of(&id) < SHARDS);
        let mut seen = std::collections::HashSet::new();
        for i in 0..4096u32 {
            let mut id = [0u8; 16];
            id[12..16].copy_from_slice(&i.wrapping_mul(2_654_435_761).to_be_bytes());
            seen.insert(shard_of(&id));
        }
        assert_eq!(seen.len(), SHARDS as usize);
    }
}
