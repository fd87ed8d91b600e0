//! The handles a customer directory receives (apart from the actor, so
//! the services that use the directory do not import it back).

use std::sync::Arc;

use uuid::Uuid;

use crate::customer::identity::IdentityProviders;
use crate::env::Env;
use crate::error::DomainResult;
use crate::ids::Mode;

/// Whether something still uses a customer (`merchant`, `mode`,
/// `customer`): the name of what does (e.g. "an active mandate"), or none.
/// Given at assembly by the resources that link to customers, so this
/// resource names none of them.
pub type InUse = fn(&Env, Uuid, Mode, Uuid) -> DomainResult<Option<&'static str>>;

/// What a customer directory reaches: the identity providers and the
/// checks that keep a used customer from being deleted.
pub struct CustomerDeps {
    pub env: Arc<Env>,
    pub identity: IdentityProviders,
    pub in_use: Vec<InUse>,
}

impl std::ops::Deref for CustomerDeps {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}
