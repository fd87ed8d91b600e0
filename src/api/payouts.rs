//! Banks, bank accounts, payouts and the payout quote; operator approval.

use actix_web::{web, HttpRequest};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::banks::{self, BankAccountView, BankView};
use kobo_actors::money::MAX_AMOUNT;
use kobo_actors::payout::actor::{PayoutAction, PayoutMessage};
use kobo_actors::payout::service::{self, CreatePayout, PayoutQuoteView, MIN_PAYOUT};
use kobo_actors::payout::PayoutView;
use kobo_actors::query::{ListView, Principal};
use kobo_actors::{DomainError, Mode};

use super::body::Query;
use super::body::{self as body, NoFields};
use super::components::{
    BadRequest, ByRef, ConflictReplayable, IdempotencyKey, NotFound, NotFoundReplayable, Overloaded,
};
use super::endpoint::{Call, Endpoint};
use super::{parse_id, resource, ApiError, ApiResult, Reply, State};

pub fn configure(cfg: &mut web::ServiceConfig) {
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
        .service(resource("/admin/v1/payouts/{id}/approve").route(web::post().to(approve)))
        .service(resource("/admin/v1/payouts/{id}/reject").route(web::post().to(reject)));
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

/// The `{id}` of a payout.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct PayoutId {
    /// The payout's id; unknown, malformed, another merchant's or the other
    /// mode's: 404.
    id: Uuid,
}

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
        .get(req, state, |c| async move {
            let Call { req, p, .. } = c;
            Query::parse(req.query_string(), &[])?;
            Ok(banks::banks_view(p.mode))
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
    Endpoint::secret_key(200)
        .saves_itself()
        .post(
            req,
            state,
            payload,
            |c, body: AddBankAccountRequest| async move {
                let (state, p) = (&c.state, &c.p);
                let save = c.idem();
                let (bank_code, number) = (body.bank_code, body.account_number);
                let (view, created) = banks::add(
                    &state.kobo,
                    &state.kobo.rails,
                    p.merchant.id,
                    p.mode,
                    &bank_code,
                    &number,
                    Some(&save),
                )
                .await?;
                Ok(if created {
                    Reply::saved(201, view)
                } else {
                    Reply {
                        status: 200,
                        body: view,
                        saved: false,
                    }
                })
            },
        )
        .await
}

/// The fields `GET /v1/bank_accounts` accepts in its query: none.
pub const LIST_BANK_ACCOUNTS_PARAMS: &[&str] = &[];

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
        .get(req, state, |c| async move {
            let Call { req, state, p, .. } = c;
            Query::parse(req.query_string(), LIST_BANK_ACCOUNTS_PARAMS)?;
            Ok(banks::list(&state.kobo, p.merchant.id, p.mode)?)
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
    #[allow(dead_code)] // checked by the parser; the one value there is
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
    Endpoint::secret_key(200)
        .saves_itself()
        .post(
            req,
            state,
            payload,
            |c, body: CreatePayoutRequest| async move {
                let (state, p) = (&c.state, &c.p);
                let save = c.idem();
                let CreatePayoutRequest {
                    amount,
                    bank_account_id: bank_account,
                    brand,
                    ..
                } = body;
                let payout = service::create(
                    state.kobo.payouts.deps(),
                    &p.merchant,
                    p.mode,
                    CreatePayout {
                        amount,
                        bank_account,
                        brand,
                        automatic: false,
                    },
                    Some(&save),
                )
                .await?;
                Ok(Reply::saved(201, payout.to_api()))
            },
        )
        .await
}

/// The fields `GET /v1/payouts` accepts in its query.
pub const LIST_PARAMS: &[&str] = &["limit", "starting_after"];

// The query of `GET /v1/payouts`, for the OpenAPI document; a unit test
// keeps these names and [`LIST_PARAMS`] equal.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ListPayoutsQuery {
    /// Page size, 1 to 100.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<u8>,
    /// The id of the last payout of the previous page.
    starting_after: Option<Uuid>,
}

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
        .list_page(
            req,
            state,
            LIST_PARAMS,
            |kobo, merchant, mode, limit, after| service::list(kobo, merchant, mode, limit, after),
        )
        .await
}

fn own(state: &State, p: &Principal, raw: &str) -> ApiResult<kobo_actors::payout::Payout> {
    let id = parse_id(raw, "payout")?;
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

/// The fields `GET /v1/payouts/quote` accepts in its query.
pub const QUOTE_PARAMS: &[&str] = &["amount", "currency", "brand"];

// The query of `GET /v1/payouts/quote`, for the OpenAPI document; a unit
// test keeps these names and [`QUOTE_PARAMS`] equal.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct QuoteQuery {
    /// Kobo the bank account would receive.
    #[param(minimum = 1, maximum = 1_000_000_000_000_i64)]
    amount: i64,
    /// Default `NGN`, the only currency of payouts.
    #[param(inline)]
    currency: Option<PayoutCurrency>,
    /// The brand whose balance would pay (default: the merchant's default
    /// brand); unknown: 400.
    brand: Option<Uuid>,
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
        .get(req, state, |c| async move {
            let Call { req, state, p, .. } = c;
            let q = Query::parse(req.query_string(), QUOTE_PARAMS)?;
            let amount = match q.get("amount") {
                None => return Err(DomainError::missing("amount").into()),
                Some(s) => s
                    .parse::<i64>()
                    .ok()
                    .filter(|n| (1..=MAX_AMOUNT).contains(n))
                    .ok_or_else(|| {
                        DomainError::invalid("amount", "amount is an integer of kobo, at least 1")
                    })?,
            };
            if let Some(c) = q.get("currency") {
                if c != "NGN" {
                    return Err(DomainError::invalid("currency", "payouts are in NGN").into());
                }
            }
            let brand = match q.uuid("brand")? {
                Some(b) => {
                    kobo_actors::query::brand(&state.kobo, p.merchant.id, p.mode, b)
                        .map_err(|_| DomainError::invalid("brand", format!("no such brand: {b}")))?
                        .id
                }
                None => p.merchant.default_brand(p.mode),
            };
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
) -> Result<serde_json::Value, DomainError> {
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
    Endpoint::secret_key(200)
        .saves_itself()
        .post(req, state, payload, |c, _: NoFields| async move {
            let (state, p) = (&c.state, &c.p);
            let save = c.idem();
            let raw = path.as_str();
            let po = own(state, p, raw)?;
            let view = send(
                state,
                po.merchant,
                po.mode,
                po.id,
                PayoutAction::Cancel,
                Some(save),
            )
            .await?;
            Ok(Reply::saved(200, view))
        })
        .await
}

async fn review(req: HttpRequest, state: State, raw: &str, action: PayoutAction) -> ApiResult {
    Endpoint::operator(200)
        .operate(req, state, |state| async move {
            let id = parse_id(raw, "payout")?;
            let po = service::load(&state.kobo, id)?
                .ok_or_else(|| DomainError::not_found("payout", id))?;
            Ok(send(&state, po.merchant, po.mode, po.id, action, None).await?)
        })
        .await
}

async fn approve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let audit = super::endpoint::audit(&req);
    review(req, state, &path, PayoutAction::Approve(audit)).await
}

async fn reject(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let audit = super::endpoint::audit(&req);
    review(req, state, &path, PayoutAction::Reject(audit)).await
}
