//! The API request log the dashboard's developers page shows: the last 24
//! hours of each merchant's and mode's secret-key calls (method, path,
//! status, request id), kept in memory and bounded ([`PER_SCOPE_MAX`] per
//! merchant and mode, [`SCOPES_MAX`] scopes). It is not durable: a restart
//! starts it empty (the access log on stderr is the record).

use std::collections::{HashMap, VecDeque};

use actix_web::HttpMessage;
use chrono::{DateTime, Duration, Utc};
use parking_lot::Mutex;
use uuid::Uuid;

use kobo_actors::Mode;

/// Calls kept per merchant and mode at most (the newest).
pub const PER_SCOPE_MAX: usize = 500;
/// Merchants and modes tracked at most (the least recently used go).
pub const SCOPES_MAX: usize = 10_000;
/// How far back the log reaches.
pub const WINDOW_HOURS: i64 = 24;

/// Marks a request as a merchant's secret-key call (set on
/// authentication; the telemetry middleware logs it when answered).
#[derive(Debug, Clone, Copy)]
pub struct LogScope(pub Uuid, pub Mode);

/// One logged call.
#[derive(Debug, Clone)]
pub struct LoggedRequest {
    pub at: DateTime<Utc>,
    pub method: &'static str,
    pub path: String,
    pub status: u16,
    pub request_id: String,
}

/// A scope's calls: when it was last used, and its ring.
type Ring = (DateTime<Utc>, VecDeque<LoggedRequest>);

#[derive(Default)]
pub struct RequestLog {
    scopes: Mutex<HashMap<(Uuid, Mode), Ring>>,
}

impl RequestLog {
    pub fn record(&self, scope: LogScope, entry: LoggedRequest) {
        let mut scopes = self.scopes.lock();
        if scopes.len() >= SCOPES_MAX && !scopes.contains_key(&(scope.0, scope.1)) {
            if let Some(oldest) = scopes
                .iter()
                .min_by_key(|(_, (last, _))| *last)
                .map(|(k, _)| *k)
            {
                scopes.remove(&oldest);
            }
        }
        let (last, ring) = scopes.entry((scope.0, scope.1)).or_default();
        *last = entry.at;
        if ring.len() == PER_SCOPE_MAX {
            ring.pop_front();
        }
        ring.push_back(entry);
    }

    /// The scope's calls of the last [`WINDOW_HOURS`], newest first.
    pub fn recent(&self, merchant: Uuid, mode: Mode, now: DateTime<Utc>) -> Vec<LoggedRequest> {
        let since = now - Duration::hours(WINDOW_HOURS);
        self.scopes
            .lock()
            .get(&(merchant, mode))
            .map(|(_, ring)| {
                ring.iter()
                    .rev()
                    .filter(|e| e.at >= since)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Logs an answered request if it was a merchant's secret-key call.
pub fn observe(
    req: &actix_web::HttpRequest,
    log: &RequestLog,
    clock: &kobo_actors::clock::Clock,
    method: &'static str,
    status: u16,
    request_id: &str,
) {
    let Some(scope) = req.extensions().get::<LogScope>().copied() else {
        return;
    };
    log.record(
        scope,
        LoggedRequest {
            at: clock.now(),
            method,
            path: logged_path(req.path()),
            status,
            request_id: request_id.to_string(),
        },
    );
}

/// Characters of a path the log keeps at most.
pub const PATH_MAX_CHARS: usize = 200;

/// The first [`PATH_MAX_CHARS`] characters of `path`, copied once (a
/// `String` collected a char at a time grew by reallocating: 1.7% of a
/// create's samples).
fn logged_path(path: &str) -> String {
    let end = path
        .char_indices()
        .nth(PATH_MAX_CHARS)
        .map_or(path.len(), |(i, _)| i);
    path[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logged_path_keeps_its_first_200_characters() {
        assert_eq!(logged_path("/v1/payment_intents"), "/v1/payment_intents");
        let long = format!("/v1/{}", "\u{e9}".repeat(300));
        let kept = logged_path(&long);
        assert_eq!(kept.chars().count(), PATH_MAX_CHARS);
        assert!(long.starts_with(&kept));
        let exact = "a".repeat(PATH_MAX_CHARS);
        assert_eq!(logged_path(&exact), exact);
    }

    #[test]
    fn the_log_keeps_the_newest_calls_of_the_last_day_per_scope() {
        let log = RequestLog::default();
        let m = Uuid::new_v4();
        let t0 = Utc::now();
        for i in 0..(PER_SCOPE_MAX + 3) {
            log.record(
                LogScope(m, Mode::Test),
                LoggedRequest {
                    at: t0 + Duration::seconds(i as i64),
                    method: "GET",
                    path: format!("/v1/x/{i}"),
                    status: 200,
                    request_id: i.to_string(),
                },
            );
        }
        let recent = log.recent(m, Mode::Test, t0 + Duration::seconds(600));
        assert_eq!(recent.len(), PER_SCOPE_MAX);
        assert_eq!(recent[0].request_id, (PER_SCOPE_MAX + 2).to_string());
        assert!(log.recent(m, Mode::Live, t0).is_empty());
        assert!(log
            .recent(
                m,
                Mode::Test,
                t0 + Duration::hours(25) + Duration::seconds(600)
            )
            .is_empty());
    }
}
