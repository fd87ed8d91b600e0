//! Read-only views straight from store snapshots (MVCC: consistent, never
//! blocking the writer). Writes never happen here.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::Africa::Lagos;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::{decode, ReadTxn, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::ids::{scope_key, Mode};
use crate::ledger::{balance_prefix, line_key, BalanceRow, Bucket, EntryType, LedgerLine};
use crate::merchant::{key_hash, secret_key_mode, ApiKey, Brand, Merchant};
use crate::money::Currency;
use crate::payment_intent::service::{attempt_key, customer_prefix, status_prefix};
use crate::payment_intent::{ChargeAttempt, PaymentIntent, Status};

pub use crate::auth::{Caller, RateLimitKey};

/// Who is calling.
#[derive(Debug, Clone)]
pub struct Principal {
    pub merchant: Merchant,
    pub mode: Mode,
    /// The credential used.
    pub caller: Caller,
}

impl Principal {
    /// A stable key to count this caller's requests by.
    pub fn rate_limit_key(&self) -> RateLimitKey {
        match self.caller.intent() {
            Some(id) => RateLimitKey::PaymentIntent(id),
            None => RateLimitKey::Merchant(self.merchant.id, self.mode),
        }
    }
}

/// Resolves a bearer token: a secret key, a payment intent's client secret,
/// or a hosted checkout credential (verified with `checkout`).
pub fn authenticate(
    kobo: &Env,
    bearer: &str,
    checkout: &crate::credential::CheckoutKey,
) -> DomainResult<Principal> {
    let read = kobo.store.read()?;
    let unauthenticated = || DomainError::unauthenticated("invalid, unknown or revoked API key");
    if secret_key_mode(bearer).is_some() {
        let key: ApiKey = read
            .get_decoded(Table::ApiKeys, key_hash(bearer).as_bytes())?
            .ok_or_else(unauthenticated)?;
        if key.revoked_at.is_some() {
            return Err(unauthenticated());
        }
        let merchant: Merchant = read
            .get_decoded(Table::Merchants, key.merchant.as_bytes())?
            .ok_or_else(unauthenticated)?;
        return Ok(Principal {
            merchant,
            mode: key.mode,
            caller: Caller::SecretKey,
        });
    }
    let (id, caller) = if bearer.starts_with(crate::credential::CHECKOUT_PREFIX) {
        let id = checkout.verify(bearer).ok_or_else(unauthenticated)?;
        (id, Caller::Checkout(id))
    } else {
        // pi_<32 hex>_secret_<24 base62>
        let id = bearer
            .strip_prefix("pi_")
            .and_then(|r| r.split_once("_secret_"))
            .and_then(|(id, _)| Uuid::try_parse(id).ok())
            .ok_or_else(unauthenticated)?;
        (id, Caller::ClientSecret(id))
    };
    let intent: PaymentIntent = read
        .get_decoded(Table::PaymentIntents, id.as_bytes())?
        .ok_or_else(unauthenticated)?;
    if caller == Caller::ClientSecret(id)
        && intent.client_secret_hash != crate::ids::sha256_hex(bearer)
    {
        return Err(unauthenticated());
    }
    let merchant: Merchant = read
        .get_decoded(Table::Merchants, intent.merchant.as_bytes())?
        .ok_or_else(unauthenticated)?;
    Ok(Principal {
        merchant,
        mode: intent.mode,
        caller,
    })
}

pub fn payment_intent(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    id: Uuid,
) -> DomainResult<PaymentIntent> {
    let read = kobo.store.read()?;
    let found: Option<PaymentIntent> = read.get_decoded(Table::PaymentIntents, id.as_bytes())?;
    match found {
        Some(i) if i.merchant == merchant && i.mode == mode => Ok(i),
        _ => Err(DomainError::not_found("payment_intent", id)),
    }
}

/// A page of a newest-first list.
pub struct Page {
    pub data: Vec<Value>,
    pub has_more: bool,
}

