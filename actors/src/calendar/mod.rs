//! The settlement calendar: Nigerian business days in Lagos time.
//!
//! Pure functions only (the one exception is [`Calendar::from_file`], which
//! reads the `--holidays FILE` override). Everything here is about *dates*:
//!
//! - a business day is Monday to Friday and not a public holiday;
//! - the Lagos date of an instant is taken in `Africa/Lagos` (UTC+1, no DST);
//! - the settlement instant of a date is 08:00 Lagos on that date;
//! - a collection is released on the `delay_days`-th business day strictly
//!   after its Lagos date (naira T+1, dollars T+7), at the settlement instant.
//!
//! The built-in holidays ([`Calendar::nigeria`]) cover 2024-2028 and hold the
//! days *off*: a fixed-date holiday that falls on a weekend is replaced by its
//! substitute working day (the following Monday, or the next working day not
//! already a holiday, so Christmas on Saturday and Boxing Day on Sunday give
//! Monday and Tuesday), which is how the Federal Government declares them.
//! Every date in the built-in set is therefore a Monday to Friday.

use std::collections::BTreeSet;
use std::path::Path;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, TimeZone, Utc, Weekday};
use chrono_tz::Africa::Lagos;

use crate::error::{DomainError, DomainResult, ErrorCode};

mod holidays;
#[cfg(test)]
mod tests;

pub use holidays::{easter_sunday, BUILTIN_FIRST_YEAR, BUILTIN_LAST_YEAR};

/// Hour (Lagos time) at which releases and automatic settlement happen.
pub const SETTLEMENT_HOUR: u32 = 8;

/// Delay of naira collections, in business days (T+1).
pub const NGN_DELAY_DAYS: u32 = 1;
/// Delay of dollar collections, in business days (T+7).
pub const USD_DELAY_DAYS: u32 = 7;

/// A business-day calendar: weekends plus a set of holiday dates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    holidays: BTreeSet<NaiveDate>,
}

impl Default for Calendar {
    fn default() -> Self {
        Calendar::nigeria()
    }
}

fn is_weekend(date: NaiveDate) -> bool {
    matches!(date.weekday(), Weekday::Sat | Weekday::Sun)
}

impl Calendar {
    /// A calendar with exactly these holidays (plus weekends).
    pub fn new(holidays: impl IntoIterator<Item = NaiveDate>) -> Calendar {
        Calendar {
            holidays: holidays.into_iter().collect(),
        }
    }

    /// The holiday dates, in order.
    pub fn holidays(&self) -> &BTreeSet<NaiveDate> {
        &self.holidays
    }

    /// Whether the date is in the holiday list (whatever its weekday).
    pub fn is_holiday(&self, date: NaiveDate) -> bool {
        self.holidays.contains(&date)
    }

    /// Monday to Friday and not a holiday.
    pub fn is_business_day(&self, date: NaiveDate) -> bool {
        !is_weekend(date) && !self.is_holiday(date)
    }

    /// The first business day strictly after `date`.
    pub fn next_business_day(&self, date: NaiveDate) -> NaiveDate {
        self.checked_next_business_day(date)
            .expect("a business day follows any date a payment can have")
    }

    /// The first business day strictly after `date`, or `None` past the
    /// last representable date.
    pub fn checked_next_business_day(&self, date: NaiveDate) -> Option<NaiveDate> {
        let mut d = date.succ_opt()?;
        while !self.is_business_day(d) {
            d = d.succ_opt()?;
        }
        Some(d)
    }

    /// The `n`-th business day strictly after `date` (`n = 1` is
    /// [`Calendar::next_business_day`]). `n = 0` returns `date` unchanged.
    /// `None` when `n` is over [`MAX_DELAY_DAYS`] or the date would not be
    /// representable: never a panic, never billions of steps.
    pub fn nth_business_day_after(&self, date: NaiveDate, n: u32) -> Option<NaiveDate> {
        if n > MAX_DELAY_DAYS {
            return None;
        }
        let mut d = date;
        for _ in 0..n {
            d = self.checked_next_business_day(d)?;
        }
        Some(d)
    }

    /// The Lagos calendar date of an instant (same as [`lagos_date`]).
    pub fn lagos_date(&self, t: DateTime<Utc>) -> NaiveDate {
        lagos_date(t)
    }

    /// 08:00 Lagos on `date`, as UTC.
    pub fn settlement_instant(&self, date: NaiveDate) -> DateTime<Utc> {
        settlement_instant(date)
    }

    /// The Lagos date on which a collection becomes available.
    ///
    /// `delay_days >= 1`: the `delay_days`-th business day strictly after
    /// the Lagos date of `collected_at` (naira T+1: Friday, Saturday and
    /// Sunday collections are released Monday, or Tuesday when Monday is a
    /// holiday; dollars T+7).
    ///
    /// `delay_days == 0` (chosen semantics): the next settlement instant at
    /// or after the collection, i.e. the collection's own Lagos date when it
    /// is a business day and the collection is at or before 08:00 Lagos,
    /// otherwise the next business day.
    ///
    /// A delay over [`MAX_DELAY_DAYS`] (or past the last representable
    /// date) is 409 `settlement_delay_out_of_range`.
    pub fn release_date(
        &self,
        collected_at: DateTime<Utc>,
        delay_days: u32,
    ) -> DomainResult<NaiveDate> {
        let day = lagos_date(collected_at);
        let date = if delay_days == 0 {
            if self.is_business_day(day) && collected_at <= settlement_instant(day) {
                Some(day)
            } else {
                self.checked_next_business_day(day)
            }
        } else {
            self.nth_business_day_after(day, delay_days)
        };
        date.ok_or_else(|| delay_out_of_range(delay_days))
    }

    /// The instant a collection becomes available:
    /// `settlement_instant(release_date(collected_at, delay_days))`.
    pub fn release_instant(
        &self,
        collected_at: DateTime<Utc>,
        delay_days: u32,
    ) -> DomainResult<DateTime<Utc>> {
        Ok(settlement_instant(
            self.release_date(collected_at, delay_days)?,
        ))
    }

    /// The first settlement instant (08:00 Lagos on a business day) at or
    /// after `t`.
    pub fn next_settlement_instant(&self, t: DateTime<Utc>) -> DateTime<Utc> {
        settlement_instant(
            self.release_date(t, 0)
                .expect("a business day follows any instant the clock can show"),
        )
    }
}

/// The longest settlement or reserve delay a computation takes, in days
/// (a century): beyond it, 409 `settlement_delay_out_of_range` instead of
/// a date past the calendar's range or an endless walk over it.
pub const MAX_DELAY_DAYS: u32 = 36_500;

/// 409 `settlement_delay_out_of_range`.
pub fn delay_out_of_range(days: u32) -> DomainError {
    DomainError::state(
        ErrorCode::SettlementDelayOutOfRange,
        format!(
            "a settlement delay of {days} days cannot be scheduled (at most {MAX_DELAY_DAYS}); \
             correct the merchant's settlement settings"
        ),
    )
}

/// The Lagos calendar date of an instant.
pub fn lagos_date(t: DateTime<Utc>) -> NaiveDate {
    t.with_timezone(&Lagos).date_naive()
}

/// 08:00 Lagos on `date`, as UTC.
pub fn settlement_instant(date: NaiveDate) -> DateTime<Utc> {
    let local = date.and_time(NaiveTime::from_hms_opt(SETTLEMENT_HOUR, 0, 0).expect("valid time"));
    Lagos
        .from_local_datetime(&local)
        .earliest()
        .expect("Lagos has no DST gaps")
        .with_timezone(&Utc)
}
