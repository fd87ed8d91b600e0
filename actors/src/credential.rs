//! The hosted checkout's own credential: `kobo_checkout_<intent>_<mac>`,
//! an HMAC-SHA256 of the payment intent's id under a server key kept outside
//! the store (a file in the data directory, see the binary's
//! `checkout-credential-key`). It is derived when the checkout page is
//! served and never stored, so neither the merchant's server nor a copy of
//! the store ever holds it. It acts on its one payment intent only, like the
//! `client_secret`, and is what lets the hosted checkout take cards in live
//! mode without the merchant's `card_api_enabled`.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use uuid::Uuid;

/// Every checkout credential starts with this.
pub const CHECKOUT_PREFIX: &str = "kobo_checkout_";

/// What the MAC covers besides the intent id (domain separation, and a
/// version should the format ever change).
const LABEL: &[u8] = b"kobo checkout credential v1\0";

/// The server key of checkout credentials.
#[derive(Clone)]
pub struct CheckoutKey([u8; 32]);

impl std::fmt::Debug for CheckoutKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CheckoutKey(..)")
    }
}

impl CheckoutKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        CheckoutKey(bytes)
    }

    /// A fresh random key (credentials it makes end with the process).
    pub fn random() -> Self {
        CheckoutKey(rand::random())
    }

    fn mac(&self, intent: Uuid) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(LABEL);
        mac.update(intent.as_bytes());
        mac
    }

    /// The checkout credential of `intent`.
    pub fn credential(&self, intent: Uuid) -> String {
        let tag = self.mac(intent).finalize().into_bytes();
        format!("{CHECKOUT_PREFIX}{}_{}", intent.simple(), hex::encode(tag))
    }

    /// The intent a checkout credential was made for, when `token` is one
    /// this key made (the MAC is compared in constant time). `None` for
    /// anything else, a token without the prefix included.
    pub fn verify(&self, token: &str) -> Option<Uuid> {
        let (id, tag) = token.strip_prefix(CHECKOUT_PREFIX)?.split_once('_')?;
        // The simple (32 hex) form only, as `credential` writes it.
        if id.len() != 32 {
            return None;
        }
        let intent = Uuid::try_parse(id).ok()?;
        let tag = hex::decode(tag).ok()?;
        self.mac(intent).verify_slice(&tag).ok()?;
        Some(intent)
    }
}

/// What a subscription manage link's MAC covers besides the id and expiry.
const MANAGE_LABEL: &[u8] = b"kobo subscription manage link v1\0";

impl CheckoutKey {
    fn manage_mac(&self, subscription: Uuid, expires: i64) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(MANAGE_LABEL);
        mac.update(subscription.as_bytes());
        mac.update(&expires.to_be_bytes());
        mac
    }

    /// The token of a subscription's manage page (`/s/<token>`):
    /// `<id>.<expiry, unix seconds>.<HMAC>`, made when asked, never stored.
    pub fn manage_token(&self, subscription: Uuid, expires: i64) -> String {
        let tag = self
            .manage_mac(subscription, expires)
            .finalize()
            .into_bytes();
        format!("{}.{expires}.{}", subscription.simple(), hex::encode(tag))
    }

    /// The subscription of a manage token this key made, if it has not
    /// expired by `now` (unix seconds; the MAC compared in constant time).
    pub fn verify_manage(&self, token: &str, now: i64) -> Option<Uuid> {
        let mut parts = token.split('.');
        let (id, exp, tag) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || id.len() != 32 {
            return None;
        }
        let subscription = Uuid::try_parse(id).ok()?;
        let expires: i64 = exp.parse().ok()?;
        let tag = hex::decode(tag).ok()?;
        self.manage_mac(subscription, expires)
            .verify_slice(&tag)
            .ok()?;
        (now < expires).then_some(subscription)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manage_token_verifies_until_it_expires_under_its_own_key_only() {
        let key = CheckoutKey::new([7; 32]);
        let id = Uuid::new_v4();
        let t = key.manage_token(id, 1_000);
        assert_eq!(key.verify_manage(&t, 999), Some(id));
        assert_eq!(key.verify_manage(&t, 1_000), None);
        assert_eq!(CheckoutKey::new([8; 32]).verify_manage(&t, 0), None);
        let later = t.replace(".1000.", ".9000.");
        assert_eq!(key.verify_manage(&later, 0), None);
        assert_eq!(key.verify_manage(&key.credential(id), 0), None);
    }

    #[test]
    fn a_credential_verifies_for_its_own_intent_under_its_own_key_only() {
        let key = CheckoutKey::new([7; 32]);
        let id = Uuid::new_v4();
        let c = key.credential(id);
        assert!(c.starts_with(CHECKOUT_PREFIX));
        assert_eq!(key.verify(&c), Some(id));
        // Another key, another intent's id with this MAC, a cut or changed
        // MAC, other shapes: refused.
        assert_eq!(CheckoutKey::new([8; 32]).verify(&c), None);
        let other = Uuid::new_v4();
        let swapped = c.replace(&id.simple().to_string(), &other.simple().to_string());
        assert_eq!(key.verify(&swapped), None);
        assert_eq!(key.verify(&c[..c.len() - 2]), None);
        let mut flipped = c.clone();
        let last = if flipped.ends_with('0') { "1" } else { "0" };
        flipped.replace_range(flipped.len() - 1.., last);
        assert_eq!(key.verify(&flipped), None);
        let hyphenated = c.replace(&id.simple().to_string(), &id.hyphenated().to_string());
        assert_eq!(key.verify(&hyphenated), None);
        assert_eq!(
            key.verify(&format!("{CHECKOUT_PREFIX}{}_", id.simple())),
            None
        );
        assert_eq!(key.verify("svc_test_abc"), None);
        assert_eq!(key.verify(""), None);
    }
}
