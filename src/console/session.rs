//! Console sessions: the operator signs in with the admin token and gets a
//! random session token in an HttpOnly, SameSite=Strict cookie (Secure over
//! HTTPS), kept server-side with its CSRF token and expiry. Sign-in is
//! rate limited per IP; its own form carries a CSRF token too (a random
//! value in a short-lived cookie and in the form: both must match).
//!
//! Session time is the service clock (so a manual clock's advance expires
//! sessions in tests); when the console itself moves a manual clock, the
//! session moves with it ([`Sessions::shift`]).
//!
//! Sessions are durable: each is written to `console_sessions` (by the
//! token's SHA-256, with the SHA-256 of the admin token it was opened
//! with) when opened, shifted or ended, and its last use at most once a
//! minute; a restart loads the live ones whose admin token is still the
//! server's (a new admin token ends every session). The map in memory is
//! the working copy.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;

use actix_web::cookie::{Cookie, SameSite};
use actix_web::HttpRequest;
use chrono::{DateTime, Duration, Utc};
use governor::clock::DefaultClock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use parking_lot::Mutex;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use kobo_actors::runtime::Kobo;
use kobo_storage::{Batch, Table};

/// The session cookie.
pub const COOKIE: &str = "kobo_console";
/// The sign-in form's CSRF cookie.
pub const SIGN_IN_COOKIE: &str = "kobo_console_sign_in";
/// Idle this long (service clock), a session ends.
pub const IDLE_MINUTES: i64 = 30;
/// However busy, a session ends this long after sign-in.
pub const MAX_AGE_HOURS: i64 = 12;
/// Sessions held at most (the oldest is dropped beyond).
pub const MAX_SESSIONS: usize = 1024;
/// Sign-in attempts per IP per minute (a burst of that many, then one
/// every 60/N seconds).
pub const SIGN_INS_PER_MINUTE: u32 = 5;

type Limiter = RateLimiter<IpAddr, DefaultKeyedStateStore<IpAddr>, DefaultClock, NoOpMiddleware>;

/// Last use is written at most this often (a page view is a read).
const TOUCH_EVERY_SECONDS: i64 = 60;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Session {
    /// Put in every form, checked on every POST.
    pub csrf: String,
    created: DateTime<Utc>,
    last_seen: DateTime<Utc>,
    /// SHA-256 (hex) of the admin token the session was opened with.
    #[serde(default)]
    admin: String,
    /// `last_seen` as last written to the store.
    #[serde(skip)]
    stored_seen: Option<DateTime<Utc>>,
}

impl Session {
    fn live_at(&self, now: DateTime<Utc>) -> bool {
        now < self.last_seen + Duration::minutes(IDLE_MINUTES)
            && now < self.created + Duration::hours(MAX_AGE_HOURS)
    }
}

pub struct Sessions {
    /// By the SHA-256 of the cookie's token (the token itself is kept
    /// nowhere on the server).
    map: Mutex<HashMap<[u8; 32], Session>>,
    sign_ins: Limiter,
    /// Where sessions are kept, and the SHA-256 (hex) of the server's
    /// admin token (`None`: in memory only, for unit tests).
    store: Option<(Arc<Kobo>, String)>,
}

impl Default for Sessions {
    fn default() -> Self {
        Self::new()
    }
}

