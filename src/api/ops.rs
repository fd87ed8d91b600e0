//! Unauthenticated operational endpoints: liveness, readiness, metrics.

use actix_web::{web, HttpResponse};
use serde_json::json;

use super::{json_response, resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(resource("/healthz").route(web::get().to(healthz)))
        .service(resource("/readyz").route(web::get().to(readyz)))
        .service(resource("/metrics").route(web::get().to(metrics)));
}

async fn healthz() -> HttpResponse {
    json_response(200, &json!({"status": "ok"}))
}

async fn readyz(state: State) -> HttpResponse {
    let store_ok = state.kobo.store.read().is_ok();
    let actors_ok = state.timers.connected();
    let status = if store_ok && actors_ok { 200 } else { 503 };
    json_response(
        status,
        &json!({"status": if status == 200 { "ready" } else { "not_ready" }, "store": store_ok, "actors": actors_ok}),
    )
}

async fn metrics(state: State) -> ApiResult {
    let text = state.metrics.render(&state.kobo, &state.health)?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(text))
}
