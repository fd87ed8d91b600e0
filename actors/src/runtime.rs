//! Assembly: builds the environment, then each resource's registry with
//! the handles its actors are given, bottom up (ledgers first; each
//! resource receives only the handles below it). `Kobo` is the assembled
//! system the HTTP layer and the timer supervisor hold; no resource
//! imports it.

use std::sync::Arc;
use std::time::Duration;

use kobo_storage::{Store, Writer};

use crate::admin::MerchantActor;
use crate::clock::Clock;
use crate::customer::deps::CustomerDeps;
use crate::customer::directory::Customers;
use crate::customer::identity::IdentityProviders;
use crate::direct_debit::MandateProviders;
use crate::env::Env;
use crate::error::DomainResult;
use crate::fx::{Fx, RateGate};
use crate::invoice::book::{InvoiceDeps, Invoices};
use crate::ledger::actor::Ledgers;
use crate::mandate::actor::MandateActor;
use crate::mandate::deps::MandateDeps;
use crate::payment_intent::actor::PaymentIntentActor;
use crate::payment_intent::deps::PaymentIntentDeps;
use crate::payment_intent::provider::Providers;
use crate::payment_link::actor::{PaymentLinkDeps, PaymentLinks};
use crate::payout::actor::{PayoutActor, PayoutDeps};
use crate::payout::rail::{Rails, SandboxRail, UnconfiguredRail};
use crate::plan::actor::Plans;
use crate::refund::actor::{AftercareActor, AftercareDeps};
use crate::registry::{KindSnapshot, Registry, VirtualActor};
use crate::settlement::Settlement;
use crate::subscription::actor::Subscriptions;
use crate::subscription::deps::SubscriptionDeps;
use crate::usdt::actor::{CryptoPayoutActor, UsdtDeps, UsdtWalletsActor};
use crate::usdt::partner::UsdtHub;
use crate::virtual_account::actor::VirtualAccounts;
use crate::virtual_account::bank::AccountBanks;
use crate::virtual_account::deps::VirtualAccountDeps;
use crate::virtual_account::nuban::Serials;
use crate::webhook::Hub;

pub use crate::env::{Config, Sequence};

/// The assembled system. Derefs to its [`Env`] (store, writer, clock,
/// sequence, calendar, configuration).
pub struct Kobo {
    pub env: Arc<Env>,
    pub payment_intents: Arc<Registry<PaymentIntentActor>>,
    pub ledgers: Ledgers,
    pub merchants: Arc<Registry<MerchantActor>>,
    pub payouts: Arc<Registry<PayoutActor>>,
    pub aftercare: Arc<Registry<AftercareActor>>,
    /// Name enquiry and payout rails, per mode.
    pub rails: Arc<Rails>,
    /// Webhook supervisor mailbox and the event stream.
    pub webhooks: Arc<Hub>,
    pub crypto_payouts: Arc<Registry<CryptoPayoutActor>>,
    pub usdt_wallets: Arc<Registry<UsdtWalletsActor>>,
    /// USDT partners, per mode, and their confirmations.
    pub usdt: Arc<UsdtHub>,
    /// Rates and conversions (the rate gate orders them; see [`crate::fx`]).
    pub fx: Arc<Fx>,
    /// Direct-debit mandates, one actor each.
    pub mandates: Arc<Registry<MandateActor>>,
    /// Direct-debit providers, per mode.
    pub mandate_providers: Arc<MandateProviders>,
    /// The daily settlement run's handles.
    pub settlement: Arc<Settlement>,
    /// Customer directories, one per merchant and mode.
    pub customers: Customers,
    /// Dedicated virtual accounts, one actor each.
    pub virtual_accounts: VirtualAccounts,
    /// Payment links, one actor each.
    pub payment_links: PaymentLinks,
    /// Invoice books, one per customer.
    pub invoices: Invoices,
    pub plans: Plans,
    pub subscriptions: Subscriptions,
    /// Shards taken over, queued for their merchants' resumption.
    pub takeovers: crate::resumption::Takeovers,
}

impl std::ops::Deref for Kobo {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}

