//! Creating payment links, committing their changes, reads and lists.
//!
//! Slugs are unique across kobo (every merchant, both modes): a row
//! `slug -> link id` claimed with `require_absent` in the batch that
//! creates the link or moves its slug, so two links can never commit the
//! same slug (the second answers 409 `slug_taken`).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use kobo_storage::{Batch, CommitError, KeyBuf, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event::Event;
use crate::idempotency::{render, Answer, IdempotencySave, Outcome};
use crate::ids::{new_id, scope_key, Mode};
use crate::merchant::{Brand, Merchant};
use crate::money::{Currency, FeeBearer};
use crate::paging::Page;
use crate::payment_intent::link::{read_counters, AMOUNT, PAYMENTS};
use crate::timer::{Timer, TimerKind};

use super::{
    check_custom_fields, check_expiry, valid_slug, AmountRule, CustomField, Effect, LinkFacts,
    LinkStatus, PaymentLink, PaymentLinkView, PAYMENT_LINK_CREATED,
};

/// A validated create request (the HTTP layer parses the body into this).
#[derive(Debug, Clone)]
pub struct CreateLink {
    pub name: String,
    pub description: Option<String>,
    pub currency: Currency,
    pub fee_bearer: FeeBearer,
    pub amount: AmountRule,
    /// Generated from the name when left out.
    pub slug: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub max_payments: Option<i64>,
    pub custom_fields: Vec<CustomField>,
    pub collect_phone: bool,
    pub return_url: Option<String>,
    pub success_message: Option<String>,
    pub metadata: Map<String, Value>,
    pub brand: Option<Uuid>,
}

pub fn list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

pub fn status_prefix(merchant: Uuid, mode: Mode, status: LinkStatus) -> KeyBuf {
    scope_key(merchant, mode).u8(status.byte())
}

pub fn slug_key(slug: &str) -> Vec<u8> {
    slug.as_bytes().to_vec()
}

pub fn load(kobo: &Env, id: Uuid) -> DomainResult<Option<PaymentLink>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::PaymentLinks, id.as_bytes())?)
}

/// The merchant's link `id` in `mode` (404 otherwise).
pub fn own(kobo: &Env, merchant: Uuid, mode: Mode, id: Uuid) -> DomainResult<PaymentLink> {
    match load(kobo, id)? {
        Some(l) if l.merchant == merchant && l.mode == mode => Ok(l),
        _ => Err(DomainError::not_found("payment_link", id)),
    }
}

/// The link whose page is `/p/<slug>`.
pub fn by_slug(kobo: &Env, slug: &str) -> DomainResult<Option<PaymentLink>> {
    if !valid_slug(slug) {
        return Ok(None);
    }
    let read = kobo.store.read()?;
    let Some(raw) = read.get(Table::PaymentLinkSlugs, &slug_key(slug))? else {
        return Ok(None);
    };
    let Ok(id) = Uuid::from_slice(&raw) else {
        return Ok(None);
    };
    Ok(read.get_decoded(Table::PaymentLinks, id.as_bytes())?)
}

/// A link's `[held, payments, amount]` counters, as committed.
pub fn counters(kobo: &Env, link: Uuid) -> DomainResult<[i64; 3]> {
    read_counters(&kobo.store.read()?, link)
}

/// What a link's view shows at `now`, from its committed counters.
pub fn facts(kobo: &Env, link: Uuid, now: DateTime<Utc>) -> DomainResult<LinkFacts<'_>> {
    let c = counters(kobo, link)?;
    Ok(LinkFacts {
        base_url: &kobo.config.base_url,
        payments: c[PAYMENTS],
        amount: c[AMOUNT],
        now,
    })
}

/// The public PaymentLink object as it is now.
pub fn view(kobo: &Env, link: &PaymentLink) -> DomainResult<PaymentLinkView> {
    Ok(link.view(facts(kobo, link.id, kobo.clock.now())?))
}

/// A slug from the link's name: its letters and digits, lowercase, words
/// joined by `-`, then `-` and 6 random characters.
fn generated_slug(name: &str) -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut base = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            base.push(c);
        } else if !base.is_empty() && !base.ends_with('-') {
            base.push('-');
        }
        if base.len() >= 40 {
            break;
        }
    }
    let mut rng = rand::thread_rng();
    let tail: String = (0..6)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect();
    let base = base.trim_matches('-');
    if base.is_empty() {
        tail
    } else {
        format!("{base}-{tail}")
    }
}

