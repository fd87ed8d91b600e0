//! `/v1/payment_links`: reusable payment pages (create, list, retrieve,
//! update, deactivate, activate) and the test helper that pays one
//! without a browser. The page itself is `crate::checkout::link`.

use actix_web::{web, HttpRequest};

use kobo_actors::idempotency::render;
use kobo_actors::money::Currency;
use kobo_actors::payment_intent::actor::Action;
use kobo_actors::payment_intent::PaymentIntentView;
use kobo_actors::payment_link::actor::{send, send_visit, LinkAction};
use kobo_actors::payment_link::service::{self, LinkFilter};
use kobo_actors::payment_link::{PaymentLink, PaymentLinkView};
use kobo_actors::query::{ListView, Principal};
use kobo_actors::DomainError;

pub use super::payment_link_bodies::*;

use super::body::NoFields;
use super::components::{
    path_id, BadRequest, ByRef, ConflictReplayable, Forbidden, IdempotencyKey, NotFound,
    NotFoundReplayable, Overloaded,
};
use super::endpoint::{live_payments, test_mode, Call, Endpoint};
use super::params;
use super::payment_intents::act;
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(
        resource("/v1/payment_links")
            .route(web::post().to(create))
            .route(web::get().to(list)),
    )
    .service(
        resource("/v1/payment_links/{id}")
            .route(web::get().to(retrieve))
            .route(web::post().to(update)),
    )
    .service(resource("/v1/payment_links/{id}/deactivate").route(web::post().to(deactivate)))
    .service(resource("/v1/payment_links/{id}/activate").route(web::post().to(activate)))
    .service(resource("/v1/test_helpers/payment_links/{id}/pay").route(web::post().to(pay)));
}

/// List items: `ListView<PaymentLinkRef>` is `List_PaymentLink`.
pub type PaymentLinkRef = ByRef<PaymentLinkView>;

path_id!(
    /// The `{id}` of a payment link.
    PaymentLinkId,
    "payment_link",
    /// The payment link's id; unknown, malformed, another merchant's or the
    /// other mode's: 404.
);

fn own(state: &State, p: &Principal, raw: &str) -> Result<PaymentLink, DomainError> {
    let id = PaymentLinkId::parse(raw).map_err(|e| e.0)?.id;
    service::own(&state.kobo, p.merchant.id, p.mode, id)
}

/// Create a payment link
///
/// An `active` link whose page is `url` (`<base-url>/p/<slug>`); each
/// visitor who pays there makes one payment intent (`payment_link` set).
/// A slug another link holds (any merchant, either mode): 409 `slug_taken`.
#[utoipa::path(
    post,
    path = "/v1/payment_links",
    operation_id = "create_payment_link",
    tag = "payment_links",
    params(IdempotencyKey),
    request_body(content = CreatePaymentLinkRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new payment link, `active`.", body = PaymentLinkView),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
    )
)]
async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    Endpoint::secret_key(201)
        .gate(live_payments)
        .post(
            req,
            state,
            payload,
            |c, body: CreatePaymentLinkRequest| async move {
                let p = &c.p;
                Ok(service::create(c.kobo(), &p.merchant, p.mode, body.into(), c.save()).await?)
            },
        )
        .await
}

/// List payment links
///
/// Newest first; `status` filters by the status shown now.
#[utoipa::path(
    get,
    path = "/v1/payment_links",
    operation_id = "list_payment_links",
    tag = "payment_links",
    params(ListPaymentLinksQuery),
    responses(
        (status = 200, description = "A page of payment links, newest first.", body = ListView<PaymentLinkRef>),
        (status = 400, response = BadRequest),
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: ListPaymentLinksQuery| async move {
            let Call { state, p, .. } = c;
            let filter = LinkFilter {
                limit: q.limit,
                starting_after: q.starting_after,
                status: q.status,
                brand: params::brand(&state, &p, q.brand)?,
            };
            let page = service::list(&state.kobo, p.merchant.id, p.mode, &filter)?;
            Ok(page.to_api())
        })
        .await
}

