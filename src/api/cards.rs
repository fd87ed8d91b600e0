//! `/v1/payment_intents/{id}/card` and `/authenticate`: paying by card
//! (service-api.md, Payment intents rules 3 to 8).
//!
//! Card data handling: the body is read, checked into a
//! [`CardDetails`] and sent to the intent's actor, which hands it to the
//! provider; nothing else keeps it. The body is never logged (the access log
//! has the method, path and status only), error messages never echo a
//! value, and the idempotency fingerprint of these bodies is keyed with a
//! secret kept outside the store ([`fingerprint_key`]), so a saved
//! fingerprint cannot be brute-forced back into a card number, CVC, PIN or
//! code.

use std::path::Path;

use actix_web::{web, HttpRequest};
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_actors::idempotency::{Answer as DomainAnswer, IdempotencySave};
use kobo_actors::money::Currency;
use kobo_actors::payment_intent::actor::{payment_in_progress, Action, IntentMessage};
use kobo_actors::payment_intent::card::{AuthInput, BillingAddress, CardDetails, Secret};
use kobo_actors::payment_intent::PaymentIntentView;
use kobo_actors::query::{self, Principal};
use kobo_actors::{DomainError, ErrorCode, Mode};

use super::body;
use super::components::{
    ConflictReplayable, Forbidden, IdempotencyKey, NotFoundReplayable, Overloaded, PaymentIntentId,
};
use super::endpoint::{live_payments, Endpoint, Fingerprint};
use super::{resource, ApiError, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(resource("/v1/payment_intents/{id}/card").route(web::post().to(card)))
        .service(
            resource("/v1/payment_intents/{id}/authenticate").route(web::post().to(authenticate)),
        );
}

/// The file (in the data directory, beside the store, not in it) holding
/// the key of card-request fingerprints.
pub const FINGERPRINT_KEY_FILE: &str = "card-fingerprint-key";

/// Loads the fingerprint key, creating it (mode 0600) on first start. It
/// lives outside the store file so that a copy of the store alone (a
/// backup) holds nothing a card number could be recovered from.
pub fn fingerprint_key(data: &Path) -> anyhow::Result<[u8; 32]> {
    crate::keyfile::load_or_create(data, FINGERPRINT_KEY_FILE)
}

/// Live card-by-API needs the merchant's `card_api_enabled` (403, after
/// `account_not_activated`), whoever sends the card: the merchant's
/// server (secret key) or any page of the merchant's holding the payment's
/// `client_secret`. Only kobo's own hosted checkout (its checkout
/// credential) does not need it.
fn ensure_card_api(p: &Principal) -> ApiResult<()> {
    live_payments(p)?;
    if p.mode == Mode::Live && !p.caller.is_checkout() && !p.merchant.settings.card_api_enabled {
        return Err(ApiError(DomainError::forbidden(
            ErrorCode::CardApiNotEnabled,
            "card payments by API are not enabled for this account in live mode; use the hosted checkout or bank transfer",
        )));
    }
    Ok(())
}

/// Sends a card action to the intent's actor, refused with
/// `payment_in_progress` while another request works on the payment.
async fn act_if_idle(
    state: &State,
    p: &Principal,
    id: Uuid,
    action: Action,
    save: Option<IdempotencySave>,
) -> Result<DomainAnswer<PaymentIntentView>, DomainError> {
    let msg = IntentMessage {
        merchant: p.merchant.id,
        mode: p.mode,
        merchant_name: p.merchant.name.clone(),
        bank_transfer_enabled: p.merchant.settings.payment_methods.bank_transfer,
        action,
        idem: save,
    };
    state
        .kobo
        .payment_intents
        .send_if_idle(id, msg, payment_in_progress)
        .await?
}

// ---------------------------------------------------------------- card

