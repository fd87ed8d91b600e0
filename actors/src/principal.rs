//! Who is calling: a bearer token (secret key, client secret or hosted
//! checkout credential) resolved to a merchant, a mode and a caller. Reads
//! merchants, API keys and payment intents from a snapshot.

use std::sync::Arc;

use uuid::Uuid;

use kobo_storage::Table;

use crate::auth::{Caller, RateLimitKey};
use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::ids::Mode;
use crate::merchant::{key_hash, read_api_key, read_merchant, secret_key_mode, Merchant};
use crate::payment_intent::PaymentIntent;

/// Who is calling.
#[derive(Debug, Clone)]
pub struct Principal {
    pub merchant: Arc<Merchant>,
    pub mode: Mode,
    /// The credential used.
    pub caller: Caller,
}

impl Principal {
    /// A stable key to count this caller's requests by.
    pub fn rate_limit_key(&self) -> RateLimitKey {
        match self.caller.intent() {
            Some(id) => RateLimitKey::PaymentIntent(id),
            None => RateLimitKey::Merchant(self.merchant.id, self.mode),
        }
    }
}

/// Resolves a bearer token: a secret key, a payment intent's client secret,
/// or a hosted checkout credential (verified with `checkout`).
pub fn authenticate(
    kobo: &Env,
    bearer: &str,
    checkout: &crate::credential::CheckoutKey,
) -> DomainResult<Principal> {
    let read = kobo.store.read()?;
    let unauthenticated = || DomainError::unauthenticated("invalid, unknown or revoked API key");
    if secret_key_mode(bearer).is_some() {
        let key = read_api_key(&read, &key_hash(bearer))?.ok_or_else(unauthenticated)?;
        if key.revoked_at.is_some() {
            return Err(unauthenticated());
        }
        let merchant = read_merchant(&read, key.merchant)?.ok_or_else(unauthenticated)?;
        return Ok(Principal {
            merchant,
            mode: key.mode,
            caller: Caller::SecretKey,
        });
    }
    let (id, caller) = if bearer.starts_with(crate::credential::CHECKOUT_PREFIX) {
        let id = checkout.verify(bearer).ok_or_else(unauthenticated)?;
        (id, Caller::Checkout(id))
    } else {
        // pi_<32 hex>_secret_<24 base62>
        let id = bearer
            .strip_prefix("pi_")
            .and_then(|r| r.split_once("_secret_"))
            .and_then(|(id, _)| Uuid::try_parse(id).ok())
            .ok_or_else(unauthenticated)?;
        (id, Caller::ClientSecret(id))
    };
    let intent: PaymentIntent = read
        .get_decoded(Table::PaymentIntents, id.as_bytes())?
        .ok_or_else(unauthenticated)?;
    if caller == Caller::ClientSecret(id)
        && intent.client_secret_hash != crate::ids::sha256_hex(bearer)
    {
        return Err(unauthenticated());
    }
    let merchant = read_merchant(&read, intent.merchant)?.ok_or_else(unauthenticated)?;
    Ok(Principal {
        merchant,
        mode: intent.mode,
        caller,
    })
}
