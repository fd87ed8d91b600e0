//! A visitor's answers on a payment link's page (or the test helper's
//! `pay`), checked against the link: the amount within its rule, the
//! email, the phone when asked, each custom field. Every wrong answer is
//! reported (the page shows each next to its field); the API answers the
//! first. The answers become the payment intent's parameters: custom
//! fields in `metadata` as `cf_<key>`, the phone as `customer_phone`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{DomainError, ErrorCode};
use crate::payment_intent::service::CreatePaymentIntent;

use super::{AmountType, CustomField, FieldType, PaymentLink};

/// Longest answer to a text field (a metadata value's limit).
pub const MAX_ANSWER: usize = 500;

/// What a visitor sent.
#[derive(Debug, Clone, Default)]
pub struct VisitInput {
    /// Minor units; a `fixed` link's own amount when left out.
    pub amount: Option<i64>,
    pub email: Option<String>,
    pub phone: Option<String>,
    /// Custom field key to answer.
    pub answers: BTreeMap<String, String>,
    /// The page form's nonce: a second submit of the same form finds the
    /// payment the first one made. None from the API (its Idempotency-Key
    /// does this).
    pub nonce: Option<String>,
}

/// A page nonce: 16 to 64 letters and digits.
pub fn valid_nonce(n: &str) -> bool {
    (16..=64).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// An email address with a domain (the API's rule for `customer_email`).
pub fn valid_email(s: &str) -> bool {
    s.len() <= 254
        && match s.split_once('@') {
            Some((local, domain)) => {
                !local.is_empty()
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
                    && !domain.contains('@')
                    && !s.chars().any(|c| c.is_whitespace() || c == ',')
            }
            None => false,
        }
}

/// A phone number: 7 to 15 digits, an optional leading `+`; spaces and
/// dashes between them are dropped. Answers the number as kept.
pub fn normal_phone(s: &str) -> Option<String> {
    let kept: String = s.chars().filter(|c| !matches!(c, ' ' | '-')).collect();
    let digits = kept.strip_prefix('+').unwrap_or(&kept);
    ((7..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())).then_some(kept)
}

/// A number: digits with an optional sign and decimal part, at most 30
/// characters.
fn valid_number(s: &str) -> bool {
    let unsigned = s.strip_prefix('-').unwrap_or(s);
    let (whole, frac) = unsigned.split_once('.').unwrap_or((unsigned, "0"));
    s.len() <= 30
        && !whole.is_empty()
        && !frac.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
}

/// The error of a wrong amount (400 `amount_out_of_range`).
pub fn amount_out_of_range(link: &PaymentLink) -> DomainError {
    let a = &link.amount;
    let message = match a.amount_type {
        AmountType::Fixed => format!(
            "this link's amount is fixed at {}",
            a.amount.unwrap_or_default()
        ),
        AmountType::CustomerChosen => match a.max_amount {
            Some(max) => format!(
                "`amount` must be between {} and {max}",
                a.min_amount.unwrap_or_default()
            ),
            None => format!(
                "`amount` must be at least {}",
                a.min_amount.unwrap_or_default()
            ),
        },
    };
    DomainError::request(ErrorCode::AmountOutOfRange, Some("amount"), message)
}

fn check_amount(link: &PaymentLink, amount: Option<i64>) -> Result<i64, DomainError> {
    match (link.amount.amount_type, amount) {
        (AmountType::Fixed, None) => Ok(link.amount.amount.unwrap_or_default()),
        (AmountType::CustomerChosen, None) => Err(DomainError::missing("amount")),
        (_, Some(a)) if link.amount.allows(a) => Ok(a),
        (_, Some(_)) => Err(amount_out_of_range(link)),
    }
}

/// The answer to `field`, checked: `None` when left out of an optional
/// field.
fn check_answer(field: &CustomField, answer: Option<&str>) -> Result<Option<String>, DomainError> {
    let param = format!("custom_fields.{}", field.key);
    let answer = answer.map(str::trim).filter(|a| !a.is_empty());
    let Some(a) = answer else {
        return match field.required {
            true => Err(DomainError::missing(&param)),
            false => Ok(None),
        };
    };
    let checked = match field.field_type {
        FieldType::Text => (a.chars().count() <= MAX_ANSWER).then(|| a.to_string()),
        FieldType::Number => valid_number(a).then(|| a.to_string()),
        FieldType::Phone => normal_phone(a),
        FieldType::Dropdown => field
            .options
            .as_ref()
            .filter(|o| o.iter().any(|x| x == a))
            .map(|_| a.to_string()),
    };
    let what = match field.field_type {
        FieldType::Text => "at most 500 characters",
        FieldType::Number => "a number",
        FieldType::Phone => "a phone number of 7 to 15 digits",
        FieldType::Dropdown => "one of the field's options",
    };
    checked
        .map(Some)
        .ok_or_else(|| DomainError::invalid(&param, format!("`{param}` must be {what}")))
}

/// The phone answer into `metadata` (`customer_phone`), when the link asks.
fn check_phone(
    link: &PaymentLink,
    phone: Option<&str>,
    metadata: &mut Map<String, Value>,
) -> Result<(), DomainError> {
    let phone = phone.map(str::trim).filter(|p| !p.is_empty());
    match (link.collect_phone, phone) {
        (true, None) => Err(DomainError::missing("phone")),
        (true, Some(p)) => match normal_phone(p) {
            Some(p) => {
                metadata.insert("customer_phone".into(), Value::String(p));
                Ok(())
            }
            None => Err(DomainError::invalid(
                "phone",
                "`phone` must be a phone number of 7 to 15 digits",
            )),
        },
        (false, Some(_)) => Err(DomainError::invalid(
            "phone",
            "this link does not ask for a phone number",
        )),
        (false, None) => Ok(()),
    }
}

/// The custom field answers into `metadata` (`cf_<key>`); every wrong one
/// into `errors`.
fn check_answers(
    link: &PaymentLink,
    answers: &BTreeMap<String, String>,
    metadata: &mut Map<String, Value>,
    errors: &mut Vec<DomainError>,
) {
    if let Some(k) = answers
        .keys()
        .find(|k| !link.custom_fields.iter().any(|f| &f.key == *k))
    {
        errors.push(DomainError::unknown(&format!("custom_fields.{k}")));
    }
    for field in &link.custom_fields {
        match check_answer(field, answers.get(&field.key).map(String::as_str)) {
            Ok(Some(a)) => {
                metadata.insert(format!("cf_{}", field.key), Value::String(a));
            }
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
}

fn check_email(email: Option<&str>) -> Result<String, DomainError> {
    match email.map(str::trim).filter(|e| !e.is_empty()) {
        None => Err(DomainError::missing("email")),
        Some(e) if !valid_email(e) => Err(DomainError::invalid(
            "email",
            "`email` is not an email address",
        )),
        Some(e) => Ok(e.to_string()),
    }
}

/// Checks a visit against `link`: the intent's parameters, or every wrong
/// answer (each naming its field in `param`).
pub fn check(
    link: &PaymentLink,
    input: &VisitInput,
) -> Result<CreatePaymentIntent, Vec<DomainError>> {
    let mut errors = Vec::new();
    let mut metadata = Map::new();
    let amount = check_amount(link, input.amount)
        .map_err(|e| errors.push(e))
        .ok();
    let email = check_email(input.email.as_deref())
        .map_err(|e| errors.push(e))
        .ok();
    if let Err(e) = check_phone(link, input.phone.as_deref(), &mut metadata) {
        errors.push(e);
    }
    check_answers(link, &input.answers, &mut metadata, &mut errors);
    match (amount, email) {
        (Some(amount), Some(email)) if errors.is_empty() => Ok(CreatePaymentIntent {
            amount,
            currency: link.currency,
            reference: None,
            description: Some(link.name.clone()),
            customer_email: Some(email),
            metadata,
            fee_bearer: link.fee_bearer,
            brand: Some(link.brand),
            customer: None,
            return_url: link.return_url.clone(),
        }),
        _ => Err(errors),
    }
}