impl Kobo {
    // Long on purpose: the assembly, bottom up, each registry with its handles; a flat list.
    pub fn new(
        store: Store,
        writer: Writer,
        clock: Clock,
        config: Config,
    ) -> DomainResult<Arc<Kobo>> {
        let (capacity, idle) = (config.mailbox_capacity, config.actor_idle);
        let providers = Providers::sandbox(config.sandbox_card_latency);
        let env = Arc::new(Env::new(store, writer, clock, config)?);
        let (store, writer) = (env.store.clone(), env.writer.clone());
        fn registry<A: VirtualActor>(
            deps: Arc<A::Deps>,
            (cap, idle): (usize, Duration),
        ) -> Arc<Registry<A>> {
            Arc::new(Registry::new(deps, cap, idle))
        }
        let sizing = (capacity, idle);

        let ledgers: Ledgers = registry(env.clone(), sizing);
        let merchants = registry(env.clone(), sizing);
        let usdt_wallets = registry(env.clone(), sizing);
        let mandate_providers = Arc::new(MandateProviders::sandbox(store.clone(), writer.clone()));
        let rails = Arc::new(Rails {
            test: Box::new(SandboxRail {
                store: store.clone(),
                writer: writer.clone(),
            }),
            live: Box::new(UnconfiguredRail),
        });
        let customers = registry(
            Arc::new(CustomerDeps {
                env: env.clone(),
                identity: IdentityProviders::sandbox(store.clone(), writer.clone()),
                in_use: vec![
                    crate::mandate::service::customer_in_use,
                    crate::virtual_account::service::customer_in_use,
                ],
            }),
            sizing,
        );
        let payment_links: PaymentLinks = registry(
            Arc::new(PaymentLinkDeps {
                env: env.clone(),
                customers: customers.clone(),
            }),
            sizing,
        );
        let account_banks = AccountBanks::sandbox(store.clone(), writer.clone());
        let usdt = Arc::new(UsdtHub::sandbox(store, writer));
        let invoices: Invoices = registry(
            Arc::new(InvoiceDeps {
                env: env.clone(),
                ledgers: ledgers.clone(),
                payment_processing: crate::payment_intent::query::invoice_payment_processing,
                numbers: Default::default(),
            }),
            sizing,
        );
        let payment_intents: Arc<Registry<PaymentIntentActor>> = registry(
            Arc::new(PaymentIntentDeps {
                env: env.clone(),
                ledgers: ledgers.clone(),
                providers,
                mandate_providers: mandate_providers.clone(),
                invoices: invoices.clone(),
            }),
            sizing,
        );
        let virtual_accounts = registry(
            Arc::new(VirtualAccountDeps {
                env: env.clone(),
                intents: payment_intents.deps().clone(),
                customers: customers.clone(),
                banks: account_banks,
                serials: Serials::default(),
            }),
            sizing,
        );
        let payouts = registry(
            Arc::new(PayoutDeps {
                env: env.clone(),
                ledgers: ledgers.clone(),
                rails: rails.clone(),
            }),
            sizing,
        );
        let aftercare = Registry::new_cyclic(capacity, idle, |aftercare| AftercareDeps {
            env: env.clone(),
            ledgers: ledgers.clone(),
            aftercare,
        });
        let crypto_payouts = registry(
            Arc::new(UsdtDeps {
                env: env.clone(),
                ledgers: ledgers.clone(),
                usdt: usdt.clone(),
            }),
            sizing,
        );
        let mandates = registry(
            Arc::new(MandateDeps {
                env: env.clone(),
                mandate_providers: mandate_providers.clone(),
                customers: customers.clone(),
            }),
            sizing,
        );
        let plans: Plans = registry(env.clone(), sizing);
        let subscriptions: Subscriptions = registry(
            Arc::new(SubscriptionDeps {
                env: env.clone(),
                invoices: invoices.clone(),
                mandates: mandates.clone(),
            }),
            sizing,
        );
        let fx = Arc::new(Fx {
            env: env.clone(),
            gate: RateGate::default(),
            ledgers: ledgers.clone(),
        });
        let settlement = Arc::new(Settlement {
            env: env.clone(),
            ledgers: ledgers.clone(),
            payouts: payouts.clone(),
            fx: fx.clone(),
            crypto_payouts: crypto_payouts.clone(),
            acquired: Default::default(),
        });
        Ok(Arc::new(Kobo {
            webhooks: Arc::new(Hub::new(env.clone())),
            env,
            payment_intents,
            ledgers,
            merchants,
            payouts,
            aftercare,
            rails,
            crypto_payouts,
            usdt_wallets,
            usdt,
            fx,
            mandates,
            mandate_providers,
            settlement,
            customers,
            virtual_accounts,
            payment_links,
            invoices,
            plans,
            subscriptions,
            takeovers: Default::default(),
        }))
    }

