//! The shared context every actor and handler reaches: store, writer, clock,
//! sequences, registries, providers and configuration.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kobo_storage::{writer::u64_from, writer::META_SEQ_HIGH_WATER, Store, Table, Writer};

use crate::admin::MerchantActor;
use crate::calendar::Calendar;
use crate::clock::Clock;
use crate::error::DomainResult;
use crate::ledger::actor::LedgerActor;
use crate::payment_intent::actor::PaymentIntentActor;
use crate::provider::Providers;
use crate::registry::{KindSnapshot, Registry};

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

pub struct Kobo {
    pub calendar: Calendar,
    pub store: Store,
    pub writer: Writer,
    pub clock: Clock,
    pub seq: Sequence,
    pub config: Config,
    pub providers: Providers,
    pub payment_intents: Registry<PaymentIntentActor>,
    pub ledgers: Registry<LedgerActor>,
    pub merchants: Registry<MerchantActor>,
    pub payouts: Registry<crate::payout::actor::PayoutActor>,
    pub aftercare: Registry<crate::refund::actor::AftercareActor>,
    /// Name enquiry and payout rails, per mode.
    pub rails: crate::payout::rail::Rails,
    /// Webhook supervisor mailbox and the event stream.
    pub webhooks: crate::webhook::Hub,
    pub crypto_payouts: Registry<crate::usdt::actor::CryptoPayoutActor>,
    pub usdt_wallets: Registry<crate::usdt::actor::UsdtWalletsActor>,
    /// USDT partners, per mode, and their confirmations.
    pub usdt: crate::usdt::partner::UsdtHub,
    /// Orders rate publishes against conversions (see [`crate::fx`]).
    pub fx_gate: crate::fx::RateGate,
    /// Direct-debit mandates, one actor each.
    pub mandates: Registry<crate::mandate::actor::MandateActor>,
    /// Direct-debit providers, per mode.
    pub mandate_providers: crate::mandate::provider::MandateProviders,
}

impl Kobo {
    pub fn new(
        store: Store,
        writer: Writer,
        clock: Clock,
        config: Config,
    ) -> DomainResult<Arc<Kobo>> {
        let high_water = store
            .read()?
            .get(Table::Meta, META_SEQ_HIGH_WATER)?
            .map(|v| u64_from(&v))
            .unwrap_or(0);
        let capacity = config.mailbox_capacity;
        let providers = Providers::sandbox(config.sandbox_card_latency);
        let (store_for_rail, writer_for_rail) = (store.clone(), writer.clone());
        let usdt = crate::usdt::partner::UsdtHub::sandbox(store.clone(), writer.clone());
        let mandate_providers =
            crate::mandate::provider::MandateProviders::sandbox(store.clone(), writer.clone());
        Ok(Arc::new(Kobo {
            calendar: config.calendar.clone(),
            store,
            writer,
            clock,
            seq: Sequence(AtomicU64::new(high_water)),
            config,
            providers,
            payment_intents: Registry::new(capacity),
            ledgers: Registry::new(capacity),
            merchants: Registry::new(capacity),
            payouts: Registry::new(capacity),
            aftercare: Registry::new(capacity),
            rails: crate::payout::rail::Rails {
                test: Box::new(crate::payout::rail::SandboxRail {
                    store: store_for_rail,
                    writer: writer_for_rail,
                }),
                live: Box::new(crate::payout::rail::UnconfiguredRail),
            },
            webhooks: crate::webhook::Hub::new(),
            crypto_payouts: Registry::new(capacity),
            usdt_wallets: Registry::new(capacity),
            usdt,
            fx_gate: crate::fx::RateGate::default(),
            mandates: Registry::new(capacity),
            mandate_providers,
        }))
    }

    pub fn actor_health(&self) -> Vec<KindSnapshot> {
        vec![
            self.payment_intents.snapshot(),
            self.ledgers.snapshot(),
            self.merchants.snapshot(),
            self.payouts.snapshot(),
            self.aftercare.snapshot(),
            self.crypto_payouts.snapshot(),
            self.usdt_wallets.snapshot(),
            self.mandates.snapshot(),
        ]
    }
}

/// A runtime over a fresh store in `dir`, on a manual clock, for unit tests.
#[cfg(test)]
pub fn for_tests(dir: &std::path::Path, now: &str) -> Arc<Kobo> {
    let store = Store::open(dir).expect("store");
    let writer = store.start_writer(kobo_storage::WriterMetrics::new());
    Kobo::new(
        store,
        writer,
        Clock::manual(now.parse().expect("RFC 3339")),
        Config {
            base_url: "http://localhost".into(),
            actor_idle: Duration::from_secs(30),
            mailbox_capacity: 16,
            calendar: Calendar::nigeria(),
            sandbox_card_latency: Duration::ZERO,
        },
    )
    .expect("runtime")
}
