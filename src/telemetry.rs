//! Logs and metrics. Logs go to stderr through tracing (text or JSON); every
//! line written while serving a request carries its `request_id`. Metrics
//! are Prometheus text at `/metrics`.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue, CACHE_CONTROL};
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};
use tracing::Instrument;

use kobo_actors::{DomainError, Kobo};
use kobo_storage::WriterMetrics;

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    actors_live: IntGaugeVec,
    actor_events: IntGaugeVec,
    timers_due: prometheus::IntGauge,
    webhooks: IntGaugeVec,
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
        }
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

    pub fn render(&self, kobo: &Kobo) -> Result<String, DomainError> {
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
        self.timers_due
            .set(kobo_actors::timers::timers_due(kobo, kobo.clock.now())? as i64);
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

/// The method label: the standard methods, everything else `other`.
pub fn method_label(method: &actix_web::http::Method) -> &'static str {
    use actix_web::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
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

/// Wraps every request: a request id (echoed as `Request-Id`), a tracing span
/// carrying it, an access log line, the route metrics, and
/// `Cache-Control: no-store` on every answer that does not choose its own
/// caching (API answers carry secrets: client secrets, signing secrets,
/// keys; no proxy or browser may keep them).
///
/// The log names the route pattern (`/c/{code}`), never the path: paths of
/// pages are capabilities (a checkout code, a sandbox reference) that
/// anyone reading the logs could otherwise use.
pub async fn around_request<B: MessageBody>(
    req: ServiceRequest,
    next: actix_web::middleware::Next<B>,
) -> Result<ServiceResponse<B>, actix_web::Error> {
    let started = Instant::now();
    let request_id = uuid::Uuid::new_v4().to_string();
    let method = method_label(req.method());
    let metrics = req
        .app_data::<actix_web::web::Data<crate::api::AppState>>()
        .map(|s| s.metrics.clone());
    let span = tracing::info_span!("request", request_id = %request_id, method = %method);
    async move {
        let mut res = next.call(req).await?;
        let status = res.status().as_u16();
        let route = res
            .request()
            .match_pattern()
            .unwrap_or_else(|| "unmatched".to_string());
        if let Some(m) = metrics {
            m.observe(method, &route, status, started);
        }
        let headers = res.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&request_id) {
            headers.insert(HeaderName::from_static("request-id"), v);
        }
        if !headers.contains_key(CACHE_CONTROL) {
            headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        }
        tracing::info!(
            route = %route,
            status,
            elapsed_us = started.elapsed().as_micros() as u64,
            "served"
        );
        Ok(res)
    }
    .instrument(span)
    .await
}

pub fn init_logging(json: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, never in a file or a pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .init();
    } else {
        builder.init();
    }
}
