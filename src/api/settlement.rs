//! Settlement as merchants see it: the rolling reserve, and the test helpers
//! that release pending money and run settlement now.

use actix_web::{web, HttpRequest};
use serde_json::json;

use kobo_actors::ledger::Bucket;
use kobo_actors::{query, settlement};

use super::body::{Fields, Query};
use super::{
    authenticate, idempotent, json_response, read_body, require_test_mode, resource, ApiResult,
    Reply, State,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/v1/reserve").route(web::get().to(reserve)))
        .service(
            resource("/v1/test_helpers/balance/release_pending")
                .route(web::post().to(release_pending)),
        )
        .service(resource("/v1/test_helpers/settlements/run").route(web::post().to(run)));
}

async fn reserve(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    Query::parse(req.query_string(), &[])?;
    Ok(json_response(
        200,
        &query::reserve(&state.kobo, &p.merchant, p.mode)?,
    ))
}

/// Skips the settlement delay for the merchant's captured test payments:
/// everything still in `pending` is released now.
async fn release_pending(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let p = authenticate(&req, &state)?;
    require_test_mode(&p)?;
    let body = read_body(payload).await?;
    let (state, p, body) = (&state, &p, &body);
    idempotent(&req, state, p, body, |_| async move {
        Fields::parse(body, &[])?;
        let kobo = &state.kobo;
        let keys = settlement::scheduled_keys(kobo, p.merchant.id, p.mode, Bucket::Pending, None)?;
        let released = settlement::release(kobo, p.merchant.id, p.mode, keys).await?;
        Ok(Reply {
            status: 200,
            body: json!({"object": "test_helper_result", "livemode": false, "released": released}),
            saved: false,
        })
    })
    .await
}

/// Runs settlement for the merchant now, as the 08:00 run would: releases
/// what is due (pending and reserve) and pays out by automatic settlement.
async fn run(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let p = authenticate(&req, &state)?;
    require_test_mode(&p)?;
    let body = read_body(payload).await?;
    let (state, p, body) = (&state, &p, &body);
    idempotent(&req, state, p, body, |_| async move {
        Fields::parse(body, &[])?;
        let kobo = &state.kobo;
        let now = kobo.clock.now();
        let mut keys = Vec::new();
        for bucket in [Bucket::Pending, Bucket::Reserve] {
            keys.extend(settlement::scheduled_keys(kobo, p.merchant.id, p.mode, bucket, Some(now))?);
        }
        let released = settlement::release(kobo, p.merchant.id, p.mode, keys).await?;
        // Dollars first (auto_settlement.usd), as the 08:00 run does.
        let dollars = kobo_actors::fx::settle_dollars(kobo, &p.merchant, p.mode).await?;
        let mut payouts = kobo_actors::payout::service::auto_settle(kobo, &p.merchant, p.mode).await?;
        payouts.extend(dollars.crypto_payouts);
        Ok(Reply {
            status: 200,
            body: json!({"object": "test_helper_result", "livemode": false, "released": released, "payouts": payouts, "conversions": dollars.conversions}),
            saved: false,
        })
    })
    .await
}
