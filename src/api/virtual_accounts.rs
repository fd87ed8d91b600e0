//! `/v1/virtual_accounts` (create, list, retrieve, refresh, deactivate)
//! and the test helper `simulate_transfer`.

use actix_web::{web, HttpRequest};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::idempotency::Answer;
use kobo_actors::payment_intent::{metadata_schema, PaymentIntentView};
use kobo_actors::query::ListView;
use kobo_actors::virtual_account::actor::{
    AccountAction, AccountMessage, Credit, CreditMessage, SimulatedTransfer,
};
use kobo_actors::virtual_account::service::{
    self, AccountFilter, CreateVirtualAccount, ACCOUNT_BANKS,
};
use kobo_actors::virtual_account::{AccountStatus, VirtualAccountView};
use kobo_actors::DomainError;

use super::body::{self, tunnel, NoFields, FIELD};
use super::components::{
    path_id, BadRequest, ByRef, ConflictReplayable, Forbidden, IdempotencyKey, NotFound,
    NotFoundReplayable, Overloaded,
};
use super::endpoint::{live_payments, test_mode, Call, Endpoint};
use super::params;
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(
        resource("/v1/virtual_accounts")
            .route(web::post().to(create))
            .route(web::get().to(list)),
    )
    .service(resource("/v1/virtual_accounts/{id}").route(web::get().to(retrieve)))
    .service(resource("/v1/virtual_accounts/{id}/refresh").route(web::post().to(refresh)))
    .service(resource("/v1/virtual_accounts/{id}/deactivate").route(web::post().to(deactivate)))
    .service(
        resource("/v1/test_helpers/virtual_accounts/{id}/simulate_transfer")
            .route(web::post().to(simulate_transfer)),
    );
}

pub type VirtualAccountRef = ByRef<VirtualAccountView>;

path_id!(
    /// The `{id}` of a virtual account.
    VirtualAccountId,
    "virtual_account",
    /// The account's id; unknown, malformed, another merchant's or the
    /// other mode's: 404.
);

fn preferred_bank<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let Some(s) = body::text::<D, 6>(d)? else {
        return Ok(None);
    };
    if !ACCOUNT_BANKS.contains(&s.as_str()) {
        return Err(tunnel(DomainError::invalid(
            FIELD,
            format!(
                "`{FIELD}` must be one of the partner banks: {}",
                ACCOUNT_BANKS.join(", ")
            ),
        )));
    }
    Ok(Some(s))
}

/// The body that creates a virtual account.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateVirtualAccount)]
pub struct CreateVirtualAccountRequest {
    /// The customer (unknown or deleted: 404 with `param: customer`). A
    /// customer with a pending or active account gets that account (200,
    /// `Existing-Object: true`).
    #[serde(deserialize_with = "body::required_uuid")]
    customer: Uuid,
    /// The CBN code of a partner bank: `035` (Wema Bank, the default),
    /// `101` (Providus Bank) or `102` (Titan Trust Bank).
    #[schema(pattern = "^(035|101|102)$")]
    #[serde(deserialize_with = "preferred_bank")]
    preferred_bank: Option<String>,
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "body::metadata")]
    metadata: Map<String, Value>,
}

fn session_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let Some(s) = body::text::<D, 64>(d)? else {
        return Ok(None);
    };
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(tunnel(DomainError::invalid(
            FIELD,
            "`session_id` is 1 to 64 letters and digits",
        )));
    }
    Ok(Some(s))
}

fn sender_account<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let Some(s) = body::text::<D, 10>(d)? else {
        return Ok(None);
    };
    if s.len() != 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(tunnel(DomainError::invalid(
            FIELD,
            "`sender_account` must be 10 digits",
        )));
    }
    Ok(Some(s))
}

/// A simulated transfer into a test virtual account.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SimulateAccountTransfer)]
pub struct SimulateAccountTransferRequest {
    /// Kobo.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::amount::<_, 1>")]
    amount: i64,
    /// The interbank session id: the same one again is the same transfer
    /// (the same payment intent, nothing new). Default: derived from the
    /// Idempotency-Key, so a retried request is the same transfer too.
    #[schema(pattern = "^[A-Za-z0-9]{1,64}$", max_length = 64)]
    #[serde(deserialize_with = "session_id")]
    session_id: Option<String>,
    #[schema(max_length = 100)]
    #[serde(deserialize_with = "body::text::<_, 100>")]
    sender_name: Option<String>,
    /// 10 digits.
    #[schema(pattern = "^[0-9]{10}$")]
    #[serde(deserialize_with = "sender_account")]
    sender_account: Option<String>,
}

