//! `/v1/payment_intents`: create, list, retrieve, cancel, bank transfer,
//! charge attempts.

use actix_web::{web, HttpRequest};
use serde_json::Value;
use uuid::Uuid;

use kobo_actors::idempotency::IdempotencySave;
use kobo_actors::money::FeeBearer;
use kobo_actors::payment_intent::actor::{Action, IntentMessage};
use kobo_actors::payment_intent::service::{self, CreatePaymentIntent};
use kobo_actors::payment_intent::Status;
use kobo_actors::query::{self, IntentFilter, Principal};
use kobo_actors::{DomainError, Mode};

use super::body::{Fields, Query};
use super::{
    authenticate, authenticate_for, idempotent, json_response, parse_id, read_body, resource,
    ApiError, ApiResult, Reply, State,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/v1/payment_intents")
            .route(web::post().to(create))
            .route(web::get().to(list)),
    )
    .service(resource("/v1/payment_intents/{id}").route(web::get().to(retrieve)))
    .service(resource("/v1/payment_intents/{id}/cancel").route(web::post().to(cancel)))
    .service(
        resource("/v1/payment_intents/{id}/bank_transfer").route(web::post().to(bank_transfer)),
    )
    .service(
        resource("/v1/payment_intents/{id}/charge_attempts").route(web::get().to(charge_attempts)),
    );
}

const CREATE_FIELDS: &[&str] = &[
    "amount",
    "currency",
    "reference",
    "description",
    "customer_email",
    "metadata",
    "fee_bearer",
    "brand",
    "customer",
    "return_url",
];

/// Amounts of a payment intent start at 100 minor units.
pub const MIN_PAYMENT_AMOUNT: i64 = 100;

fn parse_create(body: &[u8]) -> Result<CreatePaymentIntent, DomainError> {
    let f = Fields::parse(body, CREATE_FIELDS)?;
    let amount = f.required_amount("amount", MIN_PAYMENT_AMOUNT)?;
    let currency = f
        .currency("currency")?
        .ok_or_else(|| DomainError::missing("currency"))?;
    let fee_bearer = match f.string("fee_bearer", 16)?.as_deref() {
        None | Some("merchant") => FeeBearer::Merchant,
        Some("customer") => FeeBearer::Customer,
        Some(_) => {
            return Err(DomainError::invalid(
                "fee_bearer",
                "fee_bearer must be merchant or customer",
            ))
        }
    };
    Ok(CreatePaymentIntent {
        amount,
        currency,
        reference: f.string("reference", 255)?,
        description: f.string("description", 1000)?,
        customer_email: f.email("customer_email")?,
        metadata: f.metadata("metadata")?,
        fee_bearer,
        brand: f.uuid("brand")?,
        customer: f.uuid("customer")?,
        return_url: f.url("return_url")?,
    })
}

/// Live payments need an activated account (403 before anything else).
fn ensure_can_take_payments(p: &Principal) -> ApiResult<()> {
    if p.mode == Mode::Live && !p.merchant.settings.live_approved {
        return Err(ApiError(DomainError::forbidden(
            "account_not_activated",
            "live payments are not yet enabled for this account",
        )));
    }
    Ok(())
}

async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let p = authenticate(&req, &state)?;
    ensure_can_take_payments(&p)?;
    let body = read_body(payload).await?;
    let (state, p, body) = (&state, &p, &body);
    idempotent(&req, state, p, body, |save| async move {
        let params = parse_create(body)?;
        let view = service::create(&state.kobo, &p.merchant, p.mode, params, Some(&save)).await?;
        Ok(Reply::saved(201, view))
    })
    .await
}

async fn list(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let q = Query::parse(
        req.query_string(),
        &["limit", "starting_after", "customer", "status"],
    )?;
    let filter = IntentFilter {
        limit: q.limit()?,
        starting_after: q.uuid("starting_after")?,
        status: q.one_of("status", Status::parse, "a payment intent status")?,
        customer: q.uuid("customer")?,
    };
    let page = query::list_payment_intents(&state.kobo, p.merchant.id, p.mode, &filter)?;
    Ok(json_response(200, &page.to_api()))
}

async fn retrieve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let p = authenticate_for(&req, &state, Some(&path))?;
    let id = parse_id(&path, "payment_intent")?;
    let intent = query::payment_intent(&state.kobo, p.merchant.id, p.mode, id)?;
    Ok(json_response(200, &intent.to_api(None)))
}

async fn charge_attempts(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let id = parse_id(&path, "payment_intent")?;
    let intent = query::payment_intent(&state.kobo, p.merchant.id, p.mode, id)?;
    Ok(json_response(
        200,
        &query::charge_attempts(&state.kobo, &intent)?.to_api(),
    ))
}

/// Sends `action` to the intent's actor, after checking it exists for this
/// merchant and mode (so unknown ids never activate an actor).
pub async fn act(
    state: &State,
    p: &Principal,
    id: Uuid,
    action: Action,
    save: Option<IdempotencySave>,
) -> Result<Value, DomainError> {
    query::payment_intent(&state.kobo, p.merchant.id, p.mode, id)?;
    let msg = IntentMessage {
        merchant: p.merchant.id,
        mode: p.mode,
        merchant_name: p.merchant.name.clone(),
        bank_transfer_enabled: p.merchant.settings.payment_methods.bank_transfer,
        action,
        idem: save,
    };
    state
        .kobo
        .payment_intents
        .send(&state.kobo, id, msg)
        .await?
}

/// A POST on one intent that takes no body: idempotent, then the action.
pub async fn intent_action(
    req: HttpRequest,
    state: State,
    payload: web::Payload,
    p: Principal,
    raw_id: &str,
    action: impl FnOnce(&Fields) -> Result<Action, DomainError>,
    allowed: &[&str],
) -> ApiResult {
    let body = read_body(payload).await?;
    let (state, p, body) = (&state, &p, &body);
    idempotent(&req, state, p, body, |save| async move {
        let fields = Fields::parse(body, allowed)?;
        let id = parse_id(raw_id, "payment_intent").map_err(|e| e.0)?;
        let action = action(&fields)?;
        let view = act(state, p, id, action, Some(save)).await?;
        Ok(Reply::saved(200, view))
    })
    .await
}

async fn cancel(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    intent_action(req, state, payload, p, &path, |_| Ok(Action::Cancel), &[]).await
}

async fn bank_transfer(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate_for(&req, &state, Some(&path))?;
    ensure_can_take_payments(&p)?;
    intent_action(
        req,
        state,
        payload,
        p,
        &path,
        |_| Ok(Action::BankTransfer),
        &[],
    )
    .await
}
