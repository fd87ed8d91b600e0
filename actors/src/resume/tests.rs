//! Resumptions on a cluster node (in-memory leases, manual time): taking a
//! shard over resumes the work its merchants' previous owner left pending
//! (a sandbox bank notification, a crypto payout unconfirmed, a refund
//! awaiting its provider, a payment link's outbox row), and no other
//! shard's; the outbox check passes over another node's merchants and goes
//! on. And a single process resumes every merchant's.

use std::collections::BTreeSet;
use std::future::Future;

use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use serde_json::Map;
use tokio::sync::mpsc::UnboundedReceiver;
use uuid::Uuid;

use kobo_storage::fence::{shard_of, Ownership, SHARDS};
use kobo_storage::{Batch, Table};

use super::{next_takeover, resume, Merchants};
use crate::audit::Audit;
use crate::cluster::rendezvous;
use crate::cluster::timing::TICK;
use crate::cluster::Node;
use crate::ids::Mode;
use crate::money::Currency;
use crate::payment_intent::link::outbox_key;
use crate::payment_link::PaymentLink;
use crate::refund::{Refund, RefundStatus};
use crate::runtime::two_nodes;
use crate::runtime::Kobo;
use crate::usdt::{CryptoPayout, CryptoPayoutStatus, Network};
use crate::virtual_account::bank::{transfer_key, ReceivedTransfer};
use crate::virtual_account::nuban::nuban;
use crate::virtual_account::{AccountStatus, VirtualAccount};

const NODES: [&str; 2] = ["a", "b"];

fn run(test: impl Future<Output = ()>) {
    actix::System::new().block_on(test);
}

fn now(kobo: &Kobo) -> DateTime<Utc> {
    kobo.clock.now()
}

/// Two merchants: one whose shard rendezvous gives node `a`, one node `b`.
async fn merchants(kobo: &Kobo) -> (Uuid, Uuid) {
    let (mut of_a, mut of_b) = (None, None);
    while of_a.is_none() || of_b.is_none() {
        let m = crate::admin::create_merchant(
            &kobo.env,
            "Ada Stores".into(),
            Default::default(),
            &Audit::command("test"),
        )
        .await
        .unwrap()
        .merchant
        .id;
        match rendezvous::owner(shard_of(m.as_bytes()), NODES) {
            Some("a") => of_a = of_a.or(Some(m)),
            _ => of_b = of_b.or(Some(m)),
        }
    }
    (of_a.unwrap(), of_b.unwrap())
}

/// What a merchant's previous owner left pending, by key.
struct Pending {
    merchant: Uuid,
    link_row: Vec<u8>,
    account: Uuid,
    notification: Vec<u8>,
    payout: Uuid,
}