    /// Drops every cached actor and cache of this node (a cluster node lost
    /// a shard: correct and simple, and ownership changes are rare). Each
    /// is read from the store again when next needed.
    pub fn evict_all(&self) {
        self.payment_intents.evict_all();
        self.ledgers.evict_all();
        self.merchants.evict_all();
        self.payouts.evict_all();
        self.aftercare.evict_all();
        self.crypto_payouts.evict_all();
        self.usdt_wallets.evict_all();
        self.mandates.evict_all();
        self.customers.evict_all();
        self.virtual_accounts.evict_all();
        self.virtual_accounts.deps().serials.forget();
        self.payment_links.evict_all();
        self.invoices.evict_all();
        self.invoices.deps().numbers.forget();
        self.plans.evict_all();
        self.subscriptions.evict_all();
        self.webhooks.reset();
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
            self.customers.snapshot(),
            self.virtual_accounts.snapshot(),
            self.payment_links.snapshot(),
            self.invoices.snapshot(),
            self.plans.snapshot(),
            self.subscriptions.snapshot(),
        ]
    }
}

/// What a cluster node does when its shards change: before serving newly
/// acquired shards, the sequence jumps to a fresh block (so a merchant's
/// numbers only grow across owners), every cached actor and cache is
/// dropped ([`Kobo::evict_all`]: whatever was read before, while another
/// node could write the merchants, is read again), webhook deliveries are
/// rescheduled for the merchants owned now, and the shards are noted for
/// the next timer pass to schedule their daily settlement runs; once they
/// are served, their merchants' pending work is resumed
/// ([`crate::resumption::Takeovers`]); on any loss, every cached actor and
/// cache is dropped too.
impl crate::cluster::ShardEvents for Kobo {
    fn acquired(&self, shards: &[u16]) -> Result<(), kobo_storage::StoreError> {
        self.seq.jump()?;
        self.evict_all();
        crate::settlement::note_acquired(&self.settlement, shards);
        Ok(())
    }

    fn serving(&self, shards: &[u16]) {
        self.takeovers.serving(shards);
    }

    fn lost(&self, _shards: &[u16]) {
        self.evict_all();
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
            calendar: crate::calendar::Calendar::nigeria(),
            sandbox_card_latency: Duration::ZERO,
        },
    )
    .expect("runtime")
}

/// Node `a` of a two-node cluster (for unit tests): its shard events are
/// `kobo`'s and its view fences `kobo`'s writer; node `b` does nothing
/// but take and give shards. Both over one in-memory lease table.
#[cfg(test)]
pub struct TwoNodes {
    pub time: crate::cluster::time::ManualTime,
    pub view: Arc<crate::cluster::ClusterView>,
    pub a: crate::cluster::Node,
    pub b: crate::cluster::Node,
    /// Node a's last tick, the one that gave it its share.
    pub report: crate::cluster::node::TickReport,
}

/// [`TwoNodes`] after `b` took every shard and handed `a` its rendezvous
/// share.
#[cfg(test)]
pub fn two_nodes(kobo: &Arc<Kobo>) -> TwoNodes {
    use crate::cluster::memory::{Link, MemoryLeases, Quiet};
    use crate::cluster::{ClusterView, Node};
    let time = crate::cluster::time::ManualTime::default();
    let db = MemoryLeases::new(time.clone());
    let clock = Arc::new(time.clone());
    let view = Arc::new(ClusterView::new("a", "http://a", clock.clone()));
    kobo.env.cluster.set(view.clone()).ok().unwrap();
    kobo.writer.set_ownership(view.clone());
    let a = Node::new(view.clone(), Link::new(&db), clock.clone(), kobo.clone());
    let other = Arc::new(ClusterView::new("b", "http://b", clock.clone()));
    let b = Node::new(other, Link::new(&db), clock, Arc::new(Quiet));
    b.tick();
    a.tick();
    b.tick();
    let report = a.tick();
    assert!(report.error.is_none(), "{report:?}");
    TwoNodes {
        time,
        view,
        a,
        b,
        report,
    }
}
