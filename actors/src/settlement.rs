//! Settlement: releasing scheduled money now, the daily 08:00 run
//! (dollar settlement, then automatic naira payouts) and its schedule. The
//! release rows themselves belong to the ledger ([`crate::ledger::release`]).

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use kobo_storage::fence::{shard_of, Ownership, SHARDS};
use kobo_storage::{Batch, Table};

use crate::clock::micros;
use crate::env::Env;
use crate::error::{DomainResult, ErrorCode};
use crate::fx::{brands_with_dollars, convert, current_rate, ngn_for, Convert};
use crate::ids::Mode;
use crate::ledger::actor::Ledgers;
use crate::ledger::release::release_prefix;
use crate::ledger::Bucket;
use crate::merchant::{Merchant, UsdSettlement};
use crate::payout::actor::PayoutActor;
use crate::registry::Registry;
use crate::timer::{Timer, TimerKind};

/// What the daily run reaches: the ledgers, payouts (automatic naira
/// settlement), FX and crypto payouts (dollar settlement).
pub struct Settlement {
    pub env: Arc<Env>,
    pub ledgers: Ledgers,
    pub payouts: Arc<Registry<PayoutActor>>,
    pub fx: Arc<crate::fx::Fx>,
    pub crypto_payouts: crate::usdt::service::CryptoPayouts,
    /// Shards acquired whose daily runs the next timer pass ensures
    /// ([`note_acquired`]).
    pub acquired: parking_lot::Mutex<std::collections::BTreeSet<u16>>,
}

