//! What creates and what updates a customer, and the pure rules of an
//! update (cleared fields, merged metadata). No store, no clock.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{Customer, RiskAction};
use crate::error::{DomainError, DomainResult};

/// A validated create request: `email` and/or `phone`.
#[derive(Debug, Clone, Default)]
pub struct NewCustomer {
    pub email: Option<String>,
    pub phone: Option<String>,
    pub name: Option<String>,
    /// A brand of the merchant (checked by the caller); none: the default.
    pub brand: Option<Uuid>,
    pub metadata: Map<String, Value>,
    pub risk_action: Option<RiskAction>,
}

/// One field of an update: left alone, cleared (`""`), or set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Field {
    #[default]
    Keep,
    Clear,
    Set(String),
}

impl Field {
    fn apply(&self, current: &mut Option<String>) {
        match self {
            Field::Keep => {}
            Field::Clear => *current = None,
            Field::Set(v) => *current = Some(v.clone()),
        }
    }
}

/// A validated update request.
#[derive(Debug, Clone, Default)]
pub struct CustomerPatch {
    pub email: Field,
    pub phone: Field,
    pub name: Field,
    /// Merged into the customer's metadata; a key set to `""` is removed.
    pub metadata: Option<Map<String, Value>>,
    pub risk_action: Option<RiskAction>,
}

/// The most metadata keys a customer keeps.
pub const MAX_METADATA_KEYS: usize = 20;

impl CustomerPatch {
    /// The customer after this update (`updated_at` = `now` when anything
    /// changed; unchanged otherwise). A customer keeps an email or a phone
    /// (400 on `email`), and at most 20 metadata keys (400 on `metadata`).
    pub fn apply(&self, c: &Customer, now: DateTime<Utc>) -> DomainResult<Customer> {
        let mut next = c.clone();
        self.email.apply(&mut next.email);
        self.phone.apply(&mut next.phone);
        self.name.apply(&mut next.name);
        if let Some(r) = self.risk_action {
            next.risk_action = r;
        }
        if let Some(m) = &self.metadata {
            for (k, v) in m {
                if v.as_str() == Some("") {
                    next.metadata.remove(k);
                } else {
                    next.metadata.insert(k.clone(), v.clone());
                }
            }
            if next.metadata.len() > MAX_METADATA_KEYS {
                return Err(DomainError::invalid(
                    "metadata",
                    format!("a customer keeps at most {MAX_METADATA_KEYS} metadata keys"),
                ));
            }
        }
        if next.email.is_none() && next.phone.is_none() {
            return Err(DomainError::invalid(
                "email",
                "a customer keeps an email or a phone (or both)",
            ));
        }
        if next != *c {
            next.updated_at = Some(now);
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::customer::Identity;
    use crate::ids::Mode;
    use chrono::TimeZone;
    use serde_json::json;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 3, 9, 0, 0).unwrap()
    }

    fn customer() -> Customer {
        Customer {
            id: Uuid::nil(),
            merchant: Uuid::nil(),
            mode: Mode::Test,
            seq: 1,
            email: Some("Ada@Example.com".into()),
            name: Some("Ada".into()),
            created_at: t0(),
            phone: None,
            brand: None,
            metadata: json!({"a": "1", "b": 2}).as_object().unwrap().clone(),
            risk_action: RiskAction::Default,
            identity: Identity::default(),
            updated_at: None,
            deleted_at: None,
        }
    }

    #[test]
    fn fields_are_kept_cleared_or_set_and_metadata_merges() {
        let now = t0() + chrono::Duration::minutes(1);
        let patch = CustomerPatch {
            phone: Field::Set("+2348031234567".into()),
            name: Field::Clear,
            metadata: Some(json!({"a": "", "c": true}).as_object().unwrap().clone()),
            risk_action: Some(RiskAction::Deny),
            ..Default::default()
        };
        let c = patch.apply(&customer(), now).unwrap();
        assert_eq!(c.email.as_deref(), Some("Ada@Example.com"));
        assert_eq!(c.phone.as_deref(), Some("+2348031234567"));
        assert_eq!(c.name, None);
        assert_eq!(c.metadata, *json!({"b": 2, "c": true}).as_object().unwrap());
        assert_eq!(c.risk_action, RiskAction::Deny);
        assert_eq!(c.updated_at, Some(now));
        // Nothing changes: updated_at stays.
        let same = CustomerPatch::default().apply(&customer(), now).unwrap();
        assert_eq!(same, customer());
    }

    #[test]
    fn a_customer_keeps_an_email_or_a_phone_and_at_most_20_keys() {
        let patch = CustomerPatch {
            email: Field::Clear,
            ..Default::default()
        };
        let e = patch.apply(&customer(), t0()).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("email"));
        let many: Map<String, Value> = (0..19).map(|i| (format!("k{i}"), json!(i))).collect();
        let patch = CustomerPatch {
            metadata: Some(many),
            ..Default::default()
        };
        let e = patch.apply(&customer(), t0()).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("metadata"));
    }
}
