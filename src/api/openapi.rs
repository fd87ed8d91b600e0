//! `GET /v1/openapi.json`: the OpenAPI 3.1 document of every `/v1`
//! operation, generated with utoipa from the code's own types: responses
//! from the view structs that render them (`PaymentIntentView`, ...),
//! request bodies and queries from the schema structs whose field names unit
//! tests keep equal to what the parsers accept, and each operation from the
//! `#[utoipa::path]` annotation on its handler. No part of it is written by
//! hand as JSON.

use std::sync::OnceLock;

use actix_web::HttpResponse;
use utoipa::openapi::extensions::ExtensionsBuilder;
use utoipa::openapi::schema::{Ref, Schema};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::RefOr;
use utoipa::{Modify, OpenApi};

pub use super::components::*;

/// Where the document is served.
pub const PATH: &str = "/v1/openapi.json";

/// The name of the secret-key security scheme.
pub const BEARER: &str = "bearer";
/// The name of the client-secret security scheme.
pub const CLIENT_SECRET: &str = "client_secret";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "kobo",
        version = "0.1.0",
        description = "Payments, balances and payouts for businesses in Nigeria. Every amount is an integer in the currency's smallest unit (kobo, cents). Every POST needs an `Idempotency-Key` header: the same key with the same body answers the saved response with `Idempotent-Replayed: true`.",
        license(name = "MIT")
    ),
    paths(
        serve,
        super::payment_intents::create,
        super::payment_intents::list,
        super::payment_intents::retrieve,
        super::payment_intents::cancel,
        super::payment_intents::bank_transfer,
        super::payment_intents::charge_attempts,
        super::cards::card,
        super::cards::authenticate,
        super::balance::balance,
        super::balance::transactions,
        super::balance::export,
        super::settlement::reserve,
        super::brands::create,
        super::brands::list,
        super::brands::retrieve,
        super::payouts::list_banks,
        super::payouts::add_bank_account,
        super::payouts::list_bank_accounts,
        super::payouts::quote,
        super::payouts::create,
        super::payouts::list,
        super::payouts::retrieve,
        super::payouts::cancel,
        super::refunds::create_refund,
        super::refunds::list_refunds,
        super::refunds::retrieve_refund,
        super::refunds::list_disputes,
        super::refunds::retrieve_dispute,
        super::refunds::evidence,
        super::refunds::open_dispute,
        super::refunds::resolve,
        super::settlement::release_pending,
        super::settlement::run,
        super::test_helpers::succeed,
        super::test_helpers::simulate_transfer,
        super::webhooks::create,
        super::webhooks::list,
        super::webhooks::disable,
        super::webhooks::enable,
        super::webhooks::delete,
        super::webhooks::test,
        super::events::list,
        super::events::redeliver,
        super::events::delivery_attempts,
        super::stream::stream,
        super::fx::preview,
        super::fx::create_conversion,
        super::fx::list_conversions,
        super::fx::retrieve_conversion,
        super::usdt::usdt,
        super::usdt::preview,
        super::usdt::create_payout,
        super::usdt::list_payouts,
        super::usdt::retrieve_payout,
        super::mandates::create,
        super::mandates::list,
        super::mandates::retrieve,
        super::mandates::refresh,
        super::mandates::cancel,
        super::mandates::charge,
        super::customers::create,
        super::customers::list,
        super::customers::retrieve,
        super::customers::update,
        super::customers::delete,
        super::customers::verify_identity,
        super::virtual_accounts::create,
        super::virtual_accounts::list,
        super::virtual_accounts::retrieve,
        super::virtual_accounts::refresh,
        super::virtual_accounts::deactivate,
        super::virtual_accounts::simulate_transfer,
        super::payment_links::create,
        super::payment_links::list,
        super::payment_links::retrieve,
        super::payment_links::update,
        super::payment_links::deactivate,
        super::payment_links::activate,
        super::payment_links::pay,
        super::invoices::create,
        super::invoices::list,
        super::invoices::retrieve,
        super::invoices::update,
        super::invoices::finalize,
        super::invoices::send_invoice,
        super::invoices::void,
        super::invoices::mark_uncollectible,
        super::invoices::delete,
        super::invoices::record_payment,
        super::invoices::charge_mandate,
        super::invoices::test_pay,
        super::plans::create,
        super::plans::list,
        super::plans::retrieve,
        super::plans::update,
        super::plans::archive,
        super::subscriptions::create,
        super::subscriptions::list,
        super::subscriptions::retrieve,
        super::subscriptions::update,
        super::subscriptions::cancel,
        super::subscriptions::manage_link,
        super::subscriptions::test_renew,
    ),
    components(
        schemas(super::ErrorBody),
        responses(
            BadRequest,
            BadRequestReplayable,
            Unauthorized,
            Forbidden,
            NotFound,
            NotFoundReplayable,
            ConflictReplayable,
            PayloadTooLarge,
            IdempotencyKeyReused,
            InternalError,
            Overloaded,
            RateLimited,
        )
    ),
    modifiers(&SecuritySchemes, &OptionalBodies, &Lifecycle, &RateLimits, &StandardErrors),
    security(("bearer" = [])),
    tags(
        (name = "payment_intents", description = "Accepting payments."),
        (name = "balance", description = "Balances, the ledger's balance transactions, and the rolling reserve."),
        (name = "brands", description = "A merchant's brands; each holds its own money."),
        (name = "payouts", description = "Banks, the merchant's bank accounts, and payouts of available naira to them."),
        (name = "refunds", description = "Refunds and disputes of successful payments."),
        (name = "test_helpers", description = "Simulated provider behaviour; test keys only (404 for live keys)."),
        (name = "webhooks", description = "Webhook endpoints, the event history with deliveries, redelivery, and the live event stream. Deliveries are HTTPS POSTs of the Event (without `deliveries`) signed with `Service-Signature: t=<unix>,v1=<hex HMAC-SHA256 of \"<t>.<event id>.<raw body>\">`."),
        (name = "fx", description = "Dollar rates and dollar-to-naira conversions."),
        (name = "usdt", description = "USDT payouts of dollars to the merchant's wallets."),
        (name = "mandates", description = "Direct debit: mandates the customer approves once, and charges that debit their bank account."),
        (name = "customers", description = "The merchant's customers: one per email in each mode, their risk action and their identity (BVN) checks."),
        (name = "virtual_accounts", description = "Dedicated virtual accounts: one permanent account number (NUBAN) per customer; every transfer into it becomes a successful payment intent."),
        (name = "payment_links", description = "Reusable payment pages (`/p/<slug>`): each visitor who pays makes one payment intent."),
        (name = "invoices", description = "Invoices with partial payments, a hosted invoice page, and reconciliation of the customer's payments and virtual-account credits."),
        (name = "subscriptions", description = "Plans (a price billed every interval) and subscriptions: a customer billed each period through an invoice, collected by direct debit or by sending the invoice."),
        (name = "meta", description = "About the API itself."),
    )
)]
pub struct ApiDoc;

