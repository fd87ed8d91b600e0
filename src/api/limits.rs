//! Rate limits (docs/api.md, "Rate limits"): token buckets from `governor`,
//! refilled in real time (not the manual clock).
//!
//! - Per caller, checked once per authenticated `/v1` call right after
//!   authentication ([`check_caller`], from `authenticate_for`): a secret
//!   key's bucket is its merchant and mode (rolling the key keeps it); a
//!   client secret's is its payment intent. The rate is the merchant's
//!   `rate_limits` setting for the mode (default 100/s live, 25/s test), read
//!   from the principal at check time, so an operator's change applies to
//!   the next request without a restart.
//! - Per client IP, on every route but `/healthz`, `/readyz` and `/metrics`
//!   ([`per_ip`], a middleware): `kobo serve --ip-rate-limit` (default
//!   500/s, 0 = off). The IP is the TCP peer's; `X-Forwarded-For` and
//!   `Forwarded` are not trusted. IPv6 callers share a bucket per /64.
//!
//! Each bucket holds one second's worth of requests (burst = rate). Over the
//! limit: 429 `rate_limited` with `Retry-After`, before the idempotency
//! wrapper runs, so nothing is saved under the Idempotency-Key.
//!
//! Memory stays bounded: a cleanup task drops full buckets
//! (`retain_recent`) every [`CLEANUP_EVERY`], and a limiter tracking more
//! than [`MAX_KEYS`] callers after that starts afresh.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, HttpRequest, ResponseError};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use parking_lot::Mutex;

use kobo_actors::query::{Principal, RateLimitKey};
use kobo_actors::DomainError;

use super::error::{ApiError, ApiResult};

/// Default of `kobo serve --ip-rate-limit`: requests per second per IP.
pub const DEFAULT_IP_PER_SECOND: u32 = 500;
/// Callers one limiter tracks at most (a few MiB).
pub const MAX_KEYS: usize = 100_000;
/// How often full buckets are dropped.
pub const CLEANUP_EVERY: Duration = Duration::from_secs(10);
/// Routes the per-IP limit leaves alone (probes and scrapes).
const UNLIMITED_PATHS: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

type Limiter<K, C> =
    RateLimiter<K, DefaultKeyedStateStore<K>, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// Keyed token buckets; one governor limiter per rate in use (a quota is
/// per limiter, and merchants' rates differ). `C` is real time but in unit
/// tests.
struct Buckets<K: Hash + Eq + Clone, C: Clock + Clone = DefaultClock> {
    clock: C,
    by_rate: Mutex<HashMap<NonZeroU32, Arc<Limiter<K, C>>>>,
}

impl<K: Hash + Eq + Clone, C: Clock + Clone> Buckets<K, C> {
    fn new(clock: C) -> Self {
        Buckets {
            clock,
            by_rate: Mutex::new(HashMap::new()),
        }
    }

    fn fresh(&self, rate: NonZeroU32) -> Arc<Limiter<K, C>> {
        Arc::new(RateLimiter::dashmap_with_clock(
            Quota::per_second(rate),
            self.clock.clone(),
        ))
    }

    fn limiter(&self, rate: NonZeroU32) -> Arc<Limiter<K, C>> {
        self.by_rate
            .lock()
            .entry(rate)
            .or_insert_with(|| self.fresh(rate))
            .clone()
    }

    /// Takes a token from `key`'s bucket of `rate` per second; `Err` holds
    /// the wait until one is there.
    fn check(&self, key: &K, rate: NonZeroU32) -> Result<(), Duration> {
        let mut limiter = self.limiter(rate);
        if limiter.len() >= MAX_KEYS {
            limiter.retain_recent();
            if limiter.len() >= MAX_KEYS {
                // So many callers at once that tracking them all would grow
                // without bound: start this rate's buckets afresh.
                tracing::warn!(
                    rate = rate.get(),
                    keys = limiter.len(),
                    "rate limiter full; its buckets start afresh"
                );
                let fresh = self.fresh(rate);
                self.by_rate.lock().insert(rate, fresh.clone());
                limiter = fresh;
            }
        }
        limiter
            .check_key(key)
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// Drops full buckets (a full bucket is the same as none) and limiters
    /// left empty and unused.
    fn cleanup(&self) {
        let limiters: Vec<_> = self.by_rate.lock().values().cloned().collect();
        for l in &limiters {
            l.retain_recent();
            l.shrink_to_fit();
        }
        drop(limiters);
        self.by_rate
            .lock()
            .retain(|_, l| !l.is_empty() || Arc::strong_count(l) > 1);
    }

    #[cfg(test)]
    fn keys(&self) -> usize {
        self.by_rate.lock().values().map(|l| l.len()).sum()
    }
}

/// The server's rate limiters (`web::Data<RateLimits>`).
pub struct RateLimits {
    /// Requests per second per IP; `None`: no per-IP limit.
    ip_per_second: Option<NonZeroU32>,
    ips: Buckets<IpAddr>,
    callers: Buckets<RateLimitKey>,
}

impl RateLimits {
    /// `ip_per_second` 0 turns the per-IP limit off.
    pub fn new(ip_per_second: u32) -> Self {
        RateLimits {
            ip_per_second: NonZeroU32::new(ip_per_second),
            ips: Buckets::new(DefaultClock::default()),
            callers: Buckets::new(DefaultClock::default()),
        }
    }

