//! The subscription machine's table and property tests.

use chrono::{Datelike, TimeZone, Timelike};
use chrono_tz::Africa::Lagos;
use proptest::prelude::*;
use serde_json::Map;

use super::*;
use crate::ids::Mode;
use crate::money::Currency;

fn t(s: &str) -> DateTime<Utc> {
    s.parse().expect("RFC 3339")
}

fn terms(amount: i64, interval: Interval, count: u32, limit: Option<u32>) -> Terms {
    Terms {
        plan: Uuid::from_u128(7),
        name: "Gold".into(),
        amount,
        currency: Currency::NGN,
        interval,
        interval_count: count,
        invoice_limit: limit,
    }
}

fn sub(method: CollectionMethod, terms: Terms, at: DateTime<Utc>, trial: u32) -> Subscription {
    let mut s = Subscription {
        id: Uuid::from_u128(1),
        merchant: Uuid::from_u128(2),
        mode: Mode::Test,
        seq: 1,
        customer: Uuid::from_u128(3),
        brand: Uuid::from_u128(4),
        terms,
        collection_method: method,
        mandate: Some(Uuid::from_u128(5)),
        days_until_due: 7,
        status: S::Scheduled,
        start_at: at,
        trial_days: trial,
        trial_start: None,
        trial_end: None,
        trial_will_end_at: None,
        period: 0,
        current_period_start: at,
        current_period_end: at,
        anchor: lagos_date(at),
        anchor_period: 1,
        billed: 0,
        ever_paid: false,
        incomplete_expires_at: None,
        bills: Vec::new(),
        pending_change: None,
        cancel_at_period_end: false,
        canceled_at: None,
        cancellation_reason: None,
        ended_at: None,
        renewed_period: None,
        latest_invoice: None,
        metadata: Map::new(),
        created_at: at,
        updated_at: at,
        timer_at: None,
    };
    begin(&mut s, at, trial);
    s
}

fn run(s: &Subscription, c: Command, now: DateTime<Utc>) -> (Subscription, Vec<&'static str>) {
    let d = decide(s, &c, now).expect("decided");
    (d.after, d.events)
}

/// The actor's part, done at once: invoice `inv-<period>`, debits.
fn settle_work(mut s: Subscription, now: DateTime<Utc>) -> Subscription {
    while let Some(w) = work(&s, now) {
        let c = match w {
            Work::Invoice(p) => Command::Invoiced {
                period: p,
                invoice: Uuid::from_u128(1000 + p as u128),
            },
            Work::Charge { period, attempt } => Command::Charged {
                period,
                payment: Uuid::from_u128(((period as u128) << 16) + attempt as u128),
            },
            Work::Close(p, _) => Command::Closed { period: p },
        };
        s = run(&s, c, now).0;
    }
    s
}

#[test]
fn a_subscription_without_trial_is_incomplete_until_its_first_invoice_is_paid() {
    let at = t("2026-01-31T10:00:00Z");
    let s = sub(
        CollectionMethod::Mandate,
        terms(500_000, Interval::Month, 1, None),
        at,
        0,
    );
    assert_eq!(s.status, S::Incomplete);
    assert_eq!(s.current_period_end, t("2026-02-28T07:00:00Z"));
    let s = settle_work(s, at);
    let (s, ev) = run(
        &s,
        Command::News {
            paid: vec![1],
            failed: vec![],
        },
        at,
    );
    assert_eq!(
        (s.status, ev),
        (S::Active, vec![event::SUBSCRIPTION_ACTIVATED])
    );
}

