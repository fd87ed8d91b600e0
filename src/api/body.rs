//! Parsing request bodies and query strings into typed values, naming the
//! offending parameter on every error ("parse, don't validate").

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde_json::{Map, Value};
use uuid::Uuid;

use kobo_actors::money::{Currency, MAX_AMOUNT};
use kobo_actors::DomainError;

type R<T> = Result<T, DomainError>;

/// A JSON object body whose keys were checked against the allowed names.
pub struct Fields {
    map: Map<String, Value>,
}

impl Fields {
    /// Parses `bytes` as a JSON object (an empty body is an empty object) and
    /// refuses unknown keys.
    pub fn parse(bytes: &[u8], allowed: &[&str]) -> R<Fields> {
        let map = if bytes.iter().all(|b| b.is_ascii_whitespace()) {
            Map::new()
        } else {
            match serde_json::from_slice::<Value>(bytes) {
                Ok(Value::Object(m)) => m,
                Ok(_) => {
                    return Err(DomainError::invalid(
                        "body",
                        "the body must be a JSON object",
                    ))
                }
                Err(e) => return Err(DomainError::invalid("body", format!("malformed JSON: {e}"))),
            }
        };
        if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(DomainError::unknown(k));
        }
        Ok(Fields { map })
    }

    pub fn raw(&self, name: &str) -> Option<&Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    pub fn amount(&self, name: &str, min: i64) -> R<Option<i64>> {
        match self.raw(name) {
            None => Ok(None),
            Some(v) => parse_amount(v, name, min).map(Some),
        }
    }

    pub fn required_amount(&self, name: &str, min: i64) -> R<i64> {
        self.amount(name, min)?
            .ok_or_else(|| DomainError::missing(name))
    }

    pub fn string(&self, name: &str, max_len: usize) -> R<Option<String>> {
        match self.raw(name) {
            None => Ok(None),
            Some(Value::String(s)) => {
                if s.chars().count() > max_len {
                    Err(DomainError::invalid(
                        name,
                        format!("`{name}` is longer than {max_len} characters"),
                    ))
                } else {
                    Ok(Some(s.clone()))
                }
            }
            Some(_) => Err(DomainError::invalid(
                name,
                format!("`{name}` must be a string"),
            )),
        }
    }

    pub fn required_string(&self, name: &str, max_len: usize) -> R<String> {
        let s = self
            .string(name, max_len)?
            .ok_or_else(|| DomainError::missing(name))?;
        if s.trim().is_empty() {
            return Err(DomainError::invalid(
                name,
                format!("`{name}` must not be empty"),
            ));
        }
        Ok(s)
    }

    pub fn currency(&self, name: &str) -> R<Option<Currency>> {
        match self.string(name, 3)? {
            None => Ok(None),
            Some(s) => Currency::parse(&s)
                .map(Some)
                .ok_or_else(|| DomainError::invalid(name, "currency must be NGN or USD")),
        }
    }

    pub fn uuid(&self, name: &str) -> R<Option<Uuid>> {
        match self.string(name, 64)? {
            None => Ok(None),
            Some(s) => parse_uuid(&s, name).map(Some),
        }
    }

    pub fn email(&self, name: &str) -> R<Option<String>> {
        let Some(s) = self.string(name, 254)? else {
            return Ok(None);
        };
        let ok = match s.split_once('@') {
            Some((local, domain)) => {
                !local.is_empty()
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
                    && !s.chars().any(|c| c.is_whitespace() || c == ',')
                    && !domain.contains('@')
            }
            None => false,
        };
        if ok {
            Ok(Some(s))
        } else {
            Err(DomainError::invalid(
                name,
                format!("`{name}` is not an email address"),
            ))
        }
    }

    pub fn url(&self, name: &str) -> R<Option<String>> {
        let Some(s) = self.string(name, 2048)? else {
            return Ok(None);
        };
        match url::Url::parse(&s) {
            Ok(u) if (u.scheme() == "https" || u.scheme() == "http") && u.host().is_some() => {
                Ok(Some(s))
            }
            _ => Err(DomainError::invalid(
                name,
                format!("`{name}` must be an http(s) URL"),
            )),
        }
    }

    /// `metadata`: up to 20 keys of at most 40 characters; values are
    /// strings (at most 500 characters), numbers or booleans.
    pub fn metadata(&self, name: &str) -> R<Map<String, Value>> {
        match self.raw(name) {
            None => Ok(Map::new()),
            Some(Value::Object(m)) => {
                if m.len() > 20 {
                    return Err(DomainError::invalid(name, "metadata holds at most 20 keys"));
                }
                for (k, v) in m {
                    let param = format!("{name}.{k}");
                    if k.is_empty() || k.chars().count() > 40 {
                        return Err(DomainError::invalid(
                            &param,
                            "metadata keys are 1 to 40 characters",
                        ));
                    }
                    match v {
                        Value::String(s) if s.chars().count() <= 500 => {}
                        Value::Number(_) | Value::Bool(_) => {}
                        _ => {
                            return Err(DomainError::invalid(
                                &param,
                                "metadata values are strings of at most 500 characters, numbers or booleans",
                            ))
                        }
                    }
                }
                Ok(m.clone())
            }
            Some(_) => Err(DomainError::invalid(name, "metadata must be an object")),
        }
    }
}

