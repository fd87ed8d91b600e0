//! USDT: `GET /v1/usdt`, the preview, crypto payouts, and the operator's
//! wallet routes (`/admin/v1/merchants/{id}/usdt_wallets`).

use actix_web::{web, HttpRequest};
use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::query::{ListView, Principal};
use kobo_actors::usdt::actor::{WalletChange, WalletCommand};
use kobo_actors::usdt::service::{
    self, CreateCryptoPayout, UsdtPreviewView, UsdtView, MAX_LABEL_LEN,
};
use kobo_actors::usdt::{settings_of, CryptoPayoutView, Network, SANDBOX_OTP};
use kobo_actors::{DomainError, Mode};

use super::body::{Fields, Query};
use super::fx::{parse_preview, ListQuery, PreviewQuery, LIST_PARAMS};
use super::openapi::{
    BadRequest, BadRequestReplayable, ByRef, ConflictReplayable, Forbidden, IdempotencyKey,
    IdempotencyKeyReused, InternalError, NotFound, NotFoundReplayable, PayloadTooLarge,
    Unauthorized,
};
use super::{
    authenticate, idempotent, json_response, parse_id, read_body, resource, ApiError, ApiResult,
    Reply, State,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/v1/usdt").route(web::get().to(usdt)))
        .service(resource("/v1/usdt/preview").route(web::get().to(preview)))
        .service(
            resource("/v1/usdt/payouts")
                .route(web::post().to(create_payout))
                .route(web::get().to(list_payouts)),
        )
        .service(resource("/v1/usdt/payouts/{id}").route(web::get().to(retrieve_payout)))
        .service(
            resource("/admin/v1/merchants/{id}/usdt_wallets").route(web::post().to(add_wallet)),
        )
        .service(
            resource("/admin/v1/merchants/{id}/usdt_wallets/{wallet}")
                .route(web::delete().to(delete_wallet)),
        );
}

pub type CryptoPayoutRef = ByRef<CryptoPayoutView>;

/// The `{id}` of a crypto payout.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct CryptoPayoutId {
    /// Unknown, another merchant's or the other mode's: 404.
    id: Uuid,
}

/// The merchant's USDT set-up
///
/// Whether USDT payouts are enabled, the settlement wallet, the `usdt`
/// settings and this mode's wallets (added and cleared by the operator,
/// as the dashboard does).
#[utoipa::path(
    get,
    path = "/v1/usdt",
    operation_id = "retrieve_usdt",
    tag = "usdt",
    responses(
        (status = 200, description = "The USDT set-up.", body = UsdtView),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    )
)]
async fn usdt(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    Query::parse(req.query_string(), &[])?;
    let view = service::usdt_view(&state.kobo, &p.merchant, p.mode)?;
    Ok(json_response(
        200,
        &serde_json::to_value(view).expect("a USDT view serializes"),
    ))
}

/// Preview a USDT payout
///
/// The dollars available, and for `usd_amount` kobo's fee (`fee_bps` of the
/// amount, rounded half up), 7.5% VAT on the fee (half up) and the USDT the
/// wallet receives at 1 USDT per dollar: `usd_amount - fee - vat`, in
/// cents. Reserves nothing.
#[utoipa::path(
    get,
    path = "/v1/usdt/preview",
    operation_id = "preview_usdt_payout",
    tag = "usdt",
    params(PreviewQuery),
    responses(
        (status = 200, description = "The preview.", body = UsdtPreviewView),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    )
)]
async fn preview(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let (usd_amount, brand) = parse_preview(&state, &p, req.query_string())?;
    let view = service::preview(&state.kobo, &p.merchant, p.mode, brand, usd_amount)?;
    Ok(json_response(
        200,
        &serde_json::to_value(view).expect("a preview serializes"),
    ))
}

/// The fields `POST /v1/usdt/payouts` accepts: [`CreateCryptoPayoutRequest`]'s.
pub const PAYOUT_FIELDS: &[&str] = &["usd_amount", "wallet", "brand", "otp"];

// The body of `POST /v1/usdt/payouts`, for the OpenAPI document; a unit
// test keeps these fields and [`PAYOUT_FIELDS`] equal.
/// The body that sends dollars as USDT. No other fields are allowed.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateCryptoPayout)]
#[allow(dead_code)]
pub struct CreateCryptoPayoutRequest {
    /// Cents taken from USD `available`; the fee and its VAT come out of it.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    usd_amount: i64,
    /// One of this mode's wallets (`GET /v1/usdt`); unknown or cleared: 404.
    wallet: Uuid,
    /// Whose dollars (default: the default brand); unknown: 404.
    brand: Option<Uuid>,
    /// The one-time code: required in live mode; in test mode optional, and
    /// when sent it must be `123456` (else 400 `incorrect_otp`).
    #[schema(max_length = 32)]
    otp: Option<String>,
}

