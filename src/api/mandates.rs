//! Direct debit: `/v1/mandates` (create, list, retrieve, refresh, cancel,
//! charge).

use actix_web::{web, HttpRequest};
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::idempotency::{Answer, IdempotencySave};
use kobo_actors::mandate::actor::{ChargeMandate, MandateAction, MandateMessage};
use kobo_actors::mandate::service::{self, CreateMandate, MandateFilter};
use kobo_actors::mandate::{Mandate, MandateStatus, MandateView};
use kobo_actors::money::{Currency, FeeBearer};
use kobo_actors::payment_intent::service::CreatePaymentIntent;
use kobo_actors::payment_intent::{metadata_schema, PaymentIntentView};
use kobo_actors::query::{ListView, Principal};
use kobo_actors::{DomainError, ErrorCode};

use super::body::{self as body, NoFields};
use super::components::{
    path_id, BadRequest, ByRef, ConflictReplayable, Forbidden, IdempotencyKey, NotFound,
    NotFoundReplayable, Overloaded,
};
use super::endpoint::{live_payments, Call, Endpoint};
use super::params;
use super::payment_intents::MIN_PAYMENT_AMOUNT;
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(
        resource("/v1/mandates")
            .route(web::post().to(create))
            .route(web::get().to(list)),
    )
    .service(resource("/v1/mandates/{id}").route(web::get().to(retrieve)))
    .service(resource("/v1/mandates/{id}/refresh").route(web::post().to(refresh)))
    .service(resource("/v1/mandates/{id}/cancel").route(web::post().to(cancel)))
    .service(resource("/v1/mandates/{id}/charge").route(web::post().to(charge)));
}

pub type MandateRef = ByRef<MandateView>;

path_id!(
    /// The `{id}` of a mandate.
    MandateId,
    "mandate",
    /// The mandate's id; unknown, malformed, another merchant's or the
    /// other mode's: 404.
);

// The body of `POST /v1/mandates`, for the OpenAPI document; a unit test
/// The body that creates a mandate: exactly one of `customer` and
/// `customer_email`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateMandate)]
pub struct CreateMandateRequest {
    /// An existing customer (unknown or deleted: 404 with param
    /// `customer`).
    #[serde(deserialize_with = "body::uuid")]
    customer: Option<Uuid>,
    /// The customer of this email (compared case-insensitively), found or
    /// made.
    #[schema(format = Email, max_length = 254)]
    #[serde(deserialize_with = "body::email")]
    customer_email: Option<String>,
    #[schema(max_length = 255)]
    #[serde(deserialize_with = "body::text::<_, 255>")]
    customer_name: Option<String>,
    /// Where the authorization page sends the customer after approving: an
    /// http(s) URL.
    #[schema(format = "uri", max_length = 2048)]
    #[serde(deserialize_with = "body::url")]
    callback_url: Option<String>,
}

// The body of a charge, for the OpenAPI document; a unit test keeps these
/// The body that charges a mandate.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ChargeMandate)]
pub struct ChargeMandateRequest {
    /// Kobo, at least 100.
    #[schema(minimum = 100, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::amount::<_, MIN_PAYMENT_AMOUNT>")]
    amount: i64,
    /// `NGN`: direct debit is naira only.
    #[schema(value_type = String, pattern = "^NGN$")]
    #[serde(deserialize_with = "naira")]
    currency: Currency,
    #[schema(max_length = 1000)]
    #[serde(deserialize_with = "body::text::<_, 1000>")]
    description: Option<String>,
    /// Unique among the merchant's payment intents (409 `duplicate_reference`).
    #[schema(max_length = 255)]
    #[serde(deserialize_with = "body::text::<_, 255>")]
    reference: Option<String>,
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "body::metadata")]
    metadata: Map<String, Value>,
}

/// The query of `GET /v1/mandates`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListMandatesQuery {
    /// Page size, 1 to 100.
    #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
    #[serde(deserialize_with = "params::limit")]
    limit: usize,
    /// The id of the last mandate of the previous page.
    #[serde(deserialize_with = "params::uuid")]
    starting_after: Option<Uuid>,
    /// Only this customer's mandates.
    #[serde(deserialize_with = "params::uuid")]
    customer: Option<Uuid>,
    /// Only mandates in this status.
    #[param(inline)]
    #[serde(deserialize_with = "params::one_of")]
    status: Option<MandateStatus>,
}

pub(crate) fn direct_debit_enabled(p: &Principal) -> Result<(), DomainError> {
    if !p.merchant.settings.payment_methods.direct_debit {
        return Err(DomainError::request(
            ErrorCode::PaymentMethodUnavailable,
            None,
            "direct debit is turned off in this merchant's payment settings",
        ));
    }
    Ok(())
}

