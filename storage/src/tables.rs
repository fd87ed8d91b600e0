//! The table catalogue and the composite-key builder.
//!
//! Every table maps bytes to bytes. Keys are built with [`KeyBuf`] from
//! fixed-width big-endian parts, so byte order is the logical order (ids,
//! sequences, times). Values are [`crate::codec`] encoded unless noted.
//!
//! The tables are logical: each key is prefixed with its table's one-byte
//! id, and most of them live in one physical redb table, so a commit
//! touches few B-trees instead of one per table, which measurably cuts the
//! writer's page work (docs/performance.md). A few that grow in ascending
//! key order have a redb table of their own ([`crate::trees`]).
//!
//! **Global tables** ([`Table::is_global`]) hold rows that belong to no
//! merchant: kobo's own bookkeeping (`Meta`), what the operator writes
//! and keeps (merchants and their API keys, FX rates, the audit log,
//! console sessions), names unique across kobo (payment link slugs,
//! virtual account numbers and NUBAN serials), the dashboard's people and
//! their sessions (a person signs in before any merchant is known), and
//! the sandbox rails' records (the pretend bank, USDT partner, mandate and
//! identity providers stand outside kobo). Every other table holds a
//! merchant's rows, even when its key does not start with the merchant
//! (payment intents by id, charge attempts, timers, the event outbox,
//! deliveries and their queue, scheduled releases, ...): a batch writing
//! them names its merchant ([`crate::Batch::owned_by`]) so that, on a
//! cluster, only the node owning the merchant's shard commits it. The
//! writer refuses to let an untagged batch touch a non-global table once
//! an ownership is set (see [`crate::writer::Writer::submit`]). Merchants
//! and API keys are global because the operator creates and changes them
//! from any node; a batch written for one merchant (its own key roll, its
//! own settings) may still be tagged with it.

use redb::TableDefinition;

pub type Def = TableDefinition<'static, &'static [u8], &'static [u8]>;

/// A redb table of a write transaction, as kobo's trees are typed.
pub(crate) type WriteTable<'txn> = redb::Table<'txn, &'static [u8], &'static [u8]>;

/// The physical table shared by every logical table without a tree of
/// its own ([`crate::trees::OWN_TREES`]).
pub const PHYSICAL: Def = TableDefinition::new("kv");

macro_rules! tables {
    ($($variant:ident => $name:literal,)*) => {
        /// Every table of the store.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Table { $($variant,)* }
        impl Table {
            pub const ALL: &'static [Table] = &[$(Table::$variant,)*];
            pub fn name(self) -> &'static str {
                match self { $(Table::$variant => $name,)* }
            }
            /// The one-byte prefix of this table's keys (1-based; fixed
            /// forever: new tables are appended at the end).
            pub fn id(self) -> u8 {
                self as u8 + 1
            }
            /// `key` as stored: the table id, then the key.
            pub fn physical(self, key: &[u8]) -> Vec<u8> {
                let mut k = Vec::with_capacity(key.len() + 1);
                k.push(self.id());
                k.extend_from_slice(key);
                k
            }
        }
    };
}