/// Retrieve a payment link
#[utoipa::path(
    get,
    path = "/v1/payment_links/{id}",
    operation_id = "retrieve_payment_link",
    tag = "payment_links",
    params(PaymentLinkId),
    responses(
        (status = 200, description = "The payment link.", body = PaymentLinkView),
        (status = 404, response = NotFound),
    )
)]
async fn retrieve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let Call { state, p, .. } = c;
            let link = own(&state, &p, &path)?;
            Ok(render(&service::view(&state.kobo, &link)?))
        })
        .await
}

/// A POST on one link whose body `B` makes the action sent to its actor.
async fn link_action<B: serde::de::DeserializeOwned>(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
    action: impl FnOnce(B) -> LinkAction,
) -> ApiResult {
    Endpoint::secret_key(200)
        .post(req, state, payload, |c, body: B| async move {
            let link = own(&c.state, &c.p, &path)?;
            let links = &c.state.kobo.payment_links;
            Ok(send(links, &link, action(body), c.save).await?)
        })
        .await
}

/// Update a payment link
///
/// The fields given replace the link's. The slug cannot change after the
/// first payment (409 `slug_locked`). An update does not reactivate an
/// inactive link: `activate` does, once its cause is cleared.
#[utoipa::path(
    post,
    path = "/v1/payment_links/{id}",
    operation_id = "update_payment_link",
    tag = "payment_links",
    params(PaymentLinkId, IdempotencyKey),
    request_body(content = UpdatePaymentLinkRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The updated payment link.", body = PaymentLinkView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn update(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    link_action(req, state, path, payload, |b: UpdatePaymentLinkRequest| {
        LinkAction::Update(Box::new(b.into()))
    })
    .await
}

/// Deactivate a payment link
///
/// The page stops taking payments (`inactive`, `deactivated`;
/// `payment_link.deactivated`). Payments already started still finish.
/// An inactive link is returned as it is (its reason becomes
/// `deactivated`).
#[utoipa::path(
    post,
    path = "/v1/payment_links/{id}/deactivate",
    operation_id = "deactivate_payment_link",
    tag = "payment_links",
    params(PaymentLinkId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The payment link, `inactive`.", body = PaymentLinkView),
        (status = 404, response = NotFoundReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn deactivate(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    link_action(req, state, path, payload, |_: NoFields| {
        LinkAction::Deactivate
    })
    .await
}

/// Activate a payment link
///
/// Only once the cause is cleared: an `expires_at` that has passed or a
/// `max_payments` reached answers 409 `payment_link_inactive` (set a later
/// `expires_at` or a higher `max_payments` first). An active link is
/// returned as it is.
#[utoipa::path(
    post,
    path = "/v1/payment_links/{id}/activate",
    operation_id = "activate_payment_link",
    tag = "payment_links",
    params(PaymentLinkId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The payment link, `active`.", body = PaymentLinkView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn activate(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    link_action(req, state, path, payload, |_: NoFields| {
        LinkAction::Activate
    })
    .await
}

