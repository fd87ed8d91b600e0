//! Scheduled releases: when captured money becomes available. The ledger
//! actor is the only writer of these rows once they exist.
//!
//! A capture schedules its releases in the same batch that posts it: one
//! [`ScheduledRelease`] row per bucket it fills (`pending`, and `reserve`
//! when the merchant has a rolling reserve), each with a durable timer due
//! at the release instant (08:00 Lagos on the release date). When the timer
//! fires, the merchant's ledger actor posts a `release` entry (bucket out,
//! `available` in) and deletes the row and the timer in that same batch, so a
//! second run — a restart, a late timer, the test helper — finds nothing left
//! to release: nothing is ever released twice.

use chrono::{DateTime, Days, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use kobo_storage::{Batch, KeyBuf, Table};

use crate::calendar::{delay_out_of_range, Calendar, MAX_DELAY_DAYS};
use crate::clock::micros;
use crate::error::DomainResult;
use crate::ids::{scope_key, Mode};
use crate::ledger::{Bucket, LineSpec};
use crate::merchant::Settings;
use crate::money::Currency;
use crate::timer::{Timer, TimerKind};

/// Money waiting in `pending` or `reserve` for its release instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledRelease {
    pub payment: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub brand: Uuid,
    pub currency: Currency,
    pub bucket: Bucket,
    pub amount: i64,
    #[serde(with = "kobo_storage::codec::timestamp")]
    pub due: DateTime<Utc>,
    #[serde(with = "kobo_storage::codec::timestamp")]
    pub collected_at: DateTime<Utc>,
}

/// Stored in the compact format (kobo_storage::codec); rows written as
/// JSON before it still read. Pinned by
/// `tests::the_stored_layout_of_a_scheduled_release_is_pinned`.
impl kobo_storage::Compact for ScheduledRelease {}

impl ScheduledRelease {
    pub fn key(&self) -> Vec<u8> {
        release_key(
            self.merchant,
            self.mode,
            self.bucket,
            self.due,
            self.payment,
        )
    }

    pub fn timer_kind(&self) -> TimerKind {
        match self.bucket {
            Bucket::Reserve => TimerKind::ReleaseReserve,
            _ => TimerKind::ReleasePending,
        }
    }

    pub fn timer_key(&self) -> Vec<u8> {
        Timer::key(self.due, self.timer_kind(), self.payment)
    }

    /// Writes the row and its timer (and, for `pending`, the payment's
    /// pointer to it, used by refunds and disputes).
    pub fn schedule(&self, batch: &mut Batch) {
        batch.put_compact(Table::ScheduledReleases, self.key(), self);
        if self.bucket == Bucket::Pending {
            batch.put_raw(
                Table::ReleasesByPayment,
                by_payment_key(self.merchant, self.mode, self.payment),
                self.key(),
            );
        }
        Timer::new(self.timer_kind(), self.payment, self.merchant, self.mode)
            .schedule(batch, self.due);
    }

    /// Deletes the row, its timer and pointer (the release happened, or
    /// nothing is left to release).
    pub fn unschedule(&self, batch: &mut Batch) {
        batch
            .delete(Table::ScheduledReleases, self.key())
            .delete(Table::Timers, self.timer_key());
        if self.bucket == Bucket::Pending {
            batch.delete(
                Table::ReleasesByPayment,
                by_payment_key(self.merchant, self.mode, self.payment),
            );
        }
    }
}

/// Key of a payment's pointer to its pending release row.
pub fn by_payment_key(merchant: Uuid, mode: Mode, payment: Uuid) -> Vec<u8> {
    scope_key(merchant, mode).bytes(payment.as_bytes()).build()
}

pub fn release_prefix(merchant: Uuid, mode: Mode, bucket: Bucket) -> KeyBuf {
    scope_key(merchant, mode).u8(bucket.byte())
}

pub fn release_key(
    merchant: Uuid,
    mode: Mode,
    bucket: Bucket,
    due: DateTime<Utc>,
    payment: Uuid,
) -> Vec<u8> {
    release_prefix(merchant, mode, bucket)
        .u64(micros(due))
        .bytes(payment.as_bytes())
        .build()
}

