//! Settlement as merchants see it: the rolling reserve, and the test helpers
//! that release pending money and run settlement now.

use actix_web::{web, HttpRequest};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_actors::ledger::Bucket;
use kobo_actors::query::ReserveView;
use kobo_actors::{query, settlement};

use super::body::NoFields;
use super::components::{
    BadRequest, ConflictReplayable, IdempotencyKey, NotFoundReplayable, Overloaded,
};
use super::endpoint::{test_mode, Endpoint};
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(resource("/v1/reserve").route(web::get().to(reserve)))
        .service(
            resource("/v1/test_helpers/balance/release_pending")
                .route(web::post().to(release_pending)),
        )
        .service(resource("/v1/test_helpers/settlements/run").route(web::post().to(run)));
}

/// The `object` value of a test helper's result.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum TestHelperResultObject {
    #[serde(rename = "test_helper_result")]
    TestHelperResult,
}

/// What `release_pending` did.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = ReleasePendingResult)]
pub struct ReleasePendingView {
    #[schema(inline)]
    pub object: TestHelperResultObject,
    /// Always false: test mode only.
    pub livemode: bool,
    /// How many payments' pending money was released.
    pub released: usize,
}

/// What the settlement run did.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = SettlementRunResult)]
pub struct SettlementRunView {
    #[schema(inline)]
    pub object: TestHelperResultObject,
    /// Always false: test mode only.
    pub livemode: bool,
    /// How many scheduled releases (pending and reserve) were due and
    /// released.
    pub released: usize,
    /// The ids of the payouts automatic settlement created: naira payouts,
    /// then USDT crypto payouts of dollars (`auto_settlement.usd: usdt`).
    pub payouts: Vec<Uuid>,
    /// The ids of the dollar-to-naira conversions dollar settlement made
    /// (`auto_settlement.usd: convert`).
    pub conversions: Vec<Uuid>,
}

/// Retrieve the reserve
///
/// The rolling-reserve terms, what the reserve holds per currency, and
/// when it is released (by Lagos date).
#[utoipa::path(
    get,
    path = "/v1/reserve",
    operation_id = "retrieve_reserve",
    tag = "balance",
    responses(
        (status = 200, description = "The reserve.", body = ReserveView),
        (status = 400, response = BadRequest),
    )
)]
async fn reserve(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, _: NoFields| async move {
            Ok(query::reserve(c.kobo(), &c.p.merchant, c.p.mode)?)
        })
        .await
}

/// Release a test merchant's pending money now
///
/// Test keys only (404 for live keys). Skips the settlement delay for the
/// merchant's captured test payments: everything still in `pending` (not
/// the reserve) is released to `available` now.
#[utoipa::path(
    post,
    path = "/v1/test_helpers/balance/release_pending",
    operation_id = "test_release_pending",
    tag = "test_helpers",
    params(IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "How many payments were released.", body = ReleasePendingView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn release_pending(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    Endpoint::secret_key(200)
        .gate(test_mode)
        .post(req, state, payload, |c, _: NoFields| async move {
            let (state, p) = (&c.state, &c.p);
            let kobo = &state.kobo;
            let keys =
                settlement::scheduled_keys(kobo, p.merchant.id, p.mode, Bucket::Pending, None)?;
            let released = settlement::release(&kobo.ledgers, p.merchant.id, p.mode, keys).await?;
            let view = ReleasePendingView {
                object: TestHelperResultObject::TestHelperResult,
                livemode: false,
                released,
            };
            Ok(serde_json::to_value(view).expect("a test helper result serializes"))
        })
        .await
}

/// Run a test merchant's settlement now
///
/// Test keys only (404 for live keys). As the 08:00 Lagos run would:
/// releases what is due now (pending and reserve), settles dollars
/// (`auto_settlement.usd`: keep, convert or USDT), then pays out naira by
/// automatic settlement.
#[utoipa::path(
    post,
    path = "/v1/test_helpers/settlements/run",
    operation_id = "test_run_settlement",
    tag = "test_helpers",
    params(IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "What was released and paid out.", body = SettlementRunView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn run(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    Endpoint::secret_key(200)
        .gate(test_mode)
        .post(req, state, payload, |c, _: NoFields| async move {
            let (state, p) = (&c.state, &c.p);
            let kobo = &state.kobo;
            let now = kobo.clock.now();
            let mut keys = Vec::new();
            for bucket in [Bucket::Pending, Bucket::Reserve] {
                keys.extend(settlement::scheduled_keys(
                    kobo,
                    p.merchant.id,
                    p.mode,
                    bucket,
                    Some(now),
                )?);
            }
            let released = settlement::release(&kobo.ledgers, p.merchant.id, p.mode, keys).await?;
            // Dollars first (auto_settlement.usd), as the 08:00 run does.
            let dollars =
                kobo_actors::settlement::settle_dollars(&kobo.settlement, &p.merchant, p.mode)
                    .await?;
            let mut payouts =
                kobo_actors::payout::service::auto_settle(kobo.payouts.deps(), &p.merchant, p.mode)
                    .await?;
            payouts.extend(dollars.crypto_payouts);
            let view = SettlementRunView {
                object: TestHelperResultObject::TestHelperResult,
                livemode: false,
                released,
                payouts,
                conversions: dollars.conversions,
            };
            Ok(serde_json::to_value(view).expect("a test helper result serializes"))
        })
        .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The views render exactly what the `json!` renderings they replaced
    /// did.
    #[test]
    fn test_helper_results_json_is_unchanged() {
        for released in [0, 1, 250] {
            let view = ReleasePendingView {
                object: TestHelperResultObject::TestHelperResult,
                livemode: false,
                released,
            };
            let old =
                json!({"object": "test_helper_result", "livemode": false, "released": released});
            assert_eq!(serde_json::to_value(view).unwrap(), old);
            for (payouts, conversions) in [
                (vec![], vec![]),
                (vec![Uuid::new_v4(), Uuid::new_v4()], vec![Uuid::new_v4()]),
            ] {
                let old = json!({"object": "test_helper_result", "livemode": false, "released": released, "payouts": payouts, "conversions": conversions});
                let view = SettlementRunView {
                    object: TestHelperResultObject::TestHelperResult,
                    livemode: false,
                    released,
                    payouts,
                    conversions,
                };
                assert_eq!(serde_json::to_value(view).unwrap(), old);
            }
        }
    }
}
