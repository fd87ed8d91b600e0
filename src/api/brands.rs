//! `/v1/brands`: a merchant's brands; each holds its own money.

use actix_web::{web, HttpRequest};

use kobo_actors::{admin, query};

use super::body::{Fields, Query};
use super::{
    authenticate, idempotent, json_response, parse_id, read_body, resource, ApiResult, Reply, State,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/v1/brands")
            .route(web::post().to(create))
            .route(web::get().to(list)),
    )
    .service(resource("/v1/brands/{id}").route(web::get().to(retrieve)));
}

pub const CREATE_BRAND_FIELDS: &[&str] = &["name"];

async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let body = read_body(payload).await?;
    let (state, p, body) = (&state, &p, &body);
    idempotent(&req, state, p, body, |save| async move {
        let f = Fields::parse(body, CREATE_BRAND_FIELDS)?;
        let name = f.required_string("name", 200)?;
        let view =
            admin::create_brand(&state.kobo, p.merchant.id, p.mode, name, Some(&save)).await?;
        Ok(Reply::saved(201, view))
    })
    .await
}

async fn list(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let q = Query::parse(req.query_string(), &["limit", "starting_after"])?;
    let page = query::list_brands(
        &state.kobo,
        p.merchant.id,
        p.mode,
        q.limit()?,
        q.uuid("starting_after")?,
    )?;
    Ok(json_response(200, &page.to_api()))
}

async fn retrieve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let id = parse_id(&path, "brand")?;
    let brand = query::brand(&state.kobo, p.merchant.id, p.mode, id)?;
    Ok(json_response(200, &brand.to_api()))
}
