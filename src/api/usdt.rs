//! USDT: `GET /v1/usdt`, the preview, crypto payouts, and the operator's
//! wallet routes (`/admin/v1/merchants/{id}/usdt_wallets`).

use actix_web::{web, HttpRequest};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_actors::audit::Audit;
use kobo_actors::idempotency::{render, Outcome};
use kobo_actors::query::{ListView, Principal};
use kobo_actors::usdt::actor::{self as wallets, DeleteWallet};
use kobo_actors::usdt::service::{
    self, CreateCryptoPayout, UsdtPreviewView, UsdtView, MAX_LABEL_LEN,
};
use kobo_actors::usdt::{
    settings_of, CryptoPayoutView, DeletedWalletView, Network, UsdtWalletView, SANDBOX_OTP,
};
use kobo_actors::{DomainError, ErrorCode, Mode};

use super::body::{self as body, NoFields};
use super::components::{
    path_id, BadRequest, ByRef, ConflictReplayable, Forbidden, IdempotencyKey, NotFound,
    NotFoundReplayable,
};
use super::endpoint::{Call, Endpoint};
use super::fx::{ListQuery, PreviewQuery};
use super::{parse_id, resource, ApiError, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
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

path_id!(
    /// The `{id}` of a crypto payout.
    CryptoPayoutId,
    "crypto_payout",
    /// Unknown, another merchant's or the other mode's: 404.
);

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
    )
)]
async fn usdt(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, _: NoFields| async move {
            let Call { state, p, .. } = c;
            let view = service::usdt_view(&state.kobo, &p.merchant, p.mode)?;
            Ok(serde_json::to_value(view).expect("a USDT view serializes"))
        })
        .await
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
    )
)]
async fn preview(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: PreviewQuery| async move {
            let Call { state, p, .. } = c;
            let (usd_amount, brand) = q.checked(&state, &p)?;
            let view = service::preview(&state.kobo, &p.merchant, p.mode, brand, usd_amount)?;
            Ok(serde_json::to_value(view).expect("a preview serializes"))
        })
        .await
}

// The body of `POST /v1/usdt/payouts`, for the OpenAPI document; a unit
/// The body that sends dollars as USDT. No other fields are allowed.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateCryptoPayout)]
pub struct CreateCryptoPayoutRequest {
    /// Cents taken from USD `available`; the fee and its VAT come out of it.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::amount::<_, 1>")]
    usd_amount: i64,
    /// One of this mode's wallets (`GET /v1/usdt`); unknown or cleared: 404.
    #[serde(deserialize_with = "body::required_uuid")]
    wallet: Uuid,
    /// Whose dollars (default: the default brand); unknown: 404.
    #[serde(deserialize_with = "body::uuid")]
    brand: Option<Uuid>,
    /// The one-time code: required in live mode; in test mode optional, and
    /// when sent it must be `123456` (else 400 `incorrect_otp`).
    #[schema(max_length = 32)]
    #[serde(deserialize_with = "otp")]
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
/// `otp`: a string of at most 32 characters, or a whole number.
fn otp<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None => Ok(None),
        Some(Value::String(s)) if s.len() <= 32 => Ok(Some(s)),
        Some(Value::Number(n)) if n.is_u64() => Ok(Some(n.to_string())),
        Some(_) => Err(body::tunnel(DomainError::invalid(
            body::FIELD,
            "otp is the one-time code, a string of digits",
        ))),
    }
}

fn check_otp(mode: Mode, otp: Option<String>) -> Result<(), DomainError> {
    match (mode, otp) {
        (Mode::Live, None) => Err(DomainError::missing("otp")),
        (Mode::Test, Some(code)) if code.trim() != SANDBOX_OTP => Err(DomainError::request(
            ErrorCode::IncorrectOtp,
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
        (status = 201, description = "The crypto payout, `queued`.", body = CryptoPayoutView),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
    )
)]
async fn create_payout(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    const CREATE: Endpoint = Endpoint::secret_key(201).gate(ensure_usdt);
    CREATE
        .post(
            req,
            state,
            payload,
            |c, body: CreateCryptoPayoutRequest| async move {
                let (state, p) = (&c.state, &c.p);
                let CreateCryptoPayoutRequest {
                    usd_amount,
                    wallet,
                    brand,
                    otp,
                } = body;
                check_otp(p.mode, otp)?;
                let create = CreateCryptoPayout {
                    usd_amount,
                    wallet,
                    brand,
                    automatic: false,
                };
                let payouts = &state.kobo.crypto_payouts;
                Ok(service::create_payout(payouts, &p.merchant, p.mode, create, c.save()).await?)
            },
        )
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
    )
)]
async fn list_payouts(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .list_page::<ListQuery, _>(req, state, service::list_payouts)
        .await
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
        (status = 404, response = NotFound),
    )
)]
async fn retrieve_payout(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let Call { state, p, .. } = c;
            let id = CryptoPayoutId::parse(&path)?.id;
            match service::load_payout(&state.kobo, id)? {
                Some(po) if po.merchant == p.merchant.id && po.mode == p.mode => Ok(po.to_api()),
                _ => Err(ApiError(DomainError::not_found("crypto_payout", id))),
            }
        })
        .await
}

