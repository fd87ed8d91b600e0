//! The Prometheus metrics of the HTTP layer and their registry (served at
//! `/metrics`). A leaf: the request middleware ([`crate::telemetry`])
//! records into it, and the application state holds it.

use std::time::Instant;

use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use kobo_actors::{DomainError, Kobo};
use kobo_storage::WriterMetrics;

use crate::health::Health;

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    actors_live: IntGaugeVec,
    actor_events: IntGaugeVec,
    timers_due: prometheus::IntGauge,
    webhooks: IntGaugeVec,
    health: HealthGauges,
    cluster: ClusterGauges,
}

/// Cluster mode: this node's shards, lease changes and forwarded requests,
/// and `kobo_node_info{node}` naming the node (every series of one scrape
/// is that node's).
#[derive(Clone)]
struct ClusterGauges {
    shards_owned: prometheus::IntGauge,
    lease_changes: prometheus::IntCounter,
    forwarded: IntCounterVec,
    node_info: IntGaugeVec,
}

impl ClusterGauges {
    fn new(registry: &Registry) -> Self {
        let g = ClusterGauges {
            shards_owned: prometheus::IntGauge::new(
                "kobo_cluster_shards_owned",
                "Merchant shards this node holds a lease on (all 256 without --cluster)",
            )
            .unwrap(),
            lease_changes: prometheus::IntCounter::new(
                "kobo_cluster_lease_changes_total",
                "Shards this node acquired or lost since it started",
            )
            .unwrap(),
            forwarded: IntCounterVec::new(
                Opts::new(
                    "kobo_forwarded_requests_total",
                    "Requests this node forwarded to the node owning their merchant, by that node",
                ),
                &["to"],
            )
            .unwrap(),
            node_info: IntGaugeVec::new(
                Opts::new("kobo_node_info", "1, labelled with this node's cluster id"),
                &["node"],
            )
            .unwrap(),
        };
        registry.register(Box::new(g.shards_owned.clone())).unwrap();
        registry
            .register(Box::new(g.lease_changes.clone()))
            .unwrap();
        registry.register(Box::new(g.forwarded.clone())).unwrap();
        registry.register(Box::new(g.node_info.clone())).unwrap();
        g
    }

    fn set(&self, kobo: &Kobo) {
        match kobo.env.cluster.get() {
            Some(view) => {
                self.node_info.with_label_values(&[view.node_id()]).set(1);
                self.shards_owned.set(view.owned_count() as i64);
                let changes = view.lease_changes();
                self.lease_changes
                    .inc_by(changes.saturating_sub(self.lease_changes.get()));
            }
            None => self
                .shards_owned
                .set(i64::from(kobo_storage::fence::SHARDS)),
        }
    }
}

/// The health data beyond the counters: mailbox depths, overdue timers,
/// webhook queues, stream subscribers, and the latest health sample's
/// rates and commit latency percentiles ([`crate::health`]).
#[derive(Clone)]
struct HealthGauges {
    mailbox: IntGaugeVec,
    timers_overdue: prometheus::IntGauge,
    webhook_queue: IntGaugeVec,
    stream_subscribers: prometheus::IntGauge,
    actor_rates: GaugeVec,
    writer: GaugeVec,
}

impl HealthGauges {
    fn new(registry: &Registry) -> Self {
        let g = HealthGauges {
            mailbox: IntGaugeVec::new(
                Opts::new(
                    "kobo_actor_mailbox_depth",
                    "Messages queued for a kind's actors: in all (total) and the deepest mailbox (max)",
                ),
                &["kind", "of"],
            )
            .unwrap(),
            timers_overdue: prometheus::IntGauge::new(
                "kobo_timers_overdue",
                "Timers due more than 60 s ago and not yet run",
            )
            .unwrap(),
            webhook_queue: IntGaugeVec::new(
                Opts::new(
                    "kobo_webhook_queue",
                    "Webhook deliveries waiting, in flight and failing (waiting for a retry), all endpoints",
                ),
                &["state"],
            )
            .unwrap(),
            stream_subscribers: prometheus::IntGauge::new(
                "kobo_event_stream_subscribers",
                "Open event stream connections",
            )
            .unwrap(),
            actor_rates: GaugeVec::new(
                Opts::new(
                    "kobo_actor_rate_per_second",
                    "Activations and passivations per second over the latest health sample",
                ),
                &["kind", "event"],
            )
            .unwrap(),
            writer: GaugeVec::new(
                Opts::new(
                    "kobo_store_writer_recent",
                    "The store writer over the latest health sample: commits_per_second, batches_per_commit, commit_seconds_p50/p90/p99/max",
                ),
                &["what"],
            )
            .unwrap(),
        };
        registry.register(Box::new(g.mailbox.clone())).unwrap();
        registry
            .register(Box::new(g.timers_overdue.clone()))
            .unwrap();
        registry
            .register(Box::new(g.webhook_queue.clone()))
            .unwrap();
        registry
            .register(Box::new(g.stream_subscribers.clone()))
            .unwrap();
        registry.register(Box::new(g.actor_rates.clone())).unwrap();
        registry.register(Box::new(g.writer.clone())).unwrap();
        g
    }

