//! Resumptions: work a previous run left pending in the store, picked up
//! again. Four resources keep such rows (a crash, a restart or a dead
//! cluster node leaves them):
//! - the sandbox bank's transfer notifications not yet recorded
//!   ([`crate::virtual_account::actor::resume_notifications`]);
//! - crypto payouts the USDT partner has not confirmed
//!   ([`crate::usdt::service::resume_open`]);
//! - refunds awaiting their provider's confirmation
//!   ([`crate::refund::actor::resume_confirmations`]);
//! - payment links' outbox rows not yet checked
//!   ([`crate::payment_link::actor::resume_outbox`]).
//!
//! Each resumption lives in its resource's module, reads its rows once,
//! keeps those of the [`Merchants`] asked for and answers a
//! [`Resumption`](crate::resumption::Resumption)
//! (both in the core leaf `resumption.rs`): how many it found and the work
//! (messages to the actors) still to run.
//! [`resume`] runs the four over one filter. A single process resumes every
//! merchant once at start ([`at_start`]). A cluster node resumes the
//! merchants of the shards it takes over (at its first tick, and at every
//! later failover or rebalance): the node loop announces the shards once
//! its view holds them (`ShardEvents::serving`),
//! [`Takeovers`](crate::resumption::Takeovers) queues them
//! and a task on the actix runtime ([`start_takeovers`]) resumes those
//! shards' merchants this node still owns. A resumption that fails (the
//! shard left again: `merchant_moving`) is logged; its rows stay for the
//! next owner's takeover.

use std::sync::Arc;

use futures_util::future::{join_all, LocalBoxFuture};

use crate::error::DomainResult;
use crate::resumption::{next_takeover, Merchants};
use crate::runtime::Kobo;

/// What [`resume`] found, per resource, and the work to run.
pub struct Resumed {
    /// Sandbox bank notifications delivered to their accounts.
    pub notifications: usize,
    /// Crypto payouts the USDT partner is asked about again.
    pub crypto_payouts: usize,
    /// Refunds whose provider is asked again.
    pub refunds: usize,
    /// Payment links whose outbox rows are checked.
    pub links: usize,
    work: Vec<LocalBoxFuture<'static, ()>>,
}

impl Resumed {
    /// Runs the work to its end (each message answered or its failure
    /// logged).
    pub async fn finish(self) {
        join_all(self.work).await;
    }

    /// One line per resource with work found; `shards`: how many shards
    /// were taken over (none: a single process's start).
    fn log(&self, shards: Option<usize>) {
        let lines = [
            (
                self.notifications,
                "delivering transfer notifications left unrecorded",
            ),
            (
                self.crypto_payouts,
                "re-asking the USDT partner about unconfirmed payouts",
            ),
            (
                self.refunds,
                "asked again about refunds awaiting confirmation",
            ),
            (
                self.links,
                "checking payment links' outbox rows left unchecked",
            ),
        ];
        for (count, what) in lines.into_iter().filter(|(n, _)| *n > 0) {
            match shards {
                Some(shards) => tracing::info!(count, shards, "{what} (shards taken over)"),
                None => tracing::info!(count, "{what}"),
            }
        }
    }
}

/// Reads every resource's pending rows of `merchants`: the counts, and the
/// work to run.
pub fn resume(kobo: &Kobo, merchants: &Merchants) -> DomainResult<Resumed> {
    use crate::{payment_link, refund, usdt, virtual_account};
    let notifications =
        virtual_account::actor::resume_notifications(&kobo.virtual_accounts, merchants)?;
    let crypto_payouts = usdt::service::resume_open(&kobo.crypto_payouts, merchants)?;
    let refunds = refund::actor::resume_confirmations(kobo.aftercare.deps(), merchants)?;
    let links = payment_link::actor::resume_outbox(&kobo.payment_links, merchants)?;
    Ok(Resumed {
        notifications: notifications.found,
        crypto_payouts: crypto_payouts.found,
        refunds: refunds.found,
        links: links.found,
        work: vec![
            notifications.work,
            crypto_payouts.work,
            refunds.work,
            links.work,
        ],
    })
}

/// A single process at start: resumes every merchant's pending work in the
/// background (a read error stops the start).
pub fn at_start(kobo: &Kobo) -> DomainResult<()> {
    let resumed = resume(kobo, &Merchants::owned(&kobo.env))?;
    resumed.log(None);
    actix::spawn(resumed.finish());
    Ok(())
}

/// A cluster node: starts the task that resumes the merchants of every
/// shard taken over (those queued by the first tick included), one
/// takeover after another. Must run on the actix runtime.
pub fn start_takeovers(kobo: &Arc<Kobo>) {
    let Some(mut rx) = kobo.takeovers.take() else {
        tracing::error!("the takeover task is already running");
        return;
    };
    let kobo = kobo.clone();
    actix::spawn(async move {
        while let Some(shards) = next_takeover(&mut rx).await {
            match resume(
                &kobo,
                &Merchants::in_shards(&kobo.env, shards.iter().copied()),
            ) {
                Ok(resumed) => {
                    resumed.log(Some(shards.len()));
                    resumed.finish().await;
                }
                Err(e) => {
                    tracing::warn!(shards = shards.len(), error = %e, "reading the work pending in shards taken over")
                }
            }
        }
    });
}

#[cfg(test)]
mod tests;
