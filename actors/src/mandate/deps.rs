//! The handles a mandate's actor and its service functions receive (apart
//! from the actor, so the service does not import the actor back).

use std::sync::Arc;

use crate::customer::directory::Customers;
use crate::direct_debit::MandateProviders;
use crate::env::Env;

/// What a mandate's actor reaches: the direct-debit providers (the charge
/// intents it creates need only the environment) and the customer
/// directories (a new mandate commits through its customer's).
pub struct MandateDeps {
    pub env: Arc<Env>,
    pub mandate_providers: Arc<MandateProviders>,
    pub customers: Customers,
}

impl std::ops::Deref for MandateDeps {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}