tables! {
    // name -> value (clock, sequences, admin token hash, ...)
    Meta => "meta",
    // merchant id -> Merchant
    Merchants => "merchants",
    // sha256(secret key) -> ApiKey
    ApiKeys => "api_keys",
    // brand id -> Brand; and merchant|mode|seq -> brand id
    Brands => "brands",
    BrandIndex => "brand_index",
    // payment intent id -> PaymentIntent
    PaymentIntents => "payment_intents",
    // merchant|mode|seq -> id (newest-first lists)
    PaymentIntentIndex => "payment_intent_index",
    // merchant|mode|status|seq -> id
    PaymentIntentStatusIndex => "payment_intent_status_index",
    // merchant|mode|customer|seq -> id
    PaymentIntentCustomerIndex => "payment_intent_customer_index",
    // merchant|mode|reference -> id (uniqueness of reference)
    PaymentIntentReferences => "payment_intent_references",
    // short code -> payment intent id
    CheckoutLinks => "checkout_links",
    // payment intent id|attempt number -> ChargeAttempt
    ChargeAttempts => "charge_attempts",
    // merchant|mode|line id -> LedgerLine (line ids come from one global
    // increasing sequence; a merchant's lines read in order by prefix)
    LedgerLines => "ledger_lines",
    // merchant|mode|brand|currency|bucket -> i64 balance
    Balances => "balances",
    // event id -> Event; merchant|mode|seq -> event id
    Events => "events",
    EventIndex => "event_index",
    // due time (unix micros)|kind|id -> Timer
    Timers => "timers",
    // merchant|mode|key -> IdempotencyRecord (responses saved before
    // schema 4; see IdempotencyKeys)
    Idempotency => "idempotency",
    // expiry (unix micros)|merchant|mode|key -> IdempotencyRecord (empty
    // for a response saved before schema 4, whose record is in Idempotency)
    IdempotencyExpiry => "idempotency_expiry",
    // merchant|mode|bucket|due (unix micros)|payment id -> ScheduledRelease
    ScheduledReleases => "scheduled_releases",
    // bank account id -> BankAccount; merchant|mode|bank|number -> id;
    // merchant|mode|seq -> id
    BankAccounts => "bank_accounts",
    BankAccountIndex => "bank_account_index",
    BankAccountList => "bank_account_list",
    // payout id -> Payout; merchant|mode|seq -> id
    Payouts => "payouts",
    PayoutIndex => "payout_index",
    // merchant|mode|Lagos date -> i64 payout amount counted toward the limit
    PayoutUsage => "payout_usage",
    // the sandbox rail's record of transfers it accepted: reference -> row
    SandboxTransfers => "sandbox_transfers",
    // Webhooks (actors/src/webhook). seq -> event id: events whose
    // deliveries are not yet created (written with the event).
    EventOutbox => "event_outbox",
    // merchant|mode|type byte|seq -> event id (GET /v1/events?type=)
    EventTypeIndex => "event_type_index",
    // endpoint id -> WebhookEndpoint; merchant|mode|seq -> endpoint id
    WebhookEndpoints => "webhook_endpoints",
    WebhookEndpointIndex => "webhook_endpoint_index",
    // event id|endpoint id -> Delivery
    Deliveries => "deliveries",
    // endpoint id|due (unix micros)|event id -> () (waiting deliveries)
    DeliveryQueue => "delivery_queue",
    // merchant|mode|stream position -> event id (GET /v1/stream resume)
    EventStream => "event_stream",
    // merchant|mode|payment id -> key of its pending scheduled release
    ReleasesByPayment => "releases_by_payment",
    // refund id -> Refund; merchant|mode|seq -> id; merchant|mode|payment|seq -> id
    Refunds => "refunds",
    RefundIndex => "refund_index",
    RefundByPayment => "refund_by_payment",
    // dispute id -> Dispute; merchant|mode|seq -> id
    Disputes => "disputes",
    DisputeIndex => "dispute_index",
    // payment id -> PaymentAftercare (refunded, lost, open dispute)
    PaymentAftercare => "payment_aftercare",
    // refund id -> () while its provider confirmation is outstanding
    RefundsAwaiting => "refunds_awaiting",
    // FX (actors/src/fx.rs). rate id -> FxRate; seq -> rate id (the
    // newest is current)
    FxRates => "fx_rates",
    FxRateIndex => "fx_rate_index",
    // conversion id -> FxConversion; merchant|mode|seq -> id
    FxConversions => "fx_conversions",
    FxConversionIndex => "fx_conversion_index",
    // USDT (actors/src/usdt). wallet id -> UsdtWallet; merchant|mode|seq ->
    // id (active wallets); merchant|mode|network|address -> id
    UsdtWallets => "usdt_wallets",
    UsdtWalletIndex => "usdt_wallet_index",
    UsdtWalletAddresses => "usdt_wallet_addresses",
    // crypto payout id -> CryptoPayout; merchant|mode|seq -> id
    CryptoPayouts => "crypto_payouts",
    CryptoPayoutIndex => "crypto_payout_index",
    // crypto payout id -> () while the partner has not confirmed it
    CryptoPayoutsOpen => "crypto_payouts_open",
    // the sandbox USDT partner's record of transfers: reference -> row
    SandboxCryptoTransfers => "sandbox_crypto_transfers",
    // Customers (actors/src/customer.rs). customer id -> Customer;
    // merchant|mode|seq -> id
    Customers => "customers",
    CustomerIndex => "customer_index",
    // Direct debit mandates (actors/src/mandate). mandate id -> Mandate;
    // merchant|mode|seq -> id; merchant|mode|status|seq -> id;
    // merchant|mode|customer|seq -> id
    Mandates => "mandates",
    MandateIndex => "mandate_index",
    MandateStatusIndex => "mandate_status_index",
    MandateCustomerIndex => "mandate_customer_index",
    // the sandbox mandate provider's records: mandate id -> the customer's
    // answer on the authorization page; payment id -> the debit it took
    SandboxMandates => "sandbox_mandates",
    SandboxDebits => "sandbox_debits",
    // Customers proper (actors/src/customer). merchant|mode|lowercased
    // email -> id (one live customer per email); merchant|mode|phone|seq
    // -> id; merchant|mode|brand|seq -> id; merchant|mode|risk|seq -> id
    CustomerEmails => "customer_emails",
    CustomerPhoneIndex => "customer_phone_index",
    CustomerBrandIndex => "customer_brand_index",
    CustomerRiskIndex => "customer_risk_index",
    // the sandbox identity provider's verdicts: check reference -> verdict
    SandboxIdentityChecks => "sandbox_identity_checks",
    // Dedicated virtual accounts (actors/src/virtual_account). id ->
    // VirtualAccount; merchant|mode|seq -> id; merchant|mode|status|seq ->
    // id; merchant|mode|customer|seq -> id; account number -> id
    VirtualAccounts => "virtual_accounts",
    VirtualAccountIndex => "virtual_account_index",
    VirtualAccountStatusIndex => "virtual_account_status_index",
    VirtualAccountCustomerIndex => "virtual_account_customer_index",
    VirtualAccountNumbers => "virtual_account_numbers",
    // NUBAN serial -> account id: every number ever given (never deleted)
    VirtualAccountSerials => "virtual_account_serials",
    // merchant|mode|customer -> the customer's pending or active account
    CustomerOpenAccounts => "customer_open_accounts",
    // account id|session id -> payment intent id: each credit once
    VirtualAccountCredits => "virtual_account_credits",
    // merchant|mode|account id|seq -> payment intent id
    PaymentIntentVirtualAccountIndex => "payment_intent_virtual_account_index",
    // the sandbox bank: its statement of transfers into virtual accounts
    // (account id|session id -> credit), and the notifications kobo has
    // not recorded yet (account id|session id -> ())
    SandboxAccountCredits => "sandbox_account_credits",
    SandboxAccountInbox => "sandbox_account_inbox",
    // Payment links (actors/src/payment_link). link id -> PaymentLink;
    // merchant|mode|seq -> id; merchant|mode|status|seq -> id; slug -> id
    // (unique across kobo)
    PaymentLinks => "payment_links",
    PaymentLinkIndex => "payment_link_index",
    PaymentLinkStatusIndex => "payment_link_status_index",
    PaymentLinkSlugs => "payment_link_slugs",
    // link id -> [held, payments, amount] (i64 counters moved by
    // Batch::add in the batches of the link's payment intents)
    PaymentLinkCounters => "payment_link_counters",
    // link id|payment intent id -> () (a success the link's actor has not
    // yet checked against max_payments)
    PaymentLinkOutbox => "payment_link_outbox",
    // link id|page nonce -> payment intent id (one intent per page form)
    PaymentLinkVisits => "payment_link_visits",
    // merchant|mode|link id|seq -> payment intent id
    PaymentIntentLinkIndex => "payment_intent_link_index",
    // The operator audit log (actors/src/audit.rs), append-only: entry id ->
    // AuditEntry; time (unix micros)|seq -> id; merchant|time|seq -> id;
    // action byte|time|seq -> id. Nothing deletes from these tables.
    AuditLog => "audit_log",
    AuditIndex => "audit_index",
    AuditMerchantIndex => "audit_merchant_index",
    AuditActionIndex => "audit_action_index",
    // Invoices (actors/src/invoice). invoice id -> Invoice; merchant|mode|
    // seq, merchant|mode|status|seq, merchant|mode|customer|seq -> id
    Invoices => "invoices",
    InvoiceIndex => "invoice_index",
    InvoiceStatusIndex => "invoice_status_index",
    InvoiceCustomerIndex => "invoice_customer_index",
    // brand|mode|number -> invoice id (gap-free numbers, claimed absent)
    InvoiceNumbers => "invoice_numbers",
    // hosted page code -> invoice id
    InvoiceLinks => "invoice_links",
    // customer id -> i64 credit balance (kobo), written by the customer's
    // invoice book only
    CustomerCredits => "customer_credits",
    // invoice id|page nonce -> payment intent id (one intent per hosted
    // invoice page form)
    InvoiceVisits => "invoice_visits",
    // Plans (actors/src/plan). plan id -> Plan; merchant|mode|seq -> id
    Plans => "plans",
    PlanIndex => "plan_index",
    // Subscriptions (actors/src/subscription). subscription id ->
    // Subscription; merchant|mode|seq, merchant|mode|customer|seq,
    // merchant|mode|plan|seq, merchant|mode|status|seq -> id
    Subscriptions => "subscriptions",
    SubscriptionIndex => "subscription_index",
    SubscriptionCustomerIndex => "subscription_customer_index",
    SubscriptionPlanIndex => "subscription_plan_index",
    SubscriptionStatusIndex => "subscription_status_index",
    // merchant|mode|customer|plan -> subscription id: the one unfinished
    // subscription of a customer to a plan (claimed absent at create,
    // deleted when it is canceled or completed)
    SubscriptionOpen => "subscription_open",
    // subscription|period -> invoice id: a period's invoice, claimed absent
    // in the invoice's create batch (a period is billed once)
    SubscriptionInvoices => "subscription_invoices",
    // merchant|mode|subscription|seq -> invoice id (`GET /v1/invoices?subscription=`)
    InvoiceSubscriptionIndex => "invoice_subscription_index",
    // subscription|period|attempt -> payment intent id: a period's debit
    // attempt, claimed absent in the charge's batch (never debited twice)
    SubscriptionCharges => "subscription_charges",
    // The merchant dashboard's people (actors/src/dashboard_user): user id ->
    // DashboardUser; lowercased email -> user id (claimed absent: one
    // account per email); merchant|user id -> () (a merchant's team).
    DashboardUsers => "dashboard_users",
    DashboardUserEmails => "dashboard_user_emails",
    DashboardTeam => "dashboard_team",
    // SHA-256 of a set-password token -> Invitation (one use, expires)
    DashboardInvitations => "dashboard_invitations",
    // SHA-256 of a session token -> DashboardSession; user id|session hash
    // -> () (what "sign out everywhere" revokes)
    DashboardSessions => "dashboard_sessions",
    DashboardUserSessions => "dashboard_user_sessions",
    // Every attempt of a webhook delivery (actors/src/webhook): event id|
    // endpoint id|attempt number -> DeliveryAttempt, written in the batch
    // that records the attempt's outcome; the newest
    // webhook::ATTEMPTS_KEPT of a delivery are kept.
    DeliveryAttempts => "delivery_attempts",
    // endpoint id|seq -> event id: the endpoint's test events (they are in
    // no event list; the dashboard shows their deliveries).
    WebhookTestEvents => "webhook_test_events",
    // Operator console sessions (src/console/session.rs): SHA-256 of the
    // session token -> ConsoleSession (with the SHA-256 of the admin token
    // it was opened with: a session outlives a restart, not a new token).
    ConsoleSessions => "console_sessions",
    // Saved responses (actors/src/idempotency.rs), since schema 4: the
    // record key (merchant|mode|[tag|intent]|key) -> its expiry (unix
    // micros, u64): the record is the value of that IdempotencyExpiry row.
    IdempotencyKeys => "idempotency_keys",
}

