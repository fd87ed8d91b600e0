//! The OpenAPI components the handlers' annotations name: the error
//! responses (each with the [`ErrorBody`] schema), the parameters
//! (`Idempotency-Key`, a path's `{id}`: each a type that both documents
//! and reads it), and list items by reference. A leaf: it imports no
//! handler, so handlers and the document ([`super::openapi`]) both depend
//! on it and not on each other.

use std::borrow::Cow;
use std::marker::PhantomData;

use actix_web::HttpRequest;
use utoipa::openapi::schema::{Ref, Schema};
use utoipa::openapi::RefOr;
use utoipa::{IntoParams, PartialSchema, ToSchema};

use kobo_actors::idempotency::MAX_KEY_LEN;
use kobo_actors::ledger::BalanceTransactionView;
use kobo_actors::payment_intent::{ChargeAttemptView, PaymentIntentView};
use kobo_actors::{DomainError, ErrorCode};

use super::error::{ApiError, ApiResult};

pub use responses::*;

/// The extension key that stands for JSON Schema's `contentSchema`, which
/// utoipa cannot write (its schema objects take only `x-` extensions): a
/// schema gives it through [`ExtensionsBuilder`], and [`document_json`]
/// renames it to `contentSchema` (a JSON Schema 2020-12 keyword, so valid
/// OpenAPI 3.1).
pub const CONTENT_SCHEMA: &str = "x-contentSchema";

/// The `Idempotency-Key` header every POST needs.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyKey {
    /// 1 to 255 characters. The same key with the same request answers the
    /// saved response (`Idempotent-Replayed: true`); with a different
    /// request, 422. Missing: 400 `parameter_missing`. Keys are kept 24
    /// hours.
    #[param(rename = "Idempotency-Key", min_length = 1, max_length = 255)]
    pub key: String,
}

impl IdempotencyKey {
    /// Reads the header: missing is `parameter_missing`, empty, too long
    /// or not visible ASCII `parameter_invalid`.
    pub fn read(req: &HttpRequest) -> ApiResult<Self> {
        let key = match req.headers().get("idempotency-key") {
            None => {
                return Err(ApiError(
                    DomainError::of(
                        ErrorCode::ParameterMissing,
                        "every POST needs an Idempotency-Key header",
                    )
                    .with_param("Idempotency-Key"),
                ))
            }
            Some(v) => v.to_str().ok().map(str::to_string).unwrap_or_default(),
        };
        if key.is_empty() || key.len() > MAX_KEY_LEN {
            return Err(ApiError(DomainError::invalid(
                "Idempotency-Key",
                format!("the Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters"),
            )));
        }
        Ok(IdempotencyKey { key })
    }
}

