//! Dollar rates, dollar-to-naira conversions, and dollar settlement.
//!
//! Operators publish rates (kobo per US dollar); the newest is current. A
//! conversion names the rate it was quoted (`rate_id`): if a newer rate was
//! published since, nothing converts (409 `rate_changed`, naming the new
//! rate). Otherwise it is one `conversion` entry through the merchant's
//! ledger actor, which checks the dollars: USD `available` -usd, NGN
//! `available` +floor(usd * rate / 100), committed with the conversion
//! record and its saved response.
//!
//! Publishing and converting are ordered by the [`RateGate`]: a publish
//! holds it exclusively from reading the clock to its commit; a conversion
//! holds it shared from reading the clock and checking its rate to the
//! commit of its entry. So every conversion happens entirely before or
//! entirely after each publish: none commits at a rate that a newer,
//! earlier-stamped rate had already replaced.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::{decode, Batch, KeyBuf, Table};

use crate::audit::{Audit, AuditAction, Record};
use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::{new_id, scope_key, Mode};
use crate::ledger::actor::{Ledgers, PostEntry};
use crate::ledger::{balance_prefix, BalanceRow, Bucket, EntrySpec, EntryType, LineSpec};
use crate::merchant::Merchant;
use crate::money::Currency;
use crate::paging::Page;

/// Orders rate publishes (exclusive) against conversions (shared, from
/// their rate check to their commit). It guards no state: rates and
/// balances live in the store and the ledger actors. Fair (FIFO), so a
/// publish waits only for the conversions already running.
#[derive(Default)]
pub struct RateGate(tokio::sync::RwLock<()>);

/// What publishing and converting reach: the environment, the rate gate
/// and the merchants' ledgers.
pub struct Fx {
    pub env: Arc<Env>,
    pub gate: RateGate,
    pub ledgers: Ledgers,
}

impl std::ops::Deref for Fx {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}

/// The largest rate accepted: ₦1,000,000 per dollar.
pub const MAX_RATE: i64 = 100_000_000;

/// A published dollar rate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FxRate {
    pub id: Uuid,
    pub seq: u64,
    /// Kobo per US dollar.
    pub rate: i64,
    pub published_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum FxRateObject {
    #[serde(rename = "fx_rate")]
    FxRate,
}

/// A published rate, as the operator API answers it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = FxRate)]
pub struct FxRateView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: FxRateObject,
    /// Kobo per US dollar.
    pub rate: i64,
    pub published_at: DateTime<Utc>,
}

/// The rate inside a preview.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FxPreviewRate {
    /// Send it as `rate_id` to convert at this rate.
    pub id: Uuid,
    /// Kobo per US dollar.
    pub rate: i64,
    pub published_at: DateTime<Utc>,
}

/// The rate a conversion used.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FxConversionRate {
    pub id: Uuid,
    /// Kobo per US dollar.
    pub rate: i64,
}

impl FxRate {
    pub fn view(&self) -> FxRateView {
        FxRateView {
            id: self.id,
            object: FxRateObject::FxRate,
            rate: self.rate,
            published_at: self.published_at,
        }
    }
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a rate view serializes")
    }
}

/// Naira for `usd_cents` at `rate` kobo per dollar, rounded down to the kobo
/// (CONTRACT section 4): `floor(usd_cents * rate / 100)`.
pub fn ngn_for(usd_cents: i64, rate: i64) -> i64 {
    let kobo = (usd_cents.max(0) as i128 * rate.max(0) as i128) / 100;
    kobo.min(i64::MAX as i128) as i64
}

fn rate_index_key(seq: u64) -> Vec<u8> {
    KeyBuf::new().u64(seq).build()
}

