//! `/v1/customers`: create (find-or-create by email), list, retrieve,
//! update, delete, verify_identity.

use actix_web::{web, HttpRequest};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::banks::bank_name;
use kobo_actors::customer::directory::{self, CustomerAction, DeleteCustomer};
use kobo_actors::customer::identity::{Bvn, IdentityRequest};
use kobo_actors::customer::service::{self, CustomerFilter};
use kobo_actors::customer::{
    self, CustomerPatch, CustomerView, DeletedCustomerView, Field, NewCustomer, RiskAction,
};
use kobo_actors::idempotency::Answer;
use kobo_actors::invoice::service::credit_balance;
use kobo_actors::merchant::query::brand;
use kobo_actors::payment_intent::metadata_schema;
use kobo_actors::query::ListView;
use kobo_actors::{DomainError, ErrorCode};

use super::body::{self, tunnel, NoFields, FIELD};
use super::components::{
    path_id, BadRequest, ByRef, ConflictReplayable, Forbidden, IdempotencyKey, NotFound,
    NotFoundReplayable, Overloaded,
};
use super::endpoint::{live_payments, Call, Endpoint, Fingerprint};
use super::params;
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(
        resource("/v1/customers")
            .route(web::post().to(create))
            .route(web::get().to(list)),
    )
    .service(
        resource("/v1/customers/{id}")
            .route(web::get().to(retrieve))
            .route(web::post().to(update)),
    )
    .service(resource("/v1/customers/{id}/delete").route(web::post().to(delete)))
    .service(resource("/v1/customers/{id}/verify_identity").route(web::post().to(verify_identity)));
}

pub type CustomerRef = ByRef<CustomerView>;

path_id!(
    /// The `{id}` of a customer.
    CustomerId,
    "customer",
    /// The customer's id; unknown, malformed, deleted, another merchant's
    /// or the other mode's: 404.
);

/// An E.164 phone number: `+`, then 8 to 15 digits, the first not 0.
pub fn is_e164(s: &str) -> bool {
    let Some(digits) = s.strip_prefix('+') else {
        return false;
    };
    (8..=15).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0')
}

fn phone<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let Some(s) = body::text::<D, 16>(d)? else {
        return Ok(None);
    };
    if !is_e164(&s) {
        return Err(tunnel(DomainError::invalid(
            FIELD,
            format!("`{FIELD}` must be an E.164 number, like +2348031234567"),
        )));
    }
    Ok(Some(s))
}

fn risk_action<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RiskAction>, D::Error> {
    let Some(s) = body::text::<D, 16>(d)? else {
        return Ok(None);
    };
    RiskAction::parse(&s).map(Some).ok_or_else(|| {
        tunnel(DomainError::invalid(
            FIELD,
            format!("`{FIELD}` must be default, allow or deny"),
        ))
    })
}

/// The body that creates a customer: `email` and/or `phone`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateCustomer)]
pub struct CreateCustomerRequest {
    /// Unique per mode, compared case-insensitively: an email a customer
    /// already has answers that customer (200, `Existing-Object: true`).
    #[schema(format = Email, max_length = 254)]
    #[serde(deserialize_with = "body::email")]
    email: Option<String>,
    /// E.164, e.g. `+2348031234567`.
    #[schema(pattern = "^\\+[1-9][0-9]{7,14}$", max_length = 16)]
    #[serde(deserialize_with = "phone")]
    phone: Option<String>,
    #[schema(max_length = 255)]
    #[serde(deserialize_with = "body::text::<_, 255>")]
    name: Option<String>,
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "body::metadata")]
    metadata: Map<String, Value>,
    /// One of the merchant's brands (default: the default brand); unknown:
    /// 404 with `param: brand`.
    #[serde(deserialize_with = "body::uuid")]
    brand: Option<Uuid>,
    /// Default `default`.
    #[schema(inline)]
    #[serde(deserialize_with = "risk_action")]
    risk_action: Option<RiskAction>,
}

