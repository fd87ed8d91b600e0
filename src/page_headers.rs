//! The response headers every server-rendered page and its embedded assets
//! carry, shared by the hosted checkout pages, the merchant dashboard and
//! the operator console: each surface keeps its own Content-Security-Policy
//! and Referrer-Policy, and this module sets them next to the rest (no
//! caching of pages, no sniffing, no framing). A leaf: it imports nothing
//! of the crate.

use actix_web::http::{header, StatusCode};
use actix_web::HttpResponse;

/// An HTML page: `no-store`, `nosniff`, `X-Frame-Options: DENY`, the
/// surface's `csp` and `referrer` policy.
pub fn html_page(status: u16, body: String, csp: &str, referrer: &str) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header(("Referrer-Policy", referrer.to_string()))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header(("X-Frame-Options", "DENY"))
        .insert_header(("Content-Security-Policy", csp.to_string()))
        .body(body)
}

/// A script or stylesheet built into the binary, cached for five minutes.
pub fn asset(content_type: &'static str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CACHE_CONTROL, "public, max-age=300"))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .body(body)
}

/// A stylesheet built into the binary.
pub fn stylesheet(body: &'static str) -> HttpResponse {
    asset("text/css; charset=utf-8", body)
}

/// A script built into the binary.
pub fn script(body: &'static str) -> HttpResponse {
    asset("text/javascript; charset=utf-8", body)
}
