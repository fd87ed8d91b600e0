//! Dollar rates and conversions: `GET /v1/fx` (the preview),
//! `/v1/fx/conversions`, and the operator's `POST /admin/v1/fx_rates`.

use actix_web::{web, HttpRequest};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::fx::{self, Convert, FxConversionView, FxPreviewView};
use kobo_actors::money::MAX_AMOUNT;
use kobo_actors::query::{ListView, Principal};
use kobo_actors::DomainError;

use super::body::{self as body};
use super::components::{
    path_id, BadRequest, ByRef, ConflictReplayable, IdempotencyKey, NotFound, NotFoundReplayable,
};
use super::endpoint::{Call, Endpoint};
use super::params::{self, page_query};
use super::{resource, ApiError, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(resource("/v1/fx").route(web::get().to(preview)))
        .service(
            resource("/v1/fx/conversions")
                .route(web::post().to(create_conversion))
                .route(web::get().to(list_conversions)),
        )
        .service(resource("/v1/fx/conversions/{id}").route(web::get().to(retrieve_conversion)))
        .service(resource("/admin/v1/fx_rates").route(web::post().to(publish_rate)));
}

pub type FxConversionRef = ByRef<FxConversionView>;

/// The query of `GET /v1/fx` and `GET /v1/usdt/preview`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PreviewQuery {
    /// Cents, at least 1.
    #[param(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "usd_amount")]
    usd_amount: Option<i64>,
    /// Whose dollars (400 for an unknown brand); default: the default brand.
    #[serde(deserialize_with = "params::uuid")]
    brand: Option<Uuid>,
}

fn usd_amount<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    params::amount(
        d,
        &format!("usd_amount is an integer of cents, from 1 to {MAX_AMOUNT}"),
    )
}

page_query!(
    /// The query of the conversion and USDT payout lists.
    ListQuery,
    "The id of the last object of the previous page."
);

path_id!(
    /// The `{id}` of a conversion.
    ConversionId,
    "fx_conversion",
    /// Unknown, another merchant's or the other mode's: 404.
);

impl PreviewQuery {
    /// `usd_amount`, and the brand (400 when it is not one of the
    /// merchant's brands; default: the default brand).
    pub fn checked(self, state: &State, p: &Principal) -> Result<(Option<i64>, Uuid), DomainError> {
        let brand = params::brand(state, p, self.brand)?
            .unwrap_or_else(|| p.merchant.default_brand(p.mode));
        Ok((self.usd_amount, brand))
    }
}

/// Preview a conversion
///
/// The current dollar rate with its id (send it as `rate_id` to convert),
/// the dollars available to convert, and with `usd_amount` the naira they
/// would give: `floor(usd_amount * rate / 100)` kobo. No conversion fee (the
/// rate carries the margin). Before the first rate is published: 409
/// `no_fx_rate`.
#[utoipa::path(
    get,
    path = "/v1/fx",
    operation_id = "preview_fx",
    tag = "fx",
    params(PreviewQuery),
    responses(
        (status = 200, description = "The preview.", body = FxPreviewView),
        (status = 400, response = BadRequest),
        (status = 409, description = "`state_error` `no_fx_rate`: no rate has been published yet.", body = super::ErrorBody),
    )
)]
async fn preview(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: PreviewQuery| async move {
            let Call { state, p, .. } = c;
            let (usd_amount, brand) = q.checked(&state, &p)?;
            let view = fx::preview(&state.kobo, p.merchant.id, p.mode, brand, usd_amount)?;
            Ok(serde_json::to_value(view).expect("a preview serializes"))
        })
        .await
}

// The body of `POST /v1/fx/conversions`, for the OpenAPI document; a unit
/// The body that converts dollars to naira. No other fields are allowed.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateFxConversion)]
pub struct CreateConversionRequest {
    /// Cents to take from USD `available`.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::amount::<_, 1>")]
    usd_amount: i64,
    /// The rate from `GET /v1/fx`; it must still be the current rate.
    #[serde(deserialize_with = "body::required_uuid")]
    rate_id: Uuid,
    /// Whose dollars (default: the default brand); unknown: 404.
    #[serde(deserialize_with = "body::uuid")]
    brand: Option<Uuid>,
}

