//! Who made a call: the credential kind ([`Caller`]) and what rate limits
//! count it by. A core leaf (idempotency keys are scoped by the caller).

use uuid::Uuid;

use crate::ids::Mode;

/// Which credential a call was made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Caller {
    /// The merchant's secret key (`svc_test_` / `svc_live_`).
    SecretKey,
    /// A payment intent's `client_secret` (from the create response): acts
    /// on that one intent only.
    ClientSecret(Uuid),
    /// The hosted checkout page's credential
    /// ([`crate::credential::CheckoutKey`]): acts on that one intent only.
    Checkout(Uuid),
    /// A merchant dashboard session (its forms' nonces are the
    /// Idempotency-Keys, kept apart from the server's).
    Dashboard,
}

impl Caller {
    /// The one payment intent a client secret or checkout caller may act on;
    /// `None` for a secret key.
    pub fn intent(self) -> Option<Uuid> {
        match self {
            Caller::SecretKey | Caller::Dashboard => None,
            Caller::ClientSecret(id) | Caller::Checkout(id) => Some(id),
        }
    }

    /// Whether this is the hosted checkout, kobo's own page (which needs no
    /// `card_api_enabled` in live mode).
    pub fn is_checkout(self) -> bool {
        matches!(self, Caller::Checkout(_))
    }
}

/// What rate limits count calls by: the merchant and mode for secret
/// keys; the payment intent for the credentials that act on one intent
/// (its client secret and its checkout credential share it, so a second
/// credential buys no extra allowance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateLimitKey {
    Merchant(Uuid, Mode),
    PaymentIntent(Uuid),
}

impl std::fmt::Display for RateLimitKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RateLimitKey::Merchant(m, mode) => write!(f, "merchant:{m}:{}", mode.as_str()),
            RateLimitKey::PaymentIntent(id) => write!(f, "payment_intent:{id}"),
        }
    }
}
