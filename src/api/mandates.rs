//! Direct debit: `/v1/mandates` (create, list, retrieve, refresh, cancel,
//! charge) and `GET /v1/customers/{id}`.

use actix_web::{web, HttpRequest};
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::customer::{self, CustomerView};
use kobo_actors::idempotency::IdempotencySave;
use kobo_actors::mandate::actor::{MandateAction, MandateMessage};
use kobo_actors::mandate::service::{self, CreateMandate, MandateFilter};
use kobo_actors::mandate::{Mandate, MandateStatus, MandateView};
use kobo_actors::money::{Currency, FeeBearer};
use kobo_actors::payment_intent::service::CreatePaymentIntent;
use kobo_actors::payment_intent::{metadata_schema, PaymentIntentView};
use kobo_actors::query::{ListView, Principal};
use kobo_actors::DomainError;

use super::body::{Fields, Query};
use super::openapi::{
    BadRequest, BadRequestReplayable, ByRef, ConflictReplayable, Forbidden, IdempotencyKey,
    IdempotencyKeyReused, InternalError, NotFound, NotFoundReplayable, Overloaded, PayloadTooLarge,
    Unauthorized,
};
use super::payment_intents::{ensure_can_take_payments, NoFields, MIN_PAYMENT_AMOUNT, NO_FIELDS};
use super::{
    authenticate, idempotent, json_response, parse_id, read_body, resource, ApiError, ApiResult,
    Reply, State,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/v1/mandates")
            .route(web::post().to(create))
            .route(web::get().to(list)),
    )
    .service(resource("/v1/mandates/{id}").route(web::get().to(retrieve)))
    .service(resource("/v1/mandates/{id}/refresh").route(web::post().to(refresh)))
    .service(resource("/v1/mandates/{id}/cancel").route(web::post().to(cancel)))
    .service(resource("/v1/mandates/{id}/charge").route(web::post().to(charge)))
    .service(resource("/v1/customers/{id}").route(web::get().to(retrieve_customer)));
}

pub type MandateRef = ByRef<MandateView>;

/// The `{id}` of a mandate.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct MandateId {
    /// The mandate's id; unknown, malformed, another merchant's or the
    /// other mode's: 404.
    id: Uuid,
}

/// The `{id}` of a customer.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct CustomerId {
    /// The customer's id; unknown, malformed, another merchant's or the
    /// other mode's: 404.
    id: Uuid,
}

/// The fields `POST /v1/mandates` accepts: [`CreateMandateRequest`]'s.
pub const CREATE_FIELDS: &[&str] = &[
    "customer",
    "customer_email",
    "customer_name",
    "callback_url",
];

// The body of `POST /v1/mandates`, for the OpenAPI document; a unit test
// keeps these fields and [`CREATE_FIELDS`] equal.
/// The body that creates a mandate: exactly one of `customer` and
/// `customer_email`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateMandate)]
#[allow(dead_code)]
pub struct CreateMandateRequest {
    /// An existing customer (unknown: 404 with param `customer`).
    customer: Option<Uuid>,
    /// A new customer is created for this email.
    #[schema(format = Email, max_length = 254)]
    customer_email: Option<String>,
    #[schema(max_length = 255)]
    customer_name: Option<String>,
    /// Where the authorization page sends the customer after approving: an
    /// http(s) URL.
    #[schema(format = "uri", max_length = 2048)]
    callback_url: Option<String>,
}

/// The fields `POST /v1/mandates/{id}/charge` accepts:
/// [`ChargeMandateRequest`]'s.
pub const CHARGE_FIELDS: &[&str] = &["amount", "currency", "description", "reference", "metadata"];

// The body of a charge, for the OpenAPI document; a unit test keeps these
// fields and [`CHARGE_FIELDS`] equal.
/// The body that charges a mandate.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ChargeMandate)]
#[allow(dead_code)]
pub struct ChargeMandateRequest {
    /// Kobo, at least 100.
    #[schema(minimum = 100, maximum = 1_000_000_000_000_i64)]
    amount: i64,
    /// `NGN`: direct debit is naira only.
    #[schema(pattern = "^NGN$")]
    currency: String,
    #[schema(max_length = 1000)]
    description: Option<String>,
    /// Unique among the merchant's payment intents (409 `duplicate_reference`).
    #[schema(max_length = 255)]
    reference: Option<String>,
    #[schema(schema_with = metadata_schema)]
    #[serde(default)]
    metadata: Map<String, Value>,
}

/// The query `GET /v1/mandates` accepts.
pub const LIST_PARAMS: &[&str] = &["limit", "starting_after", "customer", "status"];

// The query of `GET /v1/mandates`; a unit test keeps these names and
// [`LIST_PARAMS`] equal.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ListMandatesQuery {
    /// Page size, 1 to 100.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<u8>,
    /// The id of the last mandate of the previous page.
    starting_after: Option<Uuid>,
    /// Only this customer's mandates.
    customer: Option<Uuid>,
    /// Only mandates in this status.
    #[param(inline)]
    status: Option<MandateStatus>,
}

