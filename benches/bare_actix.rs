//! `bare-actix`: the bench peer for kobo's `/healthz` (scripts/bench.sh).
//! A bare actix-web server, built with kobo's own actix-web, answering
//! `GET /healthz` with a fixed body and nothing else: no middleware, no
//! state. The gap between it and kobo's `/healthz` in the same run is what
//! kobo's request path (middleware, routing, telemetry) costs.
//!
//!   bare-actix 127.0.0.1:0   (prints "listening on http://ADDR")

use actix_web::{web, App, HttpResponse, HttpServer};

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let server = HttpServer::new(|| {
        App::new().route(
            "/healthz",
            web::get().to(|| async {
                HttpResponse::Ok()
                    .content_type("application/json")
                    .body(r#"{"status":"ok"}"#)
            }),
        )
    })
    .bind(addr)?;
    for a in server.addrs() {
        println!("listening on http://{a}");
    }
    server.run().await
}