/// Create a mandate
///
/// A `pending` mandate with `authorization_url`, where the customer
/// approves debits from their bank account. Naira only. Exactly one of
/// `customer` and `customer_email` (the customer of the email is found, or
/// made).
/// Live mode without a configured provider: 409 `provider_not_configured`.
#[utoipa::path(
    post,
    path = "/v1/mandates",
    operation_id = "create_mandate",
    tag = "mandates",
    params(IdempotencyKey),
    request_body(content = CreateMandateRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new mandate, `pending`.", body = MandateView),
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
            |c, body: CreateMandateRequest| async move {
                let (state, p) = (&c.state, &c.p);
                let request = CreateMandate {
                    customer: body.customer,
                    customer_email: body.customer_email,
                    customer_name: body.customer_name,
                    callback_url: body.callback_url,
                };
                direct_debit_enabled(p)?;
                let deps = state.kobo.mandates.deps();
                Ok(service::create(deps, p.merchant.id, p.mode, request, c.save()).await?)
            },
        )
        .await
}

/// List mandates
///
/// Newest first.
#[utoipa::path(
    get,
    path = "/v1/mandates",
    operation_id = "list_mandates",
    tag = "mandates",
    params(ListMandatesQuery),
    responses(
        (status = 200, description = "A page of mandates, newest first.", body = ListView<MandateRef>),
        (status = 400, response = BadRequest),
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: ListMandatesQuery| async move {
            let Call { state, p, .. } = c;
            let filter = MandateFilter {
                limit: q.limit,
                starting_after: q.starting_after,
                customer: q.customer,
                status: q.status,
            };
            let page = service::list(&state.kobo, p.merchant.id, p.mode, &filter)?;
            Ok(page.to_api())
        })
        .await
}

fn own(state: &State, p: &Principal, raw: &str) -> Result<Mandate, DomainError> {
    let id = MandateId::parse(raw).map_err(|e| e.0)?.id;
    service::own(&state.kobo, p.merchant.id, p.mode, id)
}

/// Retrieve a mandate
#[utoipa::path(
    get,
    path = "/v1/mandates/{id}",
    operation_id = "retrieve_mandate",
    tag = "mandates",
    params(MandateId),
    responses(
        (status = 200, description = "The mandate.", body = MandateView),
        (status = 404, response = NotFound),
    )
)]
async fn retrieve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let Call { state, p, .. } = c;
            Ok(own(&state, &p, &path)?.to_api())
        })
        .await
}

async fn send(
    state: &State,
    m: &Mandate,
    action: MandateAction,
    idem: Option<IdempotencySave>,
) -> Result<Answer<MandateView>, DomainError> {
    state
        .kobo
        .mandates
        .send(
            m.id,
            MandateMessage {
                merchant: m.merchant,
                mode: m.mode,
                action,
                idem,
            },
        )
        .await?
}

/// A body-less POST on one mandate.
async fn mandate_action(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
    action: MandateAction,
) -> ApiResult {
    Endpoint::secret_key(200)
        .post(req, state, payload, |c, _: NoFields| async move {
            let (state, p) = (&c.state, &c.p);
            let raw = path.as_str();
            let m = own(state, p, raw)?;
            Ok(send(state, &m, action, c.save).await?)
        })
        .await
}

/// Refresh a mandate
///
/// Asks the provider now whether the customer approved a `pending`
/// mandate (the service also asks every 5 minutes on its own). A mandate
/// that is no longer pending is returned as it is.
#[utoipa::path(
    post,
    path = "/v1/mandates/{id}/refresh",
    operation_id = "refresh_mandate",
    tag = "mandates",
    params(MandateId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The mandate after the provider's answer.", body = MandateView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn refresh(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    mandate_action(req, state, path, payload, MandateAction::Refresh).await
}

/// Cancel a mandate
///
/// `pending` or `active` only (otherwise 409 `mandate_unexpected_state`).
/// No further charges; debits already accepted still finish.
#[utoipa::path(
    post,
    path = "/v1/mandates/{id}/cancel",
    operation_id = "cancel_mandate",
    tag = "mandates",
    params(MandateId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The canceled mandate.", body = MandateView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn cancel(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    mandate_action(req, state, path, payload, MandateAction::Cancel).await
}

