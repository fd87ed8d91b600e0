//! The handles a virtual account's actor and its service functions receive
//! (apart from the actor, so the service does not import it back).

use std::sync::Arc;

use crate::customer::directory::Customers;
use crate::env::Env;
use crate::payment_intent::deps::PaymentIntentDeps;
use crate::virtual_account::bank::AccountBanks;
use crate::virtual_account::nuban::Serials;

/// What a virtual account reaches: the payment intents' handles (a credit
/// makes a payment captured through the ledger), the customer directories
/// (a new account commits through its customer's), the banks, and the
/// serial sequence.
pub struct VirtualAccountDeps {
    pub env: Arc<Env>,
    pub intents: Arc<PaymentIntentDeps>,
    pub customers: Customers,
    pub banks: AccountBanks,
    pub serials: Serials,
}

impl std::ops::Deref for VirtualAccountDeps {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}
