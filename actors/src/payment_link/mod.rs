//! Payment links: a reusable hosted page (`/p/<slug>`) a merchant shares;
//! each visitor who pays creates one payment intent. The object, its
//! rules, its public view and its pure state machine.
//!
//! ```text
//! (new) --create--> active
//! active --deactivate--> inactive (deactivated)
//! active --expires_at passes (timer)--> inactive (expired)
//! active --payments_count reaches max_payments--> inactive (max_payments_reached)
//! inactive --activate, once the cause is cleared--> active
//! ```
//! Every move to `inactive` records `payment_link.deactivated`.
//!
//! Slots and counters: a started payment holds one of `max_payments`
//! slots while it is `created` or `processing`; `payments_count` and
//! `amount_collected` count successful payments. Both are counters the
//! link's payment intents move in their own batches
//! ([`crate::payment_intent::link`]); the link's actor reads them to
//! admit a visit (one visit at a time per link) and to deactivate the
//! link once `max_payments` is reached.
//!
//! Files: this one the object, its rules and `decide`; `view.rs` the
//! public view; `visit.rs` a visitor's answers; `service.rs` create,
//! reads and lists; `actor.rs` the actor (visits, changes, timers).

pub mod actor;
pub mod service;
mod view;
pub mod visit;

pub use view::*;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::ids::Mode;
use crate::money::{Currency, FeeBearer, MAX_AMOUNT};

/// The smallest payment (the spec's minimum, as for payment intents).
pub const MIN_AMOUNT: i64 = 100;
/// At most this many suggested amounts.
pub const MAX_SUGGESTED: usize = 4;
/// At most this many custom fields.
pub const MAX_CUSTOM_FIELDS: usize = 5;
/// The largest `max_payments`.
pub const MAX_PAYMENTS: i64 = 1_000_000;
/// Options of one dropdown field.
pub const MAX_OPTIONS: usize = 20;

/// `expires_at` is at most this far ahead.
pub fn max_lifetime() -> Duration {
    Duration::days(5 * 366)
}

pub const PAYMENT_LINK_CREATED: &str = "payment_link.created";
pub const PAYMENT_LINK_UPDATED: &str = "payment_link.updated";
pub const PAYMENT_LINK_DEACTIVATED: &str = "payment_link.deactivated";
pub const PAYMENT_LINK_ACTIVATED: &str = "payment_link.activated";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinkStatus {
    Active,
    Inactive,
}

impl LinkStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkStatus::Active => "active",
            LinkStatus::Inactive => "inactive",
        }
    }
    pub fn parse(s: &str) -> Option<LinkStatus> {
        [LinkStatus::Active, LinkStatus::Inactive]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
    pub fn byte(self) -> u8 {
        self as u8
    }
}

/// Why a link is inactive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InactiveReason {
    /// The merchant deactivated it.
    Deactivated,
    /// `expires_at` passed.
    Expired,
    /// `payments_count` reached `max_payments`.
    MaxPaymentsReached,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AmountType {
    /// Every payment is `amount`.
    Fixed,
    /// The customer chooses, between `min_amount` and `max_amount`.
    CustomerChosen,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FieldType {
    Text,
    Number,
    Phone,
    Dropdown,
}

/// A question the page asks; the answer is kept in the payment intent's
/// metadata as `cf_<key>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CustomField {
    /// 1 to 30 of `a-z`, `0-9`, `_`; unique within the link.
    pub key: String,
    pub label: String,
    #[serde(rename = "type")]
    pub field_type: FieldType,
    /// The choices of a `dropdown` (1 to 20, unique); null otherwise.
    #[schema(required = true)]
    pub options: Option<Vec<String>>,
    pub required: bool,
}

/// How much a payment is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AmountRule {
    pub amount_type: AmountType,
    /// `fixed`: the amount.
    pub amount: Option<i64>,
    /// `customer_chosen`: the bounds and the suggestions.
    pub min_amount: Option<i64>,
    pub max_amount: Option<i64>,
    pub suggested_amounts: Vec<i64>,
}

fn amount_param(param: &str, message: impl Into<String>) -> DomainError {
    DomainError::invalid(param, message)
}

