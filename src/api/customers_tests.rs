//! The customer request schemas match their parsers; the parsers' rules.

use std::collections::BTreeSet;

use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;
use utoipa::PartialSchema;

use super::*;

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn property_names(schema: RefOr<Schema>) -> BTreeSet<String> {
    match schema {
        RefOr::T(Schema::Object(o)) => o.properties.keys().cloned().collect(),
        _ => panic!("not an object schema"),
    }
}

#[test]
fn request_schemas_match_what_the_parsers_accept() {
    assert_eq!(
        property_names(CreateCustomerRequest::schema()),
        names(body::fields_of::<CreateCustomerRequest>())
    );
    assert_eq!(
        property_names(UpdateCustomerRequest::schema()),
        names(body::fields_of::<UpdateCustomerRequest>())
    );
    assert_eq!(
        property_names(VerifyIdentityRequest::schema()),
        names(body::fields_of::<VerifyIdentityRequest>())
    );
}

#[test]
fn phones_are_e164() {
    for ok in ["+2348031234567", "+14155550100", "+12345678"] {
        assert!(is_e164(ok), "{ok}");
    }
    for bad in [
        "08031234567",
        "+0123456789",
        "+1234567",
        "+1234567890123456",
        "+234 803",
    ] {
        assert!(!is_e164(bad), "{bad}");
    }
}

#[test]
fn an_update_clears_with_an_empty_string_and_checks_what_it_sets() {
    let u: UpdateCustomerRequest =
        body::parse(br#"{"email": "", "phone": "+2348031234567"}"#).unwrap();
    assert_eq!(u.email, Field::Clear);
    assert_eq!(u.phone, Field::Set("+2348031234567".into()));
    assert_eq!(u.name, Field::Keep);
    for (raw, param) in [
        (&br#"{"email": "nope"}"#[..], "email"),
        (br#"{"phone": "0803"}"#, "phone"),
        (br#"{"name": 3}"#, "name"),
        (br#"{"risk_action": "block"}"#, "risk_action"),
    ] {
        let e = body::parse::<UpdateCustomerRequest>(raw).err().unwrap();
        assert_eq!(e.param.as_deref(), Some(param), "{e:?}");
        assert_eq!(e.code, ErrorCode::ParameterInvalid);
    }
}

#[test]
fn the_bvn_is_checked_and_never_echoed() {
    let e = body::parse::<VerifyIdentityRequest>(
        br#"{"bvn": "1234567890", "bank_code": "058", "account_number": "0123456789"}"#,
    )
    .err()
    .unwrap();
    assert_eq!(e.param.as_deref(), Some("bvn"));
    assert!(!e.message.contains("1234567890"));
    let e = body::parse::<VerifyIdentityRequest>(
        br#"{"bvn": "12345678901", "bank_code": "999", "account_number": "0123456789"}"#,
    )
    .err()
    .unwrap();
    assert_eq!(e.param.as_deref(), Some("bank_code"));
}