/// Leaves one of each kind of pending work for `merchant` (its payment
/// link's id starting with `first`, to order the outbox).
async fn leave_pending(kobo: &Kobo, merchant: Uuid, first: u8) -> Pending {
    let at = now(kobo);
    let brand = crate::admin::load_merchant(&kobo.env, merchant)
        .unwrap()
        .unwrap()
        .default_brand_test;
    let mut link_id = *Uuid::new_v4().as_bytes();
    link_id[0] = first;
    let link = PaymentLink {
        id: Uuid::from_bytes(link_id),
        merchant,
        seq: kobo.seq.next(),
        brand,
        slug: format!("rice-{first}"),
        created_at: at,
        updated_at: at,
        ..crate::payment_link::tests::link(crate::payment_link::tests::fixed(50_000))
    };
    let link_row = outbox_key(link.id, Uuid::new_v4());
    let account = VirtualAccount {
        id: Uuid::new_v4(),
        merchant,
        mode: Mode::Test,
        seq: kobo.seq.next(),
        customer: Uuid::new_v4(),
        brand,
        serial: 100_000_000 + u64::from(first),
        account_number: nuban("035", 100_000_000 + u64::from(first)),
        account_name: "ADA STORES/ADA".into(),
        bank_code: "035".into(),
        bank_name: "Wema Bank".into(),
        status: AccountStatus::Active,
        failure_reason: None,
        metadata: Map::new(),
        created_at: at,
        updated_at: at,
        activated_at: Some(at),
        deactivated_at: None,
        check_due: None,
        version: 1,
    };
    let payout = CryptoPayout {
        id: Uuid::new_v4(),
        merchant,
        mode: Mode::Test,
        seq: kobo.seq.next(),
        brand,
        wallet: Uuid::new_v4(),
        network: Network::Trc20,
        address: format!("T{}", "a".repeat(33)),
        usd_amount: 10_000,
        fee: 100,
        vat: 8,
        usdt_amount: 9_892,
        status: CryptoPayoutStatus::Queued,
        failure_code: None,
        automatic: false,
        transaction_hash: None,
        next_check_at: None,
        created_at: at,
        updated_at: at,
        paid_at: None,
        version: 1,
    };
    let refund = Refund {
        id: Uuid::new_v4(),
        merchant,
        mode: Mode::Test,
        seq: kobo.seq.next(),
        payment_intent: Uuid::new_v4(),
        brand,
        // The sandbox leaves a refund of ...17 pending: asked, never answered.
        amount: 1_017,
        currency: Currency::NGN,
        status: RefundStatus::Pending,
        reason: None,
        failure_reason: None,
        metadata: Map::new(),
        created_at: at,
        updated_at: at,
    };
    let mut b = Batch::new();
    b.put(Table::PaymentLinks, link.id.as_bytes().to_vec(), &link)
        .put_raw(Table::PaymentLinkOutbox, link_row.clone(), Vec::new())
        .put(
            Table::VirtualAccounts,
            account.id.as_bytes().to_vec(),
            &account,
        )
        .put(Table::CryptoPayouts, payout.id.as_bytes().to_vec(), &payout)
        .put_raw(
            Table::CryptoPayoutsOpen,
            payout.id.as_bytes().to_vec(),
            Vec::new(),
        )
        .put(Table::Refunds, refund.id.as_bytes().to_vec(), &refund)
        .put_raw(
            Table::RefundsAwaiting,
            refund.id.as_bytes().to_vec(),
            Vec::new(),
        );
    kobo.writer.commit(b).await.unwrap();
    // The bank took a transfer; kobo died before recording it.
    let session_id = format!("1000{first:03}");
    kobo.virtual_accounts
        .deps()
        .banks
        .test
        .receive(
            account.id,
            ReceivedTransfer {
                session_id: session_id.clone(),
                amount: 250_000,
                sender_name: Some("Ngozi".into()),
                sender_account_number: Some("0123456789".into()),
                received_at: at,
            },
        )
        .await
        .unwrap();
    Pending {
        merchant,
        link_row,
        account: account.id,
        notification: transfer_key(account.id, &session_id),
        payout: payout.id,
    }
}

fn present(kobo: &Kobo, table: Table, key: &[u8]) -> bool {
    kobo.store
        .read()
        .unwrap()
        .get(table, key)
        .unwrap()
        .is_some()
}

fn payout_status(kobo: &Kobo, id: Uuid) -> CryptoPayoutStatus {
    crate::usdt::service::load_payout(&kobo.env, id)
        .unwrap()
        .unwrap()
        .status
}

/// Whether `p`'s work was done: the notification recorded (a credit row,
/// the inbox row gone), the payout submitted, the outbox row checked.
fn resumed(kobo: &Kobo, p: &Pending) -> bool {
    let recorded = present(kobo, Table::VirtualAccountCredits, &p.notification);
    let inbox = present(kobo, Table::SandboxAccountInbox, &p.notification);
    let outbox = present(kobo, Table::PaymentLinkOutbox, &p.link_row);
    let submitted = payout_status(kobo, p.payout) == CryptoPayoutStatus::Processing;
    assert_eq!(recorded, !inbox, "account {}", p.account);
    assert_eq!(recorded, submitted, "merchant {}", p.merchant);
    assert_eq!(recorded, !outbox, "merchant {}", p.merchant);
    recorded
}

