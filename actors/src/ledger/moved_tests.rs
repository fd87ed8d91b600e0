//! A ledger whose merchant's shard leaves the node while its batch is in
//! flight (cluster mode): the caller is told to retry and the ledger's
//! memory goes back to what the store holds; the process carries on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kobo_storage::fence::Ownership;
use kobo_storage::Batch;
use uuid::Uuid;

use super::actor::PostEntry;
use super::{Bucket, EntrySpec, EntryType, LineSpec};
use crate::error::ErrorCode;
use crate::ids::Mode;
use crate::money::Currency;

/// Holds every shard, or none.
struct Switch(AtomicBool);

impl Ownership for Switch {
    fn token(&self, _shard: u16) -> Option<i64> {
        self.0.load(Ordering::SeqCst).then_some(1)
    }
}

fn post(merchant: Uuid, brand: Uuid, amount: i64) -> PostEntry {
    let mut with = Batch::new();
    with.owned_by(merchant.as_bytes());
    PostEntry {
        entry: EntrySpec {
            entry_type: EntryType::Correction,
            source: Uuid::new_v4(),
            description: "correction".into(),
            lines: vec![LineSpec {
                brand,
                currency: Currency::NGN,
                bucket: Bucket::Available,
                amount,
                gross: None,
                fee: None,
            }],
            allow_negative: true,
        },
        with,
        usage: None,
    }
}

#[test]
fn a_ledger_batch_refused_for_want_of_a_lease_answers_merchant_moving_and_memory_follows_the_store()
{
    actix::System::new().block_on(refused_then_posted());
}

async fn refused_then_posted() {
    let dir = tempfile::tempdir().unwrap();
    let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
    let held = Arc::new(Switch(AtomicBool::new(true)));
    kobo.writer.set_ownership(held.clone());
    let (merchant, brand) = (Uuid::new_v4(), Uuid::new_v4());
    let scope = (merchant, Mode::Test);

    kobo.ledgers
        .send(scope, post(merchant, brand, 100))
        .await
        .unwrap()
        .unwrap();
    held.0.store(false, Ordering::SeqCst);
    let refused = kobo
        .ledgers
        .send(scope, post(merchant, brand, 50))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::MerchantMoving);

    held.0.store(true, Ordering::SeqCst);
    let lines = kobo
        .ledgers
        .send(scope, post(merchant, brand, 7))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        lines.last().unwrap().balance_after,
        107,
        "the refused 50 never happened"
    );
}

/// Holds every shard under one lease token, until told to drop: the next
/// question is answered "not held" and the lease comes back at once under
/// a new token (another node held it in between, in a real cluster).
struct Flapping {
    token: std::sync::atomic::AtomicI64,
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

#[test]
fn memory_from_before_a_lease_lapsed_is_never_committed_under_the_next_lease() {
    actix::System::new().block_on(lapsed_then_retaken());
}

/// Two postings pipelined in the ledger's mailbox: the first is refused
/// (the shard's lease lapsed), and the lease is back, under a new token,
/// when the second is submitted, before the first's refusal reached the
/// actor. The second must not commit balances that count the refused one
/// (or anything else memory held from before the lapse).
async fn lapsed_then_retaken() {
    let dir = tempfile::tempdir().unwrap();
    let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
    let lease = Arc::new(Flapping {
        token: std::sync::atomic::AtomicI64::new(1),
        drop_next: AtomicBool::new(false),
    });
    kobo.writer.set_ownership(lease.clone());
    let (merchant, brand) = (Uuid::new_v4(), Uuid::new_v4());
    let scope = (merchant, Mode::Test);

    kobo.ledgers
        .send(scope, post(merchant, brand, 100))
        .await
        .unwrap()
        .unwrap();
    lease.drop_next.store(true, Ordering::SeqCst);
    let (refused, second) = futures_util::join!(
        kobo.ledgers.send(scope, post(merchant, brand, 50)),
        kobo.ledgers.send(scope, post(merchant, brand, 20)),
    );
    assert_eq!(
        refused.unwrap().unwrap_err().code,
        ErrorCode::MerchantMoving
    );
    let mut expected = 100;
    match second.unwrap() {
        Ok(lines) => {
            expected += 20;
            assert_eq!(lines.last().unwrap().balance_after, expected);
        }
        Err(e) => assert_eq!(e.code, ErrorCode::MerchantMoving),
    }
    let lines = kobo
        .ledgers
        .send(scope, post(merchant, brand, 7))
        .await
        .unwrap()
        .unwrap();
    expected += 7;
    assert_eq!(
        lines.last().unwrap().balance_after,
        expected,
        "the refused 50 never happened"
    );
    let stored = super::actor::load_balances(&kobo, merchant, Mode::Test).unwrap();
    assert_eq!(
        stored[&(brand, Currency::NGN, Bucket::Available)],
        expected,
        "the stored balance is the sum of the stored lines"
    );
}

#[test]
fn taking_shards_drops_what_every_actor_held_in_memory() {
    actix::System::new().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
        let (merchant, brand) = (Uuid::new_v4(), Uuid::new_v4());
        kobo.ledgers
            .send((merchant, Mode::Test), post(merchant, brand, 100))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(kobo.ledgers.snapshot().live, 1);
        // Memory read while another node could write the merchant (before
        // this node took its shard) is never used again.
        let shard = kobo_storage::fence::shard_of(merchant.as_bytes());
        crate::cluster::ShardEvents::acquired(&*kobo, &[shard]).unwrap();
        assert_eq!(kobo.ledgers.snapshot().live, 0);
    });
}
