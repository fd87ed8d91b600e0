//! Live updates: `GET /dashboard/live`, the event stream of the session's
//! merchant and mode as server-sent events (the same stream, bounds and
//! resume as `GET /v1/stream`, see [`crate::api::stream`]), authenticated
//! by the session cookie. The dashboard's script listens and reloads the
//! rows of the payments tables (server-rendered, escaped) when an event
//! arrives.

use actix_web::{web, HttpRequest, HttpResponse};

use super::signed_in;
use crate::api::{stream, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/dashboard/live", web::get().to(live));
}

async fn live(req: HttpRequest, state: State) -> HttpResponse {
    let ctx = match signed_in(&req, &state).await {
        Ok(c) => c,
        Err(_) => return HttpResponse::Unauthorized().finish(),
    };
    let resume = req
        .headers()
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<u64>().ok());
    match stream::open(&state.kobo, (ctx.merchant_id(), ctx.mode()), resume) {
        Ok(r) => r,
        Err(e) => HttpResponse::build(crate::api::status_of(e.kind))
            .insert_header(("Retry-After", "3"))
            .finish(),
    }
}
