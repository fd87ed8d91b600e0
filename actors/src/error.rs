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
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainError {
    pub kind: ErrorKind,
    pub code: String,
    pub message: String,
    pub param: Option<String>,
}

impl DomainError {
    pub fn new(kind: ErrorKind, code: &str, message: impl Into<String>) -> Self {
        DomainError {
            kind,
            code: code.to_string(),
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
        Self::new(ErrorKind::InvalidRequest, "parameter_invalid", message).with_param(param)
    }
    /// 400 `parameter_missing` naming `param`.
    pub fn missing(param: &str) -> Self {
        Self::new(
            ErrorKind::InvalidRequest,
            "parameter_missing",
            format!("`{param}` is required"),
        )
        .with_param(param)
    }
    /// 400 `parameter_unknown` naming `param`.
    pub fn unknown(param: &str) -> Self {
        Self::new(
            ErrorKind::InvalidRequest,
            "parameter_unknown",
            format!("`{param}` is not a known parameter"),
        )
        .with_param(param)
    }
    pub fn request(code: &str, param: Option<&str>, message: impl Into<String>) -> Self {
        let e = Self::new(ErrorKind::InvalidRequest, code, message);
        match param {
            Some(p) => e.with_param(p),
            None => e,
        }
    }
    /// 404 `resource_missing`.
    pub fn not_found(what: &str, id: impl fmt::Display) -> Self {
        Self::new(
            ErrorKind::NotFound,
            "resource_missing",
            format!("no such {what}: {id}"),
        )
    }
    /// 409 state error with a code.
    pub fn state(code: &str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::State, code, message)
    }
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unauthenticated, "invalid_api_key", message)
    }
    pub fn forbidden(code: &str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, code, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, "internal_error", message)
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
            "rate_limited",
            format!("too many requests from {who}; retry in {secs} s"),
        )
    }
    pub fn overloaded(what: &str) -> Self {
        Self::new(
            ErrorKind::Overloaded,
            "overloaded",
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

impl From<kobo_storage::CodecError> for DomainError {
    fn from(e: kobo_storage::CodecError) -> Self {
        DomainError::internal(format!("stored data: {e}"))
    }
}

pub type DomainResult<T> = Result<T, DomainError>;