/// The `object` value of a list.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum ListObject {
    #[serde(rename = "list")]
    List,
}

/// The list envelope: one page of a list.
// `T` is the listed resource.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = List)]
pub struct ListView<T> {
    #[schema(inline)]
    pub object: ListObject,
    /// Items of the listed resource.
    pub data: Vec<T>,
    /// False on the last page.
    pub has_more: bool,
}

impl Page {
    pub fn view(&self) -> ListView<&Value> {
        ListView {
            object: ListObject::List,
            data: self.data.iter().collect(),
            has_more: self.has_more,
        }
    }

    /// The list envelope, as JSON.
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a list view serializes")
    }
}

pub struct IntentFilter {
    pub limit: usize,
    pub starting_after: Option<Uuid>,
    pub status: Option<Status>,
    pub customer: Option<Uuid>,
}

/// Newest first. The cursor is the last id of the previous page; its place
/// (creation sequence) is fixed, so pages never skip or repeat an item even
/// while new intents are created.
pub fn list_payment_intents(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    f: &IntentFilter,
) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    let (table, prefix) = match (f.status, f.customer) {
        (Some(s), _) => (
            Table::PaymentIntentStatusIndex,
            status_prefix(merchant, mode, s).build(),
        ),
        (None, Some(c)) => (
            Table::PaymentIntentCustomerIndex,
            customer_prefix(merchant, mode, c).build(),
        ),
        (None, None) => (Table::PaymentIntentIndex, scope_key(merchant, mode).build()),
    };
    let before = match f.starting_after {
        Some(id) => {
            let cursor: Option<PaymentIntent> =
                read.get_decoded(Table::PaymentIntents, id.as_bytes())?;
            match cursor {
                Some(c) if c.merchant == merchant && c.mode == mode => {
                    let mut k = prefix.clone();
                    k.extend_from_slice(&c.seq.to_be_bytes());
                    Some(k)
                }
                _ => {
                    return Err(DomainError::invalid(
                        "starting_after",
                        format!("no such payment_intent: {id}"),
                    ))
                }
            }
        }
        None => None,
    };
    let mut data = Vec::new();
    let mut has_more = false;
    read.scan_prefix_rev(table, &prefix, before.as_deref(), |_, v| {
        let id =
            Uuid::from_slice(v).map_err(|_| kobo_storage::StoreError::Redb("bad index".into()))?;
        let intent: PaymentIntent = match read.get_decoded(Table::PaymentIntents, id.as_bytes())? {
            Some(i) => i,
            None => return Ok(true),
        };
        // The status index is exact; the customer filter also applies when
        // listing by status.
        if f.customer.is_some_and(|c| intent.customer != Some(c)) {
            return Ok(true);
        }
        if data.len() == f.limit {
            has_more = true;
            return Ok(false);
        }
        data.push(intent.to_api(None));
        Ok(true)
    })?;
    Ok(Page { data, has_more })
}

pub fn charge_attempts(kobo: &Env, intent: &PaymentIntent) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    let mut data = Vec::new();
    read.scan_prefix(
        Table::ChargeAttempts,
        &attempt_key(intent.id, 0)[..16],
        None,
        |_, v| {
            let a: ChargeAttempt = decode(v)?;
            data.push(a.to_api());
            Ok(true)
        },
    )?;
    Ok(Page {
        data,
        has_more: false,
    })
}

pub fn brand(kobo: &Env, merchant: Uuid, mode: Mode, id: Uuid) -> DomainResult<Brand> {
    let read = kobo.store.read()?;
    match read.get_decoded::<Brand>(Table::Brands, id.as_bytes())? {
        Some(b) if b.merchant == merchant && b.mode == mode => Ok(b),
        _ => Err(DomainError::not_found("brand", id)),
    }
}

/// The `object` value of a balance.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum BalanceObject {
    #[serde(rename = "balance")]
    Balance,
}

/// One currency's amount in one bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub struct BalanceAmount {
    pub currency: Currency,
    pub amount: i64,
}

