//! The bodies and queries of `/v1/payment_links` (see
//! [`super::payment_links`]): serde types that are both the parsers and
//! the OpenAPI schemas, and their field rules. The rules that span fields
//! (the amount rule, the custom fields together) are the domain's
//! (`kobo_actors::payment_link`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::money::{Currency, FeeBearer};
use kobo_actors::payment_intent::metadata_schema;
use kobo_actors::payment_link::service::CreateLink;
use kobo_actors::payment_link::visit::VisitInput;
use kobo_actors::payment_link::{
    valid_slug, AmountRule, AmountType, CustomField, FieldType, LinkStatus, LinkUpdate,
    MAX_PAYMENTS, MIN_AMOUNT,
};
use kobo_actors::DomainError;

use super::body::{self, tunnel, FIELD};
use super::params::{self, Choice};

type R<T> = Result<T, DomainError>;

/// A question the page asks (the body's form of a custom field).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CustomFieldInput)]
pub struct CustomFieldRequest {
    /// 1 to 30 of `a-z`, `0-9` and `_`, unique within the link; the
    /// answer is kept in the payment intent's metadata as `cf_<key>`.
    #[schema(pattern = "^[a-z0-9_]{1,30}$")]
    #[serde(deserialize_with = "body::required_string::<_, 30>")]
    key: String,
    /// 1 to 100 characters.
    #[schema(min_length = 1, max_length = 100)]
    #[serde(deserialize_with = "body::required_text::<_, 100>")]
    label: String,
    #[serde(rename = "type")]
    field_type: FieldType,
    /// `dropdown` only: 1 to 20 distinct choices of 1 to 100 characters.
    #[schema(max_items = 20)]
    options: Option<Vec<String>>,
    /// Default false.
    required: Option<bool>,
}

impl From<CustomFieldRequest> for CustomField {
    fn from(r: CustomFieldRequest) -> Self {
        CustomField {
            key: r.key,
            label: r.label,
            field_type: r.field_type,
            options: r.options,
            required: r.required.unwrap_or(false),
        }
    }
}

/// `custom_fields`: an array of [`CustomFieldRequest`]; errors name
/// `custom_fields[<i>].<field>`.
fn custom_fields<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<CustomField>>, D::Error> {
    let Some(v) = Option::<Value>::deserialize(d)? else {
        return Ok(None);
    };
    let Value::Array(items) = v else {
        return Err(tunnel(DomainError::invalid(
            FIELD,
            "`custom_fields` must be an array",
        )));
    };
    let mut out = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let Value::Object(map) = item else {
            return Err(tunnel(DomainError::invalid(
                &format!("{FIELD}[{i}]"),
                "each custom field is an object",
            )));
        };
        let field = body::from_map::<CustomFieldRequest>(map).map_err(|mut e| {
            let param = format!("{FIELD}[{i}].{}", e.param.take().unwrap_or_default());
            e.param = Some(param);
            tunnel(e)
        })?;
        out.push(field.into());
    }
    Ok(Some(out))
}

/// `suggested_amounts`: an array of amounts of at least 100.
fn amounts<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<i64>>, D::Error> {
    let Some(v) = Option::<Value>::deserialize(d)? else {
        return Ok(None);
    };
    let Value::Array(items) = v else {
        return Err(tunnel(DomainError::invalid(
            FIELD,
            "`suggested_amounts` must be an array",
        )));
    };
    items
        .iter()
        .map(|a| body::parse_amount(a, FIELD, MIN_AMOUNT))
        .collect::<R<Vec<i64>>>()
        .map(Some)
        .map_err(tunnel)
}

/// `slug`: `^[a-z0-9-]{3,60}$`.
fn slug<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let Some(s) = body::text::<D, 60>(d)? else {
        return Ok(None);
    };
    if !valid_slug(&s) {
        return Err(tunnel(DomainError::invalid(
            FIELD,
            "`slug` is 3 to 60 of a-z, 0-9 and -",
        )));
    }
    Ok(Some(s))
}

/// An RFC 3339 time.
fn timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    let Some(s) = body::text::<D, 64>(d)? else {
        return Ok(None);
    };
    DateTime::parse_from_rfc3339(&s)
        .map(|t| Some(t.with_timezone(&Utc)))
        .map_err(|_| {
            tunnel(DomainError::invalid(
                FIELD,
                format!("`{FIELD}` must be an RFC 3339 time"),
            ))
        })
}

/// `max_payments`: an integer from 1 to 1,000,000.
fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let Some(v) = Option::<Value>::deserialize(d)? else {
        return Ok(None);
    };
    match v.as_i64() {
        Some(n) if (v.is_i64() || v.is_u64()) && (1..=MAX_PAYMENTS).contains(&n) => Ok(Some(n)),
        _ => Err(tunnel(DomainError::invalid(
            FIELD,
            format!("`{FIELD}` must be an integer from 1 to {MAX_PAYMENTS}"),
        ))),
    }
}