/// Convert dollars to naira
///
/// Moves `usd_amount` cents out of USD `available` and
/// `floor(usd_amount * rate / 100)` kobo into NGN `available`, as one
/// `conversion` entry. A newer rate published since `rate_id`: 409
/// `rate_changed` naming the new rate and its id, and nothing converts. An
/// unknown `rate_id`: 404 (`param: rate_id`). Short dollars: 409
/// `insufficient_funds`. An amount that gives less than one kobo: 400.
#[utoipa::path(
    post,
    path = "/v1/fx/conversions",
    operation_id = "create_fx_conversion",
    tag = "fx",
    params(IdempotencyKey),
    request_body(content = CreateConversionRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The conversion.", body = FxConversionView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
    )
)]
async fn create_conversion(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    Endpoint::secret_key(201)
        .post(
            req,
            state,
            payload,
            |c, body: CreateConversionRequest| async move {
                let (state, p) = (&c.state, &c.p);
                let CreateConversionRequest {
                    usd_amount,
                    rate_id,
                    brand,
                } = body;
                let convert = Convert {
                    usd_amount,
                    rate_id,
                    brand,
                    automatic: false,
                };
                Ok(fx::convert(&state.kobo.fx, &p.merchant, p.mode, convert, c.save()).await?)
            },
        )
        .await
}

/// List conversions
///
/// Newest first, `automatic` ones (dollar settlement) included.
#[utoipa::path(
    get,
    path = "/v1/fx/conversions",
    operation_id = "list_fx_conversions",
    tag = "fx",
    params(ListQuery),
    responses(
        (status = 200, description = "The conversions, newest first.", body = ListView<FxConversionRef>),
        (status = 400, response = BadRequest),
    )
)]
async fn list_conversions(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .list_page::<ListQuery, _>(req, state, fx::list_conversions)
        .await
}

/// Retrieve a conversion
#[utoipa::path(
    get,
    path = "/v1/fx/conversions/{id}",
    operation_id = "retrieve_fx_conversion",
    tag = "fx",
    params(ConversionId),
    responses(
        (status = 200, description = "The conversion.", body = FxConversionView),
        (status = 404, response = NotFound),
    )
)]
async fn retrieve_conversion(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let Call { state, p, .. } = c;
            let id = ConversionId::parse(&path)?.id;
            match fx::load_conversion(&state.kobo, id)? {
                Some(c) if c.merchant == p.merchant.id && c.mode == p.mode => Ok(c.to_api()),
                _ => Err(ApiError(DomainError::not_found("fx_conversion", id))),
            }
        })
        .await
}

/// `POST /admin/v1/fx_rates {rate}`: publishes a rate (kobo per dollar,
/// 1 to [`fx::MAX_RATE`]); it is current from then on. 201.
async fn publish_rate(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let audit = super::endpoint::audit(&req);
    Endpoint::operator(201)
        .operate_with(req, state, payload, |state, b: PublishRate| async move {
            publish_rate_with(&state, b, audit).await
        })
        .await
}

/// Publishes the dollar rate (the operator API and the console).
pub(crate) async fn publish_rate_with(
    state: &State,
    b: PublishRate,
    audit: kobo_actors::audit::Audit,
) -> ApiResult<Value> {
    let v = b.rate;
    let rate = v
        .as_i64()
        .filter(|_| v.is_i64() || v.is_u64())
        .ok_or_else(|| DomainError::invalid("rate", "rate is an integer of kobo per US dollar"))?;
    Ok(fx::publish_rate(&state.kobo.fx, rate, &audit)
        .await?
        .to_api())
}

/// `{rate}`.
#[derive(Deserialize)]
pub(crate) struct PublishRate {
    rate: Value,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use utoipa::PartialSchema;

    use super::*;

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    pub fn property_names<T: PartialSchema>() -> BTreeSet<String> {
        let v = serde_json::to_value(T::schema()).unwrap();
        v["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    #[test]
    fn documented_fields_are_those_the_parsers_accept() {
        assert_eq!(
            property_names::<CreateConversionRequest>(),
            names(super::body::fields_of::<CreateConversionRequest>())
        );
        let schema = serde_json::to_value(CreateConversionRequest::schema()).unwrap();
        assert_eq!(
            schema["required"],
            serde_json::json!(["usd_amount", "rate_id"])
        );
        assert_eq!(schema["properties"]["usd_amount"]["minimum"], 1);
        assert_eq!(schema["properties"]["usd_amount"]["maximum"], MAX_AMOUNT);
    }
}