fn direct_debit_enabled(p: &Principal) -> Result<(), DomainError> {
    if !p.merchant.settings.payment_methods.direct_debit {
        return Err(DomainError::request(
            "payment_method_unavailable",
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
/// `customer` and `customer_email` (a new customer is made for the email).
/// Live mode without a configured provider: 409 `provider_not_configured`.
#[utoipa::path(
    post,
    path = "/v1/mandates",
    operation_id = "create_mandate",
    tag = "mandates",
    params(IdempotencyKey),
    request_body(content = CreateMandateRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new mandate, `pending`.", body = MandateView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the saved response of an earlier request with the same Idempotency-Key"))),
        (status = 400, response = BadRequestReplayable),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 413, response = PayloadTooLarge),
        (status = 422, response = IdempotencyKeyReused),
        (status = 500, response = InternalError),
    )
)]
async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let p = authenticate(&req, &state)?;
    ensure_can_take_payments(&p)?;
    let body = read_body(payload).await?;
    let (state, p, body) = (&state, &p, &body);
    idempotent(&req, state, p, body, |save| async move {
        let f = Fields::parse(body, CREATE_FIELDS)?;
        let request = CreateMandate {
            customer: f.uuid("customer")?,
            customer_email: f.email("customer_email")?,
            customer_name: f.string("customer_name", 255)?,
            callback_url: f.url("callback_url")?,
        };
        direct_debit_enabled(p)?;
        let m = service::create(
            state.kobo.mandates.deps(),
            p.merchant.id,
            p.mode,
            request,
            Some(&save),
        )
        .await?;
        Ok(Reply::saved(201, m.to_api()))
    })
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
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let q = Query::parse(req.query_string(), LIST_PARAMS)?;
    let filter = MandateFilter {
        limit: q.limit()?,
        starting_after: q.uuid("starting_after")?,
        customer: q.uuid("customer")?,
        status: q.one_of("status", MandateStatus::parse, "a mandate status")?,
    };
    let page = service::list(&state.kobo, p.merchant.id, p.mode, &filter)?;
    Ok(json_response(200, &page.to_api()))
}

fn own(state: &State, p: &Principal, raw: &str) -> Result<Mandate, DomainError> {
    let id = parse_id(raw, "mandate").map_err(|e| e.0)?;
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
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    )
)]
async fn retrieve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let p = authenticate(&req, &state)?;
    Ok(json_response(200, &own(&state, &p, &path)?.to_api()))
}

async fn send(
    state: &State,
    m: &Mandate,
    action: MandateAction,
    idem: Option<IdempotencySave>,
) -> Result<Value, DomainError> {
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
    let p = authenticate(&req, &state)?;
    let body = read_body(payload).await?;
    let (state, p, body, raw) = (&state, &p, &body, path.as_str());
    idempotent(&req, state, p, body, |save| async move {
        Fields::parse(body, NO_FIELDS)?;
        let m = own(state, p, raw)?;
        let view = send(state, &m, action, Some(save)).await?;
        Ok(Reply::saved(200, view))
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
        (status = 200, description = "The mandate after the provider's answer.", body = MandateView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the saved response of an earlier request with the same Idempotency-Key"))),
        (status = 400, response = BadRequestReplayable),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 413, response = PayloadTooLarge),
        (status = 422, response = IdempotencyKeyReused),
        (status = 500, response = InternalError),
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
        (status = 200, description = "The canceled mandate.", body = MandateView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the saved response of an earlier request with the same Idempotency-Key"))),
        (status = 400, response = BadRequestReplayable),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 413, response = PayloadTooLarge),
        (status = 422, response = IdempotencyKeyReused),
        (status = 500, response = InternalError),
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

fn parse_charge(body: &[u8]) -> Result<CreatePaymentIntent, DomainError> {
    let f = Fields::parse(body, CHARGE_FIELDS)?;
    let amount = f.required_amount("amount", MIN_PAYMENT_AMOUNT)?;
    match f.currency("currency")? {
        Some(Currency::NGN) => {}
        None => return Err(DomainError::missing("currency")),
        Some(_) => {
            return Err(DomainError::invalid(
                "currency",
                "direct debit is naira only: currency must be NGN",
            ))
        }
    }
    Ok(CreatePaymentIntent {
        amount,
        currency: Currency::NGN,
        reference: f.string("reference", 255)?,
        description: f.string("description", 1000)?,
        customer_email: None,
        metadata: f.metadata("metadata")?,
        fee_bearer: FeeBearer::Merchant,
        brand: None,
        customer: None,
        return_url: None,
    })
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
            body = PaymentIntentView, headers(("Idempotent-Replayed" = String, description = "`true` when this is the saved response of an earlier request with the same Idempotency-Key"))),
        (status = 400, response = BadRequestReplayable),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 413, response = PayloadTooLarge),
        (status = 422, response = IdempotencyKeyReused),
        (status = 500, response = InternalError),
        (status = 503, response = Overloaded),
    )
)]
async fn charge(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    ensure_can_take_payments(&p)?;
    let body = read_body(payload).await?;
    let (state, p, body, raw) = (&state, &p, &body, path.as_str());
    idempotent(&req, state, p, body, |save| async move {
        let params = parse_charge(body)?;
        let m = own(state, p, raw)?;
        direct_debit_enabled(p)?;
        let action = MandateAction::Charge {
            merchant: Box::new(p.merchant.clone()),
            params,
        };
        let view = send(state, &m, action, Some(save)).await?;
        Ok(Reply::saved(201, view))
    })
    .await
}

/// Retrieve a customer
#[utoipa::path(
    get,
    path = "/v1/customers/{id}",
    operation_id = "retrieve_customer",
    tag = "mandates",
    params(CustomerId),
    responses(
        (status = 200, description = "The customer.", body = CustomerView),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    )
)]
async fn retrieve_customer(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let id = parse_id(&path, "customer")?;
    let c = customer::load(&state.kobo, p.merchant.id, p.mode, id).map_err(ApiError)?;
    Ok(json_response(200, &c.to_api()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::schema::Schema;
    use utoipa::openapi::RefOr;
    use utoipa::PartialSchema;

    use super::*;

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
            names(CREATE_FIELDS)
        );
        assert_eq!(
            property_names(ChargeMandateRequest::schema()),
            names(CHARGE_FIELDS)
        );
        let params: BTreeSet<String> = ListMandatesQuery::into_params(|| Some(ParameterIn::Query))
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(params, names(LIST_PARAMS));
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