/// 32 random bytes from the OS, hex.
pub fn random_token() -> String {
    let mut b = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut b);
    hex::encode(b)
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Whether two secrets are equal, compared as digests (the time taken says
/// nothing about either); empty never matches.
pub fn same_secret(a: &str, b: &str) -> bool {
    !a.is_empty() && !b.is_empty() && digest(a) == digest(b)
}

impl Sessions {
    pub fn new() -> Self {
        let per_minute = NonZeroU32::new(SIGN_INS_PER_MINUTE).expect("non-zero");
        Sessions {
            map: Mutex::new(HashMap::new()),
            sign_ins: RateLimiter::keyed(Quota::per_minute(per_minute)),
            store: None,
        }
    }

    /// Sessions kept in the store: loads the live ones opened with
    /// `admin_token`, and deletes the expired and those of another token.
    pub async fn durable(kobo: Arc<Kobo>, admin_token: &str) -> Result<Self, String> {
        let admin = hex::encode(digest(admin_token));
        let now = kobo.clock.now();
        let mut live = HashMap::new();
        let mut gone = Batch::new();
        let read = kobo.store.read().map_err(|e| e.to_string())?;
        read.scan_prefix(Table::ConsoleSessions, &[], None, |k, v| {
            let s = kobo_storage::decode::<Session>(v).ok();
            match (<[u8; 32]>::try_from(k), s) {
                (Ok(key), Some(mut s)) if s.admin == admin && s.live_at(now) => {
                    s.stored_seen = Some(s.last_seen);
                    live.insert(key, s);
                }
                _ => {
                    gone.delete(Table::ConsoleSessions, k.to_vec());
                }
            }
            Ok(true)
        })
        .map_err(|e| e.to_string())?;
        drop(read);
        if !gone.is_empty() {
            kobo.writer.commit(gone).await.map_err(|e| e.to_string())?;
        }
        let mut sessions = Sessions::new();
        sessions.map = Mutex::new(live);
        sessions.store = Some((kobo, admin));
        Ok(sessions)
    }

    /// Writes (or with `None` deletes) the session under `key`; awaited
    /// when `wait`, else in the background.
    async fn keep(&self, key: [u8; 32], session: Option<Session>, wait: bool) {
        let Some((kobo, _)) = &self.store else {
            return;
        };
        let mut batch = Batch::new();
        match &session {
            Some(s) => batch.put(Table::ConsoleSessions, key.to_vec(), s),
            None => batch.delete(Table::ConsoleSessions, key.to_vec()),
        };
        let kobo = kobo.clone();
        let write = async move {
            if let Err(e) = kobo.writer.commit(batch).await {
                tracing::error!(error = %e, "a console session was not saved");
            }
        };
        if wait {
            write.await;
        } else {
            actix_web::rt::spawn(write);
        }
    }

    /// Counts a sign-in attempt from `ip`; `Err(seconds)` to wait when
    /// there were too many.
    pub fn allow_sign_in(&self, ip: IpAddr) -> Result<(), u64> {
        if self.sign_ins.len() > 10_000 {
            self.sign_ins.retain_recent();
        }
        let ip = crate::api::limits::bucket_ip(ip);
        self.sign_ins.check_key(&ip).map_err(|not_until| {
            use governor::clock::Clock;
            not_until
                .wait_time_from(DefaultClock::default().now())
                .as_secs()
                .max(1)
        })
    }

    /// A new session, saved before it is answered; answers its token (for
    /// the cookie).
    pub async fn create(&self, now: DateTime<Utc>) -> String {
        let token = random_token();
        let session = Session {
            csrf: random_token(),
            created: now,
            last_seen: now,
            admin: self
                .store
                .as_ref()
                .map(|(_, a)| a.clone())
                .unwrap_or_default(),
            stored_seen: Some(now),
        };
        let dropped = {
            let mut map = self.map.lock();
            let before: Vec<[u8; 32]> = map.keys().copied().collect();
            map.retain(|_, s| s.live_at(now));
            if map.len() >= MAX_SESSIONS {
                if let Some(oldest) = map.iter().min_by_key(|(_, s)| s.created).map(|(k, _)| *k) {
                    map.remove(&oldest);
                }
            }
            map.insert(digest(&token), session.clone());
            before
                .into_iter()
                .filter(|k| !map.contains_key(k))
                .collect::<Vec<_>>()
        };
        for k in dropped {
            self.keep(k, None, false).await;
        }
        self.keep(digest(&token), Some(session), true).await;
        token
    }

    /// The live session of `token`, marked as seen at `now`; an expired
    /// one is dropped.
    pub async fn get(&self, token: &str, now: DateTime<Utc>) -> Option<Session> {
        let key = digest(token);
        let (found, write) = {
            let mut map = self.map.lock();
            let s = map.get_mut(&key)?;
            if !s.live_at(now) {
                map.remove(&key);
                (None, None)
            } else {
                s.last_seen = s.last_seen.max(now);
                let stale = s
                    .stored_seen
                    .is_none_or(|t| s.last_seen - t >= Duration::seconds(TOUCH_EVERY_SECONDS));
                if stale {
                    s.stored_seen = Some(s.last_seen);
                }
                (Some(s.clone()), stale.then(|| Some(s.clone())))
            }
        };
        match (&found, write) {
            (None, _) => self.keep(key, None, false).await,
            (Some(_), Some(s)) => self.keep(key, s, false).await,
            _ => {}
        }
        found
    }

    /// Sign-out: the session ends (deleted before the answer).
    pub async fn remove(&self, token: &str) {
        let key = digest(token);
        self.map.lock().remove(&key);
        self.keep(key, None, true).await;
    }

    /// The console moved the manual clock by `by`: the session moves too.
    pub async fn shift(&self, token: &str, by: Duration) {
        let key = digest(token);
        let moved = self.map.lock().get_mut(&key).map(|s| {
            s.created += by;
            s.last_seen += by;
            s.stored_seen = Some(s.last_seen);
            s.clone()
        });
        if let Some(s) = moved {
            self.keep(key, Some(s), true).await;
        }
    }
}

/// Whether the request came over HTTPS (directly or, behind a proxy, as
/// `X-Forwarded-Proto: https`): cookies are then `Secure`.
pub fn over_https(req: &HttpRequest) -> bool {
    req.connection_info().scheme() == "https"
}

/// A console cookie: HttpOnly, SameSite=Strict, path `/console`, Secure
/// over HTTPS; `max_age` None deletes it.
pub fn cookie(
    req: &HttpRequest,
    name: &'static str,
    value: &str,
    max_age: Option<Duration>,
) -> Cookie<'static> {
    let mut c = Cookie::build(name, value.to_string())
        .path("/console")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(over_https(req))
        .finish();
    match max_age {
        Some(d) => c.set_max_age(actix_web::cookie::time::Duration::seconds(d.num_seconds())),
        None => c.make_removal(),
    }
    c
}

