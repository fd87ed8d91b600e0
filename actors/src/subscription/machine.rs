//! The subscription's pure state machine: `decide(state, command, now) ->
//! (state', events)`, the billing dates, and the work a state still asks
//! of the actor (`work`: a period's invoice to make, a debit to ask for,
//! an invoice to close) and its next moment (`next_moment`: the time of
//! its timer).
//!
//! Billing dates: a period ends at 08:00 Lagos, `k` intervals after the
//! anchor date, counted from the anchor each time (never from the last
//! date), so a billing day of 29-31 falls on the last day of a shorter
//! month and comes back after it (31 Jan, 28 Feb, 31 Mar).

use chrono::{DateTime, Days, Duration, Months, NaiveDate, Utc};
use uuid::Uuid;

use super::{
    Bill, CancellationReason, Close, CollectionMethod, PendingChange, Subscription,
    SubscriptionStatus as S, Terms,
};
use crate::calendar::{lagos_date, settlement_instant};
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event;
use crate::plan::Interval;

/// Days after a bill's first failed debit on which it is debited again.
pub const RETRY_DAYS: [u64; 4] = [1, 3, 5, 7];
/// An incomplete subscription is canceled this long after its start.
pub fn incomplete_window() -> Duration {
    Duration::hours(23)
}
/// A `send_invoice` bill is given up this long after it went past due.
pub const GIVE_UP_DAYS: i64 = 7;
/// `trial_will_end` is sent this many days before the trial ends.
pub const TRIAL_WILL_END_DAYS: i64 = 3;

/// The Lagos date `k` intervals of `count` `interval`s after `anchor`;
/// months clamp to the month's last day.
pub fn add_intervals(anchor: NaiveDate, interval: Interval, count: u32, k: u32) -> NaiveDate {
    let n = count * k;
    let out = match interval {
        Interval::Day => anchor.checked_add_days(Days::new(n as u64)),
        Interval::Week => anchor.checked_add_days(Days::new(7 * n as u64)),
        Interval::Month => anchor.checked_add_months(Months::new(n)),
        Interval::Year => anchor.checked_add_months(Months::new(12 * n)),
    };
    out.expect("billing dates stay within chrono's range")
}

/// When period `n` of `s` ends: 08:00 Lagos on its billing date.
pub fn period_end(s: &Subscription, n: u32) -> DateTime<Utc> {
    let t = &s.terms;
    let k = n + 1 - s.anchor_period;
    settlement_instant(add_intervals(s.anchor, t.interval, t.interval_count, k))
}

#[derive(Debug, Clone)]
pub enum Command {
    /// The subscription's timer: whatever is due by `now`.
    Due,
    /// What the actor read about the bills: periods whose invoice is paid,
    /// periods whose debit in flight failed.
    News {
        paid: Vec<u32>,
        failed: Vec<u32>,
    },
    Cancel {
        at_period_end: bool,
    },
    Update {
        mandate: Option<Uuid>,
        cancel_at_period_end: Option<bool>,
        metadata: Option<serde_json::Map<String, serde_json::Value>>,
        /// A plan change: the new terms, and whether at once (`now`) or
        /// at the period's end.
        plan: Option<(Terms, bool)>,
    },
    ChangePlan {
        terms: Terms,
        now: bool,
    },
    /// The test helper: the current period ends now (once per period).
    Renew,
    /// Bookkeeping of the actor's work (no event).
    Invoiced {
        period: u32,
        invoice: Uuid,
    },
    Charged {
        period: u32,
        payment: Uuid,
    },
    Closed {
        period: u32,
    },
    /// The mandate refused the debit (not active, the customer blocked,
    /// direct debit turned off): counted as a failed debit.
    ChargeRefused {
        period: u32,
    },
}

/// What the actor still has to do for a state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    /// Make (or find) period's invoice.
    Invoice(u32),
    /// Ask for debit `attempt` of period's invoice.
    Charge { period: u32, attempt: u32 },
    /// Close period's invoice (void or uncollectible) and drop the bill.
    Close(u32, Close),
}

pub struct Decision {
    pub after: Subscription,
    pub events: Vec<&'static str>,
}

fn ended_error(s: &Subscription) -> DomainError {
    DomainError::state(
        ErrorCode::SubscriptionEnded,
        format!(
            "this subscription is {}; it no longer changes",
            s.status.as_str()
        ),
    )
}