/// The public Balance object: every bucket, one entry per currency (zeros
/// included).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Balance)]
pub struct BalanceView {
    #[schema(inline)]
    pub object: BalanceObject,
    pub livemode: bool,
    /// The brand asked for; null for the whole business (the sum of its
    /// brands).
    #[schema(required = true)]
    pub brand: Option<Uuid>,
    /// Collected, not yet released.
    pub pending: Vec<BalanceAmount>,
    /// Can be paid out.
    pub available: Vec<BalanceAmount>,
    /// Rolling reserve held against chargebacks.
    pub reserve: Vec<BalanceAmount>,
    /// Sent to a bank, awaiting confirmation.
    pub payout_in_flight: Vec<BalanceAmount>,
    /// Being refunded to customers.
    pub refund_in_flight: Vec<BalanceAmount>,
    /// Held for disputes.
    pub dispute_hold: Vec<BalanceAmount>,
}

/// `GET /v1/balance`, as JSON.
pub fn balance(kobo: &Env, merchant: Uuid, mode: Mode, brand: Option<Uuid>) -> DomainResult<Value> {
    let view = balance_view(kobo, merchant, mode, brand)?;
    Ok(serde_json::to_value(view).expect("a balance view serializes"))
}

/// `GET /v1/balance`: every bucket, one entry per currency, zeros included;
/// a brand's own money, or the whole business (sum of brands).
pub fn balance_view(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    brand: Option<Uuid>,
) -> DomainResult<BalanceView> {
    let read = kobo.store.read()?;
    let mut sums: BTreeMap<(Bucket, Currency), i64> = BTreeMap::new();
    read.scan_prefix(
        Table::Balances,
        &balance_prefix(merchant, mode, brand).build(),
        None,
        |_, v| {
            let row: BalanceRow = decode(v)?;
            *sums.entry((row.bucket, row.currency)).or_default() += row.amount;
            Ok(true)
        },
    )?;
    Ok(balance_from_sums(mode, brand, &sums))
}

fn balance_from_sums(
    mode: Mode,
    brand: Option<Uuid>,
    sums: &BTreeMap<(Bucket, Currency), i64>,
) -> BalanceView {
    let amounts = |bucket: Bucket| -> Vec<BalanceAmount> {
        Currency::ALL
            .iter()
            .map(|c| BalanceAmount {
                currency: *c,
                amount: sums.get(&(bucket, *c)).copied().unwrap_or(0),
            })
            .collect()
    };
    BalanceView {
        object: BalanceObject::Balance,
        livemode: mode.livemode(),
        brand,
        pending: amounts(Bucket::Pending),
        available: amounts(Bucket::Available),
        reserve: amounts(Bucket::Reserve),
        payout_in_flight: amounts(Bucket::PayoutInFlight),
        refund_in_flight: amounts(Bucket::RefundInFlight),
        dispute_hold: amounts(Bucket::DisputeHold),
    }
}

/// Filters of balance transactions and statement exports.
#[derive(Debug, Clone, Default)]
pub struct LineFilter {
    pub brand: Option<Uuid>,
    pub currency: Option<Currency>,
    pub bucket: Option<Bucket>,
    pub types: Option<Vec<EntryType>>,
    /// Inclusive Lagos dates.
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
}

fn lagos_midnight(d: NaiveDate) -> DateTime<Utc> {
    Lagos
        .from_local_datetime(&d.and_hms_opt(0, 0, 0).expect("midnight"))
        .single()
        .expect("Lagos has no DST")
        .with_timezone(&Utc)
}

impl LineFilter {
    fn window(&self) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
        (
            self.from.map(lagos_midnight),
            self.to.and_then(|d| d.succ_opt()).map(lagos_midnight),
        )
    }
    fn matches(&self, l: &LedgerLine) -> bool {
        self.brand.is_none_or(|b| l.brand == b)
            && self.currency.is_none_or(|c| l.currency == c)
            && self.bucket.is_none_or(|b| l.bucket == b)
            && self
                .types
                .as_ref()
                .is_none_or(|t| t.contains(&l.entry_type))
    }
}