    fn set(&self, kobo: &Kobo, health: &Health, overdue: u64) {
        for k in kobo.actor_health() {
            self.mailbox
                .with_label_values(&[k.kind, "total"])
                .set(k.mailbox_depth as i64);
            self.mailbox
                .with_label_values(&[k.kind, "max"])
                .set(k.mailbox_depth_max as i64);
        }
        self.timers_overdue.set(overdue as i64);
        self.stream_subscribers
            .set(crate::health::stream_subscribers(kobo) as i64);
        let Some(s) = health.latest() else {
            return;
        };
        for (state, n) in [
            ("waiting", s.webhooks.waiting),
            ("in_flight", s.webhooks.in_flight),
            ("failing", s.webhooks.failing),
        ] {
            self.webhook_queue.with_label_values(&[state]).set(n as i64);
        }
        for k in &s.kinds {
            self.actor_rates
                .with_label_values(&[k.kind, "activation"])
                .set(k.activations_per_second);
            self.actor_rates
                .with_label_values(&[k.kind, "passivation"])
                .set(k.passivations_per_second);
        }
        let w = &s.writer;
        self.writer
            .with_label_values(&["commits_per_second"])
            .set(w.commits_per_second);
        if let Some(b) = w.batches_per_commit {
            self.writer
                .with_label_values(&["batches_per_commit"])
                .set(b);
        }
        if let Some(l) = w.commit_latency_ms {
            for (what, ms) in [
                ("commit_seconds_p50", l.p50),
                ("commit_seconds_p90", l.p90),
                ("commit_seconds_p99", l.p99),
                ("commit_seconds_max", l.max),
            ] {
                self.writer.with_label_values(&[what]).set(ms / 1000.0);
            }
        }
    }
}

impl Metrics {
    pub fn new(writer: &WriterMetrics) -> Self {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "kobo_http_requests_total",
                "HTTP requests by route and status",
            ),
            &["method", "route", "status"],
        )
        .unwrap();
        let latency = HistogramVec::new(
            HistogramOpts::new("kobo_http_request_duration_seconds", "HTTP request latency")
                .buckets(vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0,
                ]),
            &["method", "route"],
        )
        .unwrap();
        let actors_live = IntGaugeVec::new(
            Opts::new("kobo_actors_live", "Live actors by kind"),
            &["kind"],
        )
        .unwrap();
        let actor_events = IntGaugeVec::new(
            Opts::new(
                "kobo_actor_lifecycle_total",
                "Actor activations, passivations and restarts",
            ),
            &["kind", "event"],
        )
        .unwrap();
        let timers_due =
            prometheus::IntGauge::new("kobo_timers_due", "Timers due now and not yet run").unwrap();
        registry.register(Box::new(requests.clone())).unwrap();
        registry.register(Box::new(latency.clone())).unwrap();
        registry.register(Box::new(actors_live.clone())).unwrap();
        registry.register(Box::new(actor_events.clone())).unwrap();
        registry.register(Box::new(timers_due.clone())).unwrap();
        let webhooks = IntGaugeVec::new(
            Opts::new(
                "kobo_webhooks",
                "Webhook attempts in flight, and totals since start (attempts, delivered, failed_attempts, dropped), open event streams",
            ),
            &["what"],
        )
        .unwrap();
        registry.register(Box::new(webhooks.clone())).unwrap();
        let health = HealthGauges::new(&registry);
        let cluster = ClusterGauges::new(&registry);
        for c in writer.collectors() {
            registry.register(c).unwrap();
        }
        Metrics {
            registry,
            requests,
            latency,
            actors_live,
            actor_events,
            timers_due,
            webhooks,
            health,
            cluster,
        }
    }

    /// Counts a request forwarded to node `to`.
    pub fn forwarded(&self, to: &str) {
        self.cluster.forwarded.with_label_values(&[to]).inc();
    }

    /// Counts one request. Every label comes from a closed set, so no caller
    /// can grow the registry: `method` through [`method_label`], `route` is
    /// a route pattern of the app (or `unmatched`), `status` a class.
    pub fn observe(&self, method: &str, route: &str, status: u16, started: Instant) {
        self.requests
            .with_label_values(&[method, route, status_class(status)])
            .inc();
        self.latency
            .with_label_values(&[method, route])
            .observe(started.elapsed().as_secs_f64());
    }

    pub fn render(&self, kobo: &Kobo, health: &Health) -> Result<String, DomainError> {
        for k in kobo.actor_health() {
            self.actors_live
                .with_label_values(&[k.kind])
                .set(k.live as i64);
            for (event, n) in [
                ("activation", k.activations),
                ("passivation", k.passivations),
                ("restart", k.restarts),
            ] {
                self.actor_events
                    .with_label_values(&[k.kind, event])
                    .set(n as i64);
            }
        }
        let timers = kobo_actors::timers::timer_backlog(kobo, kobo.clock.now())?;
        self.timers_due.set(timers.due as i64);
        self.health.set(kobo, health, timers.overdue);
        self.cluster.set(kobo);
        let w = kobo.webhooks.stats();
        for (what, n) in [
            ("in_flight", w.in_flight as i64),
            ("attempts", w.attempts as i64),
            ("delivered", w.delivered as i64),
            ("failed_attempts", w.failed_attempts as i64),
            ("dropped", w.dropped as i64),
            ("streams_open", w.streams_open as i64),
        ] {
            self.webhooks.with_label_values(&[what]).set(n);
        }
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .map_err(|e| DomainError::internal(e.to_string()))?;
        String::from_utf8(out).map_err(|e| DomainError::internal(e.to_string()))
    }
}

/// The status label: `1xx` .. `5xx`.
pub fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}