/// A subscription starting at `at`: a trial, or its first period billed.
pub fn begin(s: &mut Subscription, at: DateTime<Utc>, trial_days: u32) {
    s.start_at = at;
    s.trial_days = trial_days;
    if trial_days > 0 {
        let end = settlement_instant(lagos_date(at) + Days::new(trial_days as u64));
        s.status = S::Trialing;
        s.trial_start = Some(at);
        s.trial_end = Some(end);
        s.trial_will_end_at = Some((end - Duration::days(TRIAL_WILL_END_DAYS)).max(at));
        s.period = 0;
        s.current_period_start = at;
        s.current_period_end = end;
        s.anchor = lagos_date(end);
        s.anchor_period = 1;
    } else {
        s.status = S::Incomplete;
        s.period = 1;
        s.anchor = lagos_date(at);
        s.anchor_period = 1;
        s.current_period_start = at;
        s.current_period_end = period_end(s, 1);
        s.incomplete_expires_at = Some(at + incomplete_window());
        bill(s, at, 0);
    }
}

/// Bills period `s.period`, which starts at `at`, less `credit`.
fn bill(s: &mut Subscription, at: DateTime<Utc>, credit: i64) {
    let t = &s.terms;
    let credit = credit.min(t.amount);
    let due_date = lagos_date(at) + Days::new(s.days_until_due as u64);
    let (charge_at, past_due_at) = match s.collection_method {
        CollectionMethod::Mandate => (Some(at), None),
        CollectionMethod::SendInvoice => (None, Some(settlement_instant(due_date + Days::new(1)))),
    };
    s.bills.push(Bill {
        period: s.period,
        invoice: None,
        amount: t.amount,
        credit,
        description: format!("{} (period {})", t.name, s.period),
        currency: t.currency,
        due_date,
        charge_at,
        attempts: 0,
        charging: None,
        failures: 0,
        first_failure_at: None,
        past_due_at,
        give_up_at: past_due_at.map(|d| d + Duration::days(GIVE_UP_DAYS)),
        late: false,
        close: None,
    });
    s.billed += 1;
}

fn limit_reached(s: &Subscription) -> bool {
    s.terms.invoice_limit.is_some_and(|l| s.billed >= l)
}

fn end(s: &mut Subscription, status: S, reason: Option<CancellationReason>, now: DateTime<Utc>) {
    s.status = status;
    s.ended_at = Some(now);
    s.incomplete_expires_at = None;
    s.trial_will_end_at = None;
    s.pending_change = None;
    if status == S::Canceled {
        s.canceled_at = Some(now);
        s.cancellation_reason = reason;
    }
    let close = match reason {
        Some(CancellationReason::FirstPaymentNotMade) => Some(Close::Void),
        Some(CancellationReason::PaymentFailed) => Some(Close::Uncollectible),
        _ => None,
    };
    match close {
        // The unpaid invoices are closed so; the bills go once closed.
        Some(c) => s.bills.iter_mut().for_each(|b| {
            b.close = Some(c);
            b.charge_at = None;
        }),
        // Invoices left open for the merchant; no more debits.
        None => s.bills.clear(),
    }
}

/// The current period ended at `at`: cancel, complete, or bill the next.
fn renew(s: &mut Subscription, at: DateTime<Utc>) {
    if s.cancel_at_period_end {
        end(
            s,
            S::Canceled,
            Some(CancellationReason::CancellationRequested),
            at,
        );
        return;
    }
    if limit_reached(s) {
        if s.bills.is_empty() {
            end(s, S::Completed, None, at);
        }
        return;
    }
    if let Some(change) = s.pending_change.take() {
        let reanchor = change.terms.interval != s.terms.interval
            || change.terms.interval_count != s.terms.interval_count;
        s.terms = change.terms;
        if reanchor {
            s.anchor = lagos_date(at);
            s.anchor_period = s.period + 1;
        }
    }
    s.period += 1;
    s.current_period_start = at;
    s.current_period_end = period_end(s, s.period);
    s.trial_will_end_at = None;
    bill(s, at, 0);
}

/// The status the bills give a running subscription.
fn derive_status(s: &Subscription) -> S {
    if s.status.ended() || s.status == S::Scheduled {
        return s.status;
    }
    if !s.ever_paid && s.trial_start.is_none() {
        return S::Incomplete;
    }
    if s.bills.iter().any(|b| b.late && b.close.is_none()) {
        return S::PastDue;
    }
    if !s.ever_paid {
        return S::Trialing;
    }
    S::Active
}

/// Everything due by `now`, in time order.
fn due(s: &mut Subscription, now: DateTime<Utc>, events: &mut Vec<&'static str>) {
    if s.status == S::Scheduled && s.start_at <= now {
        let (at, trial) = (s.start_at, s.trial_days);
        begin(s, at, trial);
    }
    if s.status.ended() || s.status == S::Scheduled {
        return;
    }
    if s.trial_will_end_at.is_some_and(|t| t <= now) {
        s.trial_will_end_at = None;
        events.push(event::SUBSCRIPTION_TRIAL_WILL_END);
    }
    if s.status == S::Incomplete && s.incomplete_expires_at.is_some_and(|t| t <= now) {
        let at = s.incomplete_expires_at.unwrap_or(now);
        end(
            s,
            S::Canceled,
            Some(CancellationReason::FirstPaymentNotMade),
            at,
        );
        return;
    }
    for b in s.bills.iter_mut() {
        if b.past_due_at.is_some_and(|t| t <= now) && !b.late {
            b.late = true;
        }
    }
    if let Some(at) = s
        .bills
        .iter()
        .filter_map(|b| b.give_up_at.filter(|t| *t <= now))
        .min()
    {
        end(s, S::Canceled, Some(CancellationReason::PaymentFailed), at);
        return;
    }
    while !s.status.ended() && !limit_reached_waiting(s) && s.current_period_end <= now {
        let at = s.current_period_end;
        renew(s, at);
    }
}