pub fn parse_amount(v: &Value, name: &str, min: i64) -> R<i64> {
    let n = v
        .as_i64()
        .filter(|_| v.is_i64() || v.is_u64())
        .ok_or_else(|| {
            DomainError::invalid(name, format!("`{name}` must be an integer of minor units"))
        })?;
    if n < min || n > MAX_AMOUNT {
        return Err(DomainError::invalid(
            name,
            format!("`{name}` must be between {min} and {MAX_AMOUNT}"),
        ));
    }
    Ok(n)
}

pub fn parse_uuid(s: &str, name: &str) -> R<Uuid> {
    Uuid::try_parse(s).map_err(|_| DomainError::invalid(name, format!("`{name}` must be a UUID")))
}

/// A query string whose keys were checked against the allowed names.
pub struct Query {
    pairs: BTreeMap<String, String>,
}

impl Query {
    pub fn parse(qs: &str, allowed: &[&str]) -> R<Query> {
        let mut pairs = BTreeMap::new();
        for (k, v) in url::form_urlencoded::parse(qs.as_bytes()) {
            if !allowed.contains(&k.as_ref()) {
                return Err(DomainError::unknown(&k));
            }
            pairs.insert(k.into_owned(), v.into_owned());
        }
        Ok(Query { pairs })
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs.get(name).map(|s| s.as_str())
    }

    /// `limit`: 1 to 100, default 20.
    pub fn limit(&self) -> R<usize> {
        match self.get("limit") {
            None => Ok(20),
            Some(s) => match s.parse::<usize>() {
                Ok(n) if (1..=100).contains(&n) => Ok(n),
                _ => Err(DomainError::invalid(
                    "limit",
                    "limit must be an integer from 1 to 100",
                )),
            },
        }
    }

    pub fn uuid(&self, name: &str) -> R<Option<Uuid>> {
        self.get(name).map(|s| parse_uuid(s, name)).transpose()
    }

    pub fn date(&self, name: &str) -> R<Option<NaiveDate>> {
        self.get(name)
            .map(|s| {
                NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|_| {
                    DomainError::invalid(name, format!("`{name}` must be a date YYYY-MM-DD"))
                })
            })
            .transpose()
    }

    pub fn one_of<T>(
        &self,
        name: &str,
        parse: impl Fn(&str) -> Option<T>,
        what: &str,
    ) -> R<Option<T>> {
        self.get(name)
            .map(|s| {
                parse(s)
                    .ok_or_else(|| DomainError::invalid(name, format!("`{name}` must be {what}")))
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_named() {
        let e = Fields::parse(br#"{"amount": 100, "colour": 1}"#, &["amount"])
            .err()
            .unwrap();
        assert_eq!(e.code, "parameter_unknown");
        assert_eq!(e.param.as_deref(), Some("colour"));
    }

    #[test]
    fn malformed_json_is_parameter_invalid_on_body() {
        let e = Fields::parse(b"{nope", &[]).err().unwrap();
        assert_eq!(e.code, "parameter_invalid");
        assert_eq!(e.param.as_deref(), Some("body"));
    }

    #[test]
    fn amounts_are_integers_within_bounds() {
        let f = Fields::parse(
            br#"{"a": 1.5, "b": "100", "c": 99, "d": 1000000000001, "e": 100}"#,
            &["a", "b", "c", "d", "e"],
        )
        .unwrap();
        for name in ["a", "b", "c", "d"] {
            assert_eq!(
                f.amount(name, 100).unwrap_err().param.as_deref(),
                Some(name)
            );
        }
        assert_eq!(f.amount("e", 100).unwrap(), Some(100));
        assert_eq!(
            f.required_amount("z", 100).unwrap_err().code,
            "parameter_missing"
        );
    }

    #[test]
    fn limit_defaults_to_20_and_stays_within_1_to_100() {
        assert_eq!(Query::parse("", &["limit"]).unwrap().limit().unwrap(), 20);
        assert_eq!(
            Query::parse("limit=100", &["limit"])
                .unwrap()
                .limit()
                .unwrap(),
            100
        );
        assert!(Query::parse("limit=0", &["limit"])
            .unwrap()
            .limit()
            .is_err());
        assert!(Query::parse("limit=101", &["limit"])
            .unwrap()
            .limit()
            .is_err());
        assert!(Query::parse("limit=x", &["limit"])
            .unwrap()
            .limit()
            .is_err());
    }
}
