//! Query parameters into typed values, as bodies are ([`super::body`]): each
//! operation's query is one struct deriving `Deserialize` (the parser) and
//! `IntoParams` (its OpenAPI parameters), so the document and the parser
//! cannot disagree.
//!
//! [`parse`]: the first name the type does not declare, in the order the
//! query gives them, is 400 `parameter_unknown`; then the declared fields
//! are read in their declared order, each with a field rule of this module
//! (`deserialize_with`) whose error names the field. A name given twice
//! keeps its last value; an empty value is a value (`limit=` is invalid,
//! not absent). An operation without parameters takes
//! [`super::body::NoFields`] (every name is unknown); a GET that parses no
//! query (a retrieve) ignores its query string.

use chrono::{DateTime, NaiveDate, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use uuid::Uuid;

use kobo_actors::audit::AuditAction;
use kobo_actors::customer::RiskAction;
use kobo_actors::ledger::Bucket;
use kobo_actors::mandate::MandateStatus;
use kobo_actors::money::{Currency, MAX_AMOUNT};
use kobo_actors::payment_intent::Status;
use kobo_actors::query::{self, Principal};
use kobo_actors::virtual_account::AccountStatus;
use kobo_actors::DomainError;

use super::body::{self, parse_uuid, tunnel, FIELD};
use super::State;

type R<T> = Result<T, DomainError>;

/// The name-value pairs of `qs` whose names `accepts` (the first other one
/// is `parameter_unknown`), the last value of each.
fn pairs(qs: &str, accepts: impl Fn(&str) -> bool) -> R<Map<String, Value>> {
    let mut map = Map::new();
    for (k, v) in url::form_urlencoded::parse(qs.as_bytes()) {
        if !accepts(&k) {
            return Err(DomainError::unknown(&k));
        }
        map.insert(k.into_owned(), Value::String(v.into_owned()));
    }
    Ok(map)
}

/// Parses the query string `qs` into `T`, a struct deriving `Deserialize`
/// and `IntoParams` (see the module comment).
pub fn parse<T: DeserializeOwned>(qs: &str) -> R<T> {
    let fields = body::fields_of::<T>();
    body::from_map(pairs(qs, |k| fields.contains(&k))?)
}

/// [`parse`] of an operation whose parameters are two query types (the
/// fields of `A`, then those of `B`).
pub fn parse_pair<A: DeserializeOwned, B: DeserializeOwned>(qs: &str) -> R<(A, B)> {
    let (a, b) = (body::fields_of::<A>(), body::fields_of::<B>());
    let map = pairs(qs, |k| a.contains(&k) || b.contains(&k))?;
    let (of_a, of_b): (Map<_, _>, Map<_, _>) =
        map.into_iter().partition(|(k, _)| a.contains(&k.as_str()));
    Ok((body::from_map(of_a)?, body::from_map(of_b)?))
}

/// `brand`, naming one of the merchant's brands: 400 for another.
pub fn brand(state: &State, p: &Principal, brand: Option<Uuid>) -> R<Option<Uuid>> {
    match brand {
        None => Ok(None),
        Some(b) => query::brand(&state.kobo, p.merchant.id, p.mode, b)
            .map(|_| Some(b))
            .map_err(|_| DomainError::invalid("brand", format!("no such brand: {b}"))),
    }
}

/// A query of a newest-first list: its page size and cursor.
pub trait PageQuery: DeserializeOwned {
    fn page(&self) -> (usize, Option<Uuid>);
}

/// A query type of `limit` and `starting_after` only (a [`PageQuery`]), named
/// and with the cursor's description for its list:
/// `page_query!(ListBrandsQuery, "The id of the last brand of the previous page.")`.
macro_rules! page_query {
    ($(#[doc = $doc:tt])* $name:ident, $after:tt) => {
        $(#[doc = $doc])*
        #[derive(serde::Deserialize, utoipa::IntoParams)]
        #[into_params(parameter_in = Query)]
        pub struct $name {
            /// Page size, 1 to 100.
            #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
            #[serde(deserialize_with = "crate::api::params::limit")]
            pub limit: usize,
            #[doc = $after]
            #[serde(deserialize_with = "crate::api::params::uuid")]
            pub starting_after: Option<uuid::Uuid>,
        }

        impl crate::api::params::PageQuery for $name {
            fn page(&self) -> (usize, Option<uuid::Uuid>) {
                (self.limit, self.starting_after)
            }
        }
    };
}
pub(crate) use page_query;

// ------------------------------------------------------------ field rules
//
// Each rule reads the field's text (`None` when absent) and names the
// field ([`FIELD`]) in its errors.

fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(d)
}

/// `limit`: 1 to 100, default 20.
pub fn limit<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    match text(d)? {
        None => Ok(20),
        Some(s) => match s.parse::<usize>() {
            Ok(n) if (1..=100).contains(&n) => Ok(n),
            _ => Err(tunnel(DomainError::invalid(
                FIELD,
                format!("{FIELD} must be an integer from 1 to 100"),
            ))),
        },
    }
}

/// `seconds` of `GET /admin/v1/health/history`: 1 to 600, default 600.
pub fn history_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let max = crate::health::CAPACITY * crate::health::INTERVAL.as_secs() as usize;
    match text(d)? {
        None => Ok(max),
        Some(s) => match s.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(tunnel(DomainError::invalid(
                FIELD,
                format!("{FIELD} must be an integer from 1 to {max}"),
            ))),
        },
    }
}