/// The share of `net` a reserve of `bps` holds, rounded half up; 0 to
/// `net` whatever `bps` says (a share over 100% holds all of it).
pub fn reserve_share(net: i64, bps: i64) -> i64 {
    if net <= 0 || bps <= 0 {
        return 0;
    }
    let share = ((net as i128) * (bps.min(10_000) as i128) + 5000) / 10000;
    share.min(net as i128) as i64
}

/// When reserved money is released: 08:00 Lagos on the Lagos date `days`
/// after collection (calendar days). Over [`MAX_DELAY_DAYS`]: 409
/// `settlement_delay_out_of_range`.
pub fn reserve_release_instant(
    cal: &Calendar,
    collected_at: DateTime<Utc>,
    days: u32,
) -> DomainResult<DateTime<Utc>> {
    if days > MAX_DELAY_DAYS {
        return Err(delay_out_of_range(days));
    }
    let date: NaiveDate = cal
        .lagos_date(collected_at)
        .checked_add_days(Days::new(days as u64))
        .ok_or_else(|| delay_out_of_range(days))?;
    Ok(cal.settlement_instant(date))
}

/// What a capture posts and schedules: the ledger lines (net into
/// `pending`, less the reserve's share into `reserve`) and the releases.
pub struct CapturePlan {
    pub lines: Vec<LineSpec>,
    pub releases: Vec<ScheduledRelease>,
}

#[allow(clippy::too_many_arguments)]
pub fn plan_capture(
    cal: &Calendar,
    settings: &Settings,
    payment: Uuid,
    merchant: Uuid,
    mode: Mode,
    brand: Uuid,
    currency: Currency,
    gross: i64,
    fee: i64,
    net: i64,
    now: DateTime<Utc>,
) -> DomainResult<CapturePlan> {
    let reserve = settings
        .reserve
        .as_ref()
        .map(|r| (reserve_share(net, r.percent_bps), r.days))
        .unwrap_or((0, 0));
    let pending = net - reserve.0; // 0 <= reserve.0 <= max(net, 0)
    let mut lines = vec![LineSpec {
        brand,
        currency,
        bucket: Bucket::Pending,
        amount: pending,
        gross: Some(gross),
        fee: Some(fee),
    }];
    let delay = settings.settlement_delay_days.for_currency(currency);
    let mut releases = vec![ScheduledRelease {
        payment,
        merchant,
        mode,
        brand,
        currency,
        bucket: Bucket::Pending,
        amount: pending,
        due: cal.release_instant(now, delay)?,
        collected_at: now,
    }];
    if reserve.0 > 0 {
        lines.push(LineSpec {
            brand,
            currency,
            bucket: Bucket::Reserve,
            amount: reserve.0,
            gross: None,
            fee: None,
        });
        releases.push(ScheduledRelease {
            payment,
            merchant,
            mode,
            brand,
            currency,
            bucket: Bucket::Reserve,
            amount: reserve.0,
            due: reserve_release_instant(cal, now, reserve.1)?,
            collected_at: now,
        });
    }
    Ok(CapturePlan { lines, releases })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored_release() -> ScheduledRelease {
        ScheduledRelease {
            payment: Uuid::from_u128(1),
            merchant: Uuid::from_u128(2),
            mode: Mode::Test,
            brand: Uuid::from_u128(3),
            currency: Currency::NGN,
            bucket: Bucket::Reserve,
            amount: 12_500,
            due: "2025-03-05T07:00:00Z".parse().unwrap(),
            collected_at: "2025-03-03T09:00:00Z".parse().unwrap(),
        }
    }

    /// See [`crate::compact_layout`].
    #[test]
    fn a_scheduled_release_is_stored_compact_in_its_pinned_layout() {
        crate::compact_layout::assert_stored_compact(
            &stored_release(),
            concat!(
                "03100000000000000000000000000000000110000000000000000000000000000000020010000000",
                "000000000000000000000000030002a8c301e0d9bffc0c00a0beabfc0c00",
            ),
            concat!(
                "02100000000000000000000000000000000110000000000000000000000000000000020010000000",
                "000000000000000000000000030002a8c30114323032352d30332d30355430373a30303a30305a14",
                "323032352d30332d30335430393a30303a30305a",
            ),
        );
    }
}