impl CreateCustomerRequest {
    fn into_new(self) -> Result<NewCustomer, DomainError> {
        if self.email.is_none() && self.phone.is_none() {
            return Err(DomainError::of(
                ErrorCode::ParameterMissing,
                "send `email` or `phone` (or both)",
            )
            .with_param("email"));
        }
        Ok(NewCustomer {
            email: self.email,
            phone: self.phone,
            name: self.name,
            brand: self.brand,
            metadata: self.metadata,
            risk_action: self.risk_action,
        })
    }
}

/// `""` clears, a value sets (checked by `rule`, a field rule read from
/// the value), absent keeps.
fn field<'de, D: Deserializer<'de>>(
    d: D,
    rule: impl Fn(Value) -> Result<Option<String>, serde_json::Error>,
) -> Result<Field, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None => Ok(Field::Keep),
        Some(Value::String(s)) if s.is_empty() => Ok(Field::Clear),
        // The rule's error is tunnelled (see `body::tunnel`): pass it on.
        Some(v) => match rule(v) {
            Ok(Some(s)) => Ok(Field::Set(s)),
            Ok(None) => Ok(Field::Keep),
            Err(e) => Err(serde::de::Error::custom(e.to_string())),
        },
    }
}

fn patch_email<'de, D: Deserializer<'de>>(d: D) -> Result<Field, D::Error> {
    field(d, body::email)
}

fn patch_phone<'de, D: Deserializer<'de>>(d: D) -> Result<Field, D::Error> {
    field(d, phone)
}

fn patch_name<'de, D: Deserializer<'de>>(d: D) -> Result<Field, D::Error> {
    field(d, body::text::<_, 255>)
}

/// The body that updates a customer: only the fields sent change; `""`
/// clears `email`, `phone` or `name` (a customer keeps an email or a
/// phone); `metadata` merges (a key set to `""` is removed).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = UpdateCustomer)]
pub struct UpdateCustomerRequest {
    /// Another customer's email (any case): 409 `customer_exists`.
    #[schema(value_type = Option<String>, max_length = 254)]
    #[serde(default, deserialize_with = "patch_email")]
    email: Field,
    #[schema(value_type = Option<String>, pattern = "^(\\+[1-9][0-9]{7,14})?$", max_length = 16)]
    #[serde(default, deserialize_with = "patch_phone")]
    phone: Field,
    #[schema(value_type = Option<String>, max_length = 255)]
    #[serde(default, deserialize_with = "patch_name")]
    name: Field,
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "body::metadata")]
    metadata: Map<String, Value>,
    #[schema(inline)]
    #[serde(deserialize_with = "risk_action")]
    risk_action: Option<RiskAction>,
}

/// The body that asks for a customer's identity check. The BVN is never
/// stored, logged or shown (only its last four digits).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = VerifyCustomerIdentity)]
pub struct VerifyIdentityRequest {
    /// The Bank Verification Number: 11 digits.
    #[schema(value_type = String, pattern = "^[0-9]{11}$")]
    #[serde(deserialize_with = "bvn")]
    bvn: Bvn,
    /// The CBN code of the customer's bank (`GET /v1/banks`).
    #[schema(pattern = "^([0-9]{3}|[0-9]{6})$")]
    #[serde(deserialize_with = "bank_code")]
    bank_code: String,
    /// The customer's account at that bank: 10 digits.
    #[schema(pattern = "^[0-9]{10}$")]
    #[serde(deserialize_with = "account_number")]
    account_number: String,
}

fn bvn<'de, D: Deserializer<'de>>(d: D) -> Result<Bvn, D::Error> {
    let s = body::required_string::<D, 64>(d)?;
    Bvn::parse(&s).ok_or_else(|| tunnel(DomainError::invalid(FIELD, "`bvn` must be 11 digits")))
}

fn bank_code<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = body::required_string::<D, 6>(d)?;
    match bank_name(&s) {
        Some(_) => Ok(s),
        None => Err(tunnel(DomainError::invalid(
            FIELD,
            "`bank_code` is not a known bank (GET /v1/banks)",
        ))),
    }
}