/// Publishes a rate; it is current from its commit (with its audit entry).
pub async fn publish_rate(kobo: &Fx, rate: i64, audit: &Audit) -> DomainResult<FxRate> {
    if !(1..=MAX_RATE).contains(&rate) {
        return Err(DomainError::invalid(
            "rate",
            format!("rate is an integer of kobo per US dollar, from 1 to {MAX_RATE}"),
        ));
    }
    let _exclusive = kobo.gate.0.write().await;
    let now = kobo.clock.now();
    let r = FxRate {
        id: new_id(now),
        seq: kobo.seq.next(),
        rate,
        published_at: now,
    };
    let mut batch = Batch::new();
    batch
        .put(Table::FxRates, r.id.as_bytes().to_vec(), &r)
        .put_raw(
            Table::FxRateIndex,
            rate_index_key(r.seq),
            r.id.as_bytes().to_vec(),
        )
        .note_seq(r.seq);
    let mut record = Record::new(AuditAction::FxRatePublished, "fx_rate", r.id)
        .after(r.to_api())
        .detail(serde_json::json!({ "rate": rate }));
    if let Some(previous) = current_rate(kobo)? {
        record = record.before(previous.to_api());
    }
    audit.add_to(kobo, &mut batch, record);
    kobo.writer.commit(batch).await.map_err(DomainError::from)?;
    Ok(r)
}

/// The newest rate.
pub fn current_rate(kobo: &Env) -> DomainResult<Option<FxRate>> {
    let read = kobo.store.read()?;
    let mut id = None;
    read.scan_prefix_rev(Table::FxRateIndex, &[], None, |_, v| {
        id = Uuid::from_slice(v).ok();
        Ok(false)
    })?;
    match id {
        Some(id) => Ok(read.get_decoded(Table::FxRates, id.as_bytes())?),
        None => Ok(None),
    }
}

pub fn load_rate(kobo: &Env, id: Uuid) -> DomainResult<Option<FxRate>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::FxRates, id.as_bytes())?)
}

fn no_rate() -> DomainError {
    DomainError::state(
        ErrorCode::NoFxRate,
        "no dollar rate has been published yet; conversions open once one is",
    )
}

pub use crate::ledger::query::available;

/// The brands holding available dollars, with the amounts.
pub fn brands_with_dollars(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
) -> DomainResult<Vec<(Uuid, i64)>> {
    let mut out = Vec::new();
    kobo.store.read()?.scan_prefix(
        Table::Balances,
        &balance_prefix(merchant, mode, None).build(),
        None,
        |_, v| {
            let row: BalanceRow = decode(v)?;
            if row.currency == Currency::USD && row.bucket == Bucket::Available && row.amount > 0 {
                out.push((row.brand, row.amount));
            }
            Ok(true)
        },
    )?;
    Ok(out)
}

/// The brand a call acts for: the named one (404 `brand` when it is not
/// this merchant's in this mode), else the default brand.
pub fn resolve_brand(
    kobo: &Env,
    merchant: &Merchant,
    mode: Mode,
    brand: Option<Uuid>,
) -> DomainResult<Uuid> {
    match brand {
        Some(b) => Ok(crate::merchant::query::brand(kobo, merchant.id, mode, b)
            .map_err(|e| e.with_param("brand"))?
            .id),
        None => Ok(merchant.default_brand(mode)),
    }
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum FxPreviewObject {
    #[serde(rename = "fx_preview")]
    FxPreview,
}

/// The current rate, the dollars available to convert, and with
/// `usd_amount` the naira they would give.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = FxPreview)]
pub struct FxPreviewView {
    #[schema(inline)]
    pub object: FxPreviewObject,
    pub livemode: bool,
    /// The brand whose dollars these are (the default brand unless named).
    pub brand: Uuid,
    pub rate: FxPreviewRate,
    /// Cents in the brand's USD `available`.
    pub usd_available: i64,
    /// As asked; null without `usd_amount`.
    #[schema(required = true)]
    pub usd_amount: Option<i64>,
    /// `floor(usd_amount * rate / 100)` kobo; null without `usd_amount`.
    #[schema(required = true)]
    pub ngn_amount: Option<i64>,
}

/// `GET /v1/fx`. No rate yet: 409 `no_fx_rate`.
pub fn preview(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    brand: Uuid,
    usd_amount: Option<i64>,
) -> DomainResult<FxPreviewView> {
    let rate = current_rate(kobo)?.ok_or_else(no_rate)?;
    Ok(FxPreviewView {
        object: FxPreviewObject::FxPreview,
        livemode: mode.livemode(),
        brand,
        rate: FxPreviewRate {
            id: rate.id,
            rate: rate.rate,
            published_at: rate.published_at,
        },
        usd_available: available(kobo, merchant, mode, brand, Currency::USD)?,
        usd_amount,
        ngn_amount: usd_amount.map(|u| ngn_for(u, rate.rate)),
    })
}

/// A conversion of dollars to naira.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FxConversion {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub brand: Uuid,
    pub usd_amount: i64,
    pub ngn_amount: i64,
    pub rate_id: Uuid,
    pub rate: i64,
    /// Made by dollar settlement (`auto_settlement.usd = convert`).
    pub automatic: bool,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum FxConversionObject {
    #[serde(rename = "fx_conversion")]
    FxConversion,
}

/// Dollars converted to naira: one `conversion` entry (USD `available` out,
/// NGN `available` in).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = FxConversion)]
pub struct FxConversionView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: FxConversionObject,
    pub livemode: bool,
    pub brand: Uuid,
    /// Cents taken from USD `available`.
    pub usd_amount: i64,
    /// Kobo added to NGN `available`: `floor(usd_amount * rate / 100)`.
    pub ngn_amount: i64,
    pub rate: FxConversionRate,
    /// Made by dollar settlement rather than by the API.
    pub automatic: bool,
    pub created_at: DateTime<Utc>,
}

