//! Plans: what a subscription bills, `{id, object: "plan", name, amount,
//! currency, interval, interval_count, trial_days, invoice_limit, active,
//! metadata}`. A plan's price and schedule never change (a new price is a
//! new plan); only its name and metadata change, and archiving it stops
//! new subscriptions to it (409 `plan_archived`) while those it has go on.
//!
//! Files: this one holds the object, its rules and view; `actor.rs` the
//! plan's actor (update, archive: one change at a time); `service.rs`
//! create, reads and the list.

pub mod actor;
pub mod service;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::ids::Mode;
use crate::money::Currency;

/// The unit of a plan's billing period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Interval {
    Day,
    Week,
    Month,
    Year,
}

impl Interval {
    pub const ALL: [Interval; 4] = [
        Interval::Day,
        Interval::Week,
        Interval::Month,
        Interval::Year,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Interval::Day => "day",
            Interval::Week => "week",
            Interval::Month => "month",
            Interval::Year => "year",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

/// The most days a trial may have.
pub const MAX_TRIAL_DAYS: u32 = 90;
/// The most periods a plan may bill (`invoice_limit`).
pub const MAX_INVOICE_LIMIT: u32 = 1000;

/// `interval_count` is 1 to 12 and the period is at most a year in all
/// (so `year` takes only 1; 12 months, 12 weeks and 12 days fit).
pub fn check_schedule(interval: Interval, count: u32) -> DomainResult<()> {
    if !(1..=12).contains(&count) {
        return Err(DomainError::invalid(
            "interval_count",
            "`interval_count` is an integer from 1 to 12",
        ));
    }
    if interval == Interval::Year && count > 1 {
        return Err(DomainError::invalid(
            "interval_count",
            "a plan's period is at most a year in all: `interval: year` takes `interval_count: 1`",
        ));
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub name: String,
    pub amount: i64,
    pub currency: Currency,
    pub interval: Interval,
    pub interval_count: u32,
    pub trial_days: u32,
    pub invoice_limit: Option<u32>,
    pub active: bool,
    pub metadata: Map<String, Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub archived_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = Plan)]
pub struct PlanView {
    pub id: Uuid,
    /// Always `plan`.
    #[schema(pattern = "^plan$")]
    pub object: &'static str,
    pub livemode: bool,
    pub name: String,
    /// Minor units billed each period.
    pub amount: i64,
    pub currency: Currency,
    pub interval: Interval,
    pub interval_count: u32,
    pub trial_days: u32,
    /// How many periods a subscription bills before it is `completed`;
    /// null: until canceled.
    #[schema(required = true)]
    pub invoice_limit: Option<u32>,
    /// False once archived: no new subscriptions.
    pub active: bool,
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[schema(required = true)]
    pub archived_at: Option<DateTime<Utc>>,
}

impl Plan {
    pub fn view(&self) -> PlanView {
        PlanView {
            id: self.id,
            object: "plan",
            livemode: self.mode.livemode(),
            name: self.name.clone(),
            amount: self.amount,
            currency: self.currency,
            interval: self.interval,
            interval_count: self.interval_count,
            trial_days: self.trial_days,
            invoice_limit: self.invoice_limit,
            active: self.active,
            metadata: self.metadata.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            archived_at: self.archived_at,
        }
    }

    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a plan view serializes")
    }

    /// New subscriptions (and plan changes) need an active plan.
    pub fn require_active(&self) -> DomainResult<()> {
        match self.active {
            true => Ok(()),
            false => Err(DomainError::state(
                ErrorCode::PlanArchived,
                "this plan is archived; it takes no new subscriptions",
            )
            .with_param("plan")),
        }
    }
}

/// A plan's change: only what is given changes (`metadata` merges, a key
/// set to `""` is removed).
#[derive(Debug, Clone, Default)]
pub struct PlanPatch {
    pub name: Option<String>,
    pub metadata: Option<Map<String, Value>>,
}

/// The plan after `patch` (pure).
pub fn apply_patch(p: &Plan, patch: &PlanPatch, now: DateTime<Utc>) -> Plan {
    let mut after = p.clone();
    if let Some(n) = &patch.name {
        after.name = n.clone();
    }
    if let Some(md) = &patch.metadata {
        for (k, v) in md {
            match v {
                Value::String(s) if s.is_empty() => {
                    after.metadata.remove(k);
                }
                v => {
                    after.metadata.insert(k.clone(), v.clone());
                }
            }
        }
    }
    if after != *p {
        after.updated_at = now;
    }
    after
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_is_at_most_a_year_in_all() {
        assert!(check_schedule(Interval::Month, 12).is_ok());
        assert!(check_schedule(Interval::Day, 12).is_ok());
        assert!(check_schedule(Interval::Year, 1).is_ok());
        let e = check_schedule(Interval::Year, 2).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("interval_count"));
        for bad in [0, 13] {
            let e = check_schedule(Interval::Week, bad).unwrap_err();
            assert_eq!(e.param.as_deref(), Some("interval_count"));
        }
    }
}