/// Every period billed and the last one over, but a bill still unpaid:
/// the subscription waits for it (completed when paid).
fn limit_reached_waiting(s: &Subscription) -> bool {
    limit_reached(s) && !s.bills.is_empty()
}

fn bill_mut(s: &mut Subscription, period: u32) -> Option<&mut Bill> {
    s.bills.iter_mut().find(|b| b.period == period)
}

fn news(s: &mut Subscription, paid: &[u32], failed: &[u32], now: DateTime<Utc>) {
    for p in paid {
        if s.bills.iter().any(|b| b.period == *p && b.close.is_none()) {
            s.bills.retain(|b| b.period != *p);
            s.ever_paid = true;
            s.incomplete_expires_at = None;
        }
    }
    let mut give_up = false;
    for p in failed {
        let Some(b) = bill_mut(s, *p) else { continue };
        if b.charging.is_none() || b.close.is_some() {
            continue;
        }
        b.charging = None;
        b.failures += 1;
        b.late = true;
        let first = *b.first_failure_at.get_or_insert(now);
        match RETRY_DAYS.get(b.failures as usize - 1) {
            Some(days) => {
                b.charge_at = Some(settlement_instant(lagos_date(first) + Days::new(*days)))
            }
            None => give_up = true,
        }
    }
    if give_up && s.status != S::Incomplete {
        end(s, S::Canceled, Some(CancellationReason::PaymentFailed), now);
    }
    if limit_reached(s) && s.bills.is_empty() && s.current_period_end <= now && !s.status.ended() {
        end(s, S::Completed, None, now);
    }
}

