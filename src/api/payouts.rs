//! Banks, bank accounts, payouts and the payout quote; operator approval.

use actix_web::{web, HttpRequest};
use serde::{Deserialize, Deserializer};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::banks::{self, BankAccountView, BankView};
use kobo_actors::idempotency::Answer;
use kobo_actors::payout::actor::{PayoutAction, PayoutMessage};
use kobo_actors::payout::service::{self, CreatePayout, PayoutQuoteView, MIN_PAYOUT};
use kobo_actors::payout::PayoutView;
use kobo_actors::query::{ListView, Principal};
use kobo_actors::{DomainError, Mode};

use super::body::{self as body, NoFields};
use super::components::{
    path_id, BadRequest, ByRef, ConflictReplayable, IdempotencyKey, NotFound, NotFoundReplayable,
    Overloaded,
};
use super::endpoint::{Call, Endpoint};
use super::params::{self, page_query};
use super::{resource, ApiError, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(resource("/v1/banks").route(web::get().to(list_banks)))
        .service(
            resource("/v1/bank_accounts")
                .route(web::post().to(add_bank_account))
                .route(web::get().to(list_bank_accounts)),
        )
        .service(resource("/v1/payouts/quote").route(web::get().to(quote)))
        .service(
            resource("/v1/payouts")
                .route(web::post().to(create))
                .route(web::get().to(list)),
        )
        .service(resource("/v1/payouts/{id}").route(web::get().to(retrieve)))
        .service(resource("/v1/payouts/{id}/cancel").route(web::post().to(cancel)))
        .service(resource("/admin/v1/payouts/{id}/approve").route(web::post().to(review::<true>)))
        .service(resource("/admin/v1/payouts/{id}/reject").route(web::post().to(review::<false>)));
}

/// List items: `ListView<BankRef>` is `List_Bank`.
pub type BankRef = ByRef<BankView>;
pub type BankAccountRef = ByRef<BankAccountView>;
pub type PayoutRef = ByRef<PayoutView>;

/// The only currency of payouts.
#[derive(Deserialize, ToSchema)]
#[allow(clippy::upper_case_acronyms)]
pub enum PayoutCurrency {
    NGN,
}

path_id!(
    /// The `{id}` of a payout.
    PayoutId,
    "payout",
    /// The payout's id; unknown, malformed, another merchant's or the other
    /// mode's: 404.
);

/// List banks
///
/// The Nigerian banks payouts can reach, with their CBN codes, all on one
/// page.
#[utoipa::path(
    get,
    path = "/v1/banks",
    operation_id = "list_banks",
    tag = "payouts",
    responses(
        (status = 200, description = "Every bank (`has_more` is false).", body = ListView<BankRef>),
    )
)]
async fn list_banks(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, _: NoFields| async move {
            Ok(banks::banks_view(c.p.mode))
        })
        .await
}

// The body of `POST /v1/bank_accounts`, for the OpenAPI document; a unit
/// The body that adds a bank account.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = AddBankAccount)]
pub struct AddBankAccountRequest {
    /// A CBN code from `GET /v1/banks` (unknown: 400).
    #[schema(min_length = 1, max_length = 6)]
    #[serde(deserialize_with = "body::required_text::<_, 6>")]
    bank_code: String,
    /// Exactly 10 digits (NUBAN).
    #[schema(pattern = "^[0-9]{10}$", min_length = 10, max_length = 10)]
    #[serde(deserialize_with = "body::required_text::<_, 10>")]
    account_number: String,
}

/// Add a bank account
///
/// The account is saved only after name enquiry with the bank confirms it
/// (400 `account_verification_failed` otherwise); `account_name` is the
/// name the bank returned. Adding the same account again answers the saved
/// one (200). A live-mode account needs a live payout rail (409
/// `provider_not_configured`).
#[utoipa::path(
    post,
    path = "/v1/bank_accounts",
    operation_id = "create_bank_account",
    tag = "payouts",
    params(IdempotencyKey),
    request_body(content = AddBankAccountRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new bank account.", body = BankAccountView),
        (status = 200, description = "The account was saved before: the saved bank account.", body = BankAccountView),
        (status = 409, response = ConflictReplayable),
    )
)]

async fn add_bank_account(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    ADD_BANK_ACCOUNT
        .post(req, state, payload, add_bank_account_run)
        .await
}

/// `POST /v1/bank_accounts`' declaration (the dashboard's name enquiry
/// posts through it too).
pub const ADD_BANK_ACCOUNT: Endpoint = Endpoint::secret_key(201).existing(200);

