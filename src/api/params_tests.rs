//! Unit tests of the query parser (`params.rs`).

use serde::Deserialize;

use super::*;

/// A query exercising the rules.
#[derive(Debug, PartialEq, Deserialize)]
struct Sample {
    #[serde(deserialize_with = "limit")]
    limit: usize,
    #[serde(deserialize_with = "uuid")]
    starting_after: Option<Uuid>,
    #[serde(deserialize_with = "one_of")]
    currency: Option<Currency>,
    #[serde(deserialize_with = "date")]
    from: Option<NaiveDate>,
}

#[derive(Debug, PartialEq, Deserialize)]
struct Other {
    #[serde(deserialize_with = "one_of")]
    status: Option<Status>,
}

fn refused(qs: &str, code: &str, param: &str) -> String {
    let e = parse::<Sample>(qs).unwrap_err();
    assert_eq!(
        (e.code.as_str(), e.param.as_deref()),
        (code, Some(param)),
        "{qs}: {}",
        e.message
    );
    assert!(!e.message.contains(FIELD), "{}", e.message);
    e.message
}

#[test]
fn absent_fields_take_their_defaults() {
    assert_eq!(
        parse::<Sample>("").unwrap(),
        Sample {
            limit: 20,
            starting_after: None,
            currency: None,
            from: None,
        }
    );
}

#[test]
fn each_field_is_read_by_its_rule() {
    let id = Uuid::new_v4();
    let q = parse::<Sample>(&format!(
        "limit=100&starting_after={id}&currency=USD&from=2025-01-31"
    ))
    .unwrap();
    assert_eq!(
        q,
        Sample {
            limit: 100,
            starting_after: Some(id),
            currency: Some(Currency::USD),
            from: NaiveDate::from_ymd_opt(2025, 1, 31),
        }
    );
}

#[test]
fn limit_stays_within_1_to_100() {
    for bad in ["limit=0", "limit=101", "limit=x", "limit=", "limit=-1"] {
        let message = refused(bad, "parameter_invalid", "limit");
        assert_eq!(message, "limit must be an integer from 1 to 100");
    }
}

#[test]
fn errors_name_the_field_and_say_what_it_must_be() {
    let cases = [
        (
            "starting_after=nope",
            "starting_after",
            "`starting_after` must be a UUID",
        ),
        ("currency=EUR", "currency", "`currency` must be NGN or USD"),
        (
            "from=2025-13-01",
            "from",
            "`from` must be a date YYYY-MM-DD",
        ),
    ];
    for (qs, param, message) in cases {
        assert_eq!(refused(qs, "parameter_invalid", param), message);
    }
    let e = parse::<Other>("status=paid").unwrap_err();
    assert_eq!(e.message, "`status` must be a payment intent status");
}

#[test]
fn the_first_unknown_name_in_query_order_comes_before_any_value() {
    assert_eq!(
        refused("limit=0&zeta=1&alpha=2", "parameter_unknown", "zeta"),
        "`zeta` is not a known parameter"
    );
    refused("limit=5&=x", "parameter_unknown", "");
}

#[test]
fn a_name_given_twice_keeps_its_last_value() {
    assert_eq!(parse::<Sample>("limit=0&limit=7").unwrap().limit, 7);
    refused("limit=7&limit=0", "parameter_invalid", "limit");
}

#[test]
fn values_are_percent_decoded() {
    let q = parse::<Sample>("from=2025%2D01%2D31&currency=%55SD").unwrap();
    assert_eq!(q.currency, Some(Currency::USD));
    assert_eq!(q.from, NaiveDate::from_ymd_opt(2025, 1, 31));
}

#[test]
fn fields_are_checked_in_their_declared_order() {
    refused("from=x&currency=x&limit=0", "parameter_invalid", "limit");
    refused("from=x&currency=x", "parameter_invalid", "currency");
}

#[test]
fn no_fields_refuses_every_name() {
    assert!(parse::<body::NoFields>("").is_ok());
    let Err(e) = parse::<body::NoFields>("limit=1") else {
        panic!("limit=1 was accepted");
    };
    assert_eq!(
        (e.code.as_str(), e.param.as_deref()),
        ("parameter_unknown", Some("limit"))
    );
}

#[test]
fn a_pair_takes_the_names_of_both_and_reads_the_first_type_first() {
    let (a, b) = parse_pair::<Other, Sample>("limit=3&status=canceled").unwrap();
    assert_eq!(a.status, Some(Status::Canceled));
    assert_eq!(b.limit, 3);
    let e = parse_pair::<Other, Sample>("limit=0&status=x").unwrap_err();
    assert_eq!(e.param.as_deref(), Some("status"));
    let e = parse_pair::<Other, Sample>("status=x&other=1").unwrap_err();
    assert_eq!(
        (e.code.as_str(), e.param.as_deref()),
        ("parameter_unknown", Some("other"))
    );
}
