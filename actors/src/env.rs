//! The environment every resource runs in: the store, the group-commit
//! writer, the clock, the global sequence, the calendar and configuration.
//! A core leaf: it knows no resource and no actor.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kobo_storage::{writer::u64_from, writer::META_SEQ_HIGH_WATER, Store, Table, Writer};

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

/// One increasing sequence for object order and ledger line ids. Its high
/// water mark is persisted by the writer with every batch that uses it.
pub struct Sequence(AtomicU64);

impl Sequence {
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

pub struct Env {
    pub calendar: Calendar,
    pub store: Store,
    pub writer: Writer,
    pub clock: Clock,
    pub seq: Sequence,
    pub config: Config,
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
            seq: Sequence(AtomicU64::new(high_water)),
            config,
        })
    }
}
