//! Unauthenticated operational endpoints: liveness, readiness, metrics.

use actix_web::{web, HttpResponse};
use serde_json::json;

use super::{json_response, resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(resource("/healthz").route(web::get().to(healthz)))
        .service(resource("/readyz").route(web::get().to(readyz)))
        .service(resource("/metrics").route(web::get().to(metrics)));
}

/// Alive: a constant body, written once (a probe's answer costs no
/// serializing).
async fn healthz() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(r#"{"status":"ok"}"#)
}

/// Ready: the store answers, the timer supervisor runs, and (cluster mode)
/// the node is registered with a lease view refreshed within the last 4 s.
/// The body also tells how many of the 256 merchant shards the node owns
/// (all of them without `--cluster`).
async fn readyz(state: State) -> HttpResponse {
    let store_ok = state.kobo.store.read().is_ok();
    let actors_ok = state.timers.connected();
    let (cluster, cluster_ok, owned) = match state.kobo.env.cluster.get() {
        Some(view) => {
            let fresh = view.is_fresh();
            let owned = view.owned_count();
            let node = json!({"node_id": view.node_id(), "registered": fresh});
            (node, fresh, owned)
        }
        None => (
            serde_json::Value::Null,
            true,
            usize::from(kobo_storage::fence::SHARDS),
        ),
    };
    let ready = store_ok && actors_ok && cluster_ok;
    json_response(
        if ready { 200 } else { 503 },
        &json!({
            "status": if ready { "ready" } else { "not_ready" },
            "store": store_ok,
            "actors": actors_ok,
            "shards_owned": owned,
            "cluster": cluster,
        }),
    )
}

async fn metrics(state: State) -> ApiResult {
    let text = state.metrics.render(&state.kobo, &state.health)?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(text))
}