/// The body of `POST /admin/v1/merchants/{id}/usdt_wallets`. `label` and
/// `mode` are checked after the address (as they always were).
#[derive(Deserialize)]
pub struct AddWallet {
    #[serde(deserialize_with = "body::required_text::<_, 128>")]
    address: String,
    #[serde(deserialize_with = "body::required_text::<_, 8>")]
    network: String,
    label: Option<Value>,
    mode: Option<Value>,
}

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
    let audit = super::endpoint::audit(&req);
    Endpoint::operator(201)
        .existing(200)
        .operate_with(req, state, payload, |state, b: AddWallet| async move {
            let merchant = merchant_of(&state, &path)?;
            add_wallet_for(&state, merchant, b, audit).await
        })
        .await
}

/// Adds the wallet of `b` (validated here) to `merchant`'s: what the
/// operator's `POST /admin/v1/merchants/{id}/usdt_wallets` and the
/// dashboard's settings page both do.
pub async fn add_wallet_for(
    state: &State,
    merchant: Uuid,
    b: AddWallet,
    audit: Audit,
) -> ApiResult<Outcome<UsdtWalletView>> {
    let address = b.address.trim().to_string();
    let network = Network::parse(&b.network)
        .ok_or_else(|| DomainError::invalid("network", "network must be TRC20 or ERC20"))?;
    network
        .normalize(&address)
        .map_err(|m| DomainError::invalid("address", m))?;
    let label = body::text_of("label", b.label, MAX_LABEL_LEN)?;
    let mode = match body::text_of("mode", b.mode, 8)?.as_deref() {
        None => Mode::Test,
        Some(m) => Mode::parse(m)
            .ok_or_else(|| DomainError::invalid("mode", "mode must be test or live"))?,
    };
    let add = wallets::AddWallet {
        mode,
        network,
        address,
        label,
        audit,
    };
    Ok(state.kobo.usdt_wallets.send(merchant, add).await??)
}

/// Clears a wallet: 200 `{id, object: "usdt_wallet", livemode, deleted:
/// true}`; unknown or already cleared: 404.
async fn delete_wallet(
    req: HttpRequest,
    state: State,
    path: web::Path<(String, String)>,
) -> ApiResult {
    let audit = super::endpoint::audit(&req);
    Endpoint::operator(200)
        .operate(req, state, |state| async move {
            let (merchant, wallet) = path.into_inner();
            let wallet = parse_id(&wallet, "usdt_wallet")?;
            let merchant = merchant_of(&state, &merchant)?;
            Ok(render(
                &delete_wallet_for(&state, merchant, wallet, audit).await?,
            ))
        })
        .await
}

/// Clears `merchant`'s wallet `wallet` (operator API and dashboard).
pub async fn delete_wallet_for(
    state: &State,
    merchant: Uuid,
    wallet: Uuid,
    audit: Audit,
) -> ApiResult<DeletedWalletView> {
    let deleted = DeleteWallet { wallet, audit };
    Ok(state.kobo.usdt_wallets.send(merchant, deleted).await??)
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
        let accepted: BTreeSet<String> = super::body::fields_of::<CreateCryptoPayoutRequest>()
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(documented, accepted);
        assert_eq!(v["required"], serde_json::json!(["usd_amount", "wallet"]));
    }

    #[test]
    fn the_one_time_code_is_required_live_and_checked_when_sent_in_test_mode() {
        let f = |body: &str| {
            let mut b = serde_json::from_str::<serde_json::Map<String, Value>>(body).unwrap();
            b.insert("usd_amount".into(), 1.into());
            b.insert("wallet".into(), uuid::Uuid::nil().to_string().into());
            super::body::from_map::<CreateCryptoPayoutRequest>(b).map(|r| r.otp)
        };
        let f = |mode: Mode, body: &str| f(body).and_then(|otp| check_otp(mode, otp));
        assert!(f(Mode::Test, "{}").is_ok());
        assert!(f(Mode::Test, r#"{"otp": "123456"}"#).is_ok());
        assert!(f(Mode::Test, r#"{"otp": 123456}"#).is_ok());
        let e = f(Mode::Test, r#"{"otp": "000000"}"#).unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.param.as_deref()),
            ("incorrect_otp", Some("otp"))
        );
        let e = f(Mode::Live, "{}").unwrap_err();
        assert_eq!(e.code, "parameter_missing");
        assert!(f(Mode::Live, r#"{"otp": "482913"}"#).is_ok());
        let e = f(Mode::Test, r#"{"otp": {"code": 1}}"#).unwrap_err();
        assert_eq!(e.code, "parameter_invalid");
    }
}