/// An optional UUID.
pub fn uuid<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Uuid>, D::Error> {
    text(d)?
        .map(|s| parse_uuid(&s, FIELD))
        .transpose()
        .map_err(tunnel)
}

/// An optional date, `YYYY-MM-DD`.
pub fn date<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NaiveDate>, D::Error> {
    text(d)?
        .map(|s| {
            NaiveDate::parse_from_str(&s, "%Y-%m-%d").map_err(|_| {
                DomainError::invalid(FIELD, format!("`{FIELD}` must be a date YYYY-MM-DD"))
            })
        })
        .transpose()
        .map_err(tunnel)
}

/// An optional date-time, RFC 3339.
pub fn date_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    text(d)?
        .map(|s| {
            DateTime::parse_from_rfc3339(&s)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| {
                    DomainError::invalid(FIELD, format!("`{FIELD}` must be an RFC 3339 date-time"))
                })
        })
        .transpose()
        .map_err(tunnel)
}

/// An optional amount from 1 to 10^12 minor units; `message` is the
/// error's (`"amount is an integer of kobo, at least 1"`).
pub fn amount<'de, D: Deserializer<'de>>(d: D, message: &str) -> Result<Option<i64>, D::Error> {
    text(d)?
        .map(|s| {
            s.parse::<i64>()
                .ok()
                .filter(|n| (1..=MAX_AMOUNT).contains(n))
                .ok_or_else(|| DomainError::invalid(FIELD, message))
        })
        .transpose()
        .map_err(tunnel)
}

/// A value out of a fixed set, by its wire name.
pub trait Choice: Sized {
    /// What the error says the value must be.
    const WHAT: &'static str;
    fn parse(s: &str) -> Option<Self>;
}

/// An optional [`Choice`].
pub fn one_of<'de, D: Deserializer<'de>, T: Choice>(d: D) -> Result<Option<T>, D::Error> {
    text(d)?
        .map(|s| {
            T::parse(&s).ok_or_else(|| {
                DomainError::invalid(FIELD, format!("`{FIELD}` must be {}", T::WHAT))
            })
        })
        .transpose()
        .map_err(tunnel)
}

impl Choice for Status {
    const WHAT: &'static str = "a payment intent status";
    fn parse(s: &str) -> Option<Self> {
        Status::parse(s)
    }
}

impl Choice for MandateStatus {
    const WHAT: &'static str = "a mandate status";
    fn parse(s: &str) -> Option<Self> {
        MandateStatus::parse(s)
    }
}

impl Choice for RiskAction {
    const WHAT: &'static str = "default, allow or deny";
    fn parse(s: &str) -> Option<Self> {
        RiskAction::parse(s)
    }
}

impl Choice for AccountStatus {
    const WHAT: &'static str = "a virtual account status";
    fn parse(s: &str) -> Option<Self> {
        AccountStatus::parse(s)
    }
}

impl Choice for Currency {
    const WHAT: &'static str = "NGN or USD";
    fn parse(s: &str) -> Option<Self> {
        Currency::parse(s)
    }
}

impl Choice for Bucket {
    const WHAT: &'static str =
        "one of available, pending, reserve, payout_in_flight, refund_in_flight, dispute_hold";
    fn parse(s: &str) -> Option<Self> {
        Bucket::parse(s)
    }
}

impl Choice for AuditAction {
    const WHAT: &'static str = "an audit action";
    fn parse(s: &str) -> Option<Self> {
        AuditAction::parse(s)
    }
}

#[cfg(test)]
#[path = "params_tests.rs"]
mod tests;
