//! Settlement: when captured money becomes available.
//!
//! A capture schedules its releases in the same batch that posts it: one
//! [`ScheduledRelease`] row per bucket it fills (`pending`, and `reserve`
//! when the merchant has a rolling reserve), each with a durable timer due
//! at the release instant (08:00 Lagos on the release date). When the timer
//! fires, the merchant's ledger actor posts a `release` entry (bucket out,
//! `available` in) and deletes the row and the timer in that same batch, so a
//! second run — a restart, a late timer, the test helper — finds nothing left
//! to release: nothing is ever released twice.

use chrono::{DateTime, Days, Duration, NaiveDate, Utc};
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
use crate::timers::{Timer, TimerKind};

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
    pub due: DateTime<Utc>,
    pub collected_at: DateTime<Utc>,
}

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
        batch.put(Table::ScheduledReleases, self.key(), self);
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

/// The keys of a merchant's scheduled releases from `bucket`, due at or
/// before `until` when given, oldest first.
pub fn scheduled_keys(
    kobo: &crate::runtime::Kobo,
    merchant: Uuid,
    mode: Mode,
    bucket: Bucket,
    until: Option<DateTime<Utc>>,
) -> crate::error::DomainResult<Vec<Vec<u8>>> {
    let read = kobo.store.read()?;
    let prefix = release_prefix(merchant, mode, bucket).build();
    let mut keys = Vec::new();
    read.scan_prefix(Table::ScheduledReleases, &prefix, None, |k, _| {
        let due = crate::clock::from_micros(kobo_storage::writer::u64_from(
            &k[prefix.len()..prefix.len() + 8],
        ) as i64);
        if until.is_some_and(|u| due > u) {
            return Ok(false);
        }
        keys.push(k.to_vec());
        Ok(true)
    })?;
    Ok(keys)
}

/// Releases the given scheduled releases through the merchant's ledger, in
/// chunks (each chunk one entry per payment, one commit). Answers how many
/// payments' money was released.
pub async fn release(
    kobo: &std::sync::Arc<crate::runtime::Kobo>,
    merchant: Uuid,
    mode: Mode,
    keys: Vec<Vec<u8>>,
) -> crate::error::DomainResult<usize> {
    let mut released = 0;
    for chunk in keys.chunks(RELEASE_CHUNK) {
        released += kobo
            .ledgers
            .send(
                kobo,
                (merchant, mode),
                crate::ledger::actor::ReleaseScheduled {
                    keys: chunk.to_vec(),
                },
            )
            .await??;
    }
    Ok(released)
}

/// Scheduled releases one ledger message carries.
pub const RELEASE_CHUNK: usize = 500;

/// The meta key holding when the next daily settlement run is due.
pub const META_SETTLEMENT_RUN: &[u8] = b"settlement_run_due";

/// Makes sure the daily settlement run is scheduled (once, at start-up).
pub async fn ensure_daily_run(kobo: &crate::runtime::Kobo) -> crate::error::DomainResult<()> {
    // The run is scheduled when its timer row exists (the meta row says
    // when it is due).
    let read = kobo.store.read()?;
    if let Some(due) = read.get(Table::Meta, META_SETTLEMENT_RUN)? {
        let due = crate::clock::from_micros(kobo_storage::writer::u64_from(&due) as i64);
        if read
            .get(
                Table::Timers,
                &Timer::key(due, TimerKind::SettlementRun, Uuid::nil()),
            )?
            .is_some()
        {
            return Ok(());
        }
    }
    drop(read);
    let due = kobo.calendar.next_settlement_instant(kobo.clock.now());
    let mut batch = Batch::new();
    schedule_daily_run(&mut batch, due);
    kobo.writer
        .commit(batch)
        .await
        .map_err(|e| crate::error::DomainError::internal(e.to_string()))
}

