//! `/v1/balance`, `/v1/balance_transactions` and the statement export, read
//! straight from the ledger's store snapshot.

use actix_web::{web, HttpRequest};
use chrono::NaiveDate;
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::ledger::{Bucket, EntryGroup, EntryType};
use kobo_actors::money::Currency;
use kobo_actors::query::{self, BalanceView, LineFilter, ListView, Principal};
use kobo_actors::DomainError;

use super::body;
use super::components::{BadRequest, BalanceTransactionRef};
use super::endpoint::{Call, Endpoint};
use super::params;
use super::{ApiResult, State};

/// Most lines one statement export holds.
pub const EXPORT_MAX_LINES: usize = 20_000;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(super::resource("/v1/balance").route(web::get().to(balance)))
        .service(super::resource("/v1/balance_transactions").route(web::get().to(transactions)))
        .service(super::resource("/v1/balance_transactions/export").route(web::get().to(export)));
}

/// The query of `GET /v1/balance`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BalanceQuery {
    /// One brand's own money (400 for an unknown brand); without it, the
    /// whole business (the sum of its brands).
    #[serde(deserialize_with = "params::uuid")]
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
        .get_with(req, state, |c, q: BalanceQuery| async move {
            let Call { state, p, .. } = c;
            let brand = params::brand(&state, &p, q.brand)?;
            Ok(query::balance(&state.kobo, p.merchant.id, p.mode, brand)?)
        })
        .await
}

/// The filters of `GET /v1/balance_transactions` and its export.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LineFilterQuery {
    /// One brand's lines (400 for an unknown brand).
    #[serde(deserialize_with = "params::uuid")]
    brand: Option<Uuid>,
    #[param(inline)]
    #[serde(deserialize_with = "params::one_of")]
    currency: Option<Currency>,
    #[param(inline)]
    #[serde(deserialize_with = "params::one_of")]
    bucket: Option<Bucket>,
    /// Comma-separated groups; `conversions` also matches corrections.
    #[param(value_type = Option<Vec<EntryGroup>>, inline, style = Form, explode = false)]
    #[serde(rename = "type", deserialize_with = "entry_types")]
    types: Option<Vec<EntryType>>,
    /// First day, inclusive, Lagos time.
    #[serde(deserialize_with = "params::date")]
    from: Option<NaiveDate>,
    /// Last day, inclusive, Lagos time (not before `from`).
    #[serde(deserialize_with = "params::date")]
    to: Option<NaiveDate>,
}

/// The pagination of `GET /v1/balance_transactions`, besides its
/// [`LineFilterQuery`].
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LinePageQuery {
    /// Page size, 1 to 100.
    #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
    #[serde(deserialize_with = "params::limit")]
    limit: usize,
    /// The id of the last balance transaction of the previous page.
    #[param(value_type = Option<String>, pattern = "^[0-9]+$")]
    #[serde(deserialize_with = "line_id")]
    starting_after: Option<u64>,
}

/// `type`: a comma-separated list of entry groups, as their entry types.
fn entry_types<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<EntryType>>, D::Error> {
    let Some(s) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    let mut types = Vec::new();
    for group in s.split(',').map(str::trim) {
        let t = EntryType::parse_group(group).ok_or_else(|| {
            body::tunnel(DomainError::invalid(
                "type",
                "type is a comma-separated list of payments, releases, payouts, refunds, disputes, conversions",
            ))
        })?;
        types.extend_from_slice(t);
    }
    Ok(Some(types))
}

/// A balance transaction id (digits).
fn line_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<String>::deserialize(d)?
        .map(|s| {
            s.parse::<u64>().map_err(|_| {
                body::tunnel(DomainError::invalid(
                    "starting_after",
                    "starting_after is a balance transaction id (digits)",
                ))
            })
        })
        .transpose()
}

impl LineFilterQuery {
    /// The filter, after the brand's lookup and the dates' order.
    fn into_filter(self, state: &State, p: &Principal) -> Result<LineFilter, DomainError> {
        let f = LineFilter {
            brand: params::brand(state, p, self.brand)?,
            currency: self.currency,
            bucket: self.bucket,
            types: self.types,
            from: self.from,
            to: self.to,
        };
        if let (Some(from), Some(to)) = (f.from, f.to) {
            if from > to {
                return Err(DomainError::invalid("from", "`from` is after `to`"));
            }
        }
        Ok(f)
    }
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
            let (page, filter): (LinePageQuery, LineFilterQuery) =
                params::parse_pair(req.query_string())?;
            let f = filter.into_filter(&state, &p)?;
            let page = query::balance_transactions(
                &state.kobo,
                p.merchant.id,
                p.mode,
                &f,
                page.limit,
                page.starting_after,
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
        .get_with(req, state, |c, q: LineFilterQuery| async move {
            let Call { state, p, .. } = c;
            let f = q.into_filter(&state, &p)?;
            let (lines, truncated) =
                query::statement_lines(&state.kobo, p.merchant.id, p.mode, &f, EXPORT_MAX_LINES)?;
            let data = statement_csv(&lines)?;
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

/// The CSV of statement lines (the export's `data`; the dashboard's
/// download too).
pub fn statement_csv(lines: &[kobo_actors::ledger::LedgerLine]) -> Result<String, DomainError> {
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
    for l in lines {
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
    String::from_utf8(
        w.into_inner()
            .map_err(|e| DomainError::internal(e.to_string()))?,
    )
    .map_err(|e| DomainError::internal(e.to_string()))
}