#[test]
fn an_incomplete_subscription_is_canceled_after_23_hours_and_its_invoice_voided() {
    let at = t("2026-03-01T10:00:00Z");
    let s = settle_work(
        sub(
            CollectionMethod::SendInvoice,
            terms(1000, Interval::Month, 1, None),
            at,
            0,
        ),
        at,
    );
    assert_eq!(next_moment(&s), Some(at + Duration::hours(23)));
    let (s, ev) = run(&s, Command::Due, at + Duration::hours(23));
    assert_eq!(s.status, S::Canceled);
    assert_eq!(
        s.cancellation_reason,
        Some(CancellationReason::FirstPaymentNotMade)
    );
    assert_eq!(ev, vec![event::SUBSCRIPTION_CANCELED]);
    assert_eq!(work(&s, at), Some(Work::Close(1, Close::Void)));
}

#[test]
fn a_failed_debit_is_retried_1_3_5_and_7_days_after_then_the_subscription_is_canceled() {
    let at = t("2026-01-05T07:00:00Z");
    let s = sub(
        CollectionMethod::Mandate,
        terms(1000, Interval::Month, 1, None),
        at,
        0,
    );
    let s = settle_work(s, at);
    let (s, _) = run(
        &s,
        Command::News {
            paid: vec![1],
            failed: vec![],
        },
        at,
    );
    // Renewal on 5 Feb.
    let renew_at = t("2026-02-05T07:00:00Z");
    let (s, _) = run(&s, Command::Due, renew_at);
    assert_eq!(s.period, 2);
    let mut s = settle_work(s, renew_at);
    let mut fail_at = renew_at + Duration::minutes(1);
    let mut seen = Vec::new();
    for (n, day) in [1u32, 3, 5, 7].iter().enumerate() {
        let failed = Command::News {
            paid: vec![],
            failed: vec![2],
        };
        let (next, ev) = run(&s, failed, fail_at);
        s = next;
        if n == 0 {
            assert_eq!(ev, vec![event::SUBSCRIPTION_PAST_DUE]);
        }
        // Counted from the first failure's day, at 08:00 Lagos.
        let retry = t(&format!("2026-02-{:02}T07:00:00Z", 5 + day));
        assert_eq!(s.bills[0].charge_at, Some(retry));
        seen.push(retry);
        s = settle_work(s, retry);
        assert_eq!(s.bills[0].attempts, n as u32 + 2);
        fail_at = retry + Duration::minutes(1);
    }
    let (s, ev) = run(
        &s,
        Command::News {
            paid: vec![],
            failed: vec![2],
        },
        t("2026-02-12T07:01:00Z"),
    );
    assert_eq!(s.status, S::Canceled);
    assert_eq!(
        s.cancellation_reason,
        Some(CancellationReason::PaymentFailed)
    );
    assert_eq!(ev, vec![event::SUBSCRIPTION_CANCELED]);
    assert_eq!(
        work(&s, t("2026-02-12T07:01:00Z")),
        Some(Work::Close(2, Close::Uncollectible))
    );
    assert_eq!(seen.len(), 4);
}

#[test]
fn a_clock_jump_over_three_periods_bills_each_period_once_in_order() {
    let at = t("2026-01-10T07:00:00Z");
    let s = settle_work(
        sub(
            CollectionMethod::SendInvoice,
            terms(1000, Interval::Week, 1, None),
            at,
            0,
        ),
        at,
    );
    let (s, _) = run(
        &s,
        Command::News {
            paid: vec![1],
            failed: vec![],
        },
        at,
    );
    let later = at + Duration::days(21) + Duration::hours(1);
    let (s, _) = run(&s, Command::Due, later);
    let periods: Vec<u32> = s.bills.iter().map(|b| b.period).collect();
    assert_eq!(periods, vec![2, 3, 4]);
    assert_eq!(s.billed, 4);
    // Deciding again at the same instant bills nothing more.
    let (again, _) = run(&s, Command::Due, later);
    assert_eq!(again.bills.len(), 3);
}