/// A card to pay a payment intent with. Nothing but its last four digits
/// and brand is kept.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CardPayment)]
pub struct CardRequest {
    /// 12 to 19 digits (spaces allowed), passing the Luhn check.
    #[schema(min_length = 12, max_length = 23, example = "4084080000000409")]
    #[serde(deserialize_with = "body::required_text::<_, 23>")]
    number: String,
    #[schema(minimum = 1, maximum = 12)]
    #[serde(deserialize_with = "body::integer")]
    exp_month: i64,
    /// Four digits, or two (20xx); this month or later.
    #[schema(minimum = 0, maximum = 9999)]
    #[serde(deserialize_with = "body::integer")]
    exp_year: i64,
    /// 3 digits (4 for American Express).
    #[schema(min_length = 3, max_length = 4)]
    #[serde(deserialize_with = "body::required_text::<_, 4>")]
    cvc: String,
    /// The cardholder's name.
    #[schema(max_length = 200)]
    #[serde(deserialize_with = "body::text::<_, 200>")]
    name: Option<String>,
    /// Required for dollar payments.
    #[serde(deserialize_with = "body::nested")]
    billing_address: Option<BillingAddressRequest>,
}

/// The cardholder's billing address (dollar payments).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = BillingAddress)]
pub struct BillingAddressRequest {
    #[schema(min_length = 1, max_length = 200)]
    #[serde(deserialize_with = "body::required_text::<_, 200>")]
    line1: String,
    #[schema(max_length = 200)]
    #[serde(deserialize_with = "body::text::<_, 200>")]
    line2: Option<String>,
    #[schema(min_length = 1, max_length = 100)]
    #[serde(deserialize_with = "body::required_text::<_, 100>")]
    city: String,
    #[schema(min_length = 1, max_length = 100)]
    #[serde(deserialize_with = "body::required_text::<_, 100>")]
    state: String,
    #[schema(min_length = 1, max_length = 20)]
    #[serde(deserialize_with = "body::required_text::<_, 20>")]
    postal_code: String,
    /// ISO 3166-1 alpha-2 code.
    #[schema(min_length = 2, max_length = 2, example = "US")]
    #[serde(deserialize_with = "body::required_text::<_, 2>")]
    country: String,
}

impl BillingAddressRequest {
    fn into_address(self) -> Result<BillingAddress, DomainError> {
        let country = self.country.trim().to_ascii_uppercase();
        if country.len() != 2 || !country.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(DomainError::invalid(
                "billing_address.country",
                "`billing_address.country` must be a two-letter country code",
            ));
        }
        Ok(BillingAddress {
            line1: self.line1.trim().to_string(),
            line2: self.line2.map(|s| s.trim().to_string()),
            city: self.city.trim().to_string(),
            state: self.state.trim().to_string(),
            postal_code: self.postal_code.trim().to_string(),
            country,
        })
    }
}

impl CardRequest {
    /// Checks the card (Luhn, expiry, CVC) at `now`.
    fn into_card(self, now: chrono::DateTime<chrono::Utc>) -> Result<CardDetails, DomainError> {
        let number = Secret::new(self.number);
        let cvc = Secret::new(self.cvc);
        let billing = self
            .billing_address
            .map(BillingAddressRequest::into_address)
            .transpose()?;
        let mut card = CardDetails::parse(
            number.expose(),
            self.exp_month,
            self.exp_year,
            cvc.expose(),
            now,
        )?;
        card.name = self.name;
        card.billing_address = billing;
        Ok(card)
    }
}

