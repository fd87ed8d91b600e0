//! Actor health over time: a background task takes a [`Sample`] every
//! [`INTERVAL`] (live actors and mailbox depths per kind, activation,
//! passivation and restart rates, the store writer's commit rate, batches
//! per commit, commit latency percentiles and queue, timers due and
//! overdue, webhook queues, event stream subscribers) into a ring of the
//! last [`CAPACITY`] samples (ten minutes at one a second: bounded memory).
//! Served by `GET /admin/v1/health/history`, plotted by the console
//! (`/console/health`), and its latest sample's rates are Prometheus gauges
//! ([`crate::metrics`]). Times are the machine's wall clock, not the service
//! clock (which a manual clock freezes).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value};

use kobo_actors::timers::{timer_backlog, TimerBacklog, OVERDUE_AFTER_SECS};
use kobo_actors::webhook::query::{endpoint_queues, EndpointQueue};
use kobo_actors::{DomainResult, Kobo};
use kobo_storage::WriterMetrics;

pub mod ring;

use ring::{percentile, Ring};

/// One sample a second.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// Ten minutes of samples.
pub const CAPACITY: usize = 600;
/// Delivery-queue rows one look at the webhook queues reads at most.
pub const QUEUE_SCAN_MAX: usize = 5_000;
/// Endpoints listed in `/admin/v1/actors` (the busiest).
pub const ENDPOINTS_SHOWN: usize = 50;

/// One kind of actor in a sample.
#[derive(Debug, Clone, Serialize)]
pub struct KindSample {
    pub kind: &'static str,
    pub live: u64,
    pub mailbox_depth: u64,
    pub mailbox_depth_max: u64,
    pub activations_per_second: f64,
    pub passivations_per_second: f64,
    /// Restarts during the sample's interval.
    pub restarts: u64,
}

/// Commit latency percentiles in milliseconds (nearest rank).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// Commits the percentiles are taken over.
    pub commits: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct WriterSample {
    pub commits_per_second: f64,
    /// Batches per commit over the interval (null without commits).
    pub batches_per_commit: Option<f64>,
    /// Null without commits in the interval.
    pub commit_latency_ms: Option<Latency>,
    pub queue_depth: i64,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct WebhookSample {
    pub waiting: u64,
    pub in_flight: u64,
    pub failing: u64,
    /// Endpoints with anything waiting or in flight.
    pub endpoints: u64,
}

/// The health of the service over one interval.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// When it was taken (wall clock).
    pub at: DateTime<Utc>,
    /// The interval it covers, in seconds.
    pub seconds: f64,
    pub kinds: Vec<KindSample>,
    pub writer: WriterSample,
    pub timers: TimerBacklog,
    pub webhooks: WebhookSample,
    pub stream_subscribers: u64,
}

/// The ring, and what the sampler needs.
pub struct Health {
    ring: Mutex<Ring<Sample>>,
    writer: WriterMetrics,
}

/// The cumulative counters of the previous sample.
#[derive(Default)]
struct Previous {
    at: Option<Instant>,
    kinds: Vec<(u64, u64, u64)>,
    commits: u64,
    batches: u64,
}

impl Health {
    pub fn new(writer: WriterMetrics) -> Arc<Health> {
        Arc::new(Health {
            ring: Mutex::new(Ring::new(CAPACITY)),
            writer,
        })
    }

    /// Starts the sampler (on the current runtime); it stops with it.
    pub fn start(self: &Arc<Self>, kobo: Arc<Kobo>) {
        let health = self.clone();
        actix_web::rt::spawn(async move {
            let mut prev = Previous::default();
            let mut tick = tokio::time::interval(INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let (k, h) = (kobo.clone(), health.clone());
                let taken = tokio::task::spawn_blocking(move || {
                    let r = h.sample(&k, &mut prev);
                    (r, prev)
                })
                .await;
                match taken {
                    Ok((Ok(sample), p)) => {
                        prev = p;
                        health.ring.lock().push(sample);
                    }
                    Ok((Err(e), p)) => {
                        prev = p;
                        tracing::warn!(error = %e, "health sample failed");
                    }
                    Err(e) => {
                        // The sample panicked: start the rates afresh.
                        tracing::error!(error = %e, "health sample panicked");
                        prev = Previous::default();
                    }
                }
            }
        });
    }