fn account_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = body::required_string::<D, 10>(d)?;
    if s.len() != 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(tunnel(DomainError::invalid(
            FIELD,
            "`account_number` must be 10 digits",
        )));
    }
    Ok(s)
}

/// `phone` of a list's query: an E.164 number.
fn phone_filter<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<String>::deserialize(d)? {
        Some(p) if !is_e164(&p) => Err(tunnel(DomainError::invalid(
            FIELD,
            format!("`{FIELD}` must be an E.164 number"),
        ))),
        p => Ok(p),
    }
}

/// The query of `GET /v1/customers`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListCustomersQuery {
    /// Page size, 1 to 100.
    #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
    #[serde(deserialize_with = "params::limit")]
    limit: usize,
    /// The id of the last customer of the previous page.
    #[serde(deserialize_with = "params::uuid")]
    starting_after: Option<Uuid>,
    /// Only the customer with this email (compared case-insensitively).
    email: Option<String>,
    /// Only customers with this E.164 phone number.
    #[param(pattern = "^\\+[1-9][0-9]{7,14}$")]
    #[serde(deserialize_with = "phone_filter")]
    phone: Option<String>,
    /// Only this brand's customers.
    #[serde(deserialize_with = "params::uuid")]
    brand: Option<Uuid>,
    /// Only customers with this risk action.
    #[param(inline)]
    #[serde(deserialize_with = "params::one_of")]
    risk_action: Option<RiskAction>,
}

impl From<ListCustomersQuery> for CustomerFilter {
    fn from(q: ListCustomersQuery) -> Self {
        CustomerFilter {
            limit: q.limit,
            starting_after: q.starting_after,
            email: q.email,
            phone: q.phone,
            brand: q.brand,
            risk_action: q.risk_action,
        }
    }
}

async fn send(c: &Call, action: CustomerAction) -> Result<Answer<CustomerView>, DomainError> {
    let scope = (c.p.merchant.id, c.p.mode);
    directory::send(&c.kobo().customers, scope, action, c.save.clone()).await
}

/// Create a customer
///
/// A new customer (201), or, when a customer of this mode already has the
/// email (compared case-insensitively), that customer unchanged (200, with
/// `Existing-Object: true`): concurrent creates of one email make exactly
/// one customer. Customers with only a phone are always new.
#[utoipa::path(
    post,
    path = "/v1/customers",
    operation_id = "create_customer",
    tag = "customers",
    params(IdempotencyKey),
    request_body(content = CreateCustomerRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new customer.", body = CustomerView),
        (status = 200, description = "The customer who already has this email, unchanged.", body = CustomerView,
            headers(("Existing-Object" = String, description = "`true`: the customer existed; nothing was changed"))),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    const CREATE: Endpoint = Endpoint::secret_key(201).existing_object(200);
    CREATE
        .post(
            req,
            state,
            payload,
            |c, body: CreateCustomerRequest| async move {
                let new = body.into_new()?;
                if let Some(b) = new.brand {
                    brand(c.kobo(), c.p.merchant.id, c.p.mode, b)
                        .map_err(|e| e.with_param("brand"))?;
                }
                Ok(send(&c, CustomerAction::Create(new)).await?)
            },
        )
        .await
}

/// List customers
///
/// Newest first; deleted customers are not listed.
#[utoipa::path(
    get,
    path = "/v1/customers",
    operation_id = "list_customers",
    tag = "customers",
    params(ListCustomersQuery),
    responses(
        (status = 200, description = "A page of customers, newest first.", body = ListView<CustomerRef>),
        (status = 400, response = BadRequest),
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: ListCustomersQuery| async move {
            let filter = q.into();
            let page = service::list(c.kobo(), c.p.merchant.id, c.p.mode, &filter)?;
            Ok(page.to_api())
        })
        .await
}