#[test]
fn a_trial_sends_trial_will_end_three_days_before_and_bills_at_its_end() {
    let at = t("2026-04-01T09:00:00Z");
    let s = sub(
        CollectionMethod::Mandate,
        terms(1000, Interval::Month, 1, None),
        at,
        14,
    );
    assert_eq!(s.status, S::Trialing);
    assert_eq!(s.trial_end, Some(t("2026-04-15T07:00:00Z")));
    assert_eq!(next_moment(&s), Some(t("2026-04-12T07:00:00Z")));
    let (s, ev) = run(&s, Command::Due, t("2026-04-12T07:00:00Z"));
    assert_eq!(ev, vec![event::SUBSCRIPTION_TRIAL_WILL_END]);
    let (s, _) = run(&s, Command::Due, t("2026-04-15T07:00:00Z"));
    assert_eq!((s.status, s.period, s.bills.len()), (S::Trialing, 1, 1));
    let (s, ev) = run(
        &s,
        Command::News {
            paid: vec![1],
            failed: vec![],
        },
        t("2026-04-15T07:05:00Z"),
    );
    assert_eq!(
        (s.status, ev),
        (S::Active, vec![event::SUBSCRIPTION_ACTIVATED])
    );
}

#[test]
fn the_invoice_limit_completes_the_subscription_at_the_last_periods_end() {
    let at = t("2026-01-01T07:00:00Z");
    let mut s = sub(
        CollectionMethod::SendInvoice,
        terms(1000, Interval::Day, 1, Some(2)),
        at,
        0,
    );
    s = settle_work(s, at);
    s = run(
        &s,
        Command::News {
            paid: vec![1],
            failed: vec![],
        },
        at,
    )
    .0;
    s = run(&s, Command::Due, t("2026-01-02T07:00:00Z")).0;
    s = run(
        &s,
        Command::News {
            paid: vec![2],
            failed: vec![],
        },
        t("2026-01-02T08:00:00Z"),
    )
    .0;
    assert_eq!(s.status, S::Active);
    let (s, ev) = run(&s, Command::Due, t("2026-01-03T07:00:00Z"));
    assert_eq!(
        (s.status, ev),
        (S::Completed, vec![event::SUBSCRIPTION_COMPLETED])
    );
    assert_eq!(s.billed, 2);
}

#[test]
fn a_plan_change_now_credits_the_unused_time_rounded_down() {
    let at = t("2026-01-01T07:00:00Z");
    let mut s = sub(
        CollectionMethod::SendInvoice,
        terms(3100, Interval::Month, 1, None),
        at,
        0,
    );
    s = settle_work(s, at);
    s = run(
        &s,
        Command::News {
            paid: vec![1],
            failed: vec![],
        },
        at,
    )
    .0;
    // 10 of 31 days used: 21/31 of 3100 = 2100 exactly; a third of a
    // second more used rounds down.
    let now = t("2026-01-11T07:00:00Z");
    let new = Terms {
        plan: Uuid::from_u128(8),
        ..terms(10_000, Interval::Month, 1, None)
    };
    let (s, ev) = run(
        &s,
        Command::ChangePlan {
            terms: new,
            now: true,
        },
        now,
    );
    assert_eq!(ev, vec![event::SUBSCRIPTION_UPDATED]);
    assert_eq!(
        (s.period, s.bills[0].credit, s.bills[0].amount),
        (2, 2100, 10_000)
    );
    assert_eq!(s.current_period_end, t("2026-02-11T07:00:00Z"));
    assert_eq!(
        proration_credit(
            1000,
            at,
            at + Duration::seconds(3),
            at + Duration::seconds(1)
        ),
        666
    );
}

