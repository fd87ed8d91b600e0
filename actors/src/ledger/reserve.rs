//! The rolling reserve's view (`GET /v1/reserve`): the merchant's terms,
//! what the reserve holds per currency and when it is released, read from
//! the scheduled releases of the reserve bucket.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use kobo_storage::{decode, Table};

use crate::env::Env;
use crate::error::DomainResult;
use crate::ids::Mode;
use crate::ledger::Bucket;
use crate::merchant::Merchant;
use crate::money::Currency;

/// Plain words for the reserve reasons kobo's risk team uses.
pub fn reserve_reason_text(reason: &str) -> String {
    match reason {
        "new_account" => "Your account is new: a share of each payment is held while it builds a payment history.".into(),
        "high_chargebacks" | "chargebacks" => "Your recent payments had more disputes than usual: a share of each payment is held to cover them.".into(),
        "high_risk" | "high_risk_category" => "Your business category carries more disputes: a share of each payment is held to cover them.".into(),
        "manual_review" => "Our risk team reviewed your account: a share of each payment is held for now.".into(),
        other => {
            let words = other.replace(['_', '-'], " ");
            let mut c = words.chars();
            match c.next() {
                Some(f) => format!("{}{}.", f.to_uppercase(), c.as_str()),
                None => String::new(),
            }
        }
    }
}

/// The `object` value of the reserve.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum ReserveObject {
    #[serde(rename = "reserve")]
    Reserve,
}

/// The rolling-reserve terms in force.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReserveTermsView {
    /// The share of each payment's net held, in basis points.
    #[schema(minimum = 0, maximum = 10_000)]
    pub percent_bps: i64,
    /// Each payment's share is released this many calendar days after its
    /// Lagos collection date, at 08:00 Lagos.
    pub days: u32,
    /// Why a reserve is held: a code such as `new_account`,
    /// `high_chargebacks`, `high_risk_category` or `manual_review`.
    #[schema(required = true)]
    pub reason: Option<String>,
    /// `reason` in plain words.
    #[schema(required = true)]
    pub reason_text: Option<String>,
    /// A note from the risk team.
    #[schema(required = true)]
    pub note: Option<String>,
    /// When these terms were set.
    #[schema(required = true)]
    pub since: Option<DateTime<Utc>>,
}

/// What the reserve holds in one currency.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct ReserveHeldView {
    pub currency: Currency,
    /// Minor units held.
    pub amount: i64,
    /// How many payments' shares are held.
    pub payments: usize,
    /// The earliest of their releases.
    pub next_release_at: DateTime<Utc>,
}

/// What the reserve releases on one Lagos date in one currency.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct ReserveReleaseView {
    /// The Lagos date of the release (at 08:00 Lagos).
    pub date: NaiveDate,
    pub currency: Currency,
    /// Minor units released.
    pub amount: i64,
}

/// The rolling reserve: its terms, what it holds and when that is
/// released.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Reserve)]
pub struct ReserveView {
    #[schema(inline)]
    pub object: ReserveObject,
    pub livemode: bool,
    /// Null when no reserve is held from new payments (what is still held
    /// is listed all the same).
    #[schema(required = true, inline)]
    pub terms: Option<ReserveTermsView>,
    /// Per currency that has money held.
    #[schema(inline)]
    pub held: Vec<ReserveHeldView>,
    /// By Lagos date, then currency, earliest first.
    #[schema(inline)]
    pub releases: Vec<ReserveReleaseView>,
}

/// `GET /v1/reserve`, as JSON.
pub fn reserve(kobo: &Env, merchant: &Merchant, mode: Mode) -> DomainResult<Value> {
    let view = reserve_view(kobo, merchant, mode)?;
    Ok(serde_json::to_value(view).expect("a reserve view serializes"))
}

/// `GET /v1/reserve`: the terms, what is held and when it is released.
pub fn reserve_view(kobo: &Env, merchant: &Merchant, mode: Mode) -> DomainResult<ReserveView> {
    use crate::ledger::release::{release_prefix, ScheduledRelease};
    let read = kobo.store.read()?;
    let mut held: BTreeMap<Currency, ReserveHeldView> = BTreeMap::new();
    let mut releases: BTreeMap<(NaiveDate, Currency), i64> = BTreeMap::new();
    read.scan_prefix(
        Table::ScheduledReleases,
        &release_prefix(merchant.id, mode, Bucket::Reserve).build(),
        None,
        |_, v| {
            let r: ScheduledRelease = decode(v)?;
            let h = held.entry(r.currency).or_insert(ReserveHeldView {
                currency: r.currency,
                amount: 0,
                payments: 0,
                next_release_at: r.due,
            });
            h.amount += r.amount;
            h.payments += 1;
            h.next_release_at = h.next_release_at.min(r.due);
            *releases
                .entry((kobo.calendar.lagos_date(r.due), r.currency))
                .or_default() += r.amount;
            Ok(true)
        },
    )?;
    Ok(reserve_from(
        mode,
        merchant.settings.reserve.as_ref(),
        merchant.reserve_since,
        held.into_values().collect(),
        &releases,
    ))
}