/// Visits matching lines newest first, below `before` (a line id).
/// Lines of one merchant are in time order, so the scan stops at `from`.
fn scan_lines(
    read: &ReadTxn,
    merchant: Uuid,
    mode: Mode,
    f: &LineFilter,
    before: Option<u64>,
    mut visit: impl FnMut(LedgerLine) -> bool,
) -> DomainResult<()> {
    let prefix = scope_key(merchant, mode).build();
    let before_key = before.map(|id| line_key(merchant, mode, id));
    let (start, end) = f.window();
    read.scan_prefix_rev(
        Table::LedgerLines,
        &prefix,
        before_key.as_deref(),
        |_, v| {
            let line: LedgerLine = decode(v)?;
            if start.is_some_and(|s| line.created_at < s) {
                return Ok(false);
            }
            if end.is_some_and(|e| line.created_at >= e) || !f.matches(&line) {
                return Ok(true);
            }
            Ok(visit(line))
        },
    )?;
    Ok(())
}

pub fn balance_transactions(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    f: &LineFilter,
    limit: usize,
    starting_after: Option<u64>,
) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    let mut data = Vec::new();
    let mut has_more = false;
    scan_lines(&read, merchant, mode, f, starting_after, |line| {
        if data.len() == limit {
            has_more = true;
            return false;
        }
        data.push(line.to_api());
        true
    })?;
    Ok(Page { data, has_more })
}

/// Up to `max` matching lines, oldest first, and whether more matched
/// (the oldest are then left out: narrow the dates for them).
pub fn statement_lines(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    f: &LineFilter,
    max: usize,
) -> DomainResult<(Vec<LedgerLine>, bool)> {
    let read = kobo.store.read()?;
    let mut lines = Vec::new();
    let mut truncated = false;
    scan_lines(&read, merchant, mode, f, None, |line| {
        if lines.len() == max {
            truncated = true;
            return false;
        }
        lines.push(line);
        true
    })?;
    lines.reverse();
    Ok((lines, truncated))
}

/// A merchant's brands in one mode, newest first.
pub fn list_brands(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    limit: usize,
    starting_after: Option<Uuid>,
) -> DomainResult<Page> {
    page_by_index::<Brand>(
        kobo,
        Table::Brands,
        Table::BrandIndex,
        merchant,
        mode,
        limit,
        starting_after,
        |b| (b.merchant, b.mode, b.seq),
        Brand::to_api,
    )
}

/// Plain words for the reserve reasons kobo's risk team uses.
pub fn reserve_reason_text(reason: &str) -> String {
    match reason {
        "new_account" => "Your account is new: a share of each payment is held while it builds a payment history.".into(),
        "high_chargebacks" | "chargebacks" => "Your recent payments had more disputes than usual: a share of each payment is held to cover them.".into(),
        "high_risk" | "high_risk_category" => "Your business category carries more disputes: a share of each payment is held to cover them.".into(),
        "manual_review" => "Our risk team reviewed your account: a share of each payment is held for now.".into(),
        other => {
            let words = other.replace(['_', '-'], " ");
            let mut c = words.chars();
            match c.next() {
                Some(f) => format!("{}{}.", f.to_uppercase(), c.as_str()),
                None => String::new(),
            }
        }
    }
}

/// The `object` value of the reserve.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum ReserveObject {
    #[serde(rename = "reserve")]
    Reserve,
}

