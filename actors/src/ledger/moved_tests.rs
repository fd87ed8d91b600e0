//! A ledger whose merchant's shard leaves the node while its batch is in
//! flight (cluster mode): the caller is told to retry and the ledger's
//! memory goes back to what the store holds; the process carries on.
//! Memory read under one lease is never committed under another.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use kobo_storage::fence::Ownership;
use kobo_storage::Batch;
use uuid::Uuid;

use super::actor::{load_balances, PostEntry};
use super::{Bucket, EntrySpec, EntryType, LedgerLine, LineSpec};
use crate::error::{DomainResult, ErrorCode};
use crate::ids::Mode;
use crate::money::Currency;
use crate::runtime::Kobo;

/// Holds every shard, or none.
struct Switch(AtomicBool);

impl Ownership for Switch {
    fn token(&self, _shard: u16) -> Option<i64> {
        self.0.load(Ordering::SeqCst).then_some(1)
    }
}

/// Holds every shard under one lease token, until told to drop: the next
/// question is answered "not held" and the lease comes back at once under
/// a new token (another node held it in between, in a real cluster).
struct Flapping {
    token: AtomicI64,
    drop_next: AtomicBool,
}

impl Ownership for Flapping {
    fn token(&self, _shard: u16) -> Option<i64> {
        if self.drop_next.swap(false, Ordering::SeqCst) {
            self.token.fetch_add(1, Ordering::SeqCst);
            return None;
        }
        Some(self.token.load(Ordering::SeqCst))
    }
}

/// One merchant's test-mode ledger on a fresh runtime, under `ownership`
/// (none: a single process).
struct Ledger {
    _dir: tempfile::TempDir,
    kobo: Arc<Kobo>,
    merchant: Uuid,
    brand: Uuid,
}

impl Ledger {
    fn new(ownership: Option<Arc<dyn Ownership>>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
        if let Some(o) = ownership {
            kobo.writer.set_ownership(o);
        }
        Ledger {
            _dir: dir,
            kobo,
            merchant: Uuid::new_v4(),
            brand: Uuid::new_v4(),
        }
    }

    /// Posts a correction of `amount` to the available balance.
    async fn post(&self, amount: i64) -> DomainResult<Vec<LedgerLine>> {
        let mut with = Batch::new();
        with.owned_by(self.merchant.as_bytes());
        let entry = PostEntry {
            entry: EntrySpec {
                entry_type: EntryType::Correction,
                source: Uuid::new_v4(),
                description: "correction".into(),
                lines: vec![LineSpec {
                    brand: self.brand,
                    currency: Currency::NGN,
                    bucket: Bucket::Available,
                    amount,
                    gross: None,
                    fee: None,
                }],
                allow_negative: true,
            },
            with: crate::registry::Once::new(with),
            usage: None,
        };
        self.kobo
            .ledgers
            .send((self.merchant, Mode::Test), entry)
            .await
            .unwrap()
    }

    /// The balance after the last line of a posting that succeeded.
    async fn posted(&self, amount: i64) -> i64 {
        let lines = self.post(amount).await.unwrap();
        lines.last().unwrap().balance_after
    }

    /// The available balance as the store holds it.
    fn stored(&self) -> i64 {
        let stored = load_balances(&self.kobo, self.merchant, Mode::Test).unwrap();
        stored[&(self.brand, Currency::NGN, Bucket::Available)]
    }
}

#[test]
fn a_ledger_batch_refused_for_want_of_a_lease_answers_merchant_moving_and_memory_follows_the_store()
{
    actix::System::new().block_on(async {
        let held = Arc::new(Switch(AtomicBool::new(true)));
        let ledger = Ledger::new(Some(held.clone()));
        ledger.posted(100).await;
        held.0.store(false, Ordering::SeqCst);
        let refused = ledger.post(50).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::MerchantMoving);

        held.0.store(true, Ordering::SeqCst);
        assert_eq!(ledger.posted(7).await, 107, "the refused 50 never happened");
    });
}

/// Two postings pipelined in the ledger's mailbox: the first is refused
/// (the shard's lease lapsed), and the lease is back, under a new token,
/// when the second is submitted, before the first's refusal reached the
/// actor. The second must not commit balances that count the refused one
/// (or anything else memory held from before the lapse).
#[test]
fn memory_from_before_a_lease_lapsed_is_never_committed_under_the_next_lease() {
    actix::System::new().block_on(async {
        let lease = Arc::new(Flapping {
            token: AtomicI64::new(1),
            drop_next: AtomicBool::new(false),
        });
        let ledger = Ledger::new(Some(lease.clone()));
        ledger.posted(100).await;
        lease.drop_next.store(true, Ordering::SeqCst);
        let (refused, second) = futures_util::join!(ledger.post(50), ledger.post(20));
        assert_eq!(refused.unwrap_err().code, ErrorCode::MerchantMoving);
        let mut expected = 100;
        match second {
            Ok(lines) => {
                expected += 20;
                assert_eq!(lines.last().unwrap().balance_after, expected);
            }
            Err(e) => assert_eq!(e.code, ErrorCode::MerchantMoving),
        }
        expected += 7;
        assert_eq!(
            ledger.posted(7).await,
            expected,
            "the refused 50 never happened"
        );
        assert_eq!(
            ledger.stored(),
            expected,
            "the stored balance is the sum of the stored lines"
        );
    });
}

#[test]
fn taking_shards_drops_what_every_actor_held_in_memory() {
    actix::System::new().block_on(async {
        let ledger = Ledger::new(None);
        ledger.posted(100).await;
        let kobo = &ledger.kobo;
        assert_eq!(kobo.ledgers.snapshot().live, 1);
        // Memory read while another node could write the merchant (before
        // this node took its shard) is never used again.
        let shard = kobo_storage::fence::shard_of(ledger.merchant.as_bytes());
        crate::cluster::ShardEvents::acquired(&**kobo, &[shard]).unwrap();
        assert_eq!(kobo.ledgers.snapshot().live, 0);
    });
}
