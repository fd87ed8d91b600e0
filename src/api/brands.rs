//! `/v1/brands`: a merchant's brands; each holds its own money.

use actix_web::{web, HttpRequest};
use serde::Deserialize;
use utoipa::ToSchema;

use kobo_actors::idempotency::Answer;
use kobo_actors::merchant::BrandView;
use kobo_actors::query::ListView;
use kobo_actors::{admin, query};

use super::body::{self as body};
use super::components::{path_id, BadRequest, ByRef, ConflictReplayable, IdempotencyKey, NotFound};
use super::endpoint::{Call, Endpoint};
use super::params::page_query;
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(
        resource("/v1/brands")
            .route(web::post().to(create))
            .route(web::get().to(list)),
    )
    .service(resource("/v1/brands/{id}").route(web::get().to(retrieve)));
}

/// List items: `ListView<BrandRef>` is `List_Brand`.
pub type BrandRef = ByRef<BrandView>;

// The body of `POST /v1/brands`, for the OpenAPI document; a unit test keeps
/// The body that creates a brand.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateBrand)]
pub struct CreateBrandRequest {
    /// Up to 200 characters, not only spaces.
    #[schema(min_length = 1, max_length = 200)]
    #[serde(deserialize_with = "body::required_text::<_, 200>")]
    name: String,
}

page_query!(
    /// The query of `GET /v1/brands`.
    ListBrandsQuery,
    "The id of the last brand of the previous page."
);

path_id!(
    /// The `{id}` of a brand.
    BrandId,
    "brand",
    /// The brand's id; unknown, malformed, another merchant's or the other
    /// mode's: 404.
);

/// Create a brand
///
/// A brand holds its own money: payments name it (`brand`), and balances,
/// balance transactions and payouts can be asked for one brand.
#[utoipa::path(
    post,
    path = "/v1/brands",
    operation_id = "create_brand",
    tag = "brands",
    params(IdempotencyKey),
    request_body(content = CreateBrandRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new brand.", body = BrandView),
        (status = 409, response = ConflictReplayable),
    )
)]
async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    CREATE_BRAND.post(req, state, payload, create_run).await
}

/// `POST /v1/brands`' declaration (the dashboard's settings form posts
/// through it too).
pub const CREATE_BRAND: Endpoint = Endpoint::secret_key(201);

/// `POST /v1/brands`' run: the checked name becomes a brand of the
/// caller's merchant and mode.
pub async fn create_run(c: Call, body: CreateBrandRequest) -> ApiResult<Answer<BrandView>> {
    let (state, p) = (&c.state, &c.p);
    Ok(admin::create_brand(&state.kobo, p.merchant.id, p.mode, body.name, c.save()).await?)
}

/// List brands
///
/// Newest first; the default brand has `default: true`.
#[utoipa::path(
    get,
    path = "/v1/brands",
    operation_id = "list_brands",
    tag = "brands",
    params(ListBrandsQuery),
    responses(
        (status = 200, description = "A page of brands, newest first.", body = ListView<BrandRef>),
        (status = 400, response = BadRequest),
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .list_page::<ListBrandsQuery, _>(req, state, query::list_brands)
        .await
}

/// Retrieve a brand
#[utoipa::path(
    get,
    path = "/v1/brands/{id}",
    operation_id = "retrieve_brand",
    tag = "brands",
    params(BrandId),
    responses(
        (status = 200, description = "The brand.", body = BrandView),
        (status = 404, response = NotFound),
    )
)]
async fn retrieve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let Call { state, p, .. } = c;
            let id = BrandId::parse(&path)?.id;
            let brand = query::brand(&state.kobo, p.merchant.id, p.mode, id)?;
            Ok(brand.to_api())
        })
        .await
}