    /// Takes a sample: rates are the counters' change since `prev`.
    fn sample(&self, kobo: &Kobo, prev: &mut Previous) -> DomainResult<Sample> {
        let now = Instant::now();
        let secs = prev
            .at
            .map(|t| now.duration_since(t).as_secs_f64())
            .unwrap_or(INTERVAL.as_secs_f64())
            .max(1e-3);
        let first = prev.at.is_none();
        let rate = |now: u64, before: u64| {
            if first {
                0.0
            } else {
                now.saturating_sub(before) as f64 / secs
            }
        };
        let health = kobo.actor_health();
        let mut kinds = Vec::with_capacity(health.len());
        let mut counters = Vec::with_capacity(health.len());
        for (i, k) in health.iter().enumerate() {
            let before = prev.kinds.get(i).copied().unwrap_or_default();
            kinds.push(KindSample {
                kind: k.kind,
                live: k.live as u64,
                mailbox_depth: k.mailbox_depth as u64,
                mailbox_depth_max: k.mailbox_depth_max as u64,
                activations_per_second: rate(k.activations, before.0),
                passivations_per_second: rate(k.passivations, before.1),
                restarts: if first {
                    0
                } else {
                    k.restarts.saturating_sub(before.2)
                },
            });
            counters.push((k.activations, k.passivations, k.restarts));
        }
        let (commits, batches) = (self.writer.commits.get(), self.writer.batches.get());
        let interval_commits = commits.saturating_sub(prev.commits);
        let interval_batches = batches.saturating_sub(prev.batches);
        let mut durations = self.writer.recent.take();
        durations.sort_unstable();
        let writer = WriterSample {
            commits_per_second: rate(commits, prev.commits),
            batches_per_commit: (!first && interval_commits > 0)
                .then(|| interval_batches as f64 / interval_commits as f64),
            commit_latency_ms: latency(&durations),
            queue_depth: kobo.writer.queue_depth(),
        };
        *prev = Previous {
            at: Some(now),
            kinds: counters,
            commits,
            batches,
        };
        let (queues, _) = queues(kobo)?;
        let mut webhooks = WebhookSample::default();
        for q in &queues {
            webhooks.waiting += q.waiting;
            webhooks.in_flight += q.in_flight;
            webhooks.failing += q.failing;
            webhooks.endpoints += 1;
        }
        Ok(Sample {
            at: Utc::now(),
            seconds: secs,
            kinds,
            writer,
            timers: timer_backlog(kobo, kobo.clock.now())?,
            webhooks,
            stream_subscribers: stream_subscribers(kobo),
        })
    }

    pub fn latest(&self) -> Option<Sample> {
        self.ring.lock().latest().cloned()
    }

    /// The samples of the last `seconds`, oldest first.
    pub fn history(&self, seconds: usize) -> Vec<Sample> {
        let per = INTERVAL.as_secs().max(1) as usize;
        self.ring.lock().last(seconds / per).cloned().collect()
    }
}

/// Percentiles of `sorted` (microseconds) in milliseconds.
pub fn latency(sorted: &[u32]) -> Option<Latency> {
    let ms = |q: f64| percentile(sorted, q).map(|us| us as f64 / 1000.0);
    Some(Latency {
        p50: ms(50.0)?,
        p90: ms(90.0)?,
        p99: ms(99.0)?,
        max: ms(100.0)?,
        commits: sorted.len() as u64,
    })
}

/// The webhook delivery queues by endpoint, busiest first.
pub fn queues(kobo: &Kobo) -> DomainResult<(Vec<EndpointQueue>, bool)> {
    let in_flight = kobo.webhooks.stats.endpoints_in_flight.lock().clone();
    endpoint_queues(kobo, &in_flight, QUEUE_SCAN_MAX)
}

/// Open `GET /v1/events/stream` connections.
pub fn stream_subscribers(kobo: &Kobo) -> u64 {
    kobo.webhooks.stats().streams_open as u64
}

/// The body of `GET /admin/v1/actors`: the current counters (the fields it
/// always had, each kind's last panic message), timers, webhook queues,
/// event stream subscribers, and the latest sample's rates.
pub fn report(kobo: &Kobo, health: &Health) -> DomainResult<Value> {
    let (mut endpoints, truncated) = queues(kobo)?;
    let endpoints_total = endpoints.len();
    endpoints.truncate(ENDPOINTS_SHOWN);
    let timers = timer_backlog(kobo, kobo.clock.now())?;
    Ok(json!({
        "object": "actor_health",
        "kinds": kobo.actor_health(),
        "store_writer": {
            "queue_depth": kobo.writer.queue_depth(),
            "commits": kobo.writer.commits(),
            "batches": health.writer.batches.get(),
        },
        "webhooks": kobo.webhooks.stats(),
        "webhook_endpoints": {
            "data": endpoints,
            "endpoints": endpoints_total,
            "truncated": truncated,
        },
        "timers": {
            "due": timers.due,
            "overdue": timers.overdue,
            "overdue_after_seconds": OVERDUE_AFTER_SECS,
        },
        "event_stream": {"subscribers": stream_subscribers(kobo)},
        "latest": health.latest(),
    }))
}

/// The body of `GET /admin/v1/health/history`.
pub fn history_view(health: &Health, seconds: usize) -> Value {
    json!({
        "object": "health_history",
        "interval_seconds": INTERVAL.as_secs(),
        "capacity": CAPACITY,
        "samples": health.history(seconds),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_is_null_without_commits_and_in_milliseconds_otherwise() {
        assert!(latency(&[]).is_none());
        let l = latency(&[500, 1000, 2000, 40_000]).unwrap();
        assert_eq!((l.p50, l.p90, l.p99, l.max), (1.0, 40.0, 40.0, 40.0));
        assert_eq!(l.commits, 4);
    }
}