/// The rolling-reserve terms in force.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReserveTermsView {
    /// The share of each payment's net held, in basis points.
    #[schema(minimum = 0, maximum = 10_000)]
    pub percent_bps: i64,
    /// Each payment's share is released this many calendar days after its
    /// Lagos collection date, at 08:00 Lagos.
    pub days: u32,
    /// Why a reserve is held: a code such as `new_account`,
    /// `high_chargebacks`, `high_risk_category` or `manual_review`.
    #[schema(required = true)]
    pub reason: Option<String>,
    /// `reason` in plain words.
    #[schema(required = true)]
    pub reason_text: Option<String>,
    /// A note from the risk team.
    #[schema(required = true)]
    pub note: Option<String>,
    /// When these terms were set.
    #[schema(required = true)]
    pub since: Option<DateTime<Utc>>,
}

/// What the reserve holds in one currency.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct ReserveHeldView {
    pub currency: Currency,
    /// Minor units held.
    pub amount: i64,
    /// How many payments' shares are held.
    pub payments: usize,
    /// The earliest of their releases.
    pub next_release_at: DateTime<Utc>,
}

/// What the reserve releases on one Lagos date in one currency.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct ReserveReleaseView {
    /// The Lagos date of the release (at 08:00 Lagos).
    pub date: NaiveDate,
    pub currency: Currency,
    /// Minor units released.
    pub amount: i64,
}

/// The rolling reserve: its terms, what it holds and when that is
/// released.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Reserve)]
pub struct ReserveView {
    #[schema(inline)]
    pub object: ReserveObject,
    pub livemode: bool,
    /// Null when no reserve is held from new payments (what is still held
    /// is listed all the same).
    #[schema(required = true, inline)]
    pub terms: Option<ReserveTermsView>,
    /// Per currency that has money held.
    #[schema(inline)]
    pub held: Vec<ReserveHeldView>,
    /// By Lagos date, then currency, earliest first.
    #[schema(inline)]
    pub releases: Vec<ReserveReleaseView>,
}

/// `GET /v1/reserve`, as JSON.
pub fn reserve(kobo: &Env, merchant: &Merchant, mode: Mode) -> DomainResult<Value> {
    let view = reserve_view(kobo, merchant, mode)?;
    Ok(serde_json::to_value(view).expect("a reserve view serializes"))
}

/// `GET /v1/reserve`: the terms, what is held and when it is released.
pub fn reserve_view(kobo: &Env, merchant: &Merchant, mode: Mode) -> DomainResult<ReserveView> {
    use crate::ledger::release::{release_prefix, ScheduledRelease};
    let read = kobo.store.read()?;
    let mut held: BTreeMap<Currency, ReserveHeldView> = BTreeMap::new();
    let mut releases: BTreeMap<(NaiveDate, Currency), i64> = BTreeMap::new();
    read.scan_prefix(
        Table::ScheduledReleases,
        &release_prefix(merchant.id, mode, Bucket::Reserve).build(),
        None,
        |_, v| {
            let r: ScheduledRelease = decode(v)?;
            let h = held.entry(r.currency).or_insert(ReserveHeldView {
                currency: r.currency,
                amount: 0,
                payments: 0,
                next_release_at: r.due,
            });
            h.amount += r.amount;
            h.payments += 1;
            h.next_release_at = h.next_release_at.min(r.due);
            *releases
                .entry((kobo.calendar.lagos_date(r.due), r.currency))
                .or_default() += r.amount;
            Ok(true)
        },
    )?;
    Ok(reserve_from(
        mode,
        merchant.settings.reserve.as_ref(),
        merchant.reserve_since,
        held.into_values().collect(),
        &releases,
    ))
}

fn reserve_from(
    mode: Mode,
    terms: Option<&crate::merchant::ReserveTerms>,
    since: Option<DateTime<Utc>>,
    held: Vec<ReserveHeldView>,
    releases: &BTreeMap<(NaiveDate, Currency), i64>,
) -> ReserveView {
    ReserveView {
        object: ReserveObject::Reserve,
        livemode: mode.livemode(),
        terms: terms.map(|t| ReserveTermsView {
            percent_bps: t.percent_bps,
            days: t.days,
            reason: t.reason.clone(),
            reason_text: t.reason.as_deref().map(reserve_reason_text),
            note: t.note.clone(),
            since,
        }),
        held,
        releases: releases
            .iter()
            .map(|(&(date, currency), &amount)| ReserveReleaseView {
                date,
                currency,
                amount,
            })
            .collect(),
    }
}