fn check_brand(
    kobo: &Env,
    merchant: &Merchant,
    mode: Mode,
    brand: Option<Uuid>,
) -> DomainResult<Uuid> {
    let Some(b) = brand else {
        return Ok(merchant.default_brand(mode));
    };
    let found: Option<Brand> = kobo
        .store
        .read()?
        .get_decoded(Table::Brands, b.as_bytes())?;
    match found {
        Some(x) if x.merchant == merchant.id && x.mode == mode => Ok(b),
        _ => Err(DomainError::not_found("brand", b).with_param("brand")),
    }
}

fn slug_taken() -> DomainError {
    DomainError::state(
        ErrorCode::SlugTaken,
        "this slug is already used by another payment link; choose another",
    )
}

/// Creates an active link: the object, its list indexes, the slug claim,
/// the expiry timer, `payment_link.created` and the saved response in one
/// batch. A generated slug that collides is drawn again.
pub async fn create(
    kobo: &Env,
    merchant: &Merchant,
    mode: Mode,
    req: CreateLink,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<PaymentLinkView>> {
    let now = kobo.clock.now();
    let amount = req.amount.clone().checked()?;
    check_custom_fields(&req.custom_fields)?;
    check_expiry(req.expires_at, now)?;
    let brand = check_brand(kobo, merchant, mode, req.brand)?;
    let id = new_id(now);
    let mut link = PaymentLink {
        id,
        merchant: merchant.id,
        mode,
        seq: 0,
        name: req.name.clone(),
        description: req.description.clone(),
        currency: req.currency,
        fee_bearer: req.fee_bearer,
        brand,
        amount,
        slug: String::new(),
        status: LinkStatus::Active,
        inactive_reason: None,
        expires_at: req.expires_at,
        max_payments: req.max_payments,
        custom_fields: req.custom_fields.clone(),
        collect_phone: req.collect_phone,
        return_url: req.return_url.clone(),
        success_message: req.success_message.clone(),
        metadata: req.metadata.clone(),
        created_at: now,
        updated_at: now,
        version: 1,
    };
    for _ in 0..3 {
        link.seq = kobo.seq.next();
        link.slug = req
            .slug
            .clone()
            .unwrap_or_else(|| generated_slug(&req.name));
        match commit_new(kobo, &link, idem, now).await {
            Err(e) if e.code == ErrorCode::SlugTaken && req.slug.is_none() => continue,
            done => return done,
        }
    }
    Err(DomainError::internal("no free slug was drawn; retry"))
}

async fn commit_new(
    kobo: &Env,
    link: &PaymentLink,
    idem: Option<&IdempotencySave>,
    now: DateTime<Utc>,
) -> DomainResult<Answer<PaymentLinkView>> {
    let (merchant, mode) = (link.merchant, link.mode);
    let view = link.view(LinkFacts {
        base_url: &kobo.config.base_url,
        payments: 0,
        amount: 0,
        now,
    });
    let body = render(&view);
    let mut batch = Batch::new();
    batch.owned_by(merchant.as_bytes());
    batch
        .put(Table::PaymentLinks, link.id.as_bytes().to_vec(), link)
        .put_raw(
            Table::PaymentLinkIndex,
            list_key(merchant, mode, link.seq),
            link.id.as_bytes().to_vec(),
        )
        .put_raw(
            Table::PaymentLinkStatusIndex,
            status_prefix(merchant, mode, link.status)
                .u64(link.seq)
                .build(),
            link.id.as_bytes().to_vec(),
        )
        .require_absent(Table::PaymentLinkSlugs, slug_key(&link.slug))
        .put_raw(
            Table::PaymentLinkSlugs,
            slug_key(&link.slug),
            link.id.as_bytes().to_vec(),
        )
        .note_seq(link.seq);
    if let Some(e) = link.expires_at {
        Timer::new(TimerKind::PaymentLinkExpire, link.id, merchant, mode).schedule(&mut batch, e);
    }
    Event::record(
        kobo,
        (merchant, mode),
        PAYMENT_LINK_CREATED,
        body.clone(),
        now,
        &mut batch,
    );
    let answer = Answer::save_rendered(Outcome::Created(view), &body, idem, &mut batch, now);
    commit(kobo, batch).await?;
    Ok(answer)
}

/// Commits a link's batch; a slug claimed meanwhile is 409 `slug_taken`.
async fn commit(kobo: &Env, batch: Batch) -> DomainResult<()> {
    match kobo.writer.commit(batch).await {
        Ok(()) => Ok(()),
        Err(CommitError::Conflict { table, .. }) if table == Table::PaymentLinkSlugs.name() => {
            Err(slug_taken())
        }
        Err(e) => Err(DomainError::from(e)),
    }
}

/// Commits a change of a link decided by its actor: the object, its
/// status index move, the effects (events, expiry timer, slug move), the
/// rows `batch` already holds and the saved response. Answers the view.
pub async fn commit_change(
    kobo: &Env,
    before: &PaymentLink,
    after: &PaymentLink,
    effects: &[Effect],
    mut batch: Batch,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<PaymentLinkView>> {
    let now = kobo.clock.now();
    let view = view(kobo, after)?;
    let body = render(&view);
    let (merchant, mode, id) = (after.merchant, after.mode, after.id);
    if after != before {
        batch.put(Table::PaymentLinks, id.as_bytes().to_vec(), after);
    }
    if after.status != before.status {
        batch
            .delete(
                Table::PaymentLinkStatusIndex,
                status_prefix(merchant, mode, before.status)
                    .u64(after.seq)
                    .build(),
            )
            .put_raw(
                Table::PaymentLinkStatusIndex,
                status_prefix(merchant, mode, after.status)
                    .u64(after.seq)
                    .build(),
                id.as_bytes().to_vec(),
            );
    }
    for effect in effects {
        match effect {
            Effect::Event(t) => {
                Event::record(kobo, (merchant, mode), t, body.clone(), now, &mut batch)
            }
            Effect::ScheduleExpiry(due) => {
                Timer::new(TimerKind::PaymentLinkExpire, id, merchant, mode)
                    .schedule(&mut batch, *due)
            }
            Effect::CancelExpiry(due) => {
                batch.delete(
                    Table::Timers,
                    Timer::key(*due, TimerKind::PaymentLinkExpire, id),
                );
            }
            Effect::MoveSlug { from, to } => {
                batch
                    .delete(Table::PaymentLinkSlugs, slug_key(from))
                    .require_absent(Table::PaymentLinkSlugs, slug_key(to))
                    .put_raw(
                        Table::PaymentLinkSlugs,
                        slug_key(to),
                        id.as_bytes().to_vec(),
                    );
            }
        }
    }
    let answer = Answer::save_rendered(Outcome::Updated(view), &body, idem, &mut batch, now);
    if !batch.is_empty() {
        commit(kobo, batch).await?;
    }
    Ok(answer)
}

pub struct LinkFilter {
    pub limit: usize,
    pub starting_after: Option<Uuid>,
    pub status: Option<LinkStatus>,
    pub brand: Option<Uuid>,
}

/// Newest first, with a cursor; by the status index when filtered by
/// status. Each link is shown (and filtered) by its status now: a link
/// whose expiry or last payment its actor has not yet recorded shows
/// `inactive` and leaves `status=active` at once.
pub fn list(kobo: &Env, merchant: Uuid, mode: Mode, f: &LinkFilter) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    let now = kobo.clock.now();
    let (table, prefix) = match f.status {
        Some(s) => (
            Table::PaymentLinkStatusIndex,
            status_prefix(merchant, mode, s).build(),
        ),
        None => (Table::PaymentLinkIndex, scope_key(merchant, mode).build()),
    };
    let before = match f.starting_after {
        Some(id) => match read.get_decoded::<PaymentLink>(Table::PaymentLinks, id.as_bytes())? {
            Some(l) if l.merchant == merchant && l.mode == mode => {
                let mut k = prefix.clone();
                k.extend_from_slice(&l.seq.to_be_bytes());
                Some(k)
            }
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("no such payment_link: {id}"),
                ))
            }
        },
        None => None,
    };
    let mut data: Vec<Value> = Vec::new();
    let mut has_more = false;
    read.scan_prefix_rev(table, &prefix, before.as_deref(), |_, v| {
        let id = Uuid::from_slice(v)
            .map_err(|_| kobo_storage::StoreError::Redb("bad payment link index".into()))?;
        let Some(l) = read.get_decoded::<PaymentLink>(Table::PaymentLinks, id.as_bytes())? else {
            return Ok(true);
        };
        let c =
            read_counters(&read, l.id).map_err(|e| kobo_storage::StoreError::Redb(e.message))?;
        let facts = LinkFacts {
            base_url: &kobo.config.base_url,
            payments: c[PAYMENTS],
            amount: c[AMOUNT],
            now,
        };
        let shown = l.effective_status(facts.payments, now).0;
        if f.brand.is_some_and(|b| l.brand != b) || f.status.is_some_and(|s| s != shown) {
            return Ok(true);
        }
        if data.len() == f.limit {
            has_more = true;
            return Ok(false);
        }
        data.push(l.to_api(facts));
        Ok(true)
    })?;
    Ok(Page { data, has_more })
}