fn schedule_daily_run(batch: &mut Batch, due: DateTime<Utc>) {
    Timer::new(
        TimerKind::SettlementRun,
        Uuid::nil(),
        Uuid::nil(),
        Mode::Test,
    )
    .schedule(batch, due);
    batch.put_raw(
        Table::Meta,
        META_SETTLEMENT_RUN.to_vec(),
        micros(due).to_be_bytes().to_vec(),
    );
}

/// The daily run at 08:00 Lagos on business days (after that instant's
/// releases, which sort first): automatic settlement for every merchant
/// that has it, then the next run is scheduled. A run interrupted by a crash
/// runs again; it pays only what is available then, so nothing is paid twice.
pub async fn run_daily(
    kobo: &std::sync::Arc<crate::runtime::Kobo>,
    timer_key: Vec<u8>,
) -> crate::error::DomainResult<()> {
    let merchants: Vec<crate::merchant::Merchant> = {
        let read = kobo.store.read()?;
        let mut out = Vec::new();
        read.scan_prefix(Table::Merchants, &[], None, |_, v| {
            let m: crate::merchant::Merchant = kobo_storage::decode(v)?;
            if m.settings
                .auto_settlement
                .as_ref()
                .is_some_and(|a| a.enabled)
            {
                out.push(m);
            }
            Ok(true)
        })?;
        out
    };
    for m in &merchants {
        for mode in [Mode::Test, Mode::Live] {
            // Dollars first: converted naira join this morning's payout.
            if let Err(e) = crate::fx::settle_dollars(kobo, m, mode).await {
                tracing::warn!(merchant = %m.id, error = %e, "dollar settlement skipped");
            }
            if let Err(e) = crate::payout::service::auto_settle(kobo, m, mode).await {
                tracing::warn!(merchant = %m.id, error = %e, "automatic settlement skipped");
            }
        }
    }
    let now = kobo.clock.now();
    let mut batch = Batch::new();
    batch.delete(Table::Timers, timer_key);
    // Strictly after now: the next business day's 08:00.
    let next = kobo
        .calendar
        .next_settlement_instant(now + Duration::seconds(1));
    schedule_daily_run(&mut batch, next);
    kobo.writer
        .commit(batch)
        .await
        .map_err(|e| crate::error::DomainError::internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_share_rounds_half_up_and_is_zero_without_terms() {
        assert_eq!(reserve_share(10_000, 1_000), 1_000);
        assert_eq!(reserve_share(15, 1_000), 2); // 1.5 -> 2
        assert_eq!(reserve_share(14, 1_000), 1); // 1.4 -> 1
        assert_eq!(reserve_share(10_000, 0), 0);
    }

    #[test]
    fn a_capture_with_a_reserve_splits_the_net_and_schedules_both_releases() {
        let cal = Calendar::nigeria();
        let settings = Settings {
            reserve: Some(crate::merchant::ReserveTerms {
                percent_bps: 1_000,
                days: 90,
                reason: None,
                note: None,
            }),
            ..Settings::default()
        };
        // Friday 2026-11-20 12:00 Lagos.
        let now: DateTime<Utc> = "2026-11-20T11:00:00Z".parse().unwrap();
        let p = plan_capture(
            &cal,
            &settings,
            Uuid::nil(),
            Uuid::nil(),
            Mode::Test,
            Uuid::nil(),
            Currency::NGN,
            10_000,
            100,
            9_900,
            now,
        )
        .unwrap();
        assert_eq!(p.lines[0].amount + p.lines[1].amount, 9_900);
        assert_eq!(p.lines[1].amount, 990);
        // Naira T+1: Monday 08:00 Lagos = 07:00 UTC.
        assert_eq!(
            p.releases[0].due,
            "2026-11-23T07:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        // Reserve: 90 calendar days later, 08:00 Lagos.
        assert_eq!(
            p.releases[1].due,
            "2027-02-18T07:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
    }

    #[test]
    fn extreme_delays_and_reserves_are_refused_or_held_never_a_panic() {
        let cal = Calendar::nigeria();
        let now: DateTime<Utc> = "2026-11-20T11:00:00Z".parse().unwrap();
        let plan = |settings: &Settings, net: i64| {
            plan_capture(
                &cal,
                settings,
                Uuid::nil(),
                Uuid::nil(),
                Mode::Test,
                Uuid::nil(),
                Currency::NGN,
                net,
                0,
                net,
                now,
            )
        };
        for days in [u32::MAX, MAX_DELAY_DAYS + 1] {
            let mut s = Settings::default();
            s.settlement_delay_days.ngn = days;
            let e = plan(&s, 10_000).err().expect("refused");
            assert_eq!(e.code, "settlement_delay_out_of_range", "{days}");
            assert_eq!(e.kind, crate::error::ErrorKind::State);
            let reserve = Settings {
                reserve: Some(crate::merchant::ReserveTerms {
                    percent_bps: 1_000,
                    days,
                    reason: None,
                    note: None,
                }),
                ..Settings::default()
            };
            let e = plan(&reserve, 10_000).err().expect("refused");
            assert_eq!(e.code, "settlement_delay_out_of_range", "{days}");
            assert!(reserve_release_instant(&cal, now, days).is_err());
        }
        // The longest delay taken is computed.
        let mut s = Settings::default();
        s.settlement_delay_days.ngn = MAX_DELAY_DAYS;
        assert!(plan(&s, 10_000).unwrap().releases[0].due > now);
        assert!(reserve_release_instant(&cal, now, MAX_DELAY_DAYS).unwrap() > now);
        // A reserve share never exceeds the net, whatever the terms say.
        assert_eq!(reserve_share(i64::MAX, 10_000), i64::MAX);
        assert_eq!(reserve_share(i64::MAX, i64::MAX), i64::MAX);
        assert_eq!(reserve_share(100, 20_000), 100);
        let all = Settings {
            reserve: Some(crate::merchant::ReserveTerms {
                percent_bps: 10_000,
                days: 1,
                reason: None,
                note: None,
            }),
            ..Settings::default()
        };
        let p = plan(&all, i64::MAX).unwrap();
        assert_eq!(p.lines[0].amount, 0);
        assert_eq!(p.lines[1].amount, i64::MAX);
    }

    fn scheduled(kobo: &crate::runtime::Kobo) -> Option<DateTime<Utc>> {
        let read = kobo.store.read().unwrap();
        let due = read.get(Table::Meta, META_SETTLEMENT_RUN).unwrap()?;
        let due = crate::clock::from_micros(kobo_storage::writer::u64_from(&due) as i64);
        read.get(
            Table::Timers,
            &Timer::key(due, TimerKind::SettlementRun, Uuid::nil()),
        )
        .unwrap()
        .map(|_| due)
    }

    #[tokio::test]
    async fn the_daily_run_is_scheduled_once_and_again_when_its_timer_was_lost() {
        let dir = tempfile::tempdir().unwrap();
        let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
        ensure_daily_run(&kobo).await.unwrap();
        // Wednesday 25 November 2026 10:00 UTC: next run Thursday 08:00 Lagos.
        let due = scheduled(&kobo).expect("scheduled");
        assert_eq!(
            due,
            "2026-11-26T07:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        ensure_daily_run(&kobo).await.unwrap();
        assert_eq!(scheduled(&kobo), Some(due));
        // The timer row is gone (a run that failed dropped it) while the
        // meta row still names it: start-up schedules a new run.
        let mut b = Batch::new();
        b.delete(
            Table::Timers,
            Timer::key(due, TimerKind::SettlementRun, Uuid::nil()),
        );
        kobo.writer.commit(b).await.unwrap();
        assert_eq!(scheduled(&kobo), None);
        ensure_daily_run(&kobo).await.unwrap();
        assert_eq!(scheduled(&kobo), Some(due));
    }
}
