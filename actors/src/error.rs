//! The one error type of the domain. Every public error has a kind (which the
//! HTTP layer maps to a status and `type`, in one place), a stable `code`, a
//! message for people and, on request errors, the offending `param`.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// 400 invalid_request_error
    InvalidRequest,
    /// 401 authentication_error
    Unauthenticated,
    /// 403 authentication_error
    Forbidden,
    /// 404 invalid_request_error
    NotFound,
    /// 409 state_error
    State,
    /// 413 invalid_request_error
    TooLarge,
    /// 408 invalid_request_error: the body did not arrive in time
    BodyTimeout,
    /// 422 idempotency_error
    Idempotency,
    /// 429 rate_limit_error: too many requests; retry after this many
    /// whole seconds (at least 1), sent as `Retry-After`
    RateLimited { retry_after_secs: u64 },
    /// 503 api_error: a bounded queue is full; retry later
    Overloaded,
    /// 500 api_error
    Internal,
    /// 405 invalid_request_error: a known path, the wrong method
    MethodNotAllowed,
}

/// Declares [`ErrorCode`]: each variant with its wire code and its kind.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $wire:literal => $kind:expr,)*) => {
        /// Every error code the service emits. The wire code (`as_str`) is
        /// stable; the kind (`kind`) gives its HTTP status and `type`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)*
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The wire code, as sent in `error.code`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $wire,)*
                }
            }

            /// The kind (HTTP status and `type`) every use of this code has.
            /// `RateLimited` carries the minimum `retry_after_secs` (1);
            /// [`DomainError::rate_limited`] sets the real wait.
            pub fn kind(self) -> ErrorKind {
                match self {
                    $(ErrorCode::$variant => $kind,)*
                }
            }

            /// The code whose wire form is `wire`, if any.
            pub fn from_wire(wire: &str) -> Option<ErrorCode> {
                match wire {
                    $($wire => Some(ErrorCode::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

use ErrorKind::{
    BodyTimeout, Forbidden, Idempotency, Internal, InvalidRequest, MethodNotAllowed, NotFound,
    Overloaded, State, TooLarge, Unauthenticated,
};

error_codes! {
    // 400
    ParameterMissing = "parameter_missing" => InvalidRequest,
    ParameterInvalid = "parameter_invalid" => InvalidRequest,
    ParameterUnknown = "parameter_unknown" => InvalidRequest,
    PaymentMethodUnavailable = "payment_method_unavailable" => InvalidRequest,
    IncorrectOtp = "incorrect_otp" => InvalidRequest,
    AmountTooLarge = "amount_too_large" => InvalidRequest,
    AccountVerificationFailed = "account_verification_failed" => InvalidRequest,
    TooManyEndpoints = "too_many_endpoints" => InvalidRequest,
    AmountOutOfRange = "amount_out_of_range" => InvalidRequest,
    // 401, 403
    InvalidApiKey = "invalid_api_key" => Unauthenticated,
    AccountNotActivated = "account_not_activated" => Forbidden,
    CardApiNotEnabled = "card_api_not_enabled" => Forbidden,
    UsdtNotEnabled = "usdt_not_enabled" => Forbidden,
    FormTokenInvalid = "form_token_invalid" => Forbidden,
    // 404, 405
    ResourceMissing = "resource_missing" => NotFound,
    MethodNotAllowed = "method_not_allowed" => MethodNotAllowed,
    // 408, 413
    RequestTimeout = "request_timeout" => BodyTimeout,
    BodyTooLarge = "body_too_large" => TooLarge,
    // 409
    PaymentIntentUnexpectedState = "payment_intent_unexpected_state" => State,
    BankTransferNotStarted = "bank_transfer_not_started" => State,
    ProviderNotConfigured = "provider_not_configured" => State,
    CardAttemptsExceeded = "card_attempts_exceeded" => State,
    CardApiUnavailable = "card_api_unavailable" => State,
    PaymentInProgress = "payment_in_progress" => State,
    DuplicateReference = "duplicate_reference" => State,
    IdempotencyKeyInUse = "idempotency_key_in_use" => State,
    NoFxRate = "no_fx_rate" => State,
    RateChanged = "rate_changed" => State,
    PricingOutOfRange = "pricing_out_of_range" => State,
    SettlementDelayOutOfRange = "settlement_delay_out_of_range" => State,
    ClockNotManual = "clock_not_manual" => State,
    BackupNotAvailable = "backup_not_available" => State,
    MandateAlreadyAnswered = "mandate_already_answered" => State,
    MandateUnexpectedState = "mandate_unexpected_state" => State,
    MandateNotActive = "mandate_not_active" => State,
    PaymentNotRefundable = "payment_not_refundable" => State,
    PaymentNotDisputable = "payment_not_disputable" => State,
    PaymentDisputed = "payment_disputed" => State,
    DisputeAlreadyOpen = "dispute_already_open" => State,
    DisputeNotOpen = "dispute_not_open" => State,
    DisputeResponseLate = "dispute_response_late" => State,
    InsufficientFunds = "insufficient_funds" => State,
    PayoutLimitExceeded = "payout_limit_exceeded" => State,
    PayoutUnexpectedState = "payout_unexpected_state" => State,
    CustomerExists = "customer_exists" => State,
    CustomerBlocked = "customer_blocked" => State,
    CustomerInUse = "customer_in_use" => State,
    CustomerIdentityUnverified = "customer_identity_unverified" => State,
    VirtualAccountUnexpectedState = "virtual_account_unexpected_state" => State,
    SlugTaken = "slug_taken" => State,
    /// A dashboard user with this email exists already.
    EmailTaken = "email_taken" => State,
    SlugLocked = "slug_locked" => State,
    PaymentLinkInactive = "payment_link_inactive" => State,
    PaymentLinkFull = "payment_link_full" => State,
    InvoiceNotDraft = "invoice_not_draft" => State,
    InvoiceNotPayable = "invoice_not_payable" => State,
    InvoiceHasPayments = "invoice_has_payments" => State,
    AmountExceedsRemaining = "amount_exceeds_remaining" => State,
    PlanArchived = "plan_archived" => State,
    SubscriptionExists = "subscription_exists" => State,
    SubscriptionEnded = "subscription_ended" => State,
    /// A test event for a disabled webhook endpoint.
    WebhookEndpointDisabled = "webhook_endpoint_disabled" => State,
    // 422
    IdempotencyKeyReused = "idempotency_key_reused" => Idempotency,
    // 429
    RateLimited = "rate_limited" => ErrorKind::RateLimited {
        retry_after_secs: 1
    },
    // 500, 503
    InternalError = "internal_error" => Internal,
    Overloaded = "overloaded" => Overloaded,
    /// The merchant's shard is changing hands between kobo nodes (or this
    /// node's lease on it went stale); nothing was written.
    MerchantMoving = "merchant_moving" => Overloaded,
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for ErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainError {
    pub kind: ErrorKind,
    pub code: ErrorCode,
    pub message: String,
    pub param: Option<String>,
}

impl DomainError {
    /// An error whose kind is the code's own: the usual constructor.
    pub fn of(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(code.kind(), code, message)
    }
    /// An error with an explicit kind; only for kinds that carry data
    /// (`RateLimited`) or tests. Prefer [`DomainError::of`].
    pub fn new(kind: ErrorKind, code: ErrorCode, message: impl Into<String>) -> Self {
        DomainError {
            kind,
            code,
            message: message.into(),
            param: None,
        }
    }
    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }
    /// 400 `parameter_invalid` naming `param`.
    pub fn invalid(param: &str, message: impl Into<String>) -> Self {
        Self::of(ErrorCode::ParameterInvalid, message).with_param(param)
    }
    /// 400 `parameter_missing` naming `param`.
    pub fn missing(param: &str) -> Self {
        Self::of(
            ErrorCode::ParameterMissing,
            format!("`{param}` is required"),
        )
        .with_param(param)
    }
    /// 400 `parameter_unknown` naming `param`.
    pub fn unknown(param: &str) -> Self {
        Self::of(
            ErrorCode::ParameterUnknown,
            format!("`{param}` is not a known parameter"),
        )
        .with_param(param)
    }
    /// A 400 error (`code` must be a 400 code) naming `param`, if any.
    pub fn request(code: ErrorCode, param: Option<&str>, message: impl Into<String>) -> Self {
        debug_assert_eq!(code.kind(), ErrorKind::InvalidRequest, "{code}");
        let e = Self::of(code, message);
        match param {
            Some(p) => e.with_param(p),
            None => e,
        }
    }
    /// 404 `resource_missing`.
    pub fn not_found(what: &str, id: impl fmt::Display) -> Self {
        Self::of(ErrorCode::ResourceMissing, format!("no such {what}: {id}"))
    }
    /// 409 state error with a code (`code` must be a 409 code).
    pub fn state(code: ErrorCode, message: impl Into<String>) -> Self {
        debug_assert_eq!(code.kind(), ErrorKind::State, "{code}");
        Self::of(code, message)
    }
    /// 401 `invalid_api_key`.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::of(ErrorCode::InvalidApiKey, message)
    }
    /// 403 with a code (`code` must be a 403 code).
    pub fn forbidden(code: ErrorCode, message: impl Into<String>) -> Self {
        debug_assert_eq!(code.kind(), ErrorKind::Forbidden, "{code}");
        Self::of(code, message)
    }
    /// 500 `internal_error`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::of(ErrorCode::InternalError, message)
    }
    /// 429 `rate_limited`: `who` sent more than its limit; nothing was done
    /// (and nothing saved under the Idempotency-Key).
    pub fn rate_limited(who: &str, retry_after: std::time::Duration) -> Self {
        // Whole seconds, rounded up, at least 1.
        let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
        let secs = secs.max(1);
        Self::new(
            ErrorKind::RateLimited {
                retry_after_secs: secs,
            },
            ErrorCode::RateLimited,
            format!("too many requests from {who}; retry in {secs} s"),
        )
    }
    /// 503 `overloaded`.
    pub fn overloaded(what: &str) -> Self {
        Self::of(
            ErrorCode::Overloaded,
            format!("{what} is busy; retry shortly with the same Idempotency-Key"),
        )
    }
}

impl fmt::Display for DomainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for DomainError {}

impl From<kobo_storage::StoreError> for DomainError {
    fn from(e: kobo_storage::StoreError) -> Self {
        DomainError::internal(format!("store: {e}"))
    }
}

impl From<kobo_storage::CommitError> for DomainError {
    /// A commit refused as a whole: the writer stopped, or the batch's
    /// merchant is not (or no longer) this node's. A refused precondition
    /// is the caller's to name; reaching here it is unexpected.
    fn from(e: kobo_storage::CommitError) -> Self {
        match e {
            kobo_storage::CommitError::NotOwner { .. } => DomainError::of(
                ErrorCode::MerchantMoving,
                "this merchant is moving between kobo nodes; retry shortly with the same Idempotency-Key",
            ),
            kobo_storage::CommitError::Closed => DomainError::internal("the store writer stopped"),
            kobo_storage::CommitError::Conflict { table, .. } => {
                DomainError::internal(format!("unexpected conflict in {table}"))
            }
        }
    }
}

impl From<kobo_storage::CodecError> for DomainError {
    fn from(e: kobo_storage::CodecError) -> Self {
        DomainError::internal(format!("stored data: {e}"))
    }
}

pub type DomainResult<T> = Result<T, DomainError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_refused_for_want_of_a_lease_is_a_retryable_503() {
        let e = DomainError::from(kobo_storage::CommitError::NotOwner { shard: 7 });
        assert_eq!(e.code, ErrorCode::MerchantMoving);
        assert_eq!(e.kind, ErrorKind::Overloaded);
        assert!(e.message.contains("same Idempotency-Key"));
        let e = DomainError::from(kobo_storage::CommitError::Closed);
        assert_eq!(e.kind, ErrorKind::Internal);
    }
}
