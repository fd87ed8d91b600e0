//! CONTRACT section 3a, checked on every response the black-box suite
//! receives through [`crate::helpers::TestApp::send`] and `send_raw`:
//! - `param` is on every error body, and names a field only on 400 and 404
//!   (null on 401, 403, 409, 413, 422, 429 and 5xx);
//! - every test helper answers 200 when it succeeds;
//! - every object under `/v1` (any JSON object with an `object` member,
//!   nested ones included) carries a boolean `livemode`.

use serde_json::Value;

/// Objects that describe the API itself or a page of others, not a merchant's
/// data in one mode.
const WITHOUT_MODE: &[&str] = &["list"];

/// Panics, naming the rule, when `body` (the response to `method path`)
/// breaks the contract.
#[track_caller]
pub fn check(method: &str, path: &str, status: u16, body: &Value, text: &str) {
    let path = path.split('?').next().unwrap_or(path);
    if let Some(error) = body.get("error").filter(|_| status >= 400) {
        let Some(param) = error.get("param") else {
            panic!("{method} {path}: {status} error without `param`: {text}");
        };
        if !matches!(status, 400 | 404) {
            assert!(
                param.is_null(),
                "{method} {path}: a {status} names no param (CONTRACT 3a): {text}"
            );
        }
    }
    if !path.starts_with("/v1/") || path == "/v1/openapi.json" {
        return;
    }
    if path.starts_with("/v1/test_helpers/") && (200..300).contains(&status) {
        assert_eq!(
            status, 200,
            "{method} {path}: every test helper answers 200 (CONTRACT 3a): {text}"
        );
    }
    if (200..300).contains(&status) {
        walk(method, path, body, text);
    }
}

#[track_caller]
fn walk(method: &str, path: &str, v: &Value, text: &str) {
    match v {
        Value::Object(map) => {
            if let Some(kind) = map.get("object").and_then(Value::as_str) {
                if !WITHOUT_MODE.contains(&kind) {
                    assert!(
                        map.get("livemode").is_some_and(Value::is_boolean),
                        "{method} {path}: object `{kind}` without livemode (CONTRACT 3a): {text}"
                    );
                }
            }
            for child in map.values() {
                walk(method, path, child, text);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| walk(method, path, i, text)),
        _ => {}
    }
}