fn reserve_from(
    mode: Mode,
    terms: Option<&crate::merchant::ReserveTerms>,
    since: Option<DateTime<Utc>>,
    held: Vec<ReserveHeldView>,
    releases: &BTreeMap<(NaiveDate, Currency), i64>,
) -> ReserveView {
    ReserveView {
        object: ReserveObject::Reserve,
        livemode: mode.livemode(),
        terms: terms.map(|t| ReserveTermsView {
            percent_bps: t.percent_bps,
            days: t.days,
            reason: t.reason.clone(),
            reason_text: t.reason.as_deref().map(reserve_reason_text),
            note: t.note.clone(),
            since,
        }),
        held,
        releases: releases
            .iter()
            .map(|(&(date, currency), &amount)| ReserveReleaseView {
                date,
                currency,
                amount,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    #[test]
    fn reserve_json_is_unchanged() {
        use crate::merchant::ReserveTerms;
        let at = |h: i64| {
            Utc.with_ymd_and_hms(2025, 3, 3, 7, 0, 0).unwrap() + chrono::Duration::hours(h)
        };
        let day = |d: u32| NaiveDate::from_ymd_opt(2025, 3, d).unwrap();
        // (currency, amount, payments, earliest release), as the old
        // rendering accumulated them.
        let held = [
            (Currency::NGN, 12_345, 3, at(24)),
            (Currency::USD, 500, 1, at(48)),
        ];
        let releases = BTreeMap::from([
            ((day(4), Currency::NGN), 10_000),
            ((day(4), Currency::USD), 500),
            ((day(9), Currency::NGN), 2_345),
        ]);
        let terms = [
            None,
            Some(ReserveTerms {
                percent_bps: 1_000,
                days: 30,
                reason: Some("new_account".into()),
                note: Some("until June".into()),
            }),
            Some(ReserveTerms {
                percent_bps: 250,
                days: 7,
                reason: Some("odd_reason".into()),
                note: None,
            }),
            Some(ReserveTerms {
                percent_bps: 0,
                days: 0,
                reason: None,
                note: None,
            }),
        ];
        for mode in [Mode::Test, Mode::Live] {
            for terms in &terms {
                for since in [None, Some(at(-100))] {
                    for n in [0, held.len()] {
                        let held = &held[..n];
                        let releases = if n == 0 {
                            BTreeMap::new()
                        } else {
                            releases.clone()
                        };
                        // The rendering the view replaced.
                        let old_terms = terms.as_ref().map(|t| {
                            json!({
                                "percent_bps": t.percent_bps,
                                "days": t.days,
                                "reason": t.reason,
                                "reason_text": t.reason.as_deref().map(reserve_reason_text),
                                "note": t.note,
                                "since": since,
                            })
                        });
                        let old = json!({
                            "object": "reserve",
                            "livemode": mode.livemode(),
                            "terms": old_terms,
                            "held": held.iter().map(|(c, amount, payments, next)| json!({
                                "currency": c, "amount": amount, "payments": payments, "next_release_at": Some(*next),
                            })).collect::<Vec<_>>(),
                            "releases": releases.iter().map(|((date, c), amount)| json!({
                                "date": date.to_string(), "currency": c, "amount": amount,
                            })).collect::<Vec<_>>(),
                        });
                        let new = reserve_from(
                            mode,
                            terms.as_ref(),
                            since,
                            held.iter()
                                .map(|&(currency, amount, payments, next)| ReserveHeldView {
                                    currency,
                                    amount,
                                    payments,
                                    next_release_at: next,
                                })
                                .collect(),
                            &releases,
                        );
                        let new = serde_json::to_value(new).unwrap();
                        assert_eq!(new, old);
                        assert_eq!(new.to_string(), old.to_string());
                    }
                }
            }
        }
    }
}