/// Parses and checks a card body (400 naming the field).
#[cfg(test)]
fn parse_card(
    bytes: &[u8],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<CardDetails, DomainError> {
    body::parse::<CardRequest>(bytes)?.into_card(now)
}

/// Where the card calls work: live card-by-API needs `card_api_enabled`,
/// and their bodies are fingerprinted with a key.
const CARD_CALL: Endpoint = Endpoint::intent_key(200)
    .gate(ensure_card_api)
    .fingerprint(Fingerprint::Keyed);

/// Pay a payment intent by card
///
/// The answer's `status` tells the outcome: `successful` (paid), `failed`
/// (declined; `failure_code` says why; another card may be tried),
/// `processing` with `next_action` (the bank wants a PIN, a code, ... or a
/// redirect) or `processing` without it (the bank is deciding; wait for the
/// webhook). Dollar payments need `billing_address`. Live mode needs the
/// merchant's `card_api_enabled` (403 `card_api_not_enabled`) and a live
/// card provider (409 `card_api_unavailable`). Another request working on
/// the payment: 409 `payment_in_progress` (not saved under the
/// Idempotency-Key). After 5 failed card attempts on the payment: 409
/// `card_attempts_exceeded`. The payment intent's `client_secret` may be
/// the bearer. Test cards: docs/api.md.
#[utoipa::path(
    post,
    path = "/v1/payment_intents/{id}/card",
    operation_id = "pay_payment_intent_by_card",
    tag = "payment_intents",
    params(PaymentIntentId, IdempotencyKey),
    request_body(content = CardRequest, content_type = "application/json"),
    security(("bearer" = []), ("client_secret" = [])),
    responses(
        (status = 200, description = "The payment intent after the card: `successful`, `failed` with `failure_code`, or `processing` with or without `next_action`.",
            body = PaymentIntentView),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
pub(crate) async fn card(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    CARD_CALL
        .post(req, state, payload, |c, body: CardRequest| async move {
            let (state, p) = (&c.state, &c.p);
            let card = body.into_card(state.kobo.clock.now())?;
            if !p.merchant.settings.payment_methods.card {
                return Err(ApiError(DomainError::request(
                    ErrorCode::PaymentMethodUnavailable,
                    None,
                    "card payments are turned off in this merchant's payment settings",
                )));
            }
            let id = PaymentIntentId::parse(&path)?.id;
            let intent = query::payment_intent(&state.kobo, p.merchant.id, p.mode, id)?;
            if intent.currency == Currency::USD && card.billing_address.is_none() {
                return Err(ApiError(DomainError::missing("billing_address")));
            }
            Ok(act_if_idle(state, p, id, Action::Card { card }, c.save).await?)
        })
        .await
}

// ---------------------------------------------------------------- authenticate

/// The answer to the bank's `next_action`: exactly one field, the one
/// `next_action.input` names (`otp` by default), or `cancel: true` to give
/// up the attempt.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Authenticate)]
pub struct AuthenticateRequest {
    /// The one-time code: 4 to 8 digits.
    #[schema(min_length = 4, max_length = 8, pattern = "^[0-9]+$")]
    otp: Option<String>,
    /// The card PIN: 4 digits.
    #[schema(min_length = 4, max_length = 4, pattern = "^[0-9]{4}$")]
    pin: Option<String>,
    /// The phone number registered with the bank: 7 to 15 digits, optional `+`.
    #[schema(pattern = "^\\+?[0-9]{7,15}$")]
    phone: Option<String>,
    /// The cardholder's birthday, YYYY-MM-DD.
    #[schema(format = Date)]
    birthday: Option<String>,
    /// `true` abandons the attempt (the payment becomes `failed`,
    /// `authentication_canceled`).
    cancel: Option<bool>,
}

/// What an authenticate body asks.
enum Answer {
    Cancel,
    Input(AuthInput, Secret),
}

impl AuthenticateRequest {
    fn into_answer(self) -> Result<Answer, DomainError> {
        let given = [self.otp, self.pin, self.phone, self.birthday];
        let mut answers = AuthInput::ALL
            .into_iter()
            .zip(given)
            .filter_map(|(input, v)| v.map(|v| (input, Secret::new(v))));
        let first = answers.next();
        match (self.cancel, &first) {
            (None, _) => {}
            (Some(true), None) => return Ok(Answer::Cancel),
            (Some(true), Some(_)) => {
                return Err(DomainError::invalid(
                    "cancel",
                    "send either `cancel: true` or an answer, not both",
                ))
            }
            (Some(false), _) => {
                return Err(DomainError::invalid(
                    "cancel",
                    "`cancel` may only be `true`",
                ))
            }
        }
        let Some((input, value)) = first else {
            return Err(DomainError::missing("otp"));
        };
        if let Some((extra, _)) = answers.next() {
            return Err(DomainError::invalid(
                extra.as_str(),
                "send one answer: the field `next_action.input` names",
            ));
        }
        input.check(value.expose())?;
        Ok(Answer::Input(input, value))
    }
}

#[cfg(test)]
fn parse_authenticate(bytes: &[u8]) -> Result<Answer, DomainError> {
    body::parse::<AuthenticateRequest>(bytes)?.into_answer()
}

/// Answer the bank's request on a card payment
///
/// Send the field `next_action.input` names (`otp`, `pin`, `phone` or
/// `birthday`), or `cancel: true` to give up the attempt. The answer is the
/// payment intent as on the card call: successful, failed, or another
/// `next_action` (a PIN can be asked before a code). A different field than
/// the one asked: 400 naming it; nothing waiting: 409. The payment intent's
/// `client_secret` may be the bearer.
#[utoipa::path(
    post,
    path = "/v1/payment_intents/{id}/authenticate",
    operation_id = "authenticate_payment_intent",
    tag = "payment_intents",
    params(PaymentIntentId, IdempotencyKey),
    request_body(content = AuthenticateRequest, content_type = "application/json"),
    security(("bearer" = []), ("client_secret" = [])),
    responses(
        (status = 200, description = "The payment intent after the answer, as on the card call.",
            body = PaymentIntentView),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
pub(crate) async fn authenticate(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    CARD_CALL
        .post(
            req,
            state,
            payload,
            |c, body: AuthenticateRequest| async move {
                let (state, p) = (&c.state, &c.p);
                let answer = body.into_answer()?;
                let id = PaymentIntentId::parse(&path)?.id;
                query::payment_intent(&state.kobo, p.merchant.id, p.mode, id)?;
                let action = match answer {
                    Answer::Cancel => Action::CancelAuthentication,
                    Answer::Input(input, value) => Action::Authenticate { input, value },
                };
                Ok(act_if_idle(state, p, id, action, c.save).await?)
            },
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::super::endpoint::keyed;
    use super::*;
    use chrono::TimeZone;

    fn now() -> chrono::DateTime<chrono::Utc> {
        chrono::Utc.with_ymd_and_hms(2025, 6, 15, 12, 0, 0).unwrap()
    }

    #[track_caller]
    fn refused<T>(r: Result<T, DomainError>, code: &str, param: &str) {
        let Err(e) = r else {
            panic!("expected {code} on {param}")
        };
        assert_eq!(e.code, code, "{e}");
        assert_eq!(e.param.as_deref(), Some(param), "{e}");
    }

    #[test]
    fn card_bodies_are_checked_field_by_field() {
        let ok =
            br#"{"number": "4084080000000409", "exp_month": 12, "exp_year": 2030, "cvc": "123"}"#;
        let card = parse_card(ok, now()).unwrap();
        assert_eq!(card.summary().last4, "0409");
        refused(
            parse_card(
                br#"{"exp_month": 12, "exp_year": 2030, "cvc": "123"}"#,
                now(),
            ),
            "parameter_missing",
            "number",
        );
        refused(
            parse_card(
                br#"{"number": "4084080000000409", "exp_year": 2030, "cvc": "123"}"#,
                now(),
            ),
            "parameter_missing",
            "exp_month",
        );
        refused(parse_card(br#"{"number": "4084080000000409", "exp_month": "12", "exp_year": 2030, "cvc": "123"}"#, now()), "parameter_invalid", "exp_month");
        refused(
            parse_card(
                br#"{"number": "4084080000000409", "exp_month": 12, "exp_year": 2030}"#,
                now(),
            ),
            "parameter_missing",
            "cvc",
        );
        refused(
            parse_card(
                br#"{"number": 4084080000000409, "exp_month": 12, "exp_year": 2030, "cvc": "123"}"#,
                now(),
            ),
            "parameter_invalid",
            "number",
        );
        refused(parse_card(br#"{"number": "4084080000000409", "exp_month": 12, "exp_year": 2030, "cvc": "123", "pan": "1"}"#, now()), "parameter_unknown", "pan");
        let address = |a: &str| {
            format!(
                r#"{{"number": "4084080000000409", "exp_month": 12, "exp_year": 2030, "cvc": "123", "billing_address": {a}}}"#
            )
        };
        let full = r#"{"line1": "1 Main St", "city": "Austin", "state": "TX", "postal_code": "78701", "country": "us"}"#;
        let card = parse_card(address(full).as_bytes(), now()).unwrap();
        assert_eq!(card.billing_address.as_ref().unwrap().country, "US");
        refused(
            parse_card(address(r#"{"line1": "1 Main St"}"#).as_bytes(), now()),
            "parameter_missing",
            "billing_address.city",
        );
        refused(parse_card(address(r#"{"line1": "x", "city": "y", "state": "z", "postal_code": "1", "country": "USA"}"#).as_bytes(), now()), "parameter_invalid", "billing_address.country");
        refused(
            parse_card(address(r#"{"street": "x"}"#).as_bytes(), now()),
            "parameter_unknown",
            "billing_address.street",
        );
        refused(
            parse_card(address(r#""1 Main St""#).as_bytes(), now()),
            "parameter_invalid",
            "billing_address",
        );
    }

    #[test]
    fn authenticate_bodies_carry_one_answer_or_a_cancel() {
        assert!(matches!(
            parse_authenticate(br#"{"cancel": true}"#).unwrap(),
            Answer::Cancel
        ));
        let Answer::Input(input, value) = parse_authenticate(br#"{"pin": "1234"}"#).unwrap() else {
            panic!()
        };
        assert_eq!((input, value.expose()), (AuthInput::Pin, "1234"));
        refused(parse_authenticate(b"{}"), "parameter_missing", "otp");
        refused(
            parse_authenticate(br#"{"cancel": false}"#),
            "parameter_invalid",
            "cancel",
        );
        refused(
            parse_authenticate(br#"{"cancel": true, "otp": "123456"}"#),
            "parameter_invalid",
            "cancel",
        );
        refused(
            parse_authenticate(br#"{"otp": "123456", "pin": "1234"}"#),
            "parameter_invalid",
            "pin",
        );
        refused(
            parse_authenticate(br#"{"otp": 123456}"#),
            "parameter_invalid",
            "otp",
        );
        refused(
            parse_authenticate(br#"{"pin": "12345"}"#),
            "parameter_invalid",
            "pin",
        );
        refused(
            parse_authenticate(br#"{"birthday": "1990-13-01"}"#),
            "parameter_invalid",
            "birthday",
        );
        refused(
            parse_authenticate(br#"{"code": "1"}"#),
            "parameter_unknown",
            "code",
        );
    }

    #[test]
    fn fingerprints_of_card_bodies_are_keyed() {
        let body = br#"{"number": "4084080000000409"}"#;
        let a = keyed(&[1; 32], body);
        assert_eq!(a, keyed(&[1; 32], body));
        assert_ne!(a, keyed(&[2; 32], body));
        assert!(!String::from_utf8(a).unwrap().contains("4084080000000409"));
        let dir = tempfile::tempdir().unwrap();
        let k = fingerprint_key(dir.path()).unwrap();
        assert_eq!(fingerprint_key(dir.path()).unwrap(), k);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(FINGERPRINT_KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
