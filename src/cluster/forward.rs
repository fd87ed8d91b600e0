//! Request routing in cluster mode: a request whose merchant is known (an
//! API key, or a dashboard session) is handled here when this node owns
//! the merchant's shard, and otherwise proxied to the owner's advertised
//! address (headers and body passed through, the answer streamed back),
//! with `Kobo-Forwarded-By: <this node>` added. A request that already
//! carries that header is never forwarded again, and a merchant whose
//! owner is unknown (failover in progress) is answered 503
//! `merchant_moving` with `Retry-After: 1`. Forwarding rather than
//! redirecting: API clients and payment pages expect one URL.

use std::sync::OnceLock;
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::{web, HttpResponse, ResponseError};
use futures_util::StreamExt;
use uuid::Uuid;

use kobo_actors::cluster::Owner;
use kobo_actors::{DomainError, ErrorCode};

use crate::api::{ApiError, AppState};

/// The header a forwarding node adds (its node id).
pub const FORWARDED_BY: &str = "kobo-forwarded-by";

/// Paths every node answers itself: operations, the operator API and
/// console, the API reference, static assets.
const LOCAL_PREFIXES: [&str; 7] = [
    "/healthz",
    "/readyz",
    "/metrics",
    "/admin/",
    "/console",
    "/docs",
    "/checkout/assets/",
];

/// Headers that describe one connection, not the request or answer.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
];

pub async fn route(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let Some(view) = state.kobo.env.cluster.get().cloned() else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    if LOCAL_PREFIXES.iter().any(|p| req.path().starts_with(p)) {
        return Ok(next.call(req).await?.map_into_boxed_body());
    }
    let Some(merchant) = merchant_of(&req, &state).await else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    match view.owner(&merchant) {
        Owner::Here => Ok(next.call(req).await?.map_into_boxed_body()),
        Owner::Nobody => Ok(moving(
            req,
            "the merchant's node is changing; retry in a second",
        )),
        Owner::Node { .. } if req.headers().contains_key(FORWARDED_BY) => Ok(moving(
            req,
            "the merchant moved while this request was forwarded; retry in a second",
        )),
        Owner::Node { id, address } => {
            state.metrics.forwarded(&id);
            let (http, payload) = req.into_parts();
            let response = proxy(&http, payload, &address, view.node_id()).await;
            Ok(ServiceResponse::new(http, response))
        }
    }
}

/// The merchant a request acts for, when it names one: its API key's (the
/// auth layer's lookup), its customer-facing page's object's
/// ([`super::pages`]), or its dashboard session's.
async fn merchant_of(req: &ServiceRequest, state: &AppState) -> Option<Uuid> {
    if let Some(token) = bearer(req) {
        let principal =
            kobo_actors::query::authenticate(&state.kobo, token, &state.checkout_key).ok()?;
        return Some(principal.merchant.id);
    }
    if let Some(merchant) = super::pages::merchant_of_page(state, req.path()) {
        return Some(merchant);
    }
    if req.path().starts_with("/dashboard") {
        let token = req.cookie(crate::dashboard::COOKIE)?.value().to_owned();
        let (session, _) = kobo_actors::dashboard_user::resume_session(&state.kobo, &token)
            .await
            .ok()??;
        return Some(session.merchant);
    }
    None
}

fn bearer(req: &ServiceRequest) -> Option<&str> {
    let h = req.headers().get("authorization")?.to_str().ok()?;
    let (scheme, token) = h.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// 503 `merchant_moving` (with `Retry-After: 1`, as every overloaded answer).
fn moving(req: ServiceRequest, message: &str) -> ServiceResponse<BoxBody> {
    let response = ApiError(DomainError::of(ErrorCode::MerchantMoving, message)).error_response();
    req.into_response(response)
}

fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("the forwarding client builds")
    })
}

/// Sends the request on to `address` and streams its answer back; an
/// owner that cannot be reached is answered `merchant_moving`.
async fn proxy(
    req: &actix_web::HttpRequest,
    mut payload: actix_web::dev::Payload,
    address: &str,
    me: &str,
) -> HttpResponse {
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        match chunk {
            Ok(c) => body.extend_from_slice(&c),
            Err(e) => {
                return ApiError(DomainError::invalid("body", e.to_string())).error_response()
            }
        }
    }
    let url = format!(
        "{}{}",
        address.trim_end_matches('/'),
        req.uri().path_and_query().map_or("/", |p| p.as_str())
    );
    let Ok(method) = reqwest::Method::from_bytes(req.method().as_str().as_bytes()) else {
        return not_reached(address, "an unknown method");
    };
    let mut out = client().request(method, &url);
    for (name, value) in req.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) && name.as_str() != "content-length" {
            out = out.header(name.as_str(), value.as_bytes());
        }
    }
    if let Some(peer) = req.peer_addr() {
        out = out.header("x-forwarded-for", peer.ip().to_string());
    }
    let answer = match out
        .header(FORWARDED_BY, me)
        .body(body.freeze())
        .send()
        .await
    {
        Ok(a) => a,
        Err(e) => return not_reached(address, &e.to_string()),
    };
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut response = HttpResponse::build(status);
    for (name, value) in answer.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) && name.as_str() != "content-length" {
            response.append_header((name.as_str(), value.as_bytes()));
        }
    }
    let chunks = futures_util::stream::unfold(answer, |mut a| async move {
        match a.chunk().await {
            Ok(Some(c)) => Some((Ok::<_, actix_web::Error>(c), a)),
            Ok(None) => None,
            Err(e) => Some((Err(actix_web::error::ErrorBadGateway(e)), a)),
        }
    });
    response.streaming(chunks)
}

fn not_reached(address: &str, why: &str) -> HttpResponse {
    tracing::warn!(%address, error = why, "forwarding to the merchant's node failed");
    ApiError(DomainError::of(
        ErrorCode::MerchantMoving,
        "the merchant's node did not answer; retry in a second",
    ))
    .error_response()
}
