//! What a subscription's actor reaches: the invoice books (a period's
//! invoice, closing one) and the mandates (a period's debit).

use std::sync::Arc;

use crate::env::Env;
use crate::invoice::book::Invoices;
use crate::mandate::actor::MandateActor;
use crate::registry::Registry;

pub struct SubscriptionDeps {
    pub env: Arc<Env>,
    pub invoices: Invoices,
    pub mandates: Arc<Registry<MandateActor>>,
}

impl std::ops::Deref for SubscriptionDeps {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}