/// The query of `GET /v1/virtual_accounts`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListVirtualAccountsQuery {
    /// Page size, 1 to 100.
    #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
    #[serde(deserialize_with = "params::limit")]
    limit: usize,
    /// The id of the last account of the previous page.
    #[serde(deserialize_with = "params::uuid")]
    starting_after: Option<Uuid>,
    /// Only this customer's accounts.
    #[serde(deserialize_with = "params::uuid")]
    customer: Option<Uuid>,
    /// Only accounts in this status.
    #[param(inline)]
    #[serde(deserialize_with = "params::one_of")]
    status: Option<AccountStatus>,
    /// Only the account with this number.
    account_number: Option<String>,
}

impl From<ListVirtualAccountsQuery> for AccountFilter {
    fn from(q: ListVirtualAccountsQuery) -> Self {
        AccountFilter {
            limit: q.limit,
            starting_after: q.starting_after,
            customer: q.customer,
            status: q.status,
            account_number: q.account_number,
        }
    }
}

/// Create a virtual account
///
/// A dedicated account number (NUBAN) for the customer, `pending` until
/// the bank opens it (`virtual_account.activated`) or refuses it
/// (`virtual_account.failed`). Every transfer into it becomes a
/// successful payment intent. A customer with a pending or active account
/// gets that account back (200, `Existing-Object: true`). A denied
/// customer: 409 `customer_blocked`; live mode needs the customer's
/// verified identity (409 `customer_identity_unverified`) and a live bank
/// (409 `provider_not_configured` on this build). Sandbox: opens at the
/// next check (5 minutes of clock time, or `refresh`).
#[utoipa::path(
    post,
    path = "/v1/virtual_accounts",
    operation_id = "create_virtual_account",
    tag = "virtual_accounts",
    params(IdempotencyKey),
    request_body(content = CreateVirtualAccountRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new account, `pending`.", body = VirtualAccountView),
        (status = 200, description = "The customer's pending or active account, unchanged.", body = VirtualAccountView,
            headers(("Existing-Object" = String, description = "`true`: the account existed; nothing was changed"))),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    const CREATE: Endpoint = Endpoint::secret_key(201)
        .existing_object(200)
        .gate(live_payments);
    CREATE
        .post(
            req,
            state,
            payload,
            |c, body: CreateVirtualAccountRequest| async move {
                let request = CreateVirtualAccount {
                    customer: body.customer,
                    preferred_bank: body.preferred_bank,
                    metadata: body.metadata,
                };
                let deps = c.kobo().virtual_accounts.deps();
                Ok(service::create(deps, &c.p.merchant, c.p.mode, request, c.save()).await?)
            },
        )
        .await
}

/// List virtual accounts
///
/// Newest first.
#[utoipa::path(
    get,
    path = "/v1/virtual_accounts",
    operation_id = "list_virtual_accounts",
    tag = "virtual_accounts",
    params(ListVirtualAccountsQuery),
    responses(
        (status = 200, description = "A page of virtual accounts, newest first.", body = ListView<VirtualAccountRef>),
        (status = 400, response = BadRequest),
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: ListVirtualAccountsQuery| async move {
            let filter = q.into();
            let page = service::list(c.kobo(), c.p.merchant.id, c.p.mode, &filter)?;
            Ok(page.to_api())
        })
        .await
}

/// The `{id}` of the call's path.
fn account_id(c: &Call) -> Result<Uuid, DomainError> {
    let raw = c.req.match_info().get("id").unwrap_or_default();
    Ok(VirtualAccountId::parse(raw).map_err(|e| e.0)?.id)
}

/// Retrieve a virtual account
#[utoipa::path(
    get,
    path = "/v1/virtual_accounts/{id}",
    operation_id = "retrieve_virtual_account",
    tag = "virtual_accounts",
    params(VirtualAccountId),
    responses(
        (status = 200, description = "The virtual account.", body = VirtualAccountView),
        (status = 404, response = NotFound),
    )
)]
async fn retrieve(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let a = service::own(c.kobo(), c.p.merchant.id, c.p.mode, account_id(&c)?)?;
            Ok(a.to_api())
        })
        .await
}

/// The caller's account of the path, checked before its actor is asked
/// (unknown ids never activate an actor).
fn own_account(c: &Call) -> Result<Uuid, DomainError> {
    let id = account_id(c)?;
    service::own(c.kobo(), c.p.merchant.id, c.p.mode, id)?;
    Ok(id)
}

/// Sends `action` to the account's actor.
async fn act(c: &Call, action: AccountAction) -> Result<Answer<VirtualAccountView>, DomainError> {
    let id = own_account(c)?;
    let msg = AccountMessage {
        merchant: c.p.merchant.id,
        mode: c.p.mode,
        action,
        idem: c.save.clone(),
    };
    c.kobo().virtual_accounts.send(id, msg).await?
}

