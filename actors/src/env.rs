//! The environment every resource runs in: the store, the group-commit
//! writer, the clock, the global sequence, the calendar and configuration.
//! A core leaf: it knows no resource and no actor.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use uuid::Uuid;

use kobo_storage::fence::Leases;
use kobo_storage::{
    writer::u64_from, writer::META_SEQ_HIGH_WATER, Store, StoreError, Table, Writer,
};

use crate::cluster::timing::SEQUENCE_BLOCK;
use crate::cluster::ClusterView;

use crate::calendar::Calendar;
use crate::clock::Clock;
use crate::error::DomainResult;

#[derive(Clone, Debug)]
pub struct Config {
    /// Prefix of checkout and other links.
    pub base_url: String,
    /// An actor idle this long is passivated.
    pub actor_idle: Duration,
    /// Queued messages per actor before senders get 503.
    pub mailbox_capacity: usize,
    /// Business days and public holidays (settlement).
    pub calendar: Calendar,
    /// Added to every sandbox card call (rehearses a real processor's
    /// latency; 0 by default).
    pub sandbox_card_latency: Duration,
}

/// One increasing sequence for object order and ledger line ids. A single
/// process counts in memory from the high water mark the writer persists
/// with every batch that uses it. A cluster node ([`Sequence::use_blocks`])
/// takes blocks of [`SEQUENCE_BLOCK`] numbers reserved in the shared
/// database, and jumps to a fresh block whenever it acquires a shard
/// ([`Sequence::jump`]), so a merchant's numbers only grow across owners.
pub struct Sequence {
    local: AtomicU64,
    blocks: OnceLock<Blocks>,
}

struct Blocks {
    leases: Arc<dyn Leases>,
    current: Mutex<Range<u64>>,
}

impl Blocks {
    fn reserve(&self) -> Result<Range<u64>, StoreError> {
        self.leases.reserve_sequence(SEQUENCE_BLOCK)
    }
}

impl Sequence {
    fn starting_after(high_water: u64) -> Self {
        Sequence {
            local: AtomicU64::new(high_water),
            blocks: OnceLock::new(),
        }
    }

    pub fn next(&self) -> u64 {
        let Some(blocks) = self.blocks.get() else {
            return self.local.fetch_add(1, Ordering::Relaxed) + 1;
        };
        let mut current = blocks.current.lock();
        if current.is_empty() {
            // Once per block. Without a number nothing can be written: the
            // panic is answered as an internal error by the actor's guard.
            *current = blocks
                .reserve()
                .unwrap_or_else(|e| panic!("reserving a block of sequence numbers: {e}"));
        }
        current.next().expect("a fresh block is not empty")
    }

    /// Cluster mode: from now on numbers come from blocks reserved in
    /// `leases` (the first one now).
    pub fn use_blocks(&self, leases: Arc<dyn Leases>) -> Result<(), StoreError> {
        let first = leases.reserve_sequence(SEQUENCE_BLOCK)?;
        let blocks = Blocks {
            leases,
            current: Mutex::new(first),
        };
        if self.blocks.set(blocks).is_err() {
            panic!("the sequence's blocks are set once");
        }
        Ok(())
    }

    /// Cluster mode: continue from a freshly reserved block, above every
    /// number any node used so far (a shard was acquired). Single process:
    /// nothing to do.
    pub fn jump(&self) -> Result<(), StoreError> {
        if let Some(blocks) = self.blocks.get() {
            let fresh = blocks.reserve()?;
            *blocks.current.lock() = fresh;
        }
        Ok(())
    }
}

pub struct Env {
    pub calendar: Calendar,
    pub store: Store,
    pub writer: Writer,
    pub clock: Clock,
    pub seq: Sequence,
    pub config: Config,
    /// Cluster mode: this node's ownership view (set once at start).
    pub cluster: OnceLock<Arc<ClusterView>>,
}

impl Env {
    /// The environment over `store`, its sequence resumed from the high
    /// water mark the writer persisted.
    pub fn new(store: Store, writer: Writer, clock: Clock, config: Config) -> DomainResult<Env> {
        let high_water = store
            .read()?
            .get(Table::Meta, META_SEQ_HIGH_WATER)?
            .map(|v| u64_from(&v))
            .unwrap_or(0);
        Ok(Env {
            calendar: config.calendar.clone(),
            store,
            writer,
            clock,
            seq: Sequence::starting_after(high_water),
            config,
            cluster: OnceLock::new(),
        })
    }

    /// Whether this node runs `merchant`'s work (timers, webhooks): always
    /// in a single process; in a cluster, while it holds the merchant's
    /// shard.
    pub fn owns(&self, merchant: &Uuid) -> bool {
        self.cluster.get().is_none_or(|c| c.owns(merchant))
    }
}
