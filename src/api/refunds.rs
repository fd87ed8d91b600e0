//! Refunds, disputes, and the dispute test helpers.

use actix_web::{web, HttpRequest};
use serde_json::Value;
use uuid::Uuid;

use kobo_actors::idempotency::IdempotencySave;
use kobo_actors::query::{self, Principal};
use kobo_actors::refund::actor::{AftercareAction, AftercareMessage};
use kobo_actors::refund::service;
use kobo_actors::DomainError;

use super::body::{Fields, Query};
use super::{
    authenticate, idempotent, json_response, parse_id, read_body, require_test_mode, resource,
    ApiError, ApiResult, Reply, State,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/v1/refunds")
            .route(web::post().to(create_refund))
            .route(web::get().to(list_refunds)),
    )
    .service(resource("/v1/refunds/{id}").route(web::get().to(retrieve_refund)))
    .service(resource("/v1/disputes").route(web::get().to(list_disputes)))
    .service(resource("/v1/disputes/{id}").route(web::get().to(retrieve_dispute)))
    .service(resource("/v1/disputes/{id}/evidence").route(web::post().to(evidence)))
    .service(
        resource("/v1/test_helpers/payment_intents/{id}/dispute")
            .route(web::post().to(open_dispute)),
    )
    .service(resource("/v1/test_helpers/disputes/{id}/resolve").route(web::post().to(resolve)));
}

async fn send(
    state: &State,
    p: &Principal,
    payment: Uuid,
    action: AftercareAction,
    idem: IdempotencySave,
) -> Result<Value, DomainError> {
    state
        .kobo
        .aftercare
        .send(
            &state.kobo,
            payment,
            AftercareMessage {
                merchant: p.merchant.id,
                mode: p.mode,
                action,
                idem: Some(idem),
            },
        )
        .await?
}

pub const REFUND_FIELDS: &[&str] = &["payment_intent", "amount", "reason", "metadata"];

async fn create_refund(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let body = read_body(payload).await?;
    let (state, p, body) = (&state, &p, &body);
    idempotent(&req, state, p, body, |save| async move {
        let f = Fields::parse(body, REFUND_FIELDS)?;
        let payment = f
            .uuid("payment_intent")?
            .ok_or_else(|| DomainError::missing("payment_intent"))?;
        let amount = f.amount("amount", 1)?;
        let reason = f.string("reason", 500)?;
        let metadata = f.metadata("metadata")?;
        query::payment_intent(&state.kobo, p.merchant.id, p.mode, payment)
            .map_err(|e| e.with_param("payment_intent"))?;
        let view = send(
            state,
            p,
            payment,
            AftercareAction::CreateRefund {
                amount,
                reason,
                metadata,
            },
            save,
        )
        .await?;
        Ok(Reply::saved(201, view))
    })
    .await
}

async fn list_refunds(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let q = Query::parse(
        req.query_string(),
        &["limit", "starting_after", "payment_intent"],
    )?;
    let page = service::list_refunds(
        &state.kobo,
        p.merchant.id,
        p.mode,
        q.uuid("payment_intent")?,
        q.limit()?,
        q.uuid("starting_after")?,
    )?;
    Ok(json_response(200, &page.to_api()))
}

async fn retrieve_refund(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let id = parse_id(&path, "refund")?;
    match service::load_refund(&state.kobo, id)? {
        Some(r) if r.merchant == p.merchant.id && r.mode == p.mode => {
            Ok(json_response(200, &r.to_api()))
        }
        _ => Err(ApiError(DomainError::not_found("refund", id))),
    }
}

async fn list_disputes(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let q = Query::parse(req.query_string(), &["limit", "starting_after"])?;
    let page = service::list_disputes(
        &state.kobo,
        p.merchant.id,
        p.mode,
        q.limit()?,
        q.uuid("starting_after")?,
    )?;
    Ok(json_response(200, &page.to_api()))
}

fn own_dispute(state: &State, p: &Principal, raw: &str) -> ApiResult<kobo_actors::refund::Dispute> {
    let id = parse_id(raw, "dispute")?;
    match service::load_dispute(&state.kobo, id)? {
        Some(d) if d.merchant == p.merchant.id && d.mode == p.mode => Ok(d),
        _ => Err(ApiError(DomainError::not_found("dispute", id))),
    }
}

async fn retrieve_dispute(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let p = authenticate(&req, &state)?;
    Ok(json_response(
        200,
        &own_dispute(&state, &p, &path)?.to_api(),
    ))
}

pub const EVIDENCE_FIELDS: &[&str] = &[
    "text",
    "customer_name",
    "customer_email",
    "service_date",
    "receipt_url",
    "tracking_number",
];

async fn evidence(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let body = read_body(payload).await?;
    let (state, p, body, raw) = (&state, &p, &body, path.as_str());
    idempotent(&req, state, p, body, |save| async move {
        let f = Fields::parse(body, EVIDENCE_FIELDS)?;
        let mut evidence = serde_json::Map::new();
        for name in EVIDENCE_FIELDS {
            if let Some(v) = f.string(name, 5000)? {
                evidence.insert(name.to_string(), Value::from(v));
            }
        }
        if evidence.is_empty() {
            return Err(DomainError::missing("text").into());
        }
        let d = own_dispute(state, p, raw)?;
        let view = send(
            state,
            p,
            d.payment_intent,
            AftercareAction::SubmitEvidence {
                dispute: d.id,
                evidence: Value::Object(evidence),
            },
            save,
        )
        .await?;
        Ok(Reply::saved(200, view))
    })
    .await
}

async fn open_dispute(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    require_test_mode(&p)?;
    let body = read_body(payload).await?;
    let (state, p, body, raw) = (&state, &p, &body, path.as_str());
    idempotent(&req, state, p, body, |save| async move {
        let f = Fields::parse(body, &["amount", "reason"])?;
        let amount = f.amount("amount", 1)?;
        let reason = f.string("reason", 200)?;
        let id = parse_id(raw, "payment_intent")?;
        query::payment_intent(&state.kobo, p.merchant.id, p.mode, id)?;
        let view = send(
            state,
            p,
            id,
            AftercareAction::OpenDispute { amount, reason },
            save,
        )
        .await?;
        Ok(Reply::saved(201, view))
    })
    .await
}

async fn resolve(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    require_test_mode(&p)?;
    let body = read_body(payload).await?;
    let (state, p, body, raw) = (&state, &p, &body, path.as_str());
    idempotent(&req, state, p, body, |save| async move {
        let f = Fields::parse(body, &["outcome"])?;
        let won = match f.string("outcome", 10)?.as_deref() {
            Some("won") => true,
            Some("lost") => false,
            Some(_) => return Err(DomainError::invalid("outcome", "outcome is won or lost").into()),
            None => return Err(DomainError::missing("outcome").into()),
        };
        let d = own_dispute(state, p, raw)?;
        let view = send(
            state,
            p,
            d.payment_intent,
            AftercareAction::ResolveDispute { dispute: d.id, won },
            save,
        )
        .await?;
        Ok(Reply::saved(200, view))
    })
    .await
}