/// `POST /v1/bank_accounts`' run: name enquiry, then the account is saved.
pub async fn add_bank_account_run(
    c: Call,
    body: AddBankAccountRequest,
) -> ApiResult<Answer<BankAccountView>> {
    let (state, p) = (&c.state, &c.p);
    let (bank_code, number) = (body.bank_code, body.account_number);
    Ok(banks::add(
        &state.kobo,
        &state.kobo.rails,
        p.merchant.id,
        p.mode,
        &bank_code,
        &number,
        c.save(),
    )
    .await?)
}

/// List bank accounts
///
/// All of the merchant's bank accounts in this mode, newest first, on one
/// page.
#[utoipa::path(
    get,
    path = "/v1/bank_accounts",
    operation_id = "list_bank_accounts",
    tag = "payouts",
    responses(
        (status = 200, description = "The bank accounts, newest first (`has_more` is false).",
            body = ListView<BankAccountRef>),
        (status = 400, response = BadRequest),
    )
)]
async fn list_bank_accounts(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, _: NoFields| async move {
            Ok(banks::list(c.kobo(), c.p.merchant.id, c.p.mode)?)
        })
        .await
}

// The body of `POST /v1/payouts`, for the OpenAPI document; a unit test
/// The body that creates a payout. `null` is the same as leaving a field
/// out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreatePayout)]
pub struct CreatePayoutRequest {
    /// Kobo the bank account receives; at least 100. The fee and VAT are
    /// taken from the balance on top.
    #[schema(minimum = 100, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::amount::<_, MIN_PAYOUT>")]
    amount: i64,
    currency: PayoutCurrency,
    /// One of the merchant's bank accounts in this mode (unknown: 404).
    #[serde(deserialize_with = "body::required_uuid")]
    bank_account_id: Uuid,
    /// The brand whose available balance pays (default: the merchant's
    /// default brand); unknown: 404.
    #[serde(deserialize_with = "body::uuid")]
    brand: Option<Uuid>,
}

/// Create a payout
///
/// Moves amount + fee + VAT from the brand's `available` naira to
/// `payout_in_flight` and queues the transfer; at or above the merchant's
/// approval threshold the payout waits in `awaiting_approval`. Over the
/// per-payout or the day's limit: 409 `payout_limit_exceeded`; more than
/// the balance: 409 `insufficient_funds`.
#[utoipa::path(
    post,
    path = "/v1/payouts",
    operation_id = "create_payout",
    tag = "payouts",
    params(IdempotencyKey),
    request_body(content = CreatePayoutRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new payout.", body = PayoutView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]

async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    CREATE_PAYOUT.post(req, state, payload, create_run).await
}

/// `POST /v1/payouts`' declaration (the dashboard's payout form posts
/// through it too).
pub const CREATE_PAYOUT: Endpoint = Endpoint::secret_key(201);

/// `POST /v1/payouts`' run.
pub async fn create_run(c: Call, body: CreatePayoutRequest) -> ApiResult<Answer<PayoutView>> {
    let (state, p) = (&c.state, &c.p);
    let CreatePayoutRequest {
        amount,
        bank_account_id: bank_account,
        brand,
        currency: PayoutCurrency::NGN,
    } = body;
    let create = CreatePayout {
        amount,
        bank_account,
        brand,
        automatic: false,
    };
    let deps = state.kobo.payouts.deps();
    Ok(service::create(deps, &p.merchant, p.mode, create, c.save()).await?)
}

page_query!(
    /// The query of `GET /v1/payouts`.
    ListPayoutsQuery,
    "The id of the last payout of the previous page."
);

/// List payouts
///
/// Newest first, automatic settlement's included.
#[utoipa::path(
    get,
    path = "/v1/payouts",
    operation_id = "list_payouts",
    tag = "payouts",
    params(ListPayoutsQuery),
    responses(
        (status = 200, description = "A page of payouts, newest first.", body = ListView<PayoutRef>),
        (status = 400, response = BadRequest),
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .list_page::<ListPayoutsQuery, _>(req, state, service::list)
        .await
}

fn own(state: &State, p: &Principal, raw: &str) -> ApiResult<kobo_actors::payout::Payout> {
    let id = PayoutId::parse(raw)?.id;
    match service::load(&state.kobo, id)? {
        Some(po) if po.merchant == p.merchant.id && po.mode == p.mode => Ok(po),
        _ => Err(ApiError(DomainError::not_found("payout", id))),
    }
}

/// Retrieve a payout
#[utoipa::path(
    get,
    path = "/v1/payouts/{id}",
    operation_id = "retrieve_payout",
    tag = "payouts",
    params(PayoutId),
    responses(
        (status = 200, description = "The payout.", body = PayoutView),
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

/// The query of `GET /v1/payouts/quote`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct QuoteQuery {
    /// Kobo the bank account would receive.
    #[param(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "quote_amount")]
    amount: i64,
    /// Default `NGN`, the only currency of payouts.
    #[param(inline)]
    #[serde(deserialize_with = "naira")]
    currency: Option<PayoutCurrency>,
    /// The brand whose balance would pay (default: the merchant's default
    /// brand); unknown: 400.
    #[serde(deserialize_with = "params::uuid")]
    brand: Option<Uuid>,
}

