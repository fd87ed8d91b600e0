//! The handles a payment intent's actor and its service functions receive
//! (apart from the actor, so the service does not import the actor back).

use std::sync::Arc;

use crate::direct_debit::MandateProviders;
use crate::env::Env;
use crate::invoice::book::Invoices;
use crate::ledger::actor::Ledgers;
use crate::payment_intent::provider::Providers;

/// What a payment intent's actor reaches: the merchant's ledger, the card
/// providers and the direct-debit providers.
pub struct PaymentIntentDeps {
    pub env: Arc<Env>,
    pub ledgers: Ledgers,
    pub providers: Providers,
    pub mandate_providers: Arc<MandateProviders>,
    /// The customers' invoice books: a payment of a customer with an
    /// invoice or into their virtual account is applied there, in its
    /// capture batch.
    pub invoices: Invoices,
}

impl std::ops::Deref for PaymentIntentDeps {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}