/// The keys of a merchant's scheduled releases from `bucket`, due at or
/// before `until` when given, oldest first.
pub fn scheduled_keys(
    kobo: &Env,
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
    ledgers: &Ledgers,
    merchant: Uuid,
    mode: Mode,
    keys: Vec<Vec<u8>>,
) -> crate::error::DomainResult<usize> {
    let mut released = 0;
    for chunk in keys.chunks(RELEASE_CHUNK) {
        released += ledgers
            .send(
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

/// The meta key holding when the next daily settlement run is due (the
/// nil anchor's; see [`run_meta_key`]).
pub const META_SETTLEMENT_RUN: &[u8] = b"settlement_run_due";

/// The anchor of `shard`'s daily run: the id its timer is filed under, all
/// zero but bytes 14..16 (the shard, big-endian), so it falls in `shard`
/// and shard 0's anchor is the nil id (the single-process run's).
pub fn anchor(shard: u16) -> Uuid {
    let mut b = [0u8; 16];
    b[14..16].copy_from_slice(&shard.to_be_bytes());
    Uuid::from_bytes(b)
}

/// The meta key holding when `anchor`'s next run is due: the nil anchor
/// keeps [`META_SETTLEMENT_RUN`] (so stores from before clusters keep
/// their schedule), other anchors append their shard.
pub fn run_meta_key(anchor: Uuid) -> Vec<u8> {
    let mut key = META_SETTLEMENT_RUN.to_vec();
    if !anchor.is_nil() {
        key.push(b'/');
        key.extend_from_slice(&anchor.as_bytes()[14..16]);
    }
    key
}

/// Whether the run filed under `anchor` settles `merchant`: in a single
/// process the one run settles every merchant; in a cluster each shard's
/// run settles that shard's merchants.
pub fn settles(cluster: bool, anchor: Uuid, merchant: Uuid) -> bool {
    !cluster || shard_of(merchant.as_bytes()) == shard_of(anchor.as_bytes())
}

/// The anchors of the runs this node keeps: the nil anchor in a single
/// process, the anchor of every shard it owns in a cluster.
fn owned_anchors(env: &Env) -> Vec<Uuid> {
    match env.cluster.get() {
        None => vec![Uuid::nil()],
        Some(view) => (0..SHARDS)
            .filter(|&s| view.token(s).is_some())
            .map(anchor)
            .collect(),
    }
}

/// Makes sure the daily settlement runs this node keeps are scheduled (at
/// start-up, and in a cluster after it acquires shards): one run in a
/// single process, one per owned shard in a cluster. A run already
/// scheduled is left alone.
pub async fn ensure_daily_run(kobo: &Env) -> crate::error::DomainResult<()> {
    for anchor in owned_anchors(kobo) {
        if let Some(batch) = run_batch_if_absent(kobo, anchor)? {
            kobo.writer
                .commit(batch)
                .await
                .map_err(crate::error::DomainError::from)?;
        }
    }
    Ok(())
}

/// Shards acquired since the last timer pass: their runs are ensured by
/// [`ensure_acquired`] (the membership thread cannot, as the shards are
/// not yet held while it reports them).
pub fn note_acquired(kobo: &Settlement, shards: &[u16]) {
    kobo.acquired.lock().extend(shards.iter().copied());
}

/// Ensures the daily runs of the shards noted by [`note_acquired`] that
/// this node still owns (called at the start of every timer pass). A
/// shard whose run could not be scheduled is kept for the next pass.
pub async fn ensure_acquired(kobo: &Settlement) {
    let shards = std::mem::take(&mut *kobo.acquired.lock());
    let Some(view) = kobo.env.cluster.get() else {
        return;
    };
    for shard in shards {
        if view.token(shard).is_none() {
            continue;
        }
        let outcome = match run_batch_if_absent(&kobo.env, anchor(shard)) {
            Ok(Some(batch)) => kobo.env.writer.commit(batch).await.map_err(Into::into),
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = outcome {
            let e: crate::error::DomainError = e;
            tracing::warn!(shard, error = %e, "scheduling the shard's settlement run");
            kobo.acquired.lock().insert(shard);
        }
    }
}

/// The batch scheduling `anchor`'s daily run, unless its timer row exists
/// (the meta row says when it is due). The timer key must still be absent
/// when it commits, so a second try never duplicates it.
fn run_batch_if_absent(kobo: &Env, anchor: Uuid) -> crate::error::DomainResult<Option<Batch>> {
    let meta_key = run_meta_key(anchor);
    let read = kobo.store.read()?;
    if let Some(due) = read.get(Table::Meta, &meta_key)? {
        let due = crate::clock::from_micros(kobo_storage::writer::u64_from(&due) as i64);
        if read
            .get(
                Table::Timers,
                &Timer::key(due, TimerKind::SettlementRun, anchor),
            )?
            .is_some()
        {
            return Ok(None);
        }
    }
    drop(read);
    let due = kobo.calendar.next_settlement_instant(kobo.clock.now());
    let mut batch = Batch::new();
    batch.owned_by(anchor.as_bytes());
    batch.require_absent(
        Table::Timers,
        Timer::key(due, TimerKind::SettlementRun, anchor),
    );
    schedule_daily_run(&mut batch, anchor, due);
    Ok(Some(batch))
}

fn schedule_daily_run(batch: &mut Batch, anchor: Uuid, due: DateTime<Utc>) {
    Timer::new(TimerKind::SettlementRun, anchor, anchor, Mode::Test).schedule(batch, due);
    batch.put_raw(
        Table::Meta,
        run_meta_key(anchor),
        micros(due).to_be_bytes().to_vec(),
    );
}

/// The daily run at 08:00 Lagos on business days (after that instant's
/// releases, which sort first): automatic settlement for every merchant
/// the run filed under `anchor` settles ([`settles`]) that has it, then
/// that anchor's next run is scheduled. A run interrupted by a crash runs
/// again; it pays only what is available then, so nothing is paid twice.
pub async fn run_daily(
    kobo: &Settlement,
    timer_key: Vec<u8>,
    anchor: Uuid,
) -> crate::error::DomainResult<()> {
    let cluster = kobo.env.cluster.get().is_some();
    let merchants: Vec<crate::merchant::Merchant> = {
        let read = kobo.env.store.read()?;
        let mut out = Vec::new();
        read.scan_prefix(Table::Merchants, &[], None, |_, v| {
            let m: crate::merchant::Merchant = kobo_storage::decode(v)?;
            if settles(cluster, anchor, m.id)
                && m.settings
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
            if let Err(e) = settle_dollars(kobo, m, mode).await {
                tracing::warn!(merchant = %m.id, error = %e, "dollar settlement skipped");
            }
            if let Err(e) = crate::payout::service::auto_settle(kobo.payouts.deps(), m, mode).await
            {
                tracing::warn!(merchant = %m.id, error = %e, "automatic settlement skipped");
            }
        }
    }
    let now = kobo.env.clock.now();
    let mut batch = Batch::new();
    batch.owned_by(anchor.as_bytes());
    batch.delete(Table::Timers, timer_key);
    // Strictly after now: the next business day's 08:00.
    let next = kobo
        .env
        .calendar
        .next_settlement_instant(now + Duration::seconds(1));
    schedule_daily_run(&mut batch, anchor, next);
    kobo.env
        .writer
        .commit(batch)
        .await
        .map_err(crate::error::DomainError::from)
}

#[cfg(test)]
mod run_tests;

/// What dollar settlement did for one merchant and mode.
#[derive(Debug, Clone, Default)]
pub struct DollarSettlement {
    pub conversions: Vec<Uuid>,
    pub crypto_payouts: Vec<Uuid>,
}

/// Dollar settlement (`auto_settlement.usd`), at the daily run before the
/// naira settlement, for merchants with automatic settlement enabled: each
/// brand's available dollars are kept, converted to naira at the current
/// rate (which then joins that morning's naira settlement), or sent as USDT
/// to `usdt.settle_wallet`. Only what is available at that moment moves, so
/// a second run the same morning finds nothing. What cannot be done (no
/// rate, no wallet, USDT off) is skipped with a warning and the dollars are
/// kept.
pub async fn settle_dollars(
    kobo: &Settlement,
    merchant: &Merchant,
    mode: Mode,
) -> DomainResult<DollarSettlement> {
    let mut done = DollarSettlement::default();
    let Some(auto) = merchant
        .settings
        .auto_settlement
        .as_ref()
        .filter(|a| a.enabled)
    else {
        return Ok(done);
    };
    match auto.usd {
        UsdSettlement::Keep => {}
        UsdSettlement::Convert => done.conversions = convert_dollars(kobo, merchant, mode).await?,
        UsdSettlement::Usdt => done.crypto_payouts = send_dollars(kobo, merchant, mode).await?,
    }
    Ok(done)
}

/// Converts each brand's available dollars at the current rate; answers
/// the conversions made.
async fn convert_dollars(
    kobo: &Settlement,
    merchant: &Merchant,
    mode: Mode,
) -> DomainResult<Vec<Uuid>> {
    let mut made = Vec::new();
    for (brand, usd) in brands_with_dollars(&kobo.env, merchant.id, mode)? {
        // A rate published between the read and the conversion is taken on
        // the next try.
        for _ in 0..3 {
            let Some(rate) = current_rate(&kobo.env)? else {
                tracing::warn!(merchant = %merchant.id, "dollar settlement: no rate published; dollars kept");
                return Ok(made);
            };
            if ngn_for(usd, rate.rate) < 1 {
                break;
            }
            let req = Convert {
                usd_amount: usd,
                rate_id: rate.id,
                brand: Some(brand),
                automatic: true,
            };
            match convert(&kobo.fx, merchant, mode, req, None).await {
                Ok(c) => {
                    made.push(c.view().id);
                    break;
                }
                Err(e) if e.code == ErrorCode::RateChanged => continue,
                Err(e) => {
                    tracing::warn!(merchant = %merchant.id, %brand, error = %e, "dollar settlement: conversion skipped");
                    break;
                }
            }
        }
    }
    Ok(made)
}

/// Sends each brand's available dollars as USDT to `usdt.settle_wallet`;
/// answers the crypto payouts made.
async fn send_dollars(
    kobo: &Settlement,
    merchant: &Merchant,
    mode: Mode,
) -> DomainResult<Vec<Uuid>> {
    let settings = crate::usdt::settings_of(&merchant.settings.usdt);
    let wallet = match settings.settle_wallet {
        Some(w) if settings.enabled => crate::usdt::service::load_wallet(&kobo.env, w)?
            .filter(|w| w.merchant == merchant.id && w.mode == mode && w.is_active()),
        _ => None,
    };
    let Some(wallet) = wallet else {
        if !brands_with_dollars(&kobo.env, merchant.id, mode)?.is_empty() {
            tracing::warn!(merchant = %merchant.id, ?mode, "dollar settlement: USDT is off or usdt.settle_wallet names no wallet of this mode; dollars kept");
        }
        return Ok(Vec::new());
    };
    let mut made = Vec::new();
    for (brand, usd) in brands_with_dollars(&kobo.env, merchant.id, mode)? {
        if crate::usdt::quote(usd, settings.fee_bps).usdt_amount < 1 {
            continue;
        }
        let req = crate::usdt::service::CreateCryptoPayout {
            usd_amount: usd,
            wallet: wallet.id,
            brand: Some(brand),
            automatic: true,
        };
        let payouts = &kobo.crypto_payouts;
        match crate::usdt::service::create_payout(payouts, merchant, mode, req, None).await {
            Ok(p) => made.push(p.view().id),
            Err(e) => {
                tracing::warn!(merchant = %merchant.id, %brand, error = %e, "dollar settlement: USDT payout skipped")
            }
        }
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calendar::{Calendar, MAX_DELAY_DAYS};
    use crate::ledger::release::*;
    use crate::merchant::Settings;
    use crate::money::Currency;

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

    fn scheduled(kobo: &Env) -> Option<DateTime<Utc>> {
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
