//! `/v1/balance`, `/v1/balance_transactions` and the statement export, read
//! straight from the ledger's store snapshot.

use actix_web::{web, HttpRequest};
use serde_json::json;
use uuid::Uuid;

use kobo_actors::ledger::{Bucket, EntryType};
use kobo_actors::money::Currency;
use kobo_actors::query::{self, LineFilter, Principal};
use kobo_actors::DomainError;

use super::body::Query;
use super::{authenticate, json_response, ApiResult, State};

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

async fn balance(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let q = Query::parse(req.query_string(), &["brand"])?;
    let brand = brand_param(&state, &p, &q)?;
    Ok(json_response(
        200,
        &query::balance(&state.kobo, p.merchant.id, p.mode, brand)?,
    ))
}

const FILTERS: &[&str] = &["brand", "currency", "bucket", "type", "from", "to"];

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

async fn transactions(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
    let mut allowed = FILTERS.to_vec();
    allowed.extend(["limit", "starting_after"]);
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
    Ok(json_response(200, &page.to_api()))
}

async fn export(req: HttpRequest, state: State) -> ApiResult {
    let p = authenticate(&req, &state)?;
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
    let day =
        |d: Option<chrono::NaiveDate>| d.map(|d| d.to_string()).unwrap_or_else(|| "all".into());
    Ok(json_response(
        200,
        &json!({
            "object": "statement_export",
            "livemode": p.mode.livemode(),
            "file_name": format!("kobo-statement-{}-{}-to-{}.csv", p.mode.as_str(), day(f.from), day(f.to)),
            "content_type": "text/csv",
            "rows": lines.len(),
            "truncated": truncated,
            "data": data,
        }),
    ))
}