impl AmountRule {
    /// The rule's fields together: `fixed` has `amount` and nothing else;
    /// `customer_chosen` has no `amount`, `min_amount` (default 100) at
    /// most `max_amount`, and up to 4 distinct suggestions within them.
    pub fn checked(mut self) -> DomainResult<AmountRule> {
        let in_bounds = |a: i64| (MIN_AMOUNT..=MAX_AMOUNT).contains(&a);
        for (name, v) in [
            ("amount", self.amount),
            ("min_amount", self.min_amount),
            ("max_amount", self.max_amount),
        ] {
            if v.is_some_and(|a| !in_bounds(a)) {
                return Err(amount_param(
                    name,
                    format!("`{name}` must be between {MIN_AMOUNT} and {MAX_AMOUNT}"),
                ));
            }
        }
        match self.amount_type {
            AmountType::Fixed => {
                if self.amount.is_none() {
                    return Err(DomainError::missing("amount"));
                }
                for (name, set) in [
                    ("min_amount", self.min_amount.is_some()),
                    ("max_amount", self.max_amount.is_some()),
                    ("suggested_amounts", !self.suggested_amounts.is_empty()),
                ] {
                    if set {
                        return Err(amount_param(
                            name,
                            format!("`{name}` is for `customer_chosen` links only"),
                        ));
                    }
                }
            }
            AmountType::CustomerChosen => {
                if self.amount.is_some() {
                    return Err(amount_param(
                        "amount",
                        "`amount` is for `fixed` links only; use `min_amount` and `max_amount`",
                    ));
                }
                let min = *self.min_amount.get_or_insert(MIN_AMOUNT);
                if self.max_amount.is_some_and(|max| max < min) {
                    return Err(amount_param(
                        "max_amount",
                        "`max_amount` must be at least `min_amount`",
                    ));
                }
                self.check_suggestions()?;
            }
        }
        Ok(self)
    }

    fn check_suggestions(&self) -> DomainResult<()> {
        let s = &self.suggested_amounts;
        if s.len() > MAX_SUGGESTED {
            return Err(amount_param(
                "suggested_amounts",
                format!("at most {MAX_SUGGESTED} suggested amounts"),
            ));
        }
        for (i, a) in s.iter().enumerate() {
            if !self.allows(*a) || s[..i].contains(a) {
                return Err(amount_param(
                    "suggested_amounts",
                    "suggested amounts must be distinct and within `min_amount` and `max_amount`",
                ));
            }
        }
        Ok(())
    }

    /// Whether a payment of `amount` fits the rule.
    pub fn allows(&self, amount: i64) -> bool {
        match self.amount_type {
            AmountType::Fixed => self.amount == Some(amount),
            AmountType::CustomerChosen => {
                amount >= self.min_amount.unwrap_or(MIN_AMOUNT)
                    && amount <= self.max_amount.unwrap_or(MAX_AMOUNT)
            }
        }
    }
}

/// Checks custom fields: at most 5, unique keys of `[a-z0-9_]{1,30}`,
/// labels of 1 to 100 characters, options for dropdowns only (1 to 20
/// distinct, 1 to 100 characters each). Errors name
/// `custom_fields[<i>].<field>`.
pub fn check_custom_fields(fields: &[CustomField]) -> DomainResult<()> {
    if fields.len() > MAX_CUSTOM_FIELDS {
        return Err(DomainError::invalid(
            "custom_fields",
            format!("at most {MAX_CUSTOM_FIELDS} custom fields"),
        ));
    }
    for (i, f) in fields.iter().enumerate() {
        let param = |name: &str| format!("custom_fields[{i}].{name}");
        let key_ok = (1..=30).contains(&f.key.len())
            && f.key
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !key_ok {
            return Err(DomainError::invalid(
                &param("key"),
                "a key is 1 to 30 of a-z, 0-9 and _",
            ));
        }
        if fields[..i].iter().any(|o| o.key == f.key) {
            return Err(DomainError::invalid(&param("key"), "keys must be unique"));
        }
        if f.label.trim().is_empty() || f.label.chars().count() > 100 {
            return Err(DomainError::invalid(
                &param("label"),
                "a label is 1 to 100 characters",
            ));
        }
        match (&f.options, f.field_type) {
            (None, FieldType::Dropdown) => return Err(DomainError::missing(&param("options"))),
            (Some(_), t) if t != FieldType::Dropdown => {
                return Err(DomainError::invalid(
                    &param("options"),
                    "options are for dropdown fields only",
                ))
            }
            (Some(o), _) => {
                let distinct = o.iter().enumerate().all(|(j, x)| !o[..j].contains(x));
                let sized = o
                    .iter()
                    .all(|x| !x.trim().is_empty() && x.chars().count() <= 100);
                if o.is_empty() || o.len() > MAX_OPTIONS || !distinct || !sized {
                    return Err(DomainError::invalid(
                        &param("options"),
                        "a dropdown has 1 to 20 distinct options of 1 to 100 characters",
                    ));
                }
            }
            (None, _) => {}
        }
    }
    Ok(())
}

