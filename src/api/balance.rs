//! `/v1/balance`, `/v1/balance_transactions` and the statement export, read
//! straight from the ledger's store snapshot.

use actix_web::{web, HttpRequest};
use chrono::NaiveDate;
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::ledger::{Bucket, EntryGroup, EntryType};
use kobo_actors::money::Currency;
use kobo_actors::query::{self, BalanceView, LineFilter, ListView, Principal};
use kobo_actors::DomainError;

use super::body::Query;
use super::components::{BadRequest, BalanceTransactionRef};
use super::endpoint::{Call, Endpoint};
use super::{ApiResult, State};

/// Most lines one statement export holds.
pub const EXPORT_MAX_LINES: usize = 20_000;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(super::resource("/v1/balance").route(web::get().to(balance)))
        .service(super::resource("/v1/balance_transactions").route(web::get().to(transactions)))
        .service(super::resource("/v1/balance_transactions/export").route(web::get().to(export)));
}

fn brand_param(state: &State, p: &Principal, q: &Query) -> Result<Option<Uuid>, DomainError> {
    match q.uuid("brand")? {
        None => Ok(None),
        Some(b) => query::brand(&state.kobo, p.merchant.id, p.mode, b)
            .map(|_| Some(b))
            .map_err(|_| DomainError::invalid("brand", format!("no such brand: {b}"))),
    }
}

/// The query `GET /v1/balance` accepts.
pub const BALANCE_PARAMS: &[&str] = &["brand"];

// The query of `GET /v1/balance`, for the OpenAPI document; a unit test
// keeps these names and [`BALANCE_PARAMS`] equal.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct BalanceQuery {
    /// One brand's own money (400 for an unknown brand); without it, the
    /// whole business (the sum of its brands).
    brand: Option<Uuid>,
}

/// Retrieve the balance
///
/// Straight from the ledger: every bucket, one entry per currency (zeros
/// included).
#[utoipa::path(
    get,
    path = "/v1/balance",
    operation_id = "retrieve_balance",
    tag = "balance",
    params(BalanceQuery),
    responses(
        (status = 200, description = "The balance.", body = BalanceView),
        (status = 400, response = BadRequest),
    )
)]
async fn balance(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let Call { req, state, p, .. } = c;
            let q = Query::parse(req.query_string(), BALANCE_PARAMS)?;
            let brand = brand_param(&state, &p, &q)?;
            Ok(query::balance(&state.kobo, p.merchant.id, p.mode, brand)?)
        })
        .await
}

/// The filters of balance transactions and statement exports.
pub const FILTERS: &[&str] = &["brand", "currency", "bucket", "type", "from", "to"];

// The filters of `GET /v1/balance_transactions` and its export, for the
// OpenAPI document; a unit test keeps these names and [`FILTERS`] equal.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct LineFilterQuery {
    /// One brand's lines (400 for an unknown brand).
    brand: Option<Uuid>,
    #[param(inline)]
    currency: Option<Currency>,
    #[param(inline)]
    bucket: Option<Bucket>,
    /// Comma-separated groups; `conversions` also matches corrections.
    #[param(rename = "type", inline, style = Form, explode = false)]
    types: Option<Vec<EntryGroup>>,
    /// First day, inclusive, Lagos time.
    from: Option<NaiveDate>,
    /// Last day, inclusive, Lagos time (not before `from`).
    to: Option<NaiveDate>,
}

/// The pagination of `GET /v1/balance_transactions`, besides [`FILTERS`].
pub const PAGE_PARAMS: &[&str] = &["limit", "starting_after"];

// The pagination of `GET /v1/balance_transactions`, for the OpenAPI
// document; a unit test keeps these names and [`PAGE_PARAMS`] equal.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct LinePageQuery {
    /// Page size, 1 to 100.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<u8>,
    /// The id of the last balance transaction of the previous page.
    #[param(pattern = "^[0-9]+$")]
    starting_after: Option<String>,
}

fn line_filter(state: &State, p: &Principal, q: &Query) -> Result<LineFilter, DomainError> {
    let types = match q.get("type") {
        None => None,
        Some(s) => {
            let mut types = Vec::new();
            for group in s.split(',').map(str::trim) {
                let t = EntryType::parse_group(group).ok_or_else(|| {
                    DomainError::invalid(
                        "type",
                        "type is a comma-separated list of payments, releases, payouts, refunds, disputes, conversions",
                    )
                })?;
                types.extend_from_slice(t);
            }
            Some(types)
        }
    };
    let f = LineFilter {
        brand: brand_param(state, p, q)?,
        currency: q.one_of("currency", Currency::parse, "NGN or USD")?,
        bucket: q.one_of(
            "bucket",
            Bucket::parse,
            "one of available, pending, reserve, payout_in_flight, refund_in_flight, dispute_hold",
        )?,
        types,
        from: q.date("from")?,
        to: q.date("to")?,
    };
    if let (Some(from), Some(to)) = (f.from, f.to) {
        if from > to {
            return Err(DomainError::invalid("from", "`from` is after `to`"));
        }
    }
    Ok(f)
}

