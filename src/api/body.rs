//! Parsing request bodies into typed values, naming the offending
//! parameter on every error ("parse, don't validate").
//!
//! A body is a serde struct ([`parse`]): its declared fields are the only
//! ones accepted (400 `parameter_unknown` naming the first other one),
//! `null` is the same as leaving a field out, and the fields are checked
//! in their declared order, a missing required one (`parameter_missing`)
//! where it stands. Field rules with a bound (amounts, strings with a
//! length, emails, URLs, metadata) are `deserialize_with` functions of this
//! module; their errors name the field. The same struct derives the
//! OpenAPI schema (`ToSchema`), so the document and the parser cannot
//! disagree. Query strings are read the same way: [`super::params`].

use std::fmt::Display;

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use uuid::Uuid;

use kobo_actors::money::{Currency, MAX_AMOUNT};
use kobo_actors::{DomainError, ErrorCode};

type R<T> = Result<T, DomainError>;

/// Stands for the field's name in errors raised below a field, until the
/// field's entry ([`Entries`]) substitutes it.
pub const FIELD: &str = "\u{1}";

/// Parses `bytes` as a JSON object (an empty body is an empty object).
fn object(bytes: &[u8]) -> R<Map<String, Value>> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(DomainError::invalid(
            "body",
            "the body must be a JSON object",
        )),
        Err(e) => Err(DomainError::invalid("body", format!("malformed JSON: {e}"))),
    }
}

/// Parses a body into `T`, a struct deriving `Deserialize` (see the module
/// comment). `T` is never deserialized any other way: its optional fields
/// rely on [`parse`] offering every declared field.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> R<T> {
    from_map(object(bytes)?)
}

/// [`parse`] of an object already parsed.
pub fn from_map<T: DeserializeOwned>(map: Map<String, Value>) -> R<T> {
    let fields = fields_of::<T>();
    if let Some(k) = map.keys().find(|k| !fields.contains(&k.as_str())) {
        return Err(DomainError::unknown(k));
    }
    T::deserialize(Object { map, fields }).map_err(|e| e.0)
}

/// The declared (serialized) field names of the struct `T`.
pub fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Probe;
    #[derive(Debug)]
    struct ProbeError(Option<&'static [&'static str]>);
    impl std::fmt::Display for ProbeError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("not a struct")
        }
    }
    impl std::error::Error for ProbeError {}
    impl de::Error for ProbeError {
        fn custom<M: Display>(_: M) -> Self {
            ProbeError(None)
        }
    }
    impl<'de> Deserializer<'de> for Probe {
        type Error = ProbeError;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, ProbeError> {
            Err(ProbeError(None))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, ProbeError> {
            Err(ProbeError(Some(fields)))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }
    match T::deserialize(Probe) {
        Err(ProbeError(Some(fields))) => fields,
        _ => panic!("a body type is a struct with named fields"),
    }
}

/// A [`DomainError`] travelling through serde.
#[derive(Debug)]
pub struct BodyError(DomainError);

impl Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for BodyError {}

/// How a field rule's error crosses serde's text-only `custom`: the code,
/// the param and the message, separated by NUL, after a NUL.
pub fn tunnel<E: de::Error>(e: DomainError) -> E {
    E::custom(format!(
        "\0{}\0{}\0{}",
        e.code,
        e.param.unwrap_or_default(),
        e.message
    ))
}

impl de::Error for BodyError {
    fn custom<M: Display>(msg: M) -> Self {
        let msg = msg.to_string();
        let mut parts = msg.splitn(4, '\0');
        if let (Some(""), Some(code), Some(param), Some(message)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        {
            // Field rules tunnel only 400 codes; an unknown one cannot
            // arrive, but would still be a 400 on the field.
            let code = ErrorCode::from_wire(code).unwrap_or(ErrorCode::ParameterInvalid);
            let mut e = DomainError::request(code, Some(param), message);
            if param.is_empty() {
                e.param = None;
            }
            return BodyError(e);
        }
        // serde's own words ("invalid type: string \"4242...\", expected
        // i64") may echo the value; say only what was expected.
        let expected = msg
            .rsplit_once(", expected ")
            .map(|(_, x)| x.to_string())
            .unwrap_or_else(|| "valid".to_string());
        BodyError(DomainError::invalid(
            FIELD,
            format!("`{FIELD}` must be {expected}"),
        ))
    }

    fn missing_field(field: &'static str) -> Self {
        BodyError(DomainError::missing(field))
    }

    fn unknown_field(field: &str, _: &'static [&'static str]) -> Self {
        BodyError(DomainError::unknown(field))
    }
}

/// The body object as a serde deserializer.
struct Object {
    map: Map<String, Value>,
    fields: &'static [&'static str],
}