/// The value of cookie `name`, if sent.
pub fn cookie_value(req: &HttpRequest, name: &str) -> Option<String> {
    req.cookie(name).map(|c| c.value().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[actix_web::test]
    async fn a_session_ends_when_idle_or_too_old_and_a_shift_carries_it() {
        let s = Sessions::new();
        let t0 = at("2026-11-25T10:00:00Z");
        let token = s.create(t0).await;
        assert!(s.get(&token, t0 + Duration::minutes(29)).await.is_some());
        // Seen at +29 min: idle counts from there.
        assert!(s.get(&token, t0 + Duration::minutes(58)).await.is_some());
        assert!(s.get("another", t0).await.is_none());
        s.shift(&token, Duration::days(2)).await;
        assert!(s
            .get(&token, t0 + Duration::days(2) + Duration::minutes(80))
            .await
            .is_some());
        assert!(s
            .get(&token, t0 + Duration::days(2) + Duration::minutes(111))
            .await
            .is_none());
        assert!(
            s.get(&token, t0 + Duration::days(2)).await.is_none(),
            "expired is gone"
        );

        let token = s.create(t0).await;
        let mut now = t0;
        while now + Duration::minutes(20) < t0 + Duration::hours(MAX_AGE_HOURS) {
            now += Duration::minutes(20);
            assert!(s.get(&token, now).await.is_some());
        }
        assert!(s
            .get(&token, t0 + Duration::hours(MAX_AGE_HOURS))
            .await
            .is_none());
    }

    #[actix_web::test]
    async fn sign_out_removes_the_session_and_secrets_compare_whole() {
        let s = Sessions::new();
        let t0 = at("2026-11-25T10:00:00Z");
        let token = s.create(t0).await;
        s.remove(&token).await;
        assert!(s.get(&token, t0).await.is_none());
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("", ""));
    }

    #[test]
    fn sign_ins_are_limited_per_ip() {
        let s = Sessions::new();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 0..SIGN_INS_PER_MINUTE {
            assert!(s.allow_sign_in(a).is_ok());
        }
        let wait = s.allow_sign_in(a).unwrap_err();
        assert!((1..=60).contains(&wait));
        assert!(s.allow_sign_in(b).is_ok());
    }
}
