//! The merchant of a customer-facing page, for routing in cluster mode:
//! the checkout page (`/c/{code}`), a payment link (`/p/{slug}`), an
//! invoice (`/i/{code}`), a subscription's management page (`/s/{token}`)
//! and the sandbox's bank and mandate pages. Each is found the way its
//! page finds it (one or two store reads); a path that names nothing is
//! left to the page, which answers it locally (its 404 or expired page).

use uuid::Uuid;

use kobo_actors::payment_intent::PaymentIntent;
use kobo_storage::Table;

use crate::api::AppState;

/// The merchant whose page `path` is, when it is one and names an object.
pub fn merchant_of_page(state: &AppState, path: &str) -> Option<Uuid> {
    let kobo = &state.kobo;
    let mut parts = path.trim_start_matches('/').split('/');
    let (first, second) = (parts.next()?, parts.next()?);
    match (first, second) {
        ("c", code) => crate::checkout::load_by_code(kobo, code)
            .ok()?
            .map(|i| i.merchant),
        ("p", slug) => kobo_actors::payment_link::service::by_slug(kobo, slug)
            .ok()?
            .map(|l| l.merchant),
        ("i", code) => kobo_actors::invoice::service::by_code(kobo, code)
            .ok()?
            .map(|i| i.merchant),
        ("s", token) => {
            let id = state
                .checkout_key
                .verify_manage(token, kobo.clock.now().timestamp())?;
            kobo_actors::subscription::service::load_any(kobo, id)
                .ok()?
                .map(|s| s.merchant)
        }
        ("sandbox", "bank") => {
            let (id, _) =
                kobo_actors::payment_intent::provider::parse_redirect_reference(parts.next()?)?;
            let intent: PaymentIntent = kobo
                .store
                .read()
                .ok()?
                .get_decoded(Table::PaymentIntents, id.as_bytes())
                .ok()??;
            Some(intent.merchant)
        }
        ("sandbox", "mandates") => {
            kobo_actors::mandate::service::by_authorization_reference(kobo, parts.next()?)
                .ok()?
                .map(|m| m.merchant)
        }
        _ => None,
    }
}