/// USDT payouts need `settings.usdt.enabled` (403 before anything else).
fn ensure_usdt(p: &Principal) -> ApiResult<()> {
    if !settings_of(&p.merchant.settings.usdt).enabled {
        return Err(ApiError(service::usdt_not_enabled()));
    }
    Ok(())
}

/// The one-time code rule: live mode needs one (checked by the live
/// one-time-code service, which comes with the live partner); test mode
/// checks it only when sent, against the sandbox's `123456`.
fn check_otp(mode: Mode, f: &Fields) -> Result<(), DomainError> {
    let otp = match f.raw("otp") {
        None => None,
        Some(Value::String(s)) if s.len() <= 32 => Some(s.clone()),
        Some(Value::Number(n)) if n.is_u64() => Some(n.to_string()),
        Some(_) => {
            return Err(DomainError::invalid(
                "otp",
                "otp is the one-time code, a string of digits",
            ))
        }
    };
    match (mode, otp) {
        (Mode::Live, None) => Err(DomainError::missing("otp")),
        (Mode::Test, Some(code)) if code.trim() != SANDBOX_OTP => Err(DomainError::request(
            "incorrect_otp",
            Some("otp"),
            "the one-time code is not correct (the sandbox's code is 123456)",
        )),
        _ => Ok(()),
    }
}

/// Send dollars as USDT
///
/// Creates a `queued` crypto payout: `usd_amount` moves from USD
/// `available` to `payout_in_flight` in the same step that records it
/// (short dollars: 409 `insufficient_funds`, nothing written). The partner
/// confirms asynchronously (the sandbox within 2 real seconds): `paid`
/// (`crypto_payout.paid`, the dollars leave) or `failed`
/// (`crypto_payout.failed`, the dollars return to `available`). USDT not
/// enabled for the account: 403 `usdt_not_enabled`.
#[utoipa::path(
    post,
    path = "/v1/usdt/payouts",
    operation_id = "create_crypto_payout",
    tag = "usdt",
    params(IdempotencyKey),
    request_body(content = CreateCryptoPayoutRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The crypto payout, `queued`.", body = CryptoPayoutView,
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
async fn create_payout(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let p = authenticate(&req, &state)?;
    ensure_usdt(&p)?;
    let body = read_body(payload).await?;
    let (state, p, body) = (&state, &p, &body);
    idempotent(&req, state, p, body, |save| async move {
        let f = Fields::parse(body, PAYOUT_FIELDS)?;
        let usd_amount = f.required_amount("usd_amount", 1)?;
        let wallet = f
            .uuid("wallet")?
            .ok_or_else(|| DomainError::missing("wallet"))?;
        let brand = f.uuid("brand")?;
        check_otp(p.mode, &f)?;
        let payout = service::create_payout(
            &state.kobo.crypto_payouts,
            &p.merchant,
            p.mode,
            CreateCryptoPayout {
                usd_amount,
                wallet,
                brand,
                automatic: false,
            },
            Some(&save),
        )
        .await?;
        Ok(Reply::saved(201, payout.to_api()))
    })
    .await
}

/// List crypto payouts
///
/// Newest first, `automatic` ones (dollar settlement) included.
#[utoipa::path(
    get,
    path = "/v1/usdt/payouts",
    operation_id = "list_crypto_payouts",
    tag = "usdt",
    params(ListQuery),
    responses(
        (status = 200, description = "The crypto payouts, newest first.", body = ListView<CryptoPayoutRef>),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    )
)]
async fn list_payouts(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let q = Query::parse(req.query_string(), LIST_PARAMS)?;
    let page = service::list_payouts(
        &state.kobo,
        p.merchant.id,
        p.mode,
        q.limit()?,
        q.uuid("starting_after")?,
    )?;
    Ok(json_response(200, &page.to_api()))
}

/// Retrieve a crypto payout
#[utoipa::path(
    get,
    path = "/v1/usdt/payouts/{id}",
    operation_id = "retrieve_crypto_payout",
    tag = "usdt",
    params(CryptoPayoutId),
    responses(
        (status = 200, description = "The crypto payout.", body = CryptoPayoutView),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    )
)]
async fn retrieve_payout(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let id = parse_id(&path, "crypto_payout")?;
    match service::load_payout(&state.kobo, id)? {
        Some(po) if po.merchant == p.merchant.id && po.mode == p.mode => {
            Ok(json_response(200, &po.to_api()))
        }
        _ => Err(ApiError(DomainError::not_found("crypto_payout", id))),
    }
}

