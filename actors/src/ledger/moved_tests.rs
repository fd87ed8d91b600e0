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
