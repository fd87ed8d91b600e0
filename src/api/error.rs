//! The one mapping from domain errors to HTTP, and the error body (a leaf:
//! it imports no handler).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, ResponseError};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use kobo_actors::{DomainError, ErrorCode, ErrorKind};

/// The one mapping from domain errors to HTTP.
#[derive(Debug)]
pub struct ApiError(pub DomainError);

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        ApiError(e)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

pub fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::InvalidRequest => StatusCode::BAD_REQUEST,
        ErrorKind::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorKind::Forbidden => StatusCode::FORBIDDEN,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::State => StatusCode::CONFLICT,
        ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
        ErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        ErrorKind::Idempotency => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        ErrorKind::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The `type` of an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub enum ErrorType {
    /// 400, 404, 405, 408, 413: something in the request is wrong.
    #[serde(rename = "invalid_request_error")]
    InvalidRequest,
    /// 401, 403: the key is missing, wrong or revoked, or cannot do this.
    #[serde(rename = "authentication_error")]
    Authentication,
    /// 409: the object's state does not allow the operation.
    #[serde(rename = "state_error")]
    State,
    /// 422: the Idempotency-Key was used with a different request.
    #[serde(rename = "idempotency_error")]
    Idempotency,
    /// 429: too many requests; retry after `Retry-After` seconds.
    #[serde(rename = "rate_limit_error")]
    RateLimit,
    /// 5xx: a failure on the service's side; retry with the same key.
    #[serde(rename = "api_error")]
    Api,
}

fn type_of(kind: ErrorKind) -> ErrorType {
    match kind {
        ErrorKind::InvalidRequest
        | ErrorKind::NotFound
        | ErrorKind::TooLarge
        | ErrorKind::BodyTimeout
        | ErrorKind::MethodNotAllowed => ErrorType::InvalidRequest,
        ErrorKind::Unauthenticated | ErrorKind::Forbidden => ErrorType::Authentication,
        ErrorKind::State => ErrorType::State,
        ErrorKind::Idempotency => ErrorType::Idempotency,
        ErrorKind::RateLimited { .. } => ErrorType::RateLimit,
        ErrorKind::Overloaded | ErrorKind::Internal => ErrorType::Api,
    }
}

/// The body of every error.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorDetail {
    #[serde(rename = "type")]
    pub error_type: ErrorType,
    /// Stable; programs use this, not `message`.
    pub code: String,
    /// For people.
    pub message: String,
    /// The offending field on 400 errors; null elsewhere.
    #[schema(required = true)]
    pub param: Option<String>,
}

impl ErrorBody {
    /// The one rendering of an error. `param` names a field only on 400s and
    /// on 404s for an id the request named (CONTRACT 3a); on every other
    /// status it is null, whatever the error carried.
    pub fn new(e: &DomainError) -> Self {
        let names_param = matches!(e.kind, ErrorKind::InvalidRequest | ErrorKind::NotFound);
        ErrorBody {
            error: ErrorDetail {
                error_type: type_of(e.kind),
                code: e.code.as_str().to_string(),
                message: e.message.clone(),
                param: e.param.clone().filter(|_| names_param),
            },
        }
    }
}

pub fn error_body(e: &DomainError) -> Value {
    serde_json::to_value(ErrorBody::new(e)).expect("an error body serializes")
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        status_of(self.0.kind)
    }
    fn error_response(&self) -> HttpResponse {
        if self.0.kind == ErrorKind::Internal {
            tracing::error!(code = %self.0.code, message = %self.0.message, "request failed");
        }
        let mut r = HttpResponse::build(self.status_code());
        match self.0.kind {
            ErrorKind::Overloaded => {
                r.insert_header(("Retry-After", "1"));
            }
            ErrorKind::RateLimited { retry_after_secs } => {
                r.insert_header(("Retry-After", retry_after_secs.to_string()));
            }
            _ => {}
        }
        r.json(error_body(&self.0))
    }
}

pub type ApiResult<T = HttpResponse> = Result<T, ApiError>;

