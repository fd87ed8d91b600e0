//! Sign-in throttles: token buckets (`governor`, real time) per email and
//! per client IP, checked before the password is. Over either: 429 page,
//! and the password is not checked (so guessing costs the guesser time,
//! not the server argon2 work).

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// Sign-in attempts per email: a burst of this many, then one more each
/// [`EMAIL_REFILL`].
pub const EMAIL_BURST: u32 = 5;
pub const EMAIL_REFILL: Duration = Duration::from_secs(60);
/// Sign-in attempts per client IP: a burst of this many, then one more
/// each [`IP_REFILL`].
pub const IP_BURST: u32 = 20;
pub const IP_REFILL: Duration = Duration::from_secs(6);
/// Keys a limiter tracks before idle ones are dropped.
const MAX_KEYS: usize = 100_000;

pub struct SignInThrottle {
    emails: DefaultKeyedRateLimiter<String>,
    ips: DefaultKeyedRateLimiter<IpAddr>,
}

impl Default for SignInThrottle {
    fn default() -> Self {
        Self::new()
    }
}

fn quota(burst: u32, refill: Duration) -> Quota {
    Quota::with_period(refill)
        .expect("a non-zero refill period")
        .allow_burst(NonZeroU32::new(burst).expect("a non-zero burst"))
}

impl SignInThrottle {
    pub fn new() -> Self {
        SignInThrottle {
            emails: RateLimiter::keyed(quota(EMAIL_BURST, EMAIL_REFILL)),
            ips: RateLimiter::keyed(quota(IP_BURST, IP_REFILL)),
        }
    }

    /// Takes one attempt from the IP's and the email's buckets; `Err` holds
    /// the wait before the next attempt is allowed.
    pub fn check(&self, ip: Option<IpAddr>, email: &str) -> Result<(), Duration> {
        for limiter in [self.emails.len(), self.ips.len()] {
            if limiter > MAX_KEYS {
                self.emails.retain_recent();
                self.ips.retain_recent();
            }
        }
        let now = DefaultClock::default().now();
        if let Some(ip) = ip {
            self.ips.check_key(&ip).map_err(|n| n.wait_time_from(now))?;
        }
        self.emails
            .check_key(&email.trim().to_lowercase())
            .map_err(|n| n.wait_time_from(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_email_gets_its_burst_then_waits_and_another_email_does_not() {
        let t = SignInThrottle::new();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..EMAIL_BURST {
            t.check(Some(ip), "a@example.com").unwrap();
        }
        assert!(t.check(Some(ip), "A@example.com ").is_err());
        t.check(Some(ip), "b@example.com").unwrap();
    }
}