/// Retrieve a customer
#[utoipa::path(
    get,
    path = "/v1/customers/{id}",
    operation_id = "retrieve_customer",
    tag = "customers",
    params(CustomerId),
    responses(
        (status = 200, description = "The customer.", body = CustomerView),
        (status = 404, response = NotFound),
    )
)]
async fn retrieve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let id = CustomerId::parse(&path)?.id;
            let customer = customer::load(c.kobo(), c.p.merchant.id, c.p.mode, id)?;
            let mut view = customer.view();
            view.credit_balance = Some(credit_balance(c.kobo(), id)?);
            Ok(serde_json::to_value(view).expect("a customer view serializes"))
        })
        .await
}

/// Update a customer
///
/// Only the fields sent change. `""` clears `email`, `phone` or `name`;
/// `metadata` merges into the customer's (a key set to `""` is removed).
/// Another customer's email: 409 `customer_exists`.
#[utoipa::path(
    post,
    path = "/v1/customers/{id}",
    operation_id = "update_customer",
    tag = "customers",
    params(CustomerId, IdempotencyKey),
    request_body(content = UpdateCustomerRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The customer after the update.", body = CustomerView),
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
    Endpoint::secret_key(200)
        .post(
            req,
            state,
            payload,
            |c, body: UpdateCustomerRequest| async move {
                let id = CustomerId::parse(&path)?.id;
                let patch = CustomerPatch {
                    email: body.email,
                    phone: body.phone,
                    name: body.name,
                    metadata: Some(body.metadata),
                    risk_action: body.risk_action,
                };
                Ok(send(&c, CustomerAction::Update { id, patch }).await?)
            },
        )
        .await
}

/// Delete a customer
///
/// The customer leaves every list and reads as missing (404) afterwards;
/// payment intents and mandates keep naming it. A customer with a pending
/// or active mandate or virtual account: 409 `customer_in_use`.
#[utoipa::path(
    post,
    path = "/v1/customers/{id}/delete",
    operation_id = "delete_customer",
    tag = "customers",
    params(CustomerId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The deleted customer.", body = DeletedCustomerView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn delete(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    Endpoint::secret_key(200)
        .post(req, state, payload, |c, _: NoFields| async move {
            let id = CustomerId::parse(&path)?.id;
            let msg = DeleteCustomer {
                id,
                idem: c.save.clone(),
            };
            let scope = (c.p.merchant.id, c.p.mode);
            Ok(c.kobo().customers.send(scope, msg).await??)
        })
        .await
}

/// Verify a customer's identity
///
/// Hands the BVN and bank account to the identity provider: `identity`
/// becomes `pending`, then `verified` (`customer.identity_verified`) or
/// `failed` (`customer.identity_failed`) at a later check. Only the BVN's
/// last four digits are kept. A verified customer is answered unchanged.
/// Sandbox: a BVN ending `0000` fails, `1111` stays pending, others verify
/// at the next check (5 minutes of clock time). Live mode on this build:
/// 409 `provider_not_configured`.
#[utoipa::path(
    post,
    path = "/v1/customers/{id}/verify_identity",
    operation_id = "verify_customer_identity",
    tag = "customers",
    params(CustomerId, IdempotencyKey),
    request_body(content = VerifyIdentityRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The customer, its identity `pending` (or already `verified`).", body = CustomerView),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn verify_identity(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    Endpoint::secret_key(200)
        .gate(live_payments)
        .fingerprint(Fingerprint::Keyed)
        .post(
            req,
            state,
            payload,
            |c, body: VerifyIdentityRequest| async move {
                let id = CustomerId::parse(&path)?.id;
                let request = IdentityRequest {
                    bvn: body.bvn,
                    bank_code: body.bank_code,
                    account_number: body.account_number,
                };
                Ok(send(&c, CustomerAction::VerifyIdentity { id, request }).await?)
            },
        )
        .await
}

#[cfg(test)]
#[path = "customers_tests.rs"]
mod tests;