impl ChargeMandateRequest {
    fn into_params(self) -> CreatePaymentIntent {
        CreatePaymentIntent {
            amount: self.amount,
            currency: self.currency,
            reference: self.reference,
            description: self.description,
            customer_email: None,
            metadata: self.metadata,
            fee_bearer: FeeBearer::Merchant,
            brand: None,
            customer: None,
            return_url: None,
        }
    }
}

/// Direct debit is naira only: `currency` must be `NGN`.
fn naira<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Currency, D::Error> {
    match body::currency(d)? {
        Some(Currency::NGN) => Ok(Currency::NGN),
        None => Err(body::tunnel(DomainError::missing(body::FIELD))),
        Some(_) => Err(body::tunnel(DomainError::invalid(
            body::FIELD,
            "direct debit is naira only: currency must be NGN",
        ))),
    }
}

/// Charge a mandate
///
/// Creates a payment intent that debits the customer's account through
/// the mandate: `processing` until the bank confirms, then `successful`
/// (captured, `payment_intent.successful`) or `failed`
/// (`payment_intent.failed`). The business bears the fee, at the
/// direct-debit price. A mandate that is not `active`: 409
/// `mandate_not_active`. The same Idempotency-Key never debits twice.
#[utoipa::path(
    post,
    path = "/v1/mandates/{id}/charge",
    operation_id = "charge_mandate",
    tag = "mandates",
    params(MandateId, IdempotencyKey),
    request_body(content = ChargeMandateRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new payment intent, `processing`, with `checkout_url` and `client_secret`.",
            body = PaymentIntentView),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn charge(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    Endpoint::secret_key(201)
        .gate(live_payments)
        .post(
            req,
            state,
            payload,
            |c, body: ChargeMandateRequest| async move {
                let (state, p) = (&c.state, &c.p);
                let raw = path.as_str();
                let params = body.into_params();
                let m = own(state, p, raw)?;
                direct_debit_enabled(p)?;
                let charge = ChargeMandate {
                    merchant: Box::new((*p.merchant).clone()),
                    mode: m.mode,
                    params,
                    invoice: None,
                    idem: c.save,
                    claim: None,
                };
                Ok(state.kobo.mandates.send(m.id, charge).await??)
            },
        )
        .await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use utoipa::openapi::schema::Schema;
    use utoipa::openapi::RefOr;
    use utoipa::PartialSchema;

    use super::*;
    use kobo_actors::customer::CustomerView;

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn property_names(schema: RefOr<Schema>) -> BTreeSet<String> {
        match schema {
            RefOr::T(Schema::Object(o)) => o.properties.keys().cloned().collect(),
            _ => panic!("not an object schema"),
        }
    }

    /// The request schemas have exactly the fields the parsers accept.
    #[test]
    fn request_schemas_match_what_the_parsers_accept() {
        assert_eq!(
            property_names(CreateMandateRequest::schema()),
            names(super::body::fields_of::<CreateMandateRequest>())
        );
        assert_eq!(
            property_names(ChargeMandateRequest::schema()),
            names(super::body::fields_of::<ChargeMandateRequest>())
        );
        let charge = serde_json::to_value(ChargeMandateRequest::schema()).unwrap();
        assert_eq!(
            charge["properties"]["amount"]["minimum"],
            MIN_PAYMENT_AMOUNT
        );
        assert_eq!(
            charge["required"],
            serde_json::json!(["amount", "currency"])
        );
    }

    /// The documented bodies and responses are these schemas and views.
    #[test]
    fn the_document_uses_the_mandate_schemas() {
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
        assert_eq!(body("/v1/mandates"), CreateMandateRequest::name());
        assert_eq!(
            body("/v1/mandates/{id}/charge"),
            ChargeMandateRequest::name()
        );
        assert_eq!(body("/v1/mandates/{id}/cancel"), NoFields::name());
        assert_eq!(body("/v1/mandates/{id}/refresh"), NoFields::name());
        let ok = |method: &str, path: &str, status: &str| {
            d["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
                ["$ref"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path}"))
                .to_string()
        };
        let schema = |n: std::borrow::Cow<'static, str>| format!("#/components/schemas/{n}");
        assert_eq!(
            ok("post", "/v1/mandates", "201"),
            schema(MandateView::name())
        );
        assert_eq!(
            ok("get", "/v1/mandates/{id}", "200"),
            schema(MandateView::name())
        );
        assert_eq!(
            ok("get", "/v1/mandates", "200"),
            "#/components/schemas/List_Mandate"
        );
        assert_eq!(
            ok("post", "/v1/mandates/{id}/charge", "201"),
            schema(PaymentIntentView::name())
        );
        assert_eq!(
            ok("get", "/v1/customers/{id}", "200"),
            schema(CustomerView::name())
        );
    }
}
