//! Unit tests of the body parser (`body.rs`).

use super::*;

/// A body exercising the rules.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Sample {
    #[serde(deserialize_with = "amount::<_, 100>")]
    amount: i64,
    #[serde(deserialize_with = "text::<_, 3>")]
    note: Option<String>,
    #[serde(default, deserialize_with = "metadata")]
    metadata: Map<String, Value>,
    flag: Option<bool>,
    #[serde(deserialize_with = "nested")]
    inner: Option<Inner>,
}

#[derive(Debug, serde::Deserialize)]
struct Inner {
    #[serde(deserialize_with = "required_text::<_, 5>")]
    line: String,
}

fn refused(body: &str, code: &str, param: &str) {
    let e = parse::<Sample>(body.as_bytes()).unwrap_err();
    assert_eq!(
        (e.code.as_str(), e.param.as_deref()),
        (code, Some(param)),
        "{body}: {}",
        e.message
    );
    assert!(!e.message.contains(FIELD), "{}", e.message);
}

#[test]
fn unknown_fields_are_named_before_anything_else() {
    refused(
        r#"{"amount": "x", "colour": 1}"#,
        "parameter_unknown",
        "colour",
    );
}

#[test]
fn malformed_json_and_non_objects_are_parameter_invalid_on_body() {
    refused("{nope", "parameter_invalid", "body");
    refused("[1]", "parameter_invalid", "body");
}

#[test]
fn fields_are_checked_in_declared_order_missing_ones_where_they_stand() {
    refused(r#"{"note": "toolong"}"#, "parameter_missing", "amount");
    refused(
        r#"{"amount": 100, "note": "toolong"}"#,
        "parameter_invalid",
        "note",
    );
    refused(
        r#"{"amount": 100, "flag": "yes"}"#,
        "parameter_invalid",
        "flag",
    );
    let ok = parse::<Sample>(br#"{"amount": 100, "note": null, "inner": {"line": "a"}}"#);
    let ok = ok.unwrap();
    assert!(ok.metadata.is_empty());
    assert_eq!(ok.inner.map(|i| i.line).as_deref(), Some("a"));
    assert_eq!((ok.amount, ok.note, ok.flag), (100, None, None));
    assert!(parse::<Sample>(b"").is_err());
}

#[test]
fn amounts_are_integers_within_bounds() {
    for bad in ["1.5", "\"100\"", "99", "1000000000001"] {
        refused(
            &format!(r#"{{"amount": {bad}}}"#),
            "parameter_invalid",
            "amount",
        );
    }
    assert_eq!(parse::<Sample>(br#"{"amount": 100}"#).unwrap().amount, 100);
}

#[test]
fn nested_and_metadata_errors_name_the_inner_field() {
    let base = r#""amount": 100"#;
    refused(
        &format!(r#"{{{base}, "inner": {{}}}}"#),
        "parameter_missing",
        "inner.line",
    );
    refused(
        &format!(r#"{{{base}, "inner": {{"x": 1}}}}"#),
        "parameter_unknown",
        "inner.x",
    );
    refused(
        &format!(r#"{{{base}, "inner": {{"line": " "}}}}"#),
        "parameter_invalid",
        "inner.line",
    );
    refused(
        &format!(r#"{{{base}, "inner": 1}}"#),
        "parameter_invalid",
        "inner",
    );
    refused(
        &format!(r#"{{{base}, "metadata": {{"k": []}}}}"#),
        "parameter_invalid",
        "metadata.k",
    );
}

#[test]
fn type_errors_never_echo_the_value() {
    let e = parse::<Sample>(br#"{"amount": 100, "flag": "4084080000000409"}"#).unwrap_err();
    assert!(!e.message.contains("4084"), "{}", e.message);
}