/// An optional name: 1 to 200 characters, not only spaces.
fn name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let Some(s) = body::text::<D, 200>(d)? else {
        return Ok(None);
    };
    if s.trim().is_empty() {
        return Err(tunnel(DomainError::invalid(
            FIELD,
            format!("`{FIELD}` must not be empty"),
        )));
    }
    Ok(Some(s))
}

/// The body that creates a payment link. `null` is the same as leaving a
/// field out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreatePaymentLink)]
pub struct CreatePaymentLinkRequest {
    /// Shown on the page; the payments' `description`. 1 to 200 characters.
    #[schema(min_length = 1, max_length = 200)]
    #[serde(deserialize_with = "body::required_text::<_, 200>")]
    name: String,
    #[schema(max_length = 1000)]
    #[serde(deserialize_with = "body::text::<_, 1000>")]
    description: Option<String>,
    #[serde(deserialize_with = "body::required_currency")]
    currency: Currency,
    /// Default `merchant`.
    fee_bearer: Option<FeeBearer>,
    amount_type: AmountType,
    /// `fixed` only (and required there): minor units, at least 100.
    #[schema(minimum = 100, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::opt_amount::<_, MIN_AMOUNT>")]
    amount: Option<i64>,
    /// `customer_chosen` only: default 100.
    #[schema(minimum = 100, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::opt_amount::<_, MIN_AMOUNT>")]
    min_amount: Option<i64>,
    /// `customer_chosen` only: at least `min_amount`; none for no bound.
    #[schema(minimum = 100, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::opt_amount::<_, MIN_AMOUNT>")]
    max_amount: Option<i64>,
    /// `customer_chosen` only: up to 4 distinct amounts within the bounds.
    #[schema(max_items = 4)]
    #[serde(deserialize_with = "amounts")]
    suggested_amounts: Option<Vec<i64>>,
    /// The page's address, `/p/<slug>`: unique across kobo (409
    /// `slug_taken`). Default: made from `name`.
    #[schema(pattern = "^[a-z0-9-]{3,60}$")]
    #[serde(deserialize_with = "slug")]
    slug: Option<String>,
    /// After this time the link takes no payments (`inactive`, `expired`).
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(deserialize_with = "timestamp")]
    expires_at: Option<DateTime<Utc>>,
    /// After this many successful payments the link takes no more.
    #[schema(minimum = 1, maximum = 1_000_000)]
    #[serde(deserialize_with = "count")]
    max_payments: Option<i64>,
    /// Up to 5 questions the page asks.
    #[schema(max_items = 5)]
    #[serde(deserialize_with = "custom_fields")]
    custom_fields: Option<Vec<CustomField>>,
    /// Ask for the customer's phone number (default false).
    collect_phone: Option<bool>,
    /// Where checkout sends the customer after paying: an http(s) URL.
    #[schema(format = "uri", max_length = 2048)]
    #[serde(deserialize_with = "body::url")]
    return_url: Option<String>,
    /// Shown once the payment succeeds; up to 500 characters.
    #[schema(max_length = 500)]
    #[serde(deserialize_with = "body::text::<_, 500>")]
    success_message: Option<String>,
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "body::metadata")]
    metadata: Map<String, Value>,
    /// One of the merchant's brands (default: the default brand); its name
    /// heads the page. Unknown: 404 with param `brand`.
    #[serde(deserialize_with = "body::uuid")]
    brand: Option<Uuid>,
}

impl From<CreatePaymentLinkRequest> for CreateLink {
    fn from(r: CreatePaymentLinkRequest) -> Self {
        CreateLink {
            name: r.name,
            description: r.description,
            currency: r.currency,
            fee_bearer: r.fee_bearer.unwrap_or(FeeBearer::Merchant),
            amount: AmountRule {
                amount_type: r.amount_type,
                amount: r.amount,
                min_amount: r.min_amount,
                max_amount: r.max_amount,
                suggested_amounts: r.suggested_amounts.unwrap_or_default(),
            },
            slug: r.slug,
            expires_at: r.expires_at,
            max_payments: r.max_payments,
            custom_fields: r.custom_fields.unwrap_or_default(),
            collect_phone: r.collect_phone.unwrap_or(false),
            return_url: r.return_url,
            success_message: r.success_message,
            metadata: r.metadata,
            brand: r.brand,
        }
    }
}