pub fn json_response(status: u16, body: &Value) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK)).json(body)
}

pub async fn not_found(req: HttpRequest) -> HttpResponse {
    ApiError(DomainError::of(
        ErrorCode::ResourceMissing,
        format!("no route for {} {}", req.method(), req.path()),
    ))
    .error_response()
}

pub async fn method_not_allowed(req: HttpRequest) -> HttpResponse {
    ApiError(DomainError::of(
        ErrorCode::MethodNotAllowed,
        format!("{} is not allowed on {}", req.method(), req.path()),
    ))
    .error_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The typed body renders exactly what the `json!` rendering it
    /// replaced did.
    #[test]
    fn error_body_json_is_unchanged() {
        let kinds = [
            (ErrorKind::InvalidRequest, "invalid_request_error"),
            (ErrorKind::Unauthenticated, "authentication_error"),
            (ErrorKind::Forbidden, "authentication_error"),
            (ErrorKind::NotFound, "invalid_request_error"),
            (ErrorKind::State, "state_error"),
            (ErrorKind::TooLarge, "invalid_request_error"),
            (ErrorKind::BodyTimeout, "invalid_request_error"),
            (ErrorKind::MethodNotAllowed, "invalid_request_error"),
            (ErrorKind::Idempotency, "idempotency_error"),
            (
                ErrorKind::RateLimited {
                    retry_after_secs: 1,
                },
                "rate_limit_error",
            ),
            (ErrorKind::Overloaded, "api_error"),
            (ErrorKind::Internal, "api_error"),
        ];
        for (kind, type_name) in kinds {
            for param in [None, Some("amount")] {
                let mut e = DomainError::new(kind, ErrorCode::InternalError, "what happened");
                e.param = param.map(str::to_string);
                let named = matches!(kind, ErrorKind::InvalidRequest | ErrorKind::NotFound);
                let old = json!({"error": {
                    "type": type_name,
                    "code": e.code.as_str(),
                    "message": e.message,
                    "param": if named { e.param.clone() } else { None },
                }});
                assert_eq!(error_body(&e), old);
            }
        }
    }

    /// docs/api.md's error table (under Conventions) lists every code the
    /// service emits, once, with the status it is sent with, and no other.
    #[test]
    fn the_docs_error_table_lists_every_code_with_its_status() {
        let doc = include_str!("../../docs/api.md");
        let mut listed: Vec<(u16, String)> = Vec::new();
        let table = doc
            .split_once("| status | code | when |")
            .expect("docs/api.md has the error table")
            .1;
        // The rest of the header line, then the separator, then the rows.
        for line in table.lines().skip(2).map(str::trim) {
            if !line.starts_with('|') {
                break;
            }
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let status: u16 = cells[1]
                .parse()
                .unwrap_or_else(|_| panic!("a status in {line}"));
            for code in cells[2].split(',') {
                let code = code.trim().trim_matches('`');
                listed.push((status, code.to_string()));
            }
        }
        for (status, code) in &listed {
            assert!(
                ErrorCode::from_wire(code).is_some(),
                "docs/api.md lists `{code}`, which ErrorCode lacks"
            );
            let n = listed.iter().filter(|(_, c)| c == code).count();
            assert_eq!(n, 1, "docs/api.md lists `{code}` {n} times ({status})");
        }
        for code in ErrorCode::ALL {
            let wire = code.as_str();
            let row = listed.iter().find(|(_, c)| c == wire);
            let Some((status, _)) = row else {
                panic!("docs/api.md's error table does not list `{wire}`");
            };
            assert_eq!(
                *status,
                status_of(code.kind()).as_u16(),
                "`{wire}`'s status in docs/api.md"
            );
        }
    }

    /// Each code's wire form is unique and reads back as the code.
    #[test]
    fn wire_codes_are_unique_and_read_back() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_wire(code.as_str()), Some(*code));
            let e = DomainError::of(*code, "m");
            assert_eq!(error_body(&e)["error"]["code"], code.as_str());
        }
    }
}