impl<'de> Deserializer<'de> for Object {
    type Error = BodyError;
    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, BodyError> {
        v.visit_map(Entries {
            map: self.map,
            fields: self.fields.iter(),
            pending: None,
        })
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// Offers every declared field, in declared order: a present one with its
/// value, an absent (or `null`) one as [`Absent`].
struct Entries {
    map: Map<String, Value>,
    fields: std::slice::Iter<'static, &'static str>,
    pending: Option<(&'static str, Option<Value>)>,
}

impl<'de> MapAccess<'de> for Entries {
    type Error = BodyError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, BodyError> {
        let Some(&name) = self.fields.next() else {
            return Ok(None);
        };
        let value = self.map.remove(name).filter(|v| !v.is_null());
        self.pending = Some((name, value));
        seed.deserialize(name.into_deserializer()).map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, BodyError> {
        let (name, value) = self.pending.take().expect("a key before its value");
        let out = match value {
            None => seed.deserialize(Absent(name)),
            Some(v) => seed
                .deserialize(v)
                .map_err(<BodyError as de::Error>::custom),
        };
        out.map_err(|BodyError(mut e)| {
            e.param = e.param.map(|p| p.replace(FIELD, name));
            e.message = e.message.replace(FIELD, name);
            BodyError(e)
        })
    }
}

/// A field that was not sent: `None` for an `Option`, else missing.
struct Absent(&'static str);

impl<'de> Deserializer<'de> for Absent {
    type Error = BodyError;
    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, BodyError> {
        Err(BodyError(DomainError::missing(self.0)))
    }
    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, BodyError> {
        v.visit_none()
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

// ------------------------------------------------------------ field rules
//
// Each rule reads the field's JSON value and checks it with the functions
// below, naming the field ([`FIELD`]) in its errors.

/// Deserializes the field's value, `None` when absent.
fn value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Option::<Value>::deserialize(d)
}

/// A required amount of at least `MIN` minor units.
pub fn amount<'de, D: Deserializer<'de>, const MIN: i64>(d: D) -> Result<i64, D::Error> {
    let v = Value::deserialize(d)?;
    parse_amount(&v, FIELD, MIN).map_err(tunnel)
}

/// An optional amount of at least `MIN` minor units.
pub fn opt_amount<'de, D: Deserializer<'de>, const MIN: i64>(
    d: D,
) -> Result<Option<i64>, D::Error> {
    value(d)?
        .map(|v| parse_amount(&v, FIELD, MIN))
        .transpose()
        .map_err(tunnel)
}

fn check_text(v: &Value, max_len: usize) -> R<String> {
    match v {
        Value::String(s) if s.chars().count() > max_len => Err(DomainError::invalid(
            FIELD,
            format!("`{FIELD}` is longer than {max_len} characters"),
        )),
        Value::String(s) => Ok(s.clone()),
        _ => Err(DomainError::invalid(
            FIELD,
            format!("`{FIELD}` must be a string"),
        )),
    }
}

/// An optional string of at most `MAX` characters.
pub fn text<'de, D: Deserializer<'de>, const MAX: usize>(d: D) -> Result<Option<String>, D::Error> {
    value(d)?
        .map(|v| check_text(&v, MAX))
        .transpose()
        .map_err(tunnel)
}

/// The optional string field `name` of at most `max_len` characters, for
/// an operation that checks it after others (kept as a raw value in its
/// body type).
pub fn text_of(name: &str, v: Option<Value>, max_len: usize) -> R<Option<String>> {
    v.map(|v| check_text(&v, max_len))
        .transpose()
        .map_err(|mut e| {
            e.param = e.param.map(|p| p.replace(FIELD, name));
            e.message = e.message.replace(FIELD, name);
            e
        })
}

/// A required string of at most `MAX` characters (blank allowed: the
/// domain checks it).
pub fn required_string<'de, D: Deserializer<'de>, const MAX: usize>(
    d: D,
) -> Result<String, D::Error> {
    text::<D, MAX>(d)?.ok_or_else(|| tunnel(DomainError::missing(FIELD)))
}

/// A required, non-blank string of at most `MAX` characters.
pub fn required_text<'de, D: Deserializer<'de>, const MAX: usize>(
    d: D,
) -> Result<String, D::Error> {
    let v = Value::deserialize(d)?;
    let s = check_text(&v, MAX).map_err(tunnel)?;
    if s.trim().is_empty() {
        return Err(tunnel(DomainError::invalid(
            FIELD,
            format!("`{FIELD}` must not be empty"),
        )));
    }
    Ok(s)
}

/// A required integer.
pub fn integer<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let v = Value::deserialize(d)?;
    v.as_i64().ok_or_else(|| {
        tunnel(DomainError::invalid(
            FIELD,
            format!("`{FIELD}` must be an integer"),
        ))
    })
}

/// An optional currency: `NGN` or `USD`.
pub fn currency<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Currency>, D::Error> {
    let Some(v) = value(d)? else { return Ok(None) };
    let s = check_text(&v, 3).map_err(tunnel)?;
    Currency::parse(&s)
        .map(Some)
        .ok_or_else(|| tunnel(DomainError::invalid(FIELD, "currency must be NGN or USD")))
}

/// A required currency.
pub fn required_currency<'de, D: Deserializer<'de>>(d: D) -> Result<Currency, D::Error> {
    currency(d)?.ok_or_else(|| tunnel(DomainError::missing(FIELD)))
}

/// An optional UUID.
pub fn uuid<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Uuid>, D::Error> {
    let Some(v) = value(d)? else { return Ok(None) };
    let s = check_text(&v, 64).map_err(tunnel)?;
    parse_uuid(&s, FIELD).map(Some).map_err(tunnel)
}

/// A required UUID.
pub fn required_uuid<'de, D: Deserializer<'de>>(d: D) -> Result<Uuid, D::Error> {
    uuid(d)?.ok_or_else(|| tunnel(DomainError::missing(FIELD)))
}

/// An optional email address (at most 254 characters).
pub fn email<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let Some(v) = value(d)? else { return Ok(None) };
    let s = check_text(&v, 254).map_err(tunnel)?;
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
        Err(tunnel(DomainError::invalid(
            FIELD,
            format!("`{FIELD}` is not an email address"),
        )))
    }
}

/// An optional http(s) URL (at most 2048 characters).
pub fn url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let Some(v) = value(d)? else { return Ok(None) };
    let s = check_text(&v, 2048).map_err(tunnel)?;
    match url::Url::parse(&s) {
        Ok(u) if (u.scheme() == "https" || u.scheme() == "http") && u.host().is_some() => {
            Ok(Some(s))
        }
        _ => Err(tunnel(DomainError::invalid(
            FIELD,
            format!("`{FIELD}` must be an http(s) URL"),
        ))),
    }
}

/// `metadata`: up to 20 keys of at most 40 characters; values are strings
/// (at most 500 characters), numbers or booleans. Absent: empty.
pub fn metadata<'de, D: Deserializer<'de>>(d: D) -> Result<Map<String, Value>, D::Error> {
    match value(d)? {
        None => Ok(Map::new()),
        Some(v) => check_metadata(v).map_err(tunnel),
    }
}

fn check_metadata(v: Value) -> R<Map<String, Value>> {
    let Value::Object(m) = v else {
        return Err(DomainError::invalid(FIELD, "metadata must be an object"));
    };
    if m.len() > 20 {
        return Err(DomainError::invalid(
            FIELD,
            "metadata holds at most 20 keys",
        ));
    }
    for (k, v) in &m {
        let param = format!("{FIELD}.{k}");
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
    Ok(m)
}

/// An optional nested object, itself a body type: its errors name
/// `<field>.<inner field>`.
pub fn nested<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    let Some(v) = value(d)? else { return Ok(None) };
    let Value::Object(map) = v else {
        return Err(tunnel(DomainError::invalid(
            FIELD,
            format!("`{FIELD}` must be an object"),
        )));
    };
    from_map(map).map(Some).map_err(|mut e: DomainError| {
        let inner = e.param.take().unwrap_or_default();
        let param = format!("{FIELD}.{inner}");
        e.message = e
            .message
            .replace(&format!("`{inner}`"), &format!("`{param}`"));
        e.param = Some(param);
        tunnel(e)
    })
}

/// No body, or an object without fields.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NoFields)]
pub struct NoFields {}

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

#[cfg(test)]
#[path = "body_tests.rs"]
mod tests;