/// The fields of `POST /admin/v1/merchants/{id}/usdt_wallets`.
pub const WALLET_FIELDS: &[&str] = &["address", "network", "label", "mode"];

fn merchant_of(state: &State, raw: &str) -> ApiResult<Uuid> {
    let id = parse_id(raw, "merchant")?;
    kobo_actors::admin::load_merchant(&state.kobo, id)?
        .ok_or_else(|| DomainError::not_found("merchant", id))?;
    Ok(id)
}

/// `{address, network: TRC20|ERC20, label?, mode?: test (default) | live}`:
/// 201 with the wallet; the same network and address again in that mode
/// answers 200 with the existing wallet.
async fn add_wallet(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    super::admin::operator(&req, &state)?;
    let body = read_body(payload).await?;
    let f = Fields::parse(&body, WALLET_FIELDS)?;
    let address = f.required_string("address", 128)?.trim().to_string();
    let network = f.required_string("network", 8)?;
    let network = Network::parse(&network)
        .ok_or_else(|| DomainError::invalid("network", "network must be TRC20 or ERC20"))?;
    network
        .normalize(&address)
        .map_err(|m| DomainError::invalid("address", m))?;
    let label = f.string("label", MAX_LABEL_LEN)?;
    let mode = match f.string("mode", 8)?.as_deref() {
        None => Mode::Test,
        Some(m) => Mode::parse(m)
            .ok_or_else(|| DomainError::invalid("mode", "mode must be test or live"))?,
    };
    let merchant = merchant_of(&state, &path)?;
    let (view, created) = state
        .kobo
        .usdt_wallets
        .send(
            merchant,
            WalletChange(WalletCommand::Add {
                mode,
                network,
                address,
                label,
            }),
        )
        .await??;
    Ok(json_response(if created { 201 } else { 200 }, &view))
}

/// Clears a wallet: 200 `{id, object: "usdt_wallet", livemode, deleted:
/// true}`; unknown or already cleared: 404.
async fn delete_wallet(
    req: HttpRequest,
    state: State,
    path: web::Path<(String, String)>,
) -> ApiResult {
    super::admin::operator(&req, &state)?;
    let (merchant, wallet) = path.into_inner();
    let wallet = parse_id(&wallet, "usdt_wallet")?;
    let merchant = merchant_of(&state, &merchant)?;
    let (view, _) = state
        .kobo
        .usdt_wallets
        .send(merchant, WalletChange(WalletCommand::Delete { wallet }))
        .await??;
    Ok(json_response(200, &view))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use utoipa::PartialSchema;

    use super::*;

    #[test]
    fn documented_fields_are_those_the_parser_accepts() {
        let v = serde_json::to_value(CreateCryptoPayoutRequest::schema()).unwrap();
        let documented: BTreeSet<String> = v["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let accepted: BTreeSet<String> = PAYOUT_FIELDS.iter().map(|s| s.to_string()).collect();
        assert_eq!(documented, accepted);
        assert_eq!(v["required"], serde_json::json!(["usd_amount", "wallet"]));
    }

    #[test]
    fn the_one_time_code_is_required_live_and_checked_when_sent_in_test_mode() {
        let f = |body: &str| Fields::parse(body.as_bytes(), PAYOUT_FIELDS).unwrap();
        assert!(check_otp(Mode::Test, &f("{}")).is_ok());
        assert!(check_otp(Mode::Test, &f(r#"{"otp": "123456"}"#)).is_ok());
        assert!(check_otp(Mode::Test, &f(r#"{"otp": 123456}"#)).is_ok());
        let e = check_otp(Mode::Test, &f(r#"{"otp": "000000"}"#)).unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.param.as_deref()),
            ("incorrect_otp", Some("otp"))
        );
        let e = check_otp(Mode::Live, &f("{}")).unwrap_err();
        assert_eq!(e.code, "parameter_missing");
        assert!(check_otp(Mode::Live, &f(r#"{"otp": "482913"}"#)).is_ok());
        let e = check_otp(Mode::Test, &f(r#"{"otp": {"code": 1}}"#)).unwrap_err();
        assert_eq!(e.code, "parameter_invalid");
    }
}