/// A brand's `available` balance in `currency`, from a snapshot.
pub fn available(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    brand: Uuid,
    currency: Currency,
) -> DomainResult<i64> {
    let key =
        crate::ledger::balance_store_key(merchant, mode, (brand, currency, Bucket::Available));
    Ok(kobo
        .store
        .read()?
        .get_decoded::<crate::ledger::BalanceRow>(Table::Balances, &key)?
        .map(|r| r.amount)
        .unwrap_or(0))
}

/// A newest-first page of a merchant's objects through a `merchant|mode|seq
/// -> id` index (or any index keyed `prefix|seq`, given by `within`).
/// `scope_of` answers an object's merchant, mode and seq; `starting_after`
/// must be the merchant's own in this mode (else 400). Used by every list
/// of the API.
#[allow(clippy::too_many_arguments)]
pub fn page_by_index<T: DeserializeOwned>(
    kobo: &Env,
    objects: Table,
    index: Table,
    merchant: Uuid,
    mode: Mode,
    limit: usize,
    starting_after: Option<Uuid>,
    scope_of: impl Fn(&T) -> (Uuid, Mode, u64),
    render: impl Fn(&T) -> Value,
) -> DomainResult<Page> {
    let prefix = scope_key(merchant, mode).build();
    page_within(
        kobo,
        objects,
        index,
        &prefix,
        merchant,
        mode,
        limit,
        starting_after,
        scope_of,
        render,
    )
}