impl FxConversion {
    pub fn view(&self) -> FxConversionView {
        FxConversionView {
            id: self.id,
            object: FxConversionObject::FxConversion,
            livemode: self.mode.livemode(),
            brand: self.brand,
            usd_amount: self.usd_amount,
            ngn_amount: self.ngn_amount,
            rate: FxConversionRate {
                id: self.rate_id,
                rate: self.rate,
            },
            automatic: self.automatic,
            created_at: self.created_at,
        }
    }
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a conversion view serializes")
    }
}

pub fn conversion_list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

/// A validated conversion request.
#[derive(Debug, Clone)]
pub struct Convert {
    pub usd_amount: i64,
    pub rate_id: Uuid,
    pub brand: Option<Uuid>,
    pub automatic: bool,
}

fn rate_changed(current: &FxRate) -> DomainError {
    DomainError::state(
        ErrorCode::RateChanged,
        format!(
            "a newer rate was published: {} kobo per US dollar (rate id {}); nothing was converted. Convert again with that rate_id",
            current.rate, current.id
        ),
    )
}

/// Converts dollars to naira at `rate_id`, which must still be the current
/// rate. Checks in order: brand (404), rate (404 `rate_id`), the rate is
/// current (409 `rate_changed`), the amount gives at least one kobo (400),
/// the dollars (409 `insufficient_funds`, in the ledger actor).
pub async fn convert(
    kobo: &Fx,
    merchant: &Merchant,
    mode: Mode,
    req: Convert,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<FxConversionView>> {
    let brand = resolve_brand(kobo, merchant, mode, req.brand)?;
    let rate = load_rate(kobo, req.rate_id)?
        .ok_or_else(|| DomainError::not_found("fx_rate", req.rate_id).with_param("rate_id"))?;
    // Held until the entry commits (see the module's notes).
    let _shared = kobo.gate.0.read().await;
    let ngn_amount = check_conversion(kobo, &rate, req.usd_amount)?;
    let now = kobo.clock.now();
    let c = FxConversion {
        id: new_id(now),
        merchant: merchant.id,
        mode,
        seq: kobo.seq.next(),
        brand,
        usd_amount: req.usd_amount,
        ngn_amount,
        rate_id: rate.id,
        rate: rate.rate,
        automatic: req.automatic,
        created_at: now,
    };
    let mut batch = Batch::new();
    batch.owned_by(merchant.id.as_bytes());
    batch
        .put(Table::FxConversions, c.id.as_bytes().to_vec(), &c)
        .put_raw(
            Table::FxConversionIndex,
            conversion_list_key(merchant.id, mode, c.seq),
            c.id.as_bytes().to_vec(),
        )
        .note_seq(c.seq);
    let answer = Answer::save(Outcome::Created(c.view()), idem, &mut batch, now);
    let post = PostEntry {
        entry: conversion_entry(&c),
        with: crate::registry::Once::new(batch),
        usage: None,
    };
    kobo.ledgers.send((merchant.id, mode), post).await??;
    Ok(answer)
}

/// Under the gate: `rate` must be the current rate (409 `rate_changed`),
/// and `usd_amount` must give at least one kobo at it (400). Answers the
/// naira.
fn check_conversion(kobo: &Fx, rate: &FxRate, usd_amount: i64) -> DomainResult<i64> {
    let current = current_rate(kobo)?.ok_or_else(no_rate)?;
    if current.id != rate.id {
        return Err(rate_changed(&current));
    }
    let ngn_amount = ngn_for(usd_amount, rate.rate);
    if ngn_amount < 1 {
        return Err(DomainError::invalid(
            "usd_amount",
            format!(
                "{} cents give less than one kobo at {} kobo per dollar",
                usd_amount, rate.rate
            ),
        ));
    }
    Ok(ngn_amount)
}

/// A conversion's ledger entry: USD `available` out, NGN `available` in.
fn conversion_entry(c: &FxConversion) -> EntrySpec {
    let line = |currency, amount| LineSpec {
        brand: c.brand,
        currency,
        bucket: Bucket::Available,
        amount,
        gross: None,
        fee: None,
    };
    EntrySpec {
        entry_type: EntryType::Conversion,
        source: c.id,
        description: format!(
            "conversion of {} USD cents to {} kobo at {} kobo per dollar",
            c.usd_amount, c.ngn_amount, c.rate
        ),
        lines: vec![
            line(Currency::USD, -c.usd_amount),
            line(Currency::NGN, c.ngn_amount),
        ],
        allow_negative: false,
    }
}

pub fn load_conversion(kobo: &Env, id: Uuid) -> DomainResult<Option<FxConversion>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::FxConversions, id.as_bytes())?)
}