/// Pay a test payment link
///
/// Test keys only (404 for live keys). A whole visit of the link's page:
/// the answers are checked as the page checks them (400
/// `amount_out_of_range`, a missing required field), a payment intent is
/// made (`payment_link` set, `customer_email`, the answers in `metadata`
/// as `cf_<key>`), then paid: by a simulated bank transfer for naira (with
/// transfers on), else as the `succeed` helper does. An inactive link:
/// 409 `payment_link_inactive`; every remaining payment held by one in
/// progress: 409 `payment_link_full`.
#[utoipa::path(
    post,
    path = "/v1/test_helpers/payment_links/{id}/pay",
    operation_id = "test_pay_payment_link",
    tag = "test_helpers",
    params(PaymentLinkId, IdempotencyKey),
    request_body(content = PayPaymentLinkRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The payment intent, `successful`.", body = PaymentIntentView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn pay(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    Endpoint::secret_key(200)
        .gate(test_mode)
        .post(
            req,
            state,
            payload,
            |c, body: PayPaymentLinkRequest| async move {
                let (state, p) = (&c.state, &c.p);
                let link = own(state, p, &path)?;
                let made = send_visit(&state.kobo.payment_links, &link, body.into()).await?;
                let id = made.view().id;
                let transfer = link.currency == Currency::NGN
                    && p.merchant.settings.payment_methods.bank_transfer;
                let action = match transfer {
                    true => Action::SimulateTransfer { amount: None },
                    false => Action::TestSucceed,
                };
                Ok(act(state, p, id, action, c.save.clone()).await?)
            },
        )
        .await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;
    use utoipa::openapi::schema::Schema;
    use utoipa::openapi::RefOr;
    use utoipa::{PartialSchema, ToSchema};

    use super::super::body::fields_of;
    use super::*;

    fn property_names(schema: RefOr<Schema>) -> BTreeSet<String> {
        match schema {
            RefOr::T(Schema::Object(o)) => o.properties.keys().cloned().collect(),
            _ => panic!("not an object schema"),
        }
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// The request schemas have exactly the fields the parsers accept.
    #[test]
    fn request_schemas_match_what_the_parsers_accept() {
        assert_eq!(
            property_names(CreatePaymentLinkRequest::schema()),
            names(fields_of::<CreatePaymentLinkRequest>())
        );
        assert_eq!(
            property_names(UpdatePaymentLinkRequest::schema()),
            names(fields_of::<UpdatePaymentLinkRequest>())
        );
        assert_eq!(
            property_names(CustomFieldRequest::schema()),
            names(fields_of::<CustomFieldRequest>())
        );
        assert_eq!(
            property_names(PayPaymentLinkRequest::schema()),
            names(fields_of::<PayPaymentLinkRequest>())
        );
        let create = serde_json::to_value(CreatePaymentLinkRequest::schema()).unwrap();
        assert_eq!(
            create["required"],
            serde_json::json!(["name", "currency", "amount_type"])
        );
        assert_eq!(create["properties"]["min_amount"]["minimum"], 100);
    }

    /// The documented bodies and answers are these schemas and views.
    #[test]
    fn the_document_uses_the_payment_link_schemas() {
        let d: Value =
            serde_json::from_str(&super::super::openapi::document().to_json().unwrap()).unwrap();
        let body = |path: &str| {
            d["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                .as_str()
                .unwrap_or_else(|| panic!("{path}"))
                .rsplit('/')
                .next()
                .unwrap()
                .to_string()
        };
        assert_eq!(body("/v1/payment_links"), CreatePaymentLinkRequest::name());
        assert_eq!(
            body("/v1/payment_links/{id}"),
            UpdatePaymentLinkRequest::name()
        );
        assert_eq!(body("/v1/payment_links/{id}/activate"), NoFields::name());
        assert_eq!(
            body("/v1/test_helpers/payment_links/{id}/pay"),
            PayPaymentLinkRequest::name()
        );
        let ok = |method: &str, path: &str, status: &str| {
            d["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
                ["$ref"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path}"))
                .to_string()
        };
        let schema = |n: std::borrow::Cow<'static, str>| format!("#/components/schemas/{n}");
        let link = schema(PaymentLinkView::name());
        assert_eq!(ok("post", "/v1/payment_links", "201"), link);
        assert_eq!(ok("get", "/v1/payment_links/{id}", "200"), link);
        assert_eq!(ok("post", "/v1/payment_links/{id}", "200"), link);
        assert_eq!(ok("post", "/v1/payment_links/{id}/deactivate", "200"), link);
        assert_eq!(
            ok("get", "/v1/payment_links", "200"),
            "#/components/schemas/List_PaymentLink"
        );
        assert_eq!(
            ok("post", "/v1/test_helpers/payment_links/{id}/pay", "200"),
            schema(PaymentIntentView::name())
        );
    }
}
