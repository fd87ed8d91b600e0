//! `releases`: scheduled releases, their timers and payment pointers.

use std::collections::HashSet;

use uuid::Uuid;

use kobo_storage::{decode, StoreError, Table};

use super::{hex, Checker};
use crate::ids::Mode;
use crate::ledger::release::{by_payment_key, ScheduledRelease};
use crate::ledger::Bucket;
use crate::timer::Timer;

pub(super) fn releases(c: &mut Checker) -> Result<(), StoreError> {
    let mut breaches = Vec::new();
    let mut per_payment: HashSet<(Uuid, Mode, Bucket, Uuid)> = HashSet::new();
    let mut n = 0;
    c.each(Table::ScheduledReleases, |k, v| {
        n += 1;
        let Ok(r) = decode::<ScheduledRelease>(v) else {
            breaches.push(format!("scheduled release {} does not decode", hex(k)));
            return Ok(());
        };
        let name = format!(
            "scheduled release of payment {} ({} {}, due {})",
            r.payment,
            r.bucket.as_str(),
            r.amount,
            r.due.to_rfc3339()
        );
        if r.key() != k {
            breaches.push(format!("{name} is stored under another key ({})", hex(k)));
        }
        if !per_payment.insert((r.merchant, r.mode, r.bucket, r.payment)) {
            breaches.push(format!(
                "{name}: the payment has more than one {} release scheduled",
                r.bucket.as_str()
            ));
        }
        match c.read.get(Table::Timers, &r.timer_key())? {
            None => breaches.push(format!("{name} has no timer: it would never be released")),
            Some(t) => match decode::<Timer>(&t) {
                Ok(t) if t.kind == r.timer_kind() && t.target == r.payment => {}
                _ => breaches.push(format!("{name}: its timer is of another kind or target")),
            },
        }
        if r.bucket == Bucket::Pending {
            match c.read.get(
                Table::ReleasesByPayment,
                &by_payment_key(r.merchant, r.mode, r.payment),
            )? {
                Some(p) if p == k => {}
                Some(_) => breaches.push(format!(
                    "{name}: the payment's release pointer names another release"
                )),
                None => breaches.push(format!("{name}: the payment's release pointer is missing")),
            }
        }
        Ok(())
    })?;
    let mut pointers = 0;
    c.each(Table::ReleasesByPayment, |k, v| {
        pointers += 1;
        if !c.exists(Table::ScheduledReleases, v)? {
            breaches.push(format!(
                "release pointer {} names a release that does not exist",
                hex(k)
            ));
        }
        Ok(())
    })?;
    c.examined("releases", n + pointers);
    for b in breaches {
        c.breach("releases", b);
    }
    Ok(())
}