/// [`page_by_index`] over an index keyed `within|seq`.
#[allow(clippy::too_many_arguments)]
pub fn page_within<T: DeserializeOwned>(
    kobo: &Env,
    objects: Table,
    index: Table,
    within: &[u8],
    merchant: Uuid,
    mode: Mode,
    limit: usize,
    starting_after: Option<Uuid>,
    scope_of: impl Fn(&T) -> (Uuid, Mode, u64),
    render: impl Fn(&T) -> Value,
) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    let prefix = within.to_vec();
    let before = match starting_after {
        Some(id) => match read.get_decoded::<T>(objects, id.as_bytes())? {
            Some(o) if scope_of(&o).0 == merchant && scope_of(&o).1 == mode => {
                let mut k = prefix.clone();
                k.extend_from_slice(&scope_of(&o).2.to_be_bytes());
                Some(k)
            }
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("starting_after names no object of this list: {id}"),
                ))
            }
        },
        None => None,
    };
    let mut data = Vec::new();
    let mut has_more = false;
    read.scan_prefix_rev(index, &prefix, before.as_deref(), |_, v| {
        let id = Uuid::from_slice(v).map_err(|_| {
            kobo_storage::StoreError::Redb("an index row does not hold an id".into())
        })?;
        if let Some(o) = read.get_decoded::<T>(objects, id.as_bytes())? {
            if data.len() == limit {
                has_more = true;
                return Ok(false);
            }
            data.push(render(&o));
        }
        Ok(true)
    })?;
    Ok(Page { data, has_more })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The views render exactly what the `json!` renderings they replaced
    /// did.
    #[test]
    fn list_json_is_unchanged() {
        for (data, has_more) in [
            (vec![], false),
            (vec![json!({"id": 1}), json!({"id": 2})], true),
        ] {
            let page = Page { data, has_more };
            let old = json!({"object": "list", "data": page.data, "has_more": page.has_more});
            assert_eq!(page.to_api(), old);
        }
    }

    #[test]
    fn reserve_json_is_unchanged() {
        use crate::merchant::ReserveTerms;
        let at = |h: i64| {
            Utc.with_ymd_and_hms(2025, 3, 3, 7, 0, 0).unwrap() + chrono::Duration::hours(h)
        };
        let day = |d: u32| NaiveDate::from_ymd_opt(2025, 3, d).unwrap();
        // (currency, amount, payments, earliest release), as the old
        // rendering accumulated them.
        let held = [
            (Currency::NGN, 12_345, 3, at(24)),
            (Currency::USD, 500, 1, at(48)),
        ];
        let releases = BTreeMap::from([
            ((day(4), Currency::NGN), 10_000),
            ((day(4), Currency::USD), 500),
            ((day(9), Currency::NGN), 2_345),
        ]);
        let terms = [
            None,
            Some(ReserveTerms {
                percent_bps: 1_000,
                days: 30,
                reason: Some("new_account".into()),
                note: Some("until June".into()),
            }),
            Some(ReserveTerms {
                percent_bps: 250,
                days: 7,
                reason: Some("odd_reason".into()),
                note: None,
            }),
            Some(ReserveTerms {
                percent_bps: 0,
                days: 0,
                reason: None,
                note: None,
            }),
        ];
        for mode in [Mode::Test, Mode::Live] {
            for terms in &terms {
                for since in [None, Some(at(-100))] {
                    for n in [0, held.len()] {
                        let held = &held[..n];
                        let releases = if n == 0 {
                            BTreeMap::new()
                        } else {
                            releases.clone()
                        };
                        // The rendering the view replaced.
                        let old_terms = terms.as_ref().map(|t| {
                            json!({
                                "percent_bps": t.percent_bps,
                                "days": t.days,
                                "reason": t.reason,
                                "reason_text": t.reason.as_deref().map(reserve_reason_text),
                                "note": t.note,
                                "since": since,
                            })
                        });
                        let old = json!({
                            "object": "reserve",
                            "livemode": mode.livemode(),
                            "terms": old_terms,
                            "held": held.iter().map(|(c, amount, payments, next)| json!({
                                "currency": c, "amount": amount, "payments": payments, "next_release_at": Some(*next),
                            })).collect::<Vec<_>>(),
                            "releases": releases.iter().map(|((date, c), amount)| json!({
                                "date": date.to_string(), "currency": c, "amount": amount,
                            })).collect::<Vec<_>>(),
                        });
                        let new = reserve_from(
                            mode,
                            terms.as_ref(),
                            since,
                            held.iter()
                                .map(|&(currency, amount, payments, next)| ReserveHeldView {
                                    currency,
                                    amount,
                                    payments,
                                    next_release_at: next,
                                })
                                .collect(),
                            &releases,
                        );
                        let new = serde_json::to_value(new).unwrap();
                        assert_eq!(new, old);
                        assert_eq!(new.to_string(), old.to_string());
                    }
                }
            }
        }
    }

    #[test]
    fn balance_json_is_unchanged() {
        let mut sums = BTreeMap::new();
        for (n, bucket) in Bucket::ALL.into_iter().enumerate() {
            sums.insert((bucket, Currency::NGN), 100 * n as i64 - 150);
        }
        sums.insert((Bucket::Available, Currency::USD), 42);
        for (mode, brand) in [(Mode::Test, None), (Mode::Live, Some(Uuid::new_v4()))] {
            for sums in [BTreeMap::new(), sums.clone()] {
                // The rendering the view replaced.
                let mut old = json!({
                    "object": "balance",
                    "livemode": mode.livemode(),
                    "brand": brand,
                });
                let o = old.as_object_mut().expect("object");
                for bucket in Bucket::ALL {
                    let entries: Vec<Value> = Currency::ALL
                        .iter()
                        .map(|c| {
                            json!({"currency": c, "amount": sums.get(&(bucket, *c)).copied().unwrap_or(0)})
                        })
                        .collect();
                    o.insert(bucket.as_str().to_string(), Value::Array(entries));
                }
                let new = serde_json::to_value(balance_from_sums(mode, brand, &sums)).unwrap();
                assert_eq!(new, old);
            }
        }
    }
}