/// The document.
pub fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The document as served. The rename works on the text: in compact JSON,
/// `"x-contentSchema":` (with unescaped quotes) can only be an object key.
pub fn document_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        document()
            .to_json()
            .expect("the OpenAPI document serializes")
            .replace(&format!("\"{CONTENT_SCHEMA}\":"), "\"contentSchema\":")
    })
}

/// This document
///
/// The OpenAPI 3.1 document of every `/v1` operation. Needs no key.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    operation_id = "get_openapi",
    tag = "meta",
    security(()),
    responses(
        (status = 200, description = "The OpenAPI document.", content_type = "application/json", body = Object),
    )
)]
pub async fn serve(state: Option<super::State>) -> HttpResponse {
    // With `servers` (the base URL) and curl examples: super::docs.
    let body = match &state {
        Some(state) => public_document(state),
        None => document_json(),
    };
    HttpResponse::Ok()
        .content_type("application/json")
        .body(body)
}

/// Adds the security schemes and makes the document's own operation need no
/// key (`security: []`).
struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A secret key: `svc_test_...` sees test data only, `svc_live_...` live data only. Missing, malformed, unknown or revoked: 401.",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            CLIENT_SECRET,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A payment intent's `client_secret` (from its create response): acts on that one payment intent only, where an operation lists this scheme; anything else answers 401.",
                    ))
                    .build(),
            ),
        );
        if let Some(item) = openapi.paths.paths.get_mut(PATH) {
            if let Some(op) = item.get.as_mut() {
                op.security = Some(Vec::new());
            }
        }
    }
}