/// Credit for the unused part of the current period (paid at `amount`),
/// rounded down to the kobo: `amount * unused seconds / period seconds`.
pub fn proration_credit(
    amount: i64,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> i64 {
    let total = (end - start).num_seconds();
    let unused = (end - now).num_seconds().clamp(0, total.max(0));
    if total <= 0 {
        return 0;
    }
    ((amount as i128 * unused as i128) / total as i128) as i64
}

fn change_plan(s: &mut Subscription, terms: Terms, now_: bool, now: DateTime<Utc>) {
    if !now_ {
        s.pending_change = (terms.plan != s.terms.plan).then_some(PendingChange { terms });
        return;
    }
    s.pending_change = None;
    if matches!(s.status, S::Scheduled | S::Trialing) && s.period == 0 {
        // A trial keeps running; the new plan bills at its end.
        s.terms = terms;
        return;
    }
    let current_paid = !s.bills.iter().any(|b| b.period == s.period);
    let credit = match current_paid {
        true => proration_credit(
            s.terms.amount,
            s.current_period_start,
            s.current_period_end,
            now,
        ),
        false => 0,
    };
    s.terms = terms;
    s.period += 1;
    s.anchor = lagos_date(now);
    s.anchor_period = s.period;
    s.current_period_start = now;
    s.current_period_end = period_end(s, s.period);
    bill(s, now, credit);
}

/// The state after `command` at `now`, and the events it raises.
pub fn decide(
    before: &Subscription,
    command: &Command,
    now: DateTime<Utc>,
) -> DomainResult<Decision> {
    let mut s = before.clone();
    let mut events = Vec::new();
    let bookkeeping = matches!(
        command,
        Command::Invoiced { .. } | Command::Charged { .. } | Command::Closed { .. }
    );
    let refuse_ended = matches!(
        command,
        Command::Cancel { .. }
            | Command::Update { .. }
            | Command::ChangePlan { .. }
            | Command::Renew
    );
    if refuse_ended && s.status.ended() {
        return Err(ended_error(&s));
    }
    match command {
        Command::Due => due(&mut s, now, &mut events),
        Command::News { paid, failed } => news(&mut s, paid, failed, now),
        Command::Cancel {
            at_period_end: false,
        } => end(
            &mut s,
            S::Canceled,
            Some(CancellationReason::CancellationRequested),
            now,
        ),
        Command::Cancel {
            at_period_end: true,
        } => {
            if s.status == S::Scheduled {
                end(
                    &mut s,
                    S::Canceled,
                    Some(CancellationReason::CancellationRequested),
                    now,
                );
            } else {
                s.cancel_at_period_end = true;
            }
        }
        Command::Update {
            mandate,
            cancel_at_period_end,
            metadata,
            plan,
        } => {
            if let Some((terms, at_once)) = plan {
                change_plan(&mut s, terms.clone(), *at_once, now);
            }
            if let Some(m) = mandate {
                s.mandate = Some(*m);
            }
            if let Some(c) = cancel_at_period_end {
                s.cancel_at_period_end = *c;
            }
            if let Some(md) = metadata {
                for (k, v) in md {
                    match v {
                        serde_json::Value::String(x) if x.is_empty() => {
                            s.metadata.remove(k);
                        }
                        v => {
                            s.metadata.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
        }
        Command::ChangePlan {
            terms,
            now: at_once,
        } => change_plan(&mut s, terms.clone(), *at_once, now),
        Command::Renew => {
            if s.renewed_period == Some(s.period) && s.status != S::Scheduled {
                return Ok(Decision { after: s, events });
            }
            if s.status == S::Scheduled {
                s.start_at = now;
                due(&mut s, now, &mut events);
            } else {
                s.anchor = lagos_date(now);
                s.anchor_period = s.period + 1;
                renew(&mut s, now);
            }
            s.renewed_period = Some(s.period);
        }
        Command::Invoiced { period, invoice } => {
            if let Some(b) = bill_mut(&mut s, *period) {
                b.invoice = Some(*invoice);
            }
            s.latest_invoice = Some(*invoice);
        }
        Command::Charged { period, payment } => {
            if let Some(b) = bill_mut(&mut s, *period) {
                b.charging = Some(*payment);
                b.attempts += 1;
                b.charge_at = None;
            }
        }
        Command::Closed { period } => s.bills.retain(|b| b.period != *period),
        Command::ChargeRefused { period } => {
            if let Some(b) = bill_mut(&mut s, *period) {
                b.attempts += 1;
                b.charging = Some(Uuid::nil());
            }
            news(&mut s, &[], &[*period], now);
        }
    }
    s.status = derive_status(&s);
    if s != *before {
        s.updated_at = now;
    }
    if !bookkeeping {
        status_events(before, &s, &mut events);
    }
    Ok(Decision { after: s, events })
}

fn status_events(before: &Subscription, after: &Subscription, events: &mut Vec<&'static str>) {
    let (b, a) = (before.status, after.status);
    let e = match a {
        _ if a == b => None,
        S::Canceled => Some(event::SUBSCRIPTION_CANCELED),
        S::Completed => Some(event::SUBSCRIPTION_COMPLETED),
        S::PastDue => Some(event::SUBSCRIPTION_PAST_DUE),
        S::Active if matches!(b, S::Incomplete | S::Trialing) => {
            Some(event::SUBSCRIPTION_ACTIVATED)
        }
        _ => None,
    };
    match e {
        Some(e) => events.push(e),
        None => {
            let mut x = before.view();
            let mut y = after.view();
            x.updated_at = y.updated_at;
            x.latest_invoice = y.latest_invoice;
            if x != y {
                events.push(event::SUBSCRIPTION_UPDATED);
            }
            let _ = &mut y;
        }
    }
}

/// The next thing the actor must do for `s` at `now`, if any.
pub fn work(s: &Subscription, now: DateTime<Utc>) -> Option<Work> {
    for b in &s.bills {
        if let Some(c) = b.close {
            return Some(Work::Close(b.period, c));
        }
        if b.invoice.is_none() {
            return Some(Work::Invoice(b.period));
        }
        let mandate = s.collection_method == CollectionMethod::Mandate;
        if mandate && b.charging.is_none() && b.charge_at.is_some_and(|t| t <= now) {
            return Some(Work::Charge {
                period: b.period,
                attempt: b.attempts,
            });
        }
    }
    None
}

/// When `s` next needs its timer (work pending is the caller's: `now`).
pub fn next_moment(s: &Subscription) -> Option<DateTime<Utc>> {
    if s.status.ended() {
        // Closing invoices is work; nothing else is due.
        return None;
    }
    let mut times: Vec<DateTime<Utc>> = Vec::new();
    if s.status == S::Scheduled {
        times.push(s.start_at);
        return times.into_iter().min();
    }
    times.extend(s.trial_will_end_at);
    if s.status == S::Incomplete {
        times.extend(s.incomplete_expires_at);
    }
    for b in &s.bills {
        if b.charging.is_none() {
            times.extend(b.charge_at);
        }
        if !b.late {
            times.extend(b.past_due_at);
        }
        times.extend(b.give_up_at);
    }
    if !limit_reached_waiting(s) {
        times.push(s.current_period_end);
    }
    times.into_iter().min()
}

#[cfg(test)]
mod tests;
