//! `/v1/test_helpers`: simulate provider behaviour in test mode (404 for live
//! keys).

use actix_web::{web, HttpRequest};

use kobo_actors::payment_intent::actor::Action;

use super::payment_intents::intent_action;
use super::{authenticate, require_test_mode, resource, ApiResult, State};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/v1/test_helpers/payment_intents/{id}/succeed").route(web::post().to(succeed)),
    )
    .service(
        resource("/v1/test_helpers/payment_intents/{id}/simulate_transfer")
            .route(web::post().to(simulate_transfer)),
    );
}

async fn succeed(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    require_test_mode(&p)?;
    intent_action(
        req,
        state,
        payload,
        p,
        &path,
        |_| Ok(Action::TestSucceed),
        &[],
    )
    .await
}

async fn simulate_transfer(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    require_test_mode(&p)?;
    intent_action(
        req,
        state,
        payload,
        p,
        &path,
        |f| {
            Ok(Action::SimulateTransfer {
                amount: f.amount("amount", 1)?,
            })
        },
        &["amount"],
    )
    .await
}