/// An optional request body (`Option<T>` in `request_body`) may be left out;
/// it may not be `null`: its schema is `T`'s (utoipa renders it as
/// `oneOf: [T, null]`), and `required` stays false.
struct OptionalBodies;

impl Modify for OptionalBodies {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            for op in [&mut item.post, &mut item.put, &mut item.patch]
                .into_iter()
                .flatten()
            {
                let Some(RefOr::T(body)) = op.request_body.as_mut() else {
                    continue;
                };
                for content in body.content.values_mut() {
                    let RefOr::T(content) = content else {
                        continue;
                    };
                    let Some(RefOr::T(Schema::OneOf(one_of))) = &content.schema else {
                        continue;
                    };
                    let null = serde_json::json!({"type": "null"});
                    let not_null: Vec<&RefOr<Schema>> = one_of
                        .items
                        .iter()
                        .filter(|i| serde_json::to_value(i).ok().as_ref() != Some(&null))
                        .collect();
                    if let [only] = not_null[..] {
                        if one_of.items.len() == 2 {
                            content.schema = Some(only.clone());
                        }
                    }
                }
            }
        }
    }
}

/// Marks every operation live (service-api.md, Versioning): `x-lifecycle`.
struct Lifecycle;

impl Modify for Lifecycle {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.patch,
                &mut item.delete,
            ]
            .into_iter()
            .flatten()
            {
                let live = ExtensionsBuilder::new().add("x-lifecycle", "live").build();
                match op.extensions.as_mut() {
                    Some(e) => e.merge(live),
                    None => op.extensions = Some(live),
                }
            }
        }
    }
}

/// Every operation may answer 429 (docs/api.md, "Rate limits"): the
/// per-IP limit covers every route, the per-key limit every authenticated
/// call.
struct RateLimits;

impl Modify for RateLimits {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.patch,
                &mut item.delete,
            ]
            .into_iter()
            .flatten()
            {
                op.responses.responses.insert(
                    "429".to_string(),
                    RefOr::Ref(Ref::from_response_name("RateLimited")),
                );
            }
        }
    }
}

/// The rows every operation of a kind has, so an annotation lists only what
/// is its own: every authenticated operation may answer 401 and 500; every
/// idempotent POST also 400, 413 and 422 (saved and replayed: their
/// `...Replayable` forms), and its 2xx answers carry `Idempotent-Replayed`.
/// A row an annotation gives is kept.
struct StandardErrors;

impl Modify for StandardErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::header::HeaderBuilder;
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        for (path, item) in openapi.paths.paths.iter_mut() {
            if path == PATH {
                continue;
            }
            for op in [&mut item.get, &mut item.post].into_iter().flatten() {
                let idempotent = op
                    .parameters
                    .iter()
                    .flatten()
                    .any(|p| matches!(p, RefOr::T(p) if p.name == "Idempotency-Key"));
                let mut rows = vec![("401", "Unauthorized"), ("500", "InternalError")];
                if idempotent {
                    rows.extend([
                        ("400", "BadRequestReplayable"),
                        ("413", "PayloadTooLarge"),
                        ("422", "IdempotencyKeyReused"),
                    ]);
                }
                for (status, name) in rows {
                    op.responses
                        .responses
                        .entry(status.to_string())
                        .or_insert_with(|| RefOr::Ref(Ref::from_response_name(name)));
                }
                if !idempotent {
                    continue;
                }
                for (status, response) in op.responses.responses.iter_mut() {
                    let RefOr::T(response) = response else {
                        continue;
                    };
                    if !status.starts_with('2') {
                        continue;
                    }
                    let header = HeaderBuilder::new()
                        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                        .description(Some(REPLAYED))
                        .build();
                    response
                        .headers
                        .entry("Idempotent-Replayed".to_string())
                        .or_insert(RefOr::T(header));
                }
            }
        }
    }
}

/// The `Idempotent-Replayed` header's description.
const REPLAYED: &str =
    "`true` when this is the saved response of an earlier request with the same Idempotency-Key";

#[cfg(test)]
#[path = "openapi_tests.rs"]
mod tests;

/// `GET /v1/openapi.json` as served: the document with `servers` and the
/// examples (computed once: the base URL does not change while running).
pub fn public_document(state: &super::State) -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        super::examples::finish_document(document_json(), &state.kobo.config.base_url, false)
    })
}