/// The shards announced served so far (announced during the ticks).
fn taken_over(rx: &mut UnboundedReceiver<Vec<u16>>) -> BTreeSet<u16> {
    next_takeover(rx)
        .now_or_never()
        .expect("shards announced")
        .expect("the queue is open")
}

fn held(node: &Node) -> BTreeSet<u16> {
    (0..SHARDS)
        .filter(|&s| node.view.token(s).is_some())
        .collect()
}

#[test]
fn a_node_taking_shards_over_resumes_their_merchants_pending_work_and_no_other_shards() {
    run(async {
        let dir = tempfile::tempdir().unwrap();
        let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
        let (of_a, of_b) = merchants(&kobo).await;
        let mine = leave_pending(&kobo, of_a, 0xf0).await;
        let theirs = leave_pending(&kobo, of_b, 0x01).await;
        let mut takeovers = kobo.takeovers.take().unwrap();

        // a's first share: announced once held, and resumed.
        let c = two_nodes(&kobo);
        let share = held(&c.a);
        assert!(share.contains(&shard_of(of_a.as_bytes())));
        assert!(!share.contains(&shard_of(of_b.as_bytes())));
        let shards = taken_over(&mut takeovers);
        assert_eq!(shards, share);
        let work = resume(&kobo, &Merchants::in_shards(&kobo.env, shards)).unwrap();
        let counts = |w: &super::Resumed| (w.notifications, w.crypto_payouts, w.refunds, w.links);
        assert_eq!(counts(&work), (1, 1, 1, 1));
        work.finish().await;
        assert!(resumed(&kobo, &mine));
        assert!(!resumed(&kobo, &theirs), "b's merchant is left to b");

        // b dies: a takes b's shards over and resumes them, and only them
        // (a's refund, still awaiting its provider, is not asked again).
        let b_had: BTreeSet<u16> = (0..SHARDS).filter(|s| !share.contains(s)).collect();
        assert_eq!(held(&c.b), b_had);
        for _ in 0..10 {
            c.time.advance(TICK);
            c.a.tick();
        }
        assert_eq!(held(&c.a).len(), SHARDS as usize);
        let shards = taken_over(&mut takeovers);
        assert_eq!(shards, b_had);
        let work = resume(&kobo, &Merchants::in_shards(&kobo.env, shards)).unwrap();
        assert_eq!(counts(&work), (1, 1, 1, 1));
        work.finish().await;
        assert!(resumed(&kobo, &theirs));
        assert!(takeovers.try_recv().is_err(), "nothing else taken over");
    });
}

#[test]
fn the_outbox_check_passes_over_another_nodes_merchants_and_goes_on() {
    run(async {
        let dir = tempfile::tempdir().unwrap();
        let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
        let (of_a, of_b) = merchants(&kobo).await;
        // b's link comes first in the outbox.
        let theirs = leave_pending(&kobo, of_b, 0x01).await;
        let mine = leave_pending(&kobo, of_a, 0xf0).await;
        let _c = two_nodes(&kobo);
        let links = crate::payment_link::actor::resume_outbox(
            &kobo.payment_links,
            &Merchants::owned(&kobo.env),
        )
        .unwrap();
        assert_eq!(links.found, 1);
        links.work.await;
        assert!(!present(&kobo, Table::PaymentLinkOutbox, &mine.link_row));
        assert!(present(&kobo, Table::PaymentLinkOutbox, &theirs.link_row));
    });
}

#[test]
fn a_single_process_resumes_every_merchants_pending_work() {
    run(async {
        let dir = tempfile::tempdir().unwrap();
        let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
        let (one, two) = merchants(&kobo).await;
        let pending = [
            leave_pending(&kobo, one, 0x01).await,
            leave_pending(&kobo, two, 0xf0).await,
        ];
        let work = resume(&kobo, &Merchants::owned(&kobo.env)).unwrap();
        assert_eq!(
            (
                work.notifications,
                work.crypto_payouts,
                work.refunds,
                work.links
            ),
            (2, 2, 2, 2)
        );
        work.finish().await;
        assert!(pending.iter().all(|p| resumed(&kobo, p)));
    });
}