/// A path's `{id}` parameter: a struct documenting it (`IntoParams`) and
/// reading it (`parse`: a malformed id is 404 `no such <object>`, as an
/// unknown one): `path_id!(/// doc, PayoutId, "payout", /// the id's doc)`.
macro_rules! path_id {
    ($(#[doc = $doc:tt])* $name:ident, $object:literal, $(#[doc = $id_doc:tt])*) => {
        $(#[doc = $doc])*
        #[derive(utoipa::IntoParams)]
        #[into_params(parameter_in = Path)]
        pub struct $name {
            $(#[doc = $id_doc])*
            pub id: uuid::Uuid,
        }

        impl $name {
            /// Reads the path's `{id}`.
            pub fn parse(raw: &str) -> $crate::api::ApiResult<Self> {
                $crate::api::parse_id(raw, $object).map(|id| $name { id })
            }
        }
    };
}
pub(crate) use path_id;

path_id!(
    /// The `{id}` of a payment intent.
    PaymentIntentId,
    "payment_intent",
    /// The payment intent's id; unknown, malformed, another merchant's or
    /// the other mode's: 404.
);

/// The error responses, each with the [`super::ErrorBody`] schema. The
/// `...Replayable` ones are those of POSTs, whose 4xx answers are saved and
/// replayed under the same Idempotency-Key.
#[allow(dead_code)]
mod responses {
    use utoipa::ToResponse;

    use super::super::ErrorBody;

    /// `invalid_request_error`: a parameter is missing (`parameter_missing`), unknown (`parameter_unknown`) or invalid (`parameter_invalid`), named by `param`.
    #[derive(ToResponse)]
    pub struct BadRequest(ErrorBody);

    /// `invalid_request_error`: a parameter is missing (`parameter_missing`), unknown (`parameter_unknown`) or invalid (`parameter_invalid`), named by `param` (malformed JSON: `body`; a missing or too long Idempotency-Key: `Idempotency-Key`). Saved and replayed under the same Idempotency-Key.
    #[derive(ToResponse)]
    #[response(headers(
        ("Idempotent-Replayed" = String, description = "`true` when this is the saved response of an earlier request with the same Idempotency-Key")
    ))]
    pub struct BadRequestReplayable(ErrorBody);

    /// `authentication_error`: the key is missing, malformed, unknown or revoked (a client secret used beyond its payment intent included).
    #[derive(ToResponse)]
    pub struct Unauthorized(ErrorBody);

    /// `authentication_error`: the account cannot do this yet (`account_not_activated`: live payments before approval).
    #[derive(ToResponse)]
    pub struct Forbidden(ErrorBody);

    /// `invalid_request_error` `resource_missing`: no such object, or it belongs to another account or mode.
    #[derive(ToResponse)]
    pub struct NotFound(ErrorBody);

    /// `invalid_request_error` `resource_missing`: no such object, or it belongs to another account or mode (test helpers: always for live keys). Saved and replayed under the same Idempotency-Key.
    #[derive(ToResponse)]
    #[response(headers(
        ("Idempotent-Replayed" = String, description = "`true` when this is the saved response of an earlier request with the same Idempotency-Key")
    ))]
    pub struct NotFoundReplayable(ErrorBody);

    /// `state_error`: the object's state does not allow the operation (`payment_intent_unexpected_state`, `duplicate_reference`, ...), or a request with the same Idempotency-Key is still running (`idempotency_key_in_use`). Saved and replayed under the same Idempotency-Key.
    #[derive(ToResponse)]
    #[response(headers(
        ("Idempotent-Replayed" = String, description = "`true` when this is the saved response of an earlier request with the same Idempotency-Key")
    ))]
    pub struct ConflictReplayable(ErrorBody);

    /// `invalid_request_error` `body_too_large`: the body is over 1 MiB.
    #[derive(ToResponse)]
    pub struct PayloadTooLarge(ErrorBody);

    /// `idempotency_error` `idempotency_key_reused`: the Idempotency-Key was used with a different request.
    #[derive(ToResponse)]
    pub struct IdempotencyKeyReused(ErrorBody);

    /// `api_error`: a failure on the service's side; nothing was saved, retry with the same Idempotency-Key.
    #[derive(ToResponse)]
    pub struct InternalError(ErrorBody);

    /// `api_error` `overloaded`: the object is busy; nothing was saved, retry shortly with the same Idempotency-Key.
    #[derive(ToResponse)]
    #[response(headers(
        ("Retry-After" = String, description = "Seconds to wait before retrying.")
    ))]
    pub struct Overloaded(ErrorBody);

    /// `rate_limit_error` `rate_limited`: more requests than the key's (or the client IP's) rate allows; nothing was done or saved, retry after `Retry-After` seconds with the same Idempotency-Key.
    #[derive(ToResponse)]
    #[response(headers(
        ("Retry-After" = String, description = "Whole seconds to wait before retrying (at least 1).")
    ))]
    pub struct RateLimited(ErrorBody);
}

/// A schema used by reference. utoipa inlines the schemas of generic
/// arguments; a list of `ByRef<T>` (through the aliases below) lists
/// `$ref`s to `T`'s schema instead, and registers that schema.
pub struct ByRef<T>(PhantomData<T>);

impl<T: ToSchema> PartialSchema for ByRef<T> {
    fn schema() -> RefOr<Schema> {
        RefOr::Ref(Ref::from_schema_name(T::name()))
    }
}

impl<T: ToSchema> ToSchema for ByRef<T> {
    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((T::name().into_owned(), T::schema()));
        T::schemas(schemas);
    }
}

/// List items: `ListView<PaymentIntentRef>` is `List_PaymentIntent`.
pub type PaymentIntentRef = ByRef<PaymentIntentView>;
pub type ChargeAttemptRef = ByRef<ChargeAttemptView>;
pub type BalanceTransactionRef = ByRef<BalanceTransactionView>;
pub type WebhookEndpointRef = ByRef<kobo_actors::webhook::WebhookEndpointView>;
pub type EventRef = ByRef<kobo_actors::webhook::query::EventListView>;
pub type DeliveryAttemptRef = ByRef<kobo_actors::webhook::DeliveryAttemptView>;
