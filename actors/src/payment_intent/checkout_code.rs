//! A payment intent's checkout code (`/c/<code>`, the hosted checkout
//! page's capability): the intent's id in base62, then
//! [`CHECKOUT_CODE_LEN`] random base62 characters (62^22 > 2^130, from the
//! OS-seeded CSPRNG). The code names its intent, so finding it needs no
//! index row: the page reads the intent by the id and compares the whole
//! code with the one the intent keeps. Creating an intent writes one row
//! and one precondition fewer than a code held in `checkout_links` did
//! (docs/performance.md, "Checkout codes that name their intent").
//!
//! Codes made before (the creation time then 22 random characters, 22
//! random characters, or a sequence then 8 random characters) live in
//! `checkout_links`, code -> intent id, and keep resolving there. The id
//! is no secret (it is in the client secret and every API answer); the
//! random part is what makes the code unguessable, as before.

use uuid::Uuid;

use kobo_storage::{ReadTxn, StoreError, Table};

use super::PaymentIntent;
use crate::ids::{constant_time_eq, id_base62, id_from_base62, random_base62, ID_BASE62_LEN};

/// Random characters of a new checkout code, after the id.
pub const CHECKOUT_CODE_LEN: usize = 22;

/// The longest code the page looks up; anything longer is unknown.
const MAX_CODE_LEN: usize = 64;

/// A new checkout code for the intent `id`.
pub fn new_code(id: Uuid) -> String {
    let mut code = String::with_capacity(ID_BASE62_LEN + CHECKOUT_CODE_LEN);
    code.push_str(&id_base62(id));
    code.push_str(&random_base62(CHECKOUT_CODE_LEN));
    code
}

/// The intent a code of the current form names (`None` for any other
/// text: an older code, held in `checkout_links`, or none at all).
pub fn named_intent(code: &str) -> Option<Uuid> {
    if code.len() != ID_BASE62_LEN + CHECKOUT_CODE_LEN
        || !code.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return None;
    }
    id_from_base62(&code[..ID_BASE62_LEN])
}

/// Whether the intent's code is kept in `checkout_links` (a code made
/// before codes named their intent; a credit's payment has none at all).
pub fn has_link_row(intent: &PaymentIntent) -> bool {
    intent.bank_credit.is_none() && named_intent(&intent.checkout_code) != Some(intent.id)
}

/// The payment intent whose checkout code is `code`, as `read` sees it.
pub fn find(read: &ReadTxn, code: &str) -> Result<Option<PaymentIntent>, StoreError> {
    if code.is_empty()
        || code.len() > MAX_CODE_LEN
        || !code.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return Ok(None);
    }
    if let Some(id) = named_intent(code) {
        let intent: Option<PaymentIntent> =
            read.get_decoded(Table::PaymentIntents, id.as_bytes())?;
        if let Some(i) = intent {
            if i.bank_credit.is_none()
                && constant_time_eq(i.checkout_code.as_bytes(), code.as_bytes())
            {
                return Ok(Some(i));
            }
        }
    }
    // An older code, or (by the same length) text that only looks like a
    // current one.
    let Some(raw) = read.get(Table::CheckoutLinks, code.as_bytes())? else {
        return Ok(None);
    };
    let Ok(id) = Uuid::from_slice(&raw) else {
        return Ok(None);
    };
    read.get_decoded(Table::PaymentIntents, id.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_code_names_its_intent_and_nothing_else_does() {
        let id = Uuid::new_v4();
        let code = new_code(id);
        assert_eq!(code.len(), 44);
        assert!(code.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(named_intent(&code), Some(id));
        assert_ne!(new_code(id), code, "the random part is drawn anew");
        // Older forms: the time then 22 random characters, 22 random.
        assert_eq!(named_intent("0VcaVpy89iLq1Mdd2Sgy7xtwbP3XfP"), None);
        assert_eq!(named_intent("iLq1Mdd2Sgy7xtwbP3XfP0"), None);
        // The right length but not base62, or an id past 128 bits.
        assert_eq!(named_intent(&format!("{}-", &code[..43])), None);
        assert_eq!(
            named_intent(&format!("zzzzzzzzzzzzzzzzzzzzzz{}", &code[22..])),
            None
        );
        // Ids at both ends of the range come back whole.
        for id in [Uuid::nil(), Uuid::max()] {
            assert_eq!(named_intent(&new_code(id)), Some(id));
        }
    }
}
