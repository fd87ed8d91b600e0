//! Banks, bank accounts, payouts and the payout quote; operator approval.

use actix_web::{web, HttpRequest};

use kobo_actors::banks;
use kobo_actors::payout::actor::{PayoutAction, PayoutMessage};
use kobo_actors::payout::service::{self, CreatePayout, MIN_PAYOUT};
use kobo_actors::query::Principal;
use kobo_actors::{DomainError, Mode};

use super::body::{Fields, Query};
use super::{
    authenticate, idempotent, json_response, parse_id, read_body, resource, ApiError, ApiResult,
    Reply, State,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/v1/banks").route(web::get().to(list_banks)))
        .service(
            resource("/v1/bank_accounts")
                .route(web::post().to(add_bank_account))
                .route(web::get().to(list_bank_accounts)),
        )
        .service(resource("/v1/payouts/quote").route(web::get().to(quote)))
        .service(
            resource("/v1/payouts")
                .route(web::post().to(create))
                .route(web::get().to(list)),
        )
        .service(resource("/v1/payouts/{id}").route(web::get().to(retrieve)))
        .service(resource("/v1/payouts/{id}/cancel").route(web::post().to(cancel)))
        .service(resource("/admin/v1/payouts/{id}/approve").route(web::post().to(approve)))
        .service(resource("/admin/v1/payouts/{id}/reject").route(web::post().to(reject)));
}

async fn list_banks(req: HttpRequest, state: State) -> ApiResult {
    authenticate(&req, &state)?;
    Ok(json_response(200, &banks::banks_view()))
}

pub const BANK_ACCOUNT_FIELDS: &[&str] = &["bank_code", "account_number"];

async fn add_bank_account(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let body = read_body(payload).await?;
    let (state, p, body) = (&state, &p, &body);
    idempotent(&req, state, p, body, |save| async move {
        let f = Fields::parse(body, BANK_ACCOUNT_FIELDS)?;
        let bank_code = f.required_string("bank_code", 6)?;
        let number = f.required_string("account_number", 10)?;
        let (view, created) = banks::add(
            &state.kobo,
            p.merchant.id,
            p.mode,
            &bank_code,
            &number,
            Some(&save),
        )
        .await?;
        Ok(if created {
            Reply::saved(201, view)
        } else {
            Reply {
                status: 200,
                body: view,
                saved: false,
            }
        })
    })
    .await
}

async fn list_bank_accounts(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    Query::parse(req.query_string(), &[])?;
    Ok(json_response(
        200,
        &banks::list(&state.kobo, p.merchant.id, p.mode)?,
    ))
}

pub const PAYOUT_FIELDS: &[&str] = &[
    "amount",
    "currency",
    "bank_account_id",
    "brand",
    "description",
];

async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let body = read_body(payload).await?;
    let (state, p, body) = (&state, &p, &body);
    idempotent(&req, state, p, body, |save| async move {
        let f = Fields::parse(body, PAYOUT_FIELDS)?;
        let amount = f.required_amount("amount", MIN_PAYOUT)?;
        match f.string("currency", 3)?.as_deref() {
            Some("NGN") => {}
            None => return Err(DomainError::missing("currency").into()),
            Some(_) => return Err(DomainError::invalid("currency", "payouts are in NGN").into()),
        }
        let bank_account = f
            .uuid("bank_account_id")?
            .ok_or_else(|| DomainError::missing("bank_account_id"))?;
        let brand = f.uuid("brand")?;
        f.string("description", 500)?;
        let payout = service::create(
            &state.kobo,
            &p.merchant,
            p.mode,
            CreatePayout {
                amount,
                bank_account,
                brand,
                automatic: false,
            },
            Some(&save),
        )
        .await?;
        Ok(Reply::saved(201, payout.to_api()))
    })
    .await
}

async fn list(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let q = Query::parse(req.query_string(), &["limit", "starting_after"])?;
    let page = service::list(
        &state.kobo,
        p.merchant.id,
        p.mode,
        q.limit()?,
        q.uuid("starting_after")?,
    )?;
    Ok(json_response(200, &page.to_api()))
}

fn own(state: &State, p: &Principal, raw: &str) -> ApiResult<kobo_actors::payout::Payout> {
    let id = parse_id(raw, "payout")?;
    match service::load(&state.kobo, id)? {
        Some(po) if po.merchant == p.merchant.id && po.mode == p.mode => Ok(po),
        _ => Err(ApiError(DomainError::not_found("payout", id))),
    }
}

async fn retrieve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let p = authenticate(&req, &state)?;
    Ok(json_response(200, &own(&state, &p, &path)?.to_api()))
}

async fn quote(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let q = Query::parse(req.query_string(), &["amount", "currency", "brand"])?;
    let amount = match q.get("amount") {
        None => return Err(DomainError::missing("amount").into()),
        Some(s) => s
            .parse::<i64>()
            .ok()
            .filter(|n| (1..=kobo_actors::money::MAX_AMOUNT).contains(n))
            .ok_or_else(|| {
                DomainError::invalid("amount", "amount is an integer of kobo, at least 1")
            })?,
    };
    if let Some(c) = q.get("currency") {
        if c != "NGN" {
            return Err(DomainError::invalid("currency", "payouts are in NGN").into());
        }
    }
    let brand = match q.uuid("brand")? {
        Some(b) => {
            kobo_actors::query::brand(&state.kobo, p.merchant.id, p.mode, b)
                .map_err(|_| DomainError::invalid("brand", format!("no such brand: {b}")))?
                .id
        }
        None => p.merchant.default_brand(p.mode),
    };
    Ok(json_response(
        200,
        &service::quote(&state.kobo, &p.merchant, p.mode, amount, brand)?,
    ))
}

async fn send(
    state: &State,
    merchant: uuid::Uuid,
    mode: Mode,
    id: uuid::Uuid,
    action: PayoutAction,
    idem: Option<kobo_actors::idempotency::IdempotencySave>,
) -> Result<serde_json::Value, DomainError> {
    state
        .kobo
        .payouts
        .send(
            &state.kobo,
            id,
            PayoutMessage {
                merchant,
                mode,
                action,
                idem,
            },
        )
        .await?
}

async fn cancel(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let body = read_body(payload).await?;
    let (state, p, body, raw) = (&state, &p, &body, path.as_str());
    idempotent(&req, state, p, body, |save| async move {
        Fields::parse(body, &[])?;
        let po = own(state, p, raw)?;
        let view = send(
            state,
            po.merchant,
            po.mode,
            po.id,
            PayoutAction::Cancel,
            Some(save),
        )
        .await?;
        Ok(Reply::saved(200, view))
    })
    .await
}

async fn review(req: HttpRequest, state: State, raw: &str, action: PayoutAction) -> ApiResult {
    super::admin::operator(&req, &state)?;
    let id = parse_id(raw, "payout")?;
    let po = service::load(&state.kobo, id)?.ok_or_else(|| DomainError::not_found("payout", id))?;
    let view = send(&state, po.merchant, po.mode, po.id, action, None).await?;
    Ok(json_response(200, &view))
}

async fn approve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    review(req, state, &path, PayoutAction::Approve).await
}

async fn reject(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    review(req, state, &path, PayoutAction::Reject).await
}