#[test]
fn cancel_at_period_end_cancels_at_the_renewal_without_billing() {
    let at = t("2026-01-01T07:00:00Z");
    let mut s = settle_work(
        sub(
            CollectionMethod::SendInvoice,
            terms(1000, Interval::Month, 1, None),
            at,
            0,
        ),
        at,
    );
    s = run(
        &s,
        Command::News {
            paid: vec![1],
            failed: vec![],
        },
        at,
    )
    .0;
    s = run(
        &s,
        Command::Cancel {
            at_period_end: true,
        },
        at,
    )
    .0;
    assert_eq!(s.status, S::Active);
    let (s, ev) = run(&s, Command::Due, t("2026-02-01T07:00:00Z"));
    assert_eq!(
        (s.status, s.billed, ev),
        (S::Canceled, 1, vec![event::SUBSCRIPTION_CANCELED])
    );
    assert!(decide(&s, &Command::Renew, at).is_err());
}

#[test]
fn renew_bills_once_per_period() {
    let at = t("2026-01-01T07:00:00Z");
    let mut s = settle_work(
        sub(
            CollectionMethod::SendInvoice,
            terms(1000, Interval::Month, 1, None),
            at,
            0,
        ),
        at,
    );
    s = run(
        &s,
        Command::News {
            paid: vec![1],
            failed: vec![],
        },
        at,
    )
    .0;
    let now = t("2026-01-05T12:00:00Z");
    let (s, _) = run(&s, Command::Renew, now);
    let (again, ev) = run(&s, Command::Renew, now);
    assert_eq!(
        (s.period, again.period, s.billed, again.billed),
        (2, 2, 2, 2)
    );
    assert!(ev.is_empty());
    assert_eq!(s.current_period_end, t("2026-02-05T07:00:00Z"));
}

proptest! {
    /// Every renewal is at 08:00 Lagos on the anchor's day, or on the last
    /// day of a month too short for it.
    #[test]
    fn billing_dates_keep_the_anchor_day_or_the_months_last(
        y in 2024i32..2030, m in 1u32..=12, d in 1u32..=31, k in 1u32..40, count in 1u32..=12,
    ) {
        let last = |y: i32, m: u32| (28..=31).rev().find(|d| NaiveDate::from_ymd_opt(y, m, *d).is_some()).unwrap();
        let d = d.min(last(y, m));
        let anchor = NaiveDate::from_ymd_opt(y, m, d).unwrap();
        let date = add_intervals(anchor, Interval::Month, count, k);
        let months = (m - 1 + count * k) as i32;
        let (ey, em) = (y + months / 12, (months % 12) as u32 + 1);
        prop_assert_eq!((date.year(), date.month()), (ey, em));
        prop_assert_eq!(date.day(), d.min(last(ey, em)));
        let local = settlement_instant(date).with_timezone(&Lagos);
        prop_assert_eq!((local.hour(), local.minute(), local.date_naive()), (8, 0, date));
    }

    /// However late the timer fires, every period up to now is billed
    /// once, in order, each at its own renewal time.
    #[test]
    fn a_late_timer_bills_every_missed_period_once_in_order(
        day in 1u32..=31, hours in 0i64..(24 * 400), interval in 0usize..4,
    ) {
        let interval = Interval::ALL[interval];
        let start = Lagos.with_ymd_and_hms(2026, 1, day, 9, 0, 0).unwrap().with_timezone(&Utc);
        let s = settle_work(sub(CollectionMethod::Mandate, terms(1000, interval, 1, None), start, 0), start);
        let s = run(&s, Command::News { paid: vec![1], failed: vec![] }, start).0;
        let now = start + Duration::hours(hours);
        let (after, _) = run(&s, Command::Due, now);
        let periods: Vec<u32> = after.bills.iter().map(|b| b.period).collect();
        let expected: Vec<u32> = (2..=after.period).collect();
        prop_assert_eq!(&periods, &expected);
        prop_assert!(after.current_period_end > now);
        prop_assert!(after.current_period_start <= now);
        for b in &after.bills {
            let at = b.charge_at.unwrap();
            let local = at.with_timezone(&Lagos);
            prop_assert_eq!((local.hour(), local.minute()), (8, 0));
        }
        let (again, _) = run(&after, Command::Due, now);
        prop_assert_eq!(again.bills.len(), after.bills.len());
    }
}