/// The body that updates a payment link: each field given replaces the
/// link's (`metadata` and `custom_fields` whole); a field left out (or
/// `null`) is unchanged. `currency` and `brand` never change.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = UpdatePaymentLink)]
pub struct UpdatePaymentLinkRequest {
    #[schema(min_length = 1, max_length = 200)]
    #[serde(deserialize_with = "name")]
    name: Option<String>,
    #[schema(max_length = 1000)]
    #[serde(deserialize_with = "body::text::<_, 1000>")]
    description: Option<String>,
    fee_bearer: Option<FeeBearer>,
    /// A different type starts the amount rule afresh (give its fields).
    amount_type: Option<AmountType>,
    #[schema(minimum = 100, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::opt_amount::<_, MIN_AMOUNT>")]
    amount: Option<i64>,
    #[schema(minimum = 100, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::opt_amount::<_, MIN_AMOUNT>")]
    min_amount: Option<i64>,
    #[schema(minimum = 100, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::opt_amount::<_, MIN_AMOUNT>")]
    max_amount: Option<i64>,
    #[schema(max_items = 4)]
    #[serde(deserialize_with = "amounts")]
    suggested_amounts: Option<Vec<i64>>,
    /// Unique across kobo (409 `slug_taken`); fixed after the link's first
    /// payment (409 `slug_locked`).
    #[schema(pattern = "^[a-z0-9-]{3,60}$")]
    #[serde(deserialize_with = "slug")]
    slug: Option<String>,
    /// In the future.
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(deserialize_with = "timestamp")]
    expires_at: Option<DateTime<Utc>>,
    /// At most `payments_count` deactivates an active link.
    #[schema(minimum = 1, maximum = 1_000_000)]
    #[serde(deserialize_with = "count")]
    max_payments: Option<i64>,
    #[schema(max_items = 5)]
    #[serde(deserialize_with = "custom_fields")]
    custom_fields: Option<Vec<CustomField>>,
    collect_phone: Option<bool>,
    #[schema(format = "uri", max_length = 2048)]
    #[serde(deserialize_with = "body::url")]
    return_url: Option<String>,
    #[schema(max_length = 500)]
    #[serde(deserialize_with = "body::text::<_, 500>")]
    success_message: Option<String>,
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "opt_metadata")]
    metadata: Option<Map<String, Value>>,
}

fn opt_metadata<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Map<String, Value>>, D::Error> {
    let Some(v) = Option::<Value>::deserialize(d)? else {
        return Ok(None);
    };
    // The rule's error travels as its tunnelled text.
    body::metadata(v)
        .map(Some)
        .map_err(|e| <D::Error as serde::de::Error>::custom(e.to_string()))
}

impl From<UpdatePaymentLinkRequest> for LinkUpdate {
    fn from(r: UpdatePaymentLinkRequest) -> Self {
        LinkUpdate {
            name: r.name,
            description: r.description,
            fee_bearer: r.fee_bearer,
            amount_type: r.amount_type,
            amount: r.amount,
            min_amount: r.min_amount,
            max_amount: r.max_amount,
            suggested_amounts: r.suggested_amounts,
            slug: r.slug,
            expires_at: r.expires_at,
            max_payments: r.max_payments,
            custom_fields: r.custom_fields,
            collect_phone: r.collect_phone,
            return_url: r.return_url,
            success_message: r.success_message,
            metadata: r.metadata,
        }
    }
}

/// `custom_fields` of a visit: an object of answers (strings, or numbers).
fn answers<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let Some(v) = Option::<Value>::deserialize(d)? else {
        return Ok(BTreeMap::new());
    };
    let Value::Object(m) = v else {
        return Err(tunnel(DomainError::invalid(
            FIELD,
            "`custom_fields` must be an object",
        )));
    };
    m.into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k, s)),
            Value::Number(n) => Ok((k, n.to_string())),
            _ => Err(tunnel(DomainError::invalid(
                &format!("{FIELD}.{k}"),
                "answers are strings",
            ))),
        })
        .collect()
}

/// A whole visit to the link's page, without a browser.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = PayPaymentLink)]
pub struct PayPaymentLinkRequest {
    /// Minor units: within the link's bounds (400 `amount_out_of_range`);
    /// a `fixed` link's own amount when left out.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::opt_amount::<_, 1>")]
    amount: Option<i64>,
    /// The customer's email (the payment's `customer_email`).
    #[schema(format = Email, max_length = 254)]
    #[serde(deserialize_with = "body::email")]
    email: Option<String>,
    /// Required when the link has `collect_phone`.
    #[schema(max_length = 30)]
    #[serde(deserialize_with = "body::text::<_, 30>")]
    phone: Option<String>,
    /// The answers, by custom field key.
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    #[serde(deserialize_with = "answers")]
    custom_fields: BTreeMap<String, String>,
}

impl From<PayPaymentLinkRequest> for VisitInput {
    fn from(r: PayPaymentLinkRequest) -> Self {
        VisitInput {
            amount: r.amount,
            email: r.email,
            phone: r.phone,
            answers: r.custom_fields,
            nonce: None,
        }
    }
}

impl Choice for LinkStatus {
    const WHAT: &'static str = "active or inactive";
    fn parse(s: &str) -> Option<Self> {
        LinkStatus::parse(s)
    }
}

/// The query of `GET /v1/payment_links`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListPaymentLinksQuery {
    /// Page size, 1 to 100.
    #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
    #[serde(deserialize_with = "params::limit")]
    pub limit: usize,
    /// The id of the last payment link of the previous page.
    #[serde(deserialize_with = "params::uuid")]
    pub starting_after: Option<Uuid>,
    /// Only links with this status (as shown now).
    #[param(inline)]
    #[serde(deserialize_with = "params::one_of")]
    pub status: Option<LinkStatus>,
    /// Only links of this brand (another's: 400).
    #[serde(deserialize_with = "params::uuid")]
    pub brand: Option<Uuid>,
}
