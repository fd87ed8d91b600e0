//! Logs and metrics. Logs go to stderr through tracing (text or JSON); every
//! line written while serving a request carries its `request_id`. Metrics
//! are Prometheus text at `/metrics`.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue, CACHE_CONTROL};
use tracing::Instrument;

pub use crate::metrics::Metrics;

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
    use actix_web::HttpMessage;
    let started = Instant::now();
    let request_id = uuid::Uuid::new_v4().to_string();
    req.extensions_mut()
        .insert(crate::api::request::RequestId(request_id.clone()));
    let method = method_label(req.method());
    // One reference count for the state; its metrics are reached through
    // it (cloning `Metrics` took a dozen counts per request).
    let app = req
        .app_data::<actix_web::web::Data<crate::api::AppState>>()
        .cloned();
    let span = tracing::info_span!("request", request_id = %request_id, method = %method);
    async move {
        let mut res = next.call(req).await?;
        let status = res.status().as_u16();
        let route = res
            .request()
            .match_pattern()
            .unwrap_or_else(|| "unmatched".to_string());
        if let Some(app) = &app {
            app.metrics.observe(method, &route, status, started);
            crate::api::request_log::observe(
                res.request(),
                &app.request_log,
                &app.kobo.clock,
                method,
                status,
                &request_id,
            );
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
