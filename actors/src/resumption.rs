//! What a resumption is, for the resources that keep work a process may
//! die in the middle of (see `resume.rs`, the runtime's coordination):
//! whose work it takes ([`Merchants`]) and what it found
//! ([`Resumption`]: the rows and the messages still to send); and the queue
//! of shards a cluster node has taken over ([`Takeovers`]).

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use futures_util::future::LocalBoxFuture;
use parking_lot::Mutex;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use uuid::Uuid;

use kobo_storage::fence::shard_of;

use crate::env::Env;

/// Whose pending work a resumption takes: the merchants this node owns
/// (every merchant in a single process), optionally only those of some
/// shards (the ones a cluster node just took over).
#[derive(Clone)]
pub struct Merchants {
    env: Arc<Env>,
    shards: Option<Arc<BTreeSet<u16>>>,
}

impl Merchants {
    /// Every merchant this node owns.
    pub fn owned(env: &Arc<Env>) -> Self {
        Merchants {
            env: env.clone(),
            shards: None,
        }
    }

    /// The merchants of `shards` this node owns.
    pub fn in_shards(env: &Arc<Env>, shards: impl IntoIterator<Item = u16>) -> Self {
        Merchants {
            env: env.clone(),
            shards: Some(Arc::new(shards.into_iter().collect())),
        }
    }

    pub fn include(&self, merchant: &Uuid) -> bool {
        self.shards
            .as_ref()
            .is_none_or(|s| s.contains(&shard_of(merchant.as_bytes())))
            && self.env.owns(merchant)
    }
}

/// One resource's resumption: the rows found, and the messages to send.
pub struct Resumption {
    pub found: usize,
    pub(crate) work: LocalBoxFuture<'static, ()>,
}

impl Resumption {
    pub fn new(found: usize, work: impl Future<Output = ()> + 'static) -> Self {
        Resumption {
            found,
            work: Box::pin(work),
        }
    }
}

/// The shards a cluster node has started serving, queued for the
/// takeover task. The node loop's thread only queues (never blocks).
pub struct Takeovers {
    tx: UnboundedSender<Vec<u16>>,
    rx: Mutex<Option<UnboundedReceiver<Vec<u16>>>>,
}

impl Default for Takeovers {
    fn default() -> Self {
        let (tx, rx) = unbounded_channel();
        Takeovers {
            tx,
            rx: Mutex::new(Some(rx)),
        }
    }
}

impl Takeovers {
    /// `shards` are now served here: resume their merchants' work.
    pub fn serving(&self, shards: &[u16]) {
        // The receiver lives as long as the process once taken.
        let _ = self.tx.send(shards.to_vec());
    }

    /// The queue's receiving end (once).
    pub fn take(&self) -> Option<UnboundedReceiver<Vec<u16>>> {
        self.rx.lock().take()
    }
}

/// Reads the shards queued so far (waiting for the first), together.
pub async fn next_takeover(rx: &mut UnboundedReceiver<Vec<u16>>) -> Option<BTreeSet<u16>> {
    let mut shards: BTreeSet<u16> = rx.recv().await?.into_iter().collect();
    while let Ok(more) = rx.try_recv() {
        shards.extend(more);
    }
    Some(shards)
}