/// The quote's `amount`: required, 1 to 10^12 kobo.
fn quote_amount<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    params::amount(d, "amount is an integer of kobo, at least 1")?
        .ok_or_else(|| body::tunnel(DomainError::missing(body::FIELD)))
}

/// The quote's `currency`: `NGN` when given.
fn naira<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PayoutCurrency>, D::Error> {
    match Option::<String>::deserialize(d)?.as_deref() {
        None => Ok(None),
        Some("NGN") => Ok(Some(PayoutCurrency::NGN)),
        Some(_) => Err(body::tunnel(DomainError::invalid(
            "currency",
            "payouts are in NGN",
        ))),
    }
}

/// Quote a payout
///
/// The fee and VAT of a payout of `amount`, the brand's available naira,
/// the limits in force with today's use, and the largest payout possible
/// now. Reserves nothing.
#[utoipa::path(
    get,
    path = "/v1/payouts/quote",
    operation_id = "quote_payout",
    tag = "payouts",
    params(QuoteQuery),
    responses(
        (status = 200, description = "The quote.", body = PayoutQuoteView),
        (status = 400, response = BadRequest),
    )
)]
async fn quote(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: QuoteQuery| async move {
            let Call { state, p, .. } = c;
            let QuoteQuery {
                amount,
                currency: None | Some(PayoutCurrency::NGN),
                brand,
            } = q;
            let brand = params::brand(&state, &p, brand)?
                .unwrap_or_else(|| p.merchant.default_brand(p.mode));
            Ok(service::quote(
                &state.kobo,
                &p.merchant,
                p.mode,
                amount,
                brand,
            )?)
        })
        .await
}

async fn send(
    state: &State,
    merchant: Uuid,
    mode: Mode,
    id: Uuid,
    action: PayoutAction,
    idem: Option<kobo_actors::idempotency::IdempotencySave>,
) -> Result<Answer<PayoutView>, DomainError> {
    state
        .kobo
        .payouts
        .send(
            id,
            PayoutMessage {
                merchant,
                mode,
                action,
                idem,
            },
        )
        .await?
}

/// Cancel a payout
///
/// Only an `awaiting_approval` or `queued` payout can be canceled (409
/// `payout_unexpected_state` otherwise); its money returns to `available`
/// and stops counting toward the day's limit.
#[utoipa::path(
    post,
    path = "/v1/payouts/{id}/cancel",
    operation_id = "cancel_payout",
    tag = "payouts",
    params(PayoutId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The canceled payout.", body = PayoutView),
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
    CANCEL_PAYOUT
        .post(req, state, payload, |c, _: NoFields| async move {
            cancel_run(c, path.as_str()).await
        })
        .await
}

/// `POST /v1/payouts/{id}/cancel`'s declaration (the dashboard's cancel
/// button posts through it too).
pub const CANCEL_PAYOUT: Endpoint = Endpoint::secret_key(200);

/// `POST /v1/payouts/{id}/cancel`'s run on the payout `raw` names.
pub async fn cancel_run(c: Call, raw: &str) -> ApiResult<Answer<PayoutView>> {
    let (state, p) = (&c.state, &c.p);
    let po = own(state, p, raw)?;
    let cancel = PayoutAction::Cancel;
    Ok(send(state, po.merchant, po.mode, po.id, cancel, c.save).await?)
}

/// The operator's approval (`APPROVE`) or rejection of a payout awaiting
/// it (its audit entry commits with it).
async fn review<const APPROVE: bool>(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
) -> ApiResult {
    let audit = super::endpoint::audit(&req);
    Endpoint::operator(200)
        .operate(req, state, |state| async move {
            review_with(&state, &path, APPROVE, audit).await
        })
        .await
}

/// Approves (or rejects) payout `raw_id` waiting for approval (the
/// operator API and the console); answers the payout.
pub(crate) async fn review_with(
    state: &State,
    raw_id: &str,
    approve: bool,
    audit: kobo_actors::audit::Audit,
) -> ApiResult<kobo_actors::idempotency::Outcome<PayoutView>> {
    let action = if approve {
        PayoutAction::Approve(audit)
    } else {
        PayoutAction::Reject(audit)
    };
    let id = PayoutId::parse(raw_id)?.id;
    let po = service::load(&state.kobo, id)?.ok_or_else(|| DomainError::not_found("payout", id))?;
    Ok(send(state, po.merchant, po.mode, po.id, action, None)
        .await?
        .outcome)
}