/// Refresh a virtual account
///
/// Asks the bank now whether it opened a `pending` account (the service
/// also asks every 5 minutes), and records every transfer on the
/// account's statement not yet recorded (each once: one already recorded
/// changes nothing).
#[utoipa::path(
    post,
    path = "/v1/virtual_accounts/{id}/refresh",
    operation_id = "refresh_virtual_account",
    tag = "virtual_accounts",
    params(VirtualAccountId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The virtual account after the bank's answer.", body = VirtualAccountView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn refresh(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    Endpoint::secret_key(200)
        .post(req, state, payload, |c, _: NoFields| async move {
            Ok(act(&c, AccountAction::Refresh).await?)
        })
        .await
}

/// Deactivate a virtual account
///
/// `pending` or `active` only (otherwise 409
/// `virtual_account_unexpected_state`). Permanent: the number is never
/// given again. Money that still arrives is recorded, flagged
/// (`sender.account_deactivated`).
#[utoipa::path(
    post,
    path = "/v1/virtual_accounts/{id}/deactivate",
    operation_id = "deactivate_virtual_account",
    tag = "virtual_accounts",
    params(VirtualAccountId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The deactivated account.", body = VirtualAccountView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn deactivate(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    Endpoint::secret_key(200)
        .post(req, state, payload, |c, _: NoFields| async move {
            Ok(act(&c, AccountAction::Deactivate).await?)
        })
        .await
}

/// 30 digits from the account and the Idempotency-Key: the session id of
/// a simulated transfer sent without one.
fn derived_session_id(account: Uuid, idempotency_key: &str) -> String {
    let digest = Sha256::digest(format!("{account}:{idempotency_key}").as_bytes());
    digest
        .iter()
        .take(30)
        .map(|b| char::from(b'0' + b % 10))
        .collect()
}

/// Simulate a transfer into a test virtual account
///
/// Test keys only (404 for live keys). The sandbox bank receives the
/// transfer and notifies kobo: it becomes one successful payment intent
/// (`bank_transfer`, `virtual_account` and `sender` set, the merchant
/// bears the fee). The same `session_id` again answers the same payment
/// intent and writes nothing. A `pending` or `failed` account takes no
/// transfer (409 `virtual_account_unexpected_state`); a deactivated one's
/// money is recorded and flagged.
#[utoipa::path(
    post,
    path = "/v1/test_helpers/virtual_accounts/{id}/simulate_transfer",
    operation_id = "test_simulate_account_transfer",
    tag = "test_helpers",
    params(VirtualAccountId, IdempotencyKey),
    request_body(content = SimulateAccountTransferRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The payment intent the transfer made.", body = PaymentIntentView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn simulate_transfer(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    Endpoint::secret_key(200)
        .gate(test_mode)
        .post(
            req,
            state,
            payload,
            |c, body: SimulateAccountTransferRequest| async move {
                let id = own_account(&c)?;
                let session_id = match body.session_id {
                    Some(s) => s,
                    None => {
                        let key = c.save().map(|s| s.key.as_str()).unwrap_or_default();
                        derived_session_id(id, key)
                    }
                };
                let transfer = SimulatedTransfer {
                    amount: body.amount,
                    session_id,
                    sender_name: body.sender_name,
                    sender_account_number: body.sender_account,
                };
                let msg = CreditMessage {
                    merchant: c.p.merchant.id,
                    mode: c.p.mode,
                    credit: Credit::Simulated(transfer),
                    idem: c.save.clone(),
                };
                Ok(c.kobo().virtual_accounts.send(id, msg).await??)
            },
        )
        .await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use utoipa::PartialSchema;

    use super::*;

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn property_names<T: PartialSchema>() -> BTreeSet<String> {
        let v = serde_json::to_value(T::schema()).unwrap();
        v["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    #[test]
    fn request_schemas_match_what_the_parsers_accept() {
        assert_eq!(
            property_names::<CreateVirtualAccountRequest>(),
            names(body::fields_of::<CreateVirtualAccountRequest>())
        );
        assert_eq!(
            property_names::<SimulateAccountTransferRequest>(),
            names(body::fields_of::<SimulateAccountTransferRequest>())
        );
        let create = serde_json::to_value(CreateVirtualAccountRequest::schema()).unwrap();
        assert_eq!(
            create["properties"]["preferred_bank"]["pattern"],
            format!("^({})$", ACCOUNT_BANKS.join("|"))
        );
    }

    #[test]
    fn derived_session_ids_are_30_digits_per_account_and_key() {
        let a = Uuid::new_v4();
        let s = derived_session_id(a, "k1");
        assert_eq!(s.len(), 30);
        assert!(s.bytes().all(|b| b.is_ascii_digit()));
        assert_eq!(s, derived_session_id(a, "k1"));
        assert_ne!(s, derived_session_id(a, "k2"));
        assert_ne!(s, derived_session_id(Uuid::new_v4(), "k1"));
    }
}