impl Table {
    /// Whether the table's rows belong to no merchant (see the module
    /// comment): batches touching only global tables need no owner.
    pub fn is_global(self) -> bool {
        use Table::*;
        matches!(
            self,
            Meta | Merchants
                | ApiKeys
                | SandboxTransfers
                | FxRates
                | FxRateIndex
                | SandboxCryptoTransfers
                | SandboxMandates
                | SandboxDebits
                | SandboxIdentityChecks
                | VirtualAccountNumbers
                | VirtualAccountSerials
                | SandboxAccountCredits
                | SandboxAccountInbox
                | PaymentLinkSlugs
                | AuditLog
                | AuditIndex
                | AuditMerchantIndex
                | AuditActionIndex
                | DashboardUsers
                | DashboardUserEmails
                | DashboardTeam
                | DashboardInvitations
                | DashboardSessions
                | DashboardUserSessions
                | ConsoleSessions
        )
    }
}

/// Builds a composite key from fixed-width parts.
#[derive(Default, Clone, Debug)]
pub struct KeyBuf(Vec<u8>);

impl KeyBuf {
    pub fn new() -> Self {
        KeyBuf(Vec::with_capacity(48))
    }
    pub fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    pub fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    /// A variable-length string part; terminated by 0 so that a shorter string
    /// never prefixes a longer one's key range.
    pub fn str(mut self, s: &str) -> Self {
        self.0.extend_from_slice(s.as_bytes());
        self.0.push(0);
        self
    }
    pub fn build(self) -> Vec<u8> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_endian_parts_sort_like_numbers() {
        let a = KeyBuf::new().u8(1).u64(255).build();
        let b = KeyBuf::new().u8(1).u64(256).build();
        assert!(a < b);
    }

    #[test]
    fn physical_keys_carry_the_table_id_first() {
        assert_eq!(Table::Meta.physical(b"x"), vec![1, b'x']);
        assert!(Table::ALL.iter().all(|t| t.id() < 0xff));
    }

    #[test]
    fn merchants_rows_are_never_global_and_kobos_own_are() {
        for t in [
            Table::PaymentIntents,
            Table::Timers,
            Table::EventOutbox,
            Table::Deliveries,
            Table::DeliveryQueue,
            Table::ChargeAttempts,
            Table::ScheduledReleases,
            Table::Idempotency,
            Table::LedgerLines,
        ] {
            assert!(!t.is_global(), "{}", t.name());
        }
        for t in [Table::Meta, Table::FxRates, Table::PaymentLinkSlugs] {
            assert!(t.is_global(), "{}", t.name());
        }
    }

    #[test]
    fn table_names_are_unique() {
        let mut names: Vec<_> = Table::ALL.iter().map(|t| t.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Table::ALL.len());
    }
}