/// List balance transactions
///
/// One ledger line each, newest first.
#[utoipa::path(
    get,
    path = "/v1/balance_transactions",
    operation_id = "list_balance_transactions",
    tag = "balance",
    params(LinePageQuery, LineFilterQuery),
    responses(
        (status = 200, description = "A page of balance transactions, newest first.",
            body = ListView<BalanceTransactionRef>),
        (status = 400, response = BadRequest),
    )
)]
async fn transactions(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let Call { req, state, p, .. } = c;
            let mut allowed = FILTERS.to_vec();
            allowed.extend(PAGE_PARAMS);
            let q = Query::parse(req.query_string(), &allowed)?;
            let limit = q.limit()?;
            let starting_after = q
                .get("starting_after")
                .map(|s| {
                    s.parse::<u64>().map_err(|_| {
                        DomainError::invalid(
                            "starting_after",
                            "starting_after is a balance transaction id (digits)",
                        )
                    })
                })
                .transpose()?;
            let f = line_filter(&state, &p, &q)?;
            let page = query::balance_transactions(
                &state.kobo,
                p.merchant.id,
                p.mode,
                &f,
                limit,
                starting_after,
            )?;
            Ok(page.to_api())
        })
        .await
}

/// The `object` value of a statement export.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum StatementExportObject {
    #[serde(rename = "statement_export")]
    StatementExport,
}

/// The content type of a statement export.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum StatementContentType {
    #[serde(rename = "text/csv")]
    Csv,
}

/// A statement export: the matching lines as CSV, oldest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = StatementExport)]
pub struct StatementExportView {
    #[schema(inline)]
    pub object: StatementExportObject,
    pub livemode: bool,
    pub file_name: String,
    #[schema(inline)]
    pub content_type: StatementContentType,
    /// Lines in `data`.
    pub rows: usize,
    /// More lines matched than one export holds (the oldest were left out:
    /// narrow the dates for them).
    pub truncated: bool,
    /// CSV text: `id,created_at,type,currency,bucket,amount,balance_after,gross,fee,source,brand,description`.
    pub data: String,
}

/// Export balance transactions as CSV
///
/// At most 20,000 lines, oldest first; narrow the dates for more.
#[utoipa::path(
    get,
    path = "/v1/balance_transactions/export",
    operation_id = "export_balance_transactions",
    tag = "balance",
    params(LineFilterQuery),
    responses(
        (status = 200, description = "The statement export.", body = StatementExportView),
        (status = 400, response = BadRequest),
    )
)]
async fn export(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let Call { req, state, p, .. } = c;
            let q = Query::parse(req.query_string(), FILTERS)?;
            let f = line_filter(&state, &p, &q)?;
            let (lines, truncated) =
                query::statement_lines(&state.kobo, p.merchant.id, p.mode, &f, EXPORT_MAX_LINES)?;
            let mut w = csv::Writer::from_writer(Vec::new());
            let csv_err = |e: csv::Error| DomainError::internal(format!("csv: {e}"));
            w.write_record([
                "id",
                "created_at",
                "type",
                "currency",
                "bucket",
                "amount",
                "balance_after",
                "gross",
                "fee",
                "source",
                "brand",
                "description",
            ])
            .map_err(csv_err)?;
            for l in &lines {
                w.write_record([
                    l.id.to_string(),
                    l.created_at
                        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                    l.entry_type.as_str().to_string(),
                    l.currency.as_str().to_string(),
                    l.bucket.as_str().to_string(),
                    l.amount.to_string(),
                    l.balance_after.to_string(),
                    l.gross.map(|g| g.to_string()).unwrap_or_default(),
                    l.fee.map(|g| g.to_string()).unwrap_or_default(),
                    l.source.to_string(),
                    l.brand.to_string(),
                    l.description.clone(),
                ])
                .map_err(csv_err)?;
            }
            let data = String::from_utf8(
                w.into_inner()
                    .map_err(|e| DomainError::internal(e.to_string()))?,
            )
            .map_err(|e| DomainError::internal(e.to_string()))?;
            let day = |d: Option<chrono::NaiveDate>| {
                d.map(|d| d.to_string()).unwrap_or_else(|| "all".into())
            };
            let view = StatementExportView {
                object: StatementExportObject::StatementExport,
                livemode: p.mode.livemode(),
                file_name: format!(
                    "kobo-statement-{}-{}-to-{}.csv",
                    p.mode.as_str(),
                    day(f.from),
                    day(f.to)
                ),
                content_type: StatementContentType::Csv,
                rows: lines.len(),
                truncated,
                data,
            };
            Ok(serde_json::to_value(view).map_err(|e| DomainError::internal(e.to_string()))?)
        })
        .await
}
