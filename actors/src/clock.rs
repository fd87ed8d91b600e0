//! The one source of time. `System` is real time; `Manual` moves only when an
//! operator advances it (the timer supervisor then runs every timer that came
//! due, in order). Times are kept to the microsecond.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};

#[derive(Clone)]
pub enum Clock {
    System,
    Manual(Arc<AtomicI64>),
}

impl Clock {
    pub fn manual(start: DateTime<Utc>) -> Clock {
        Clock::Manual(Arc::new(AtomicI64::new(start.timestamp_micros())))
    }

    pub fn now(&self) -> DateTime<Utc> {
        match self {
            Clock::System => from_micros(Utc::now().timestamp_micros()),
            Clock::Manual(t) => from_micros(t.load(Ordering::SeqCst)),
        }
    }

    pub fn is_manual(&self) -> bool {
        matches!(self, Clock::Manual(_))
    }

    /// Moves a manual clock forward (never back). No effect on the system clock.
    pub fn set(&self, to: DateTime<Utc>) {
        if let Clock::Manual(t) = self {
            t.fetch_max(to.timestamp_micros(), Ordering::SeqCst);
        }
    }
}

pub fn from_micros(us: i64) -> DateTime<Utc> {
    Utc.timestamp_micros(us)
        .single()
        .expect("micros within chrono's range")
}

pub fn micros(t: DateTime<Utc>) -> u64 {
    t.timestamp_micros().max(0) as u64
}