    /// Drops full buckets every [`CLEANUP_EVERY`] while the server runs.
    pub fn start_cleanup(limits: web::Data<RateLimits>) {
        actix_web::rt::spawn(async move {
            let mut every = tokio::time::interval(CLEANUP_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                limits.ips.cleanup();
                limits.callers.cleanup();
            }
        });
    }

    fn check_ip(&self, ip: IpAddr) -> Result<(), DomainError> {
        let Some(rate) = self.ip_per_second else {
            return Ok(());
        };
        self.ips
            .check(&bucket_ip(ip), rate)
            .map_err(|wait| DomainError::rate_limited("this IP address", wait))
    }

    fn check_caller(&self, p: &Principal) -> Result<(), DomainError> {
        let rate = p.merchant.settings.rate_limits.per_second(p.mode);
        // Settings bound the rate to 1..; a stored 0 would mean "refuse all",
        // which no setting can ask for: treat it as the minimum.
        let rate = NonZeroU32::new(rate).unwrap_or(NonZeroU32::MIN);
        let caller = p.rate_limit_key();
        self.callers.check(&caller, rate).map_err(|wait| {
            let who = match caller {
                RateLimitKey::Merchant(..) => "this API key",
                RateLimitKey::PaymentIntent(_) => "this payment's client secret or checkout page",
            };
            DomainError::rate_limited(who, wait)
        })
    }
}

/// The bucket of an IP: IPv4 (and IPv4-mapped IPv6) addresses each their
/// own; IPv6 per /64, the block one host usually holds.
pub(crate) fn bucket_ip(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

/// Counts an authenticated call against its caller's bucket; called once
/// per `/v1` call by `authenticate_for`. No limits registered (unit tests of
/// single handlers): no limit.
pub fn check_caller(req: &HttpRequest, principal: &Principal) -> ApiResult<()> {
    match req.app_data::<web::Data<RateLimits>>() {
        Some(limits) => limits.check_caller(principal).map_err(ApiError),
        None => Ok(()),
    }
}

/// The per-IP limit, on every route but [`UNLIMITED_PATHS`].
pub async fn per_ip<B: MessageBody>(
    req: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<EitherBody<B>>, actix_web::Error> {
    let refused = match (req.app_data::<web::Data<RateLimits>>(), req.peer_addr()) {
        (Some(limits), Some(peer)) if !UNLIMITED_PATHS.contains(&req.path()) => {
            limits.check_ip(peer.ip()).err()
        }
        _ => None,
    };
    match refused {
        Some(e) => {
            let response = ApiError(e).error_response();
            Ok(req.into_response(response).map_into_right_body())
        }
        None => Ok(next.call(req).await?.map_into_left_body()),
    }
}

#[cfg(test)]
mod tests {
    use governor::clock::FakeRelativeClock;

    use super::*;

    fn rate(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap()
    }

    fn buckets() -> (Buckets<u32, FakeRelativeClock>, FakeRelativeClock) {
        let clock = FakeRelativeClock::default();
        (Buckets::new(clock.clone()), clock)
    }

    #[test]
    fn a_bucket_holds_one_seconds_worth_and_then_says_how_long_to_wait() {
        let (b, clock) = buckets();
        for _ in 0..25 {
            b.check(&1, rate(25)).unwrap();
        }
        assert_eq!(b.check(&1, rate(25)), Err(Duration::from_millis(40)));
        // Another key and another rate have their own buckets.
        b.check(&2, rate(25)).unwrap();
        b.check(&1, rate(26)).unwrap();
        // One token comes back every 1/25 s.
        clock.advance(Duration::from_millis(40));
        b.check(&1, rate(25)).unwrap();
        assert!(b.check(&1, rate(25)).is_err());
    }

    #[test]
    fn cleanup_drops_full_buckets_and_idle_limiters() {
        let (b, clock) = buckets();
        for k in 0..100 {
            b.check(&k, rate(1000)).unwrap();
        }
        // One key drains at 1/s.
        b.check(&7, rate(1)).unwrap();
        clock.advance(Duration::from_millis(10));
        b.cleanup();
        assert_eq!(b.keys(), 1);
        assert_eq!(b.by_rate.lock().len(), 1);
        // Still limited after the cleanup.
        assert!(b.check(&7, rate(1)).is_err());
    }

    #[test]
    fn the_key_count_stays_bounded() {
        let (b, _clock) = buckets();
        for k in 0..(MAX_KEYS as u32 + 10) {
            b.check(&k, rate(1)).unwrap();
        }
        assert!(b.keys() <= MAX_KEYS);
    }

    #[test]
    fn ipv6_callers_share_a_bucket_per_64_and_mapped_ipv4_is_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(bucket_ip(a), bucket_ip(b));
        assert_ne!(bucket_ip(a), bucket_ip(c));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(bucket_ip(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
    }
}