/// `slug`: 3 to 60 of `a-z`, `0-9` and `-`.
pub fn valid_slug(s: &str) -> bool {
    (3..=60).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// `expires_at` must be in the future and at most [`max_lifetime`] ahead.
pub fn check_expiry(expires_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> DomainResult<()> {
    match expires_at {
        Some(e) if e <= now => Err(DomainError::invalid(
            "expires_at",
            "`expires_at` must be in the future",
        )),
        Some(e) if e > now + max_lifetime() => Err(DomainError::invalid(
            "expires_at",
            "`expires_at` is at most 5 years ahead",
        )),
        _ => Ok(()),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaymentLink {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    /// Creation order (newest-first lists and cursors).
    pub seq: u64,
    pub name: String,
    pub description: Option<String>,
    pub currency: Currency,
    pub fee_bearer: FeeBearer,
    pub brand: Uuid,
    pub amount: AmountRule,
    pub slug: String,
    /// As stored; see [`PaymentLink::effective_status`] for what is shown.
    pub status: LinkStatus,
    pub inactive_reason: Option<InactiveReason>,
    pub expires_at: Option<DateTime<Utc>>,
    pub max_payments: Option<i64>,
    pub custom_fields: Vec<CustomField>,
    pub collect_phone: bool,
    pub return_url: Option<String>,
    pub success_message: Option<String>,
    pub metadata: Map<String, Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Bumped on every change.
    pub version: u64,
}

impl PaymentLink {
    /// The status as it is at `now` with `payments` successful payments:
    /// the stored one, or `inactive` as soon as `expires_at` has passed or
    /// `max_payments` is reached (the actor records the change and its
    /// event at the expiry timer and at the success's check, moments
    /// later).
    pub fn effective_status(
        &self,
        payments: i64,
        now: DateTime<Utc>,
    ) -> (LinkStatus, Option<InactiveReason>) {
        if self.status == LinkStatus::Inactive {
            return (LinkStatus::Inactive, self.inactive_reason);
        }
        if self.max_reached(payments) {
            return (
                LinkStatus::Inactive,
                Some(InactiveReason::MaxPaymentsReached),
            );
        }
        if self.expired(now) {
            return (LinkStatus::Inactive, Some(InactiveReason::Expired));
        }
        (LinkStatus::Active, None)
    }

    pub fn max_reached(&self, payments: i64) -> bool {
        self.max_payments.is_some_and(|m| payments >= m)
    }

    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|e| e <= now)
    }

    fn touched(mut self, now: DateTime<Utc>) -> Self {
        self.updated_at = now;
        self.version += 1;
        self
    }

    fn deactivated(mut self, reason: InactiveReason, effects: &mut Vec<Effect>) -> Self {
        self.status = LinkStatus::Inactive;
        self.inactive_reason = Some(reason);
        effects.push(Effect::Event(PAYMENT_LINK_DEACTIVATED));
        self
    }
}

/// A validated partial update: each `Some` replaces the field.
#[derive(Debug, Clone, Default)]
pub struct LinkUpdate {
    pub name: Option<String>,
    pub description: Option<String>,
    pub fee_bearer: Option<FeeBearer>,
    pub amount_type: Option<AmountType>,
    pub amount: Option<i64>,
    pub min_amount: Option<i64>,
    pub max_amount: Option<i64>,
    pub suggested_amounts: Option<Vec<i64>>,
    pub slug: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub max_payments: Option<i64>,
    pub custom_fields: Option<Vec<CustomField>>,
    pub collect_phone: Option<bool>,
    pub return_url: Option<String>,
    pub success_message: Option<String>,
    pub metadata: Option<Map<String, Value>>,
}

/// A command to a payment link.
#[derive(Debug, Clone)]
pub enum Command {
    Update(Box<LinkUpdate>),
    Deactivate,
    Activate,
    /// The expiry timer fired.
    ExpiryDue,
    /// A payment of the link succeeded: check `max_payments`.
    PaymentsCheck,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Event(&'static str),
    ScheduleExpiry(DateTime<Utc>),
    CancelExpiry(DateTime<Utc>),
    /// The slug changed: release the old one, claim the new one.
    MoveSlug {
        from: String,
        to: String,
    },
}

fn inactive_error(message: impl Into<String>) -> DomainError {
    DomainError::state(ErrorCode::PaymentLinkInactive, message)
}

/// The state machine: `(link, command, payments so far, now)` to the new
/// link (unchanged, same version, when nothing changes) and its effects.
pub fn decide(
    link: &PaymentLink,
    command: &Command,
    payments: i64,
    now: DateTime<Utc>,
) -> DomainResult<(PaymentLink, Vec<Effect>)> {
    let mut effects = Vec::new();
    let active = link.status == LinkStatus::Active;
    let next = match command {
        Command::Update(u) => return update(link, u, payments, now),
        Command::Deactivate if active => link
            .clone()
            .deactivated(InactiveReason::Deactivated, &mut effects),
        Command::Deactivate if link.inactive_reason == Some(InactiveReason::Deactivated) => {
            return Ok((link.clone(), effects))
        }
        Command::Deactivate => {
            let mut next = link.clone();
            next.inactive_reason = Some(InactiveReason::Deactivated);
            next
        }
        Command::Activate if active => return Ok((link.clone(), effects)),
        Command::Activate => {
            if link.expired(now) {
                return Err(inactive_error(
                    "this link's expires_at has passed; set a later expires_at first",
                ));
            }
            if link.max_reached(payments) {
                return Err(inactive_error(
                    "this link has reached max_payments; raise max_payments first",
                ));
            }
            let mut next = link.clone();
            next.status = LinkStatus::Active;
            next.inactive_reason = None;
            effects.push(Effect::Event(PAYMENT_LINK_ACTIVATED));
            next
        }
        Command::ExpiryDue if active && link.expired(now) => link
            .clone()
            .deactivated(InactiveReason::Expired, &mut effects),
        Command::PaymentsCheck if active && link.max_reached(payments) => link
            .clone()
            .deactivated(InactiveReason::MaxPaymentsReached, &mut effects),
        Command::ExpiryDue | Command::PaymentsCheck => return Ok((link.clone(), effects)),
    };
    Ok((next.touched(now), effects))
}

/// Applies an update: the merged amount rule and custom fields are
/// checked whole; the slug is fixed after the first payment; a new
/// `expires_at` moves the expiry timer; a `max_payments` already reached
/// deactivates an active link.
fn update(
    link: &PaymentLink,
    u: &LinkUpdate,
    payments: i64,
    now: DateTime<Utc>,
) -> DomainResult<(PaymentLink, Vec<Effect>)> {
    let mut next = link.clone();
    let mut effects = Vec::new();
    let mut rule = link.amount.clone();
    if let Some(t) = u.amount_type {
        if t != rule.amount_type {
            rule = AmountRule {
                amount_type: t,
                amount: None,
                min_amount: None,
                max_amount: None,
                suggested_amounts: Vec::new(),
            };
        }
    }
    let set = |v: Option<i64>, old: Option<i64>| v.or(old);
    rule.amount = set(u.amount, rule.amount);
    rule.min_amount = set(u.min_amount, rule.min_amount);
    rule.max_amount = set(u.max_amount, rule.max_amount);
    if let Some(s) = &u.suggested_amounts {
        rule.suggested_amounts = s.clone();
    }
    next.amount = rule.checked()?;
    if let Some(fields) = &u.custom_fields {
        check_custom_fields(fields)?;
        next.custom_fields = fields.clone();
    }
    if let Some(slug) = u.slug.as_ref().filter(|s| **s != link.slug) {
        if payments > 0 {
            return Err(DomainError::state(
                ErrorCode::SlugLocked,
                "the slug cannot change after the link's first payment",
            ));
        }
        effects.push(Effect::MoveSlug {
            from: link.slug.clone(),
            to: slug.clone(),
        });
        next.slug = slug.clone();
    }
    if let Some(e) = u.expires_at {
        check_expiry(Some(e), now)?;
        if let Some(old) = link.expires_at {
            effects.push(Effect::CancelExpiry(old));
        }
        effects.push(Effect::ScheduleExpiry(e));
        next.expires_at = Some(e);
    }
    next.name = u.name.clone().unwrap_or(next.name);
    next.description = u.description.clone().or(next.description);
    next.fee_bearer = u.fee_bearer.unwrap_or(next.fee_bearer);
    next.max_payments = u.max_payments.or(next.max_payments);
    next.collect_phone = u.collect_phone.unwrap_or(next.collect_phone);
    next.return_url = u.return_url.clone().or(next.return_url);
    next.success_message = u.success_message.clone().or(next.success_message);
    next.metadata = u.metadata.clone().unwrap_or(next.metadata);
    effects.push(Effect::Event(PAYMENT_LINK_UPDATED));
    if next.status == LinkStatus::Active && next.max_reached(payments) {
        next = next.deactivated(InactiveReason::MaxPaymentsReached, &mut effects);
    }
    Ok((next.touched(now), effects))
}

#[cfg(test)]
pub(crate) mod tests;