/// `GET /v1/fx/conversions`: newest first.
pub fn list_conversions(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    limit: usize,
    starting_after: Option<Uuid>,
) -> DomainResult<Page> {
    crate::paging::page_by_index::<FxConversion>(
        kobo,
        Table::FxConversions,
        Table::FxConversionIndex,
        merchant,
        mode,
        limit,
        starting_after,
        |c| (c.merchant, c.mode, c.seq),
        FxConversion::to_api,
    )
}

/// The newest `limit` published rates, newest first (the operator
/// console's history).
pub fn recent_rates(kobo: &Env, limit: usize) -> DomainResult<Vec<FxRate>> {
    let read = kobo.store.read()?;
    let mut ids = Vec::new();
    read.scan_prefix_rev(Table::FxRateIndex, &[], None, |_, v| {
        if let Ok(id) = Uuid::from_slice(v) {
            ids.push(id);
        }
        Ok(ids.len() < limit)
    })?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(r) = read.get_decoded(Table::FxRates, id.as_bytes())? {
            out.push(r);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naira_round_down_to_the_kobo() {
        // 333 cents at ₦1,533.33: 333 * 153_333 / 100 = 510_598.89 -> 510_598.
        assert_eq!(ngn_for(333, 153_333), 510_598);
        assert_eq!(ngn_for(100, 150_000), 150_000);
        assert_eq!(ngn_for(1, 99), 0);
        assert_eq!(ngn_for(1, 100), 1);
        // 7 * 14_299 / 100 = 1_000.93.
        assert_eq!(ngn_for(7, 14_299), 1_000);
        // The largest amount at the largest rate does not overflow.
        assert_eq!(
            ngn_for(crate::money::MAX_AMOUNT, MAX_RATE),
            1_000_000_000_000_000_000
        );
    }
}
