//! The node loop's time source: monotonic, and manual in tests so that
//! lease deadlines are tested by moving time, never by sleeping.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

pub trait TimeSource: Send + Sync + 'static {
    fn now(&self) -> Instant;
}

/// The process's monotonic clock.
pub struct SystemTime;

impl TimeSource for SystemTime {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Time that moves only when told to.
#[derive(Clone)]
pub struct ManualTime(Arc<Mutex<Instant>>);

impl Default for ManualTime {
    fn default() -> Self {
        ManualTime(Arc::new(Mutex::new(Instant::now())))
    }
}

impl ManualTime {
    pub fn advance(&self, by: Duration) {
        *self.0.lock() += by;
    }

    /// The current instant (for tests' arithmetic).
    pub fn now_for_tests(&self) -> Instant {
        *self.0.lock()
    }
}

impl TimeSource for ManualTime {
    fn now(&self) -> Instant {
        *self.0.lock()
    }
}
