//! Operator actions on merchants: create (with a default brand per mode and
//! a key per mode), update settings, roll keys. Changes to one merchant are
//! serialized by its merchant actor; creation needs none.

use std::sync::Arc;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Value};
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::audit::{Audit, AuditAction, Record};
use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::{scope_key, Mode};
use crate::merchant::{
    key_hash, new_secret_key, ApiKey, Brand, BrandView, Merchant, MerchantView, Settings,
};
use crate::registry::{run_once, Activation, VirtualActor};

pub fn brand_index_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

fn add_brand(batch: &mut Batch, brand: &Brand) {
    batch
        .put(Table::Brands, brand.id.as_bytes().to_vec(), brand)
        .put_raw(
            Table::BrandIndex,
            brand_index_key(brand.merchant, brand.mode, brand.seq),
            brand.id.as_bytes().to_vec(),
        )
        .note_seq(brand.seq);
}

/// Creates a brand of a merchant in one mode.
pub async fn create_brand(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    name: String,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<BrandView>> {
    let now = kobo.clock.now();
    let brand = Brand {
        id: crate::ids::new_id(now),
        merchant,
        mode,
        seq: kobo.seq.next(),
        name,
        default: false,
        created_at: now,
    };
    let mut batch = Batch::new();
    batch.owned_by(merchant.as_bytes());
    add_brand(&mut batch, &brand);
    let answer = Answer::save(Outcome::Created(brand.view()), idem, &mut batch, now);
    kobo.writer.commit(batch).await.map_err(DomainError::from)?;
    Ok(answer)
}

/// A new merchant as the operator sees it once: with both secret keys.
#[derive(Debug, Clone, Serialize)]
pub struct NewMerchantView {
    #[serde(flatten)]
    pub merchant: MerchantView,
    pub test_secret_key: String,
    pub live_secret_key: String,
}

/// A new merchant's id, in a shard this node holds: in a cluster the node
/// that creates a merchant writes its first rows, so it picks the id's
/// random tail until its shard is one of its own (as many tries, on
/// average, as there are nodes).
fn new_merchant_id(kobo: &Env, now: chrono::DateTime<chrono::Utc>) -> DomainResult<Uuid> {
    for _ in 0..4096 {
        let id = crate::ids::new_id(now);
        if kobo
            .writer
            .holds(kobo_storage::fence::shard_of(id.as_bytes()))
        {
            return Ok(id);
        }
    }
    Err(kobo_storage::CommitError::NotOwner { shard: 0 }.into())
}

/// Creates a merchant (its default brand and a secret key per mode).
/// Answers the operator view with both secret keys (the only time they are
/// shown, besides a roll). The audit entry commits with it.
pub async fn create_merchant(
    kobo: &Env,
    name: String,
    settings: Settings,
    audit: &Audit,
) -> DomainResult<NewMerchantView> {
    let now = kobo.clock.now();
    let id = new_merchant_id(kobo, now)?;
    let test_key = new_secret_key(Mode::Test);
    let live_key = new_secret_key(Mode::Live);
    let mut batch = Batch::new();
    batch.owned_by(id.as_bytes());
    let mut brands = Vec::new();
    for mode in [Mode::Test, Mode::Live] {
        let brand = Brand {
            id: crate::ids::new_id(now),
            merchant: id,
            mode,
            seq: kobo.seq.next(),
            name: name.clone(),
            default: true,
            created_at: now,
        };
        add_brand(&mut batch, &brand);
        brands.push(brand.id);
    }
    let merchant = Merchant {
        id,
        name,
        created_at: now,
        reserve_since: settings.reserve.as_ref().map(|_| now),
        settings,
        default_brand_test: brands[0],
        default_brand_live: brands[1],
        key_hash_test: key_hash(&test_key),
        key_hash_live: key_hash(&live_key),
    };
    batch.put(Table::Merchants, id.as_bytes().to_vec(), &merchant);
    for (mode, key) in [(Mode::Test, &test_key), (Mode::Live, &live_key)] {
        add_key(&mut batch, key, id, mode, now);
    }
    audit.add_to(
        kobo,
        &mut batch,
        Record::new(AuditAction::MerchantCreated, "merchant", id)
            .merchant(id)
            .after(merchant.to_api()),
    );
    kobo.writer.commit(batch).await.map_err(DomainError::from)?;
    Ok(NewMerchantView {
        merchant: merchant.view(),
        test_secret_key: test_key,
        live_secret_key: live_key,
    })
}

/// A new secret key's row (answered for the audit log: the record, never
/// the key).
fn add_key(batch: &mut Batch, key: &str, merchant: Uuid, mode: Mode, now: DateTime<Utc>) -> ApiKey {
    let row = ApiKey {
        merchant,
        mode,
        created_at: now,
        revoked_at: None,
    };
    batch.put(Table::ApiKeys, key_hash(key).into_bytes(), &row);
    row
}

pub fn load_merchant(kobo: &Env, id: Uuid) -> DomainResult<Option<Merchant>> {
    Ok(load_merchant_shared(kobo, id)?.map(|m| (*m).clone()))
}

/// [`load_merchant`] without the copy: for the paths every payment takes.
pub fn load_merchant_shared(kobo: &Env, id: Uuid) -> DomainResult<Option<Arc<Merchant>>> {
    Ok(crate::merchant::read_merchant(&kobo.store.read()?, id)?)
}

/// Serializes changes to one merchant.
pub struct MerchantActor {
    activation: Activation<Self>,
}

/// Patches a merchant's settings (JSON merge patch); answers the merchant.
/// Who asked rides along: the audit entry commits with the change.
#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<MerchantView>")]
pub struct UpdateSettings(pub Value, pub Audit);

/// Replaces a merchant's secret key of one mode (the old one is revoked);
/// answers the new key, shown once. The audit entry (of the key records,
/// never the keys) commits with the roll.
#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<RolledKeyView>")]
pub struct RollKey(pub Mode, pub Audit);

/// A rolled secret key.
#[derive(Debug, Clone, Serialize)]
pub struct RolledKeyView {
    pub object: RolledKeyObject,
    pub mode: Mode,
    pub secret_key: String,
}

/// The `object` value of a rolled key.
#[derive(Debug, Clone, Copy, Serialize)]
pub enum RolledKeyObject {
    #[serde(rename = "merchant_key")]
    MerchantKey,
}

impl Actor for MerchantActor {
    type Context = Context<Self>;
}

impl VirtualActor for MerchantActor {
    type Key = Uuid;
    type Deps = Env;
    const KIND: &'static str = "merchant";
    fn activate(activation: Activation<Self>) -> Self {
        MerchantActor { activation }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

impl Handler<UpdateSettings> for MerchantActor {
    type Result = AtomicResponse<Self, DomainResult<MerchantView>>;
    fn handle(&mut self, msg: UpdateSettings, _: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let kobo = self.activation.deps.clone();
        let id = self.activation.key;
        run_once(self, update_settings(kobo, id, msg.0, msg.1))
    }
}

impl Handler<RollKey> for MerchantActor {
    type Result = AtomicResponse<Self, DomainResult<RolledKeyView>>;
    fn handle(&mut self, msg: RollKey, _: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let kobo = self.activation.deps.clone();
        let id = self.activation.key;
        run_once(self, roll_key(kobo, id, msg.0, msg.1))
    }
}

/// Live approval is its own action in the audit log; any other patch is a
/// settings update.
async fn update_settings(
    kobo: Arc<Env>,
    id: Uuid,
    patch: Value,
    audit: Audit,
) -> DomainResult<MerchantView> {
    let mut merchant =
        load_merchant(&kobo, id)?.ok_or_else(|| DomainError::not_found("merchant", id))?;
    let now = kobo.clock.now();
    let before = merchant.to_api();
    let settings = merchant.settings.patched(&patch)?;
    if settings.reserve != merchant.settings.reserve {
        merchant.reserve_since = settings.reserve.as_ref().map(|_| now);
    }
    let action = if settings.live_approved && !merchant.settings.live_approved {
        AuditAction::MerchantLiveApproved
    } else {
        AuditAction::MerchantSettingsUpdated
    };
    merchant.settings = settings;
    let mut batch = Batch::new();
    batch.owned_by(id.as_bytes());
    audit.add_to(
        &kobo,
        &mut batch,
        Record::new(action, "merchant", id)
            .merchant(id)
            .before(before)
            .after(merchant.to_api()),
    );
    save(&kobo, &merchant, batch).await?;
    Ok(merchant.view())
}

async fn roll_key(
    kobo: Arc<Env>,
    id: Uuid,
    mode: Mode,
    audit: Audit,
) -> DomainResult<RolledKeyView> {
    let mut merchant =
        load_merchant(&kobo, id)?.ok_or_else(|| DomainError::not_found("merchant", id))?;
    let now = kobo.clock.now();
    let mut batch = Batch::new();
    batch.owned_by(id.as_bytes());
    let key = new_secret_key(mode);
    let old = match mode {
        Mode::Test => std::mem::replace(&mut merchant.key_hash_test, key_hash(&key)),
        Mode::Live => std::mem::replace(&mut merchant.key_hash_live, key_hash(&key)),
    };
    let read = kobo.store.read()?;
    let mut record = Record::new(AuditAction::MerchantKeyRolled, "merchant", id)
        .merchant(id)
        .detail(json!({ "mode": mode }));
    if let Some(mut old_key) = read.get_decoded::<ApiKey>(Table::ApiKeys, old.as_bytes())? {
        // The key records, never the keys (nor their hashes).
        record = record.before(json!({ "mode": mode, "key": &old_key }));
        old_key.revoked_at = Some(now);
        batch.put(Table::ApiKeys, old.into_bytes(), &old_key);
    }
    drop(read);
    let new_key = add_key(&mut batch, &key, id, mode, now);
    audit.add_to(
        &kobo,
        &mut batch,
        record.after(json!({ "mode": mode, "key": &new_key })),
    );
    save(&kobo, &merchant, batch).await?;
    Ok(RolledKeyView {
        object: RolledKeyObject::MerchantKey,
        mode,
        secret_key: key,
    })
}

/// Commits `batch` with the merchant.
async fn save(kobo: &Env, merchant: &Merchant, mut batch: Batch) -> DomainResult<()> {
    batch.put(Table::Merchants, merchant.id.as_bytes().to_vec(), merchant);
    kobo.writer.commit(batch).await.map_err(DomainError::from)
}

/// Merchants rows one search reads at most.
pub const MERCHANT_SEARCH_SCAN_MAX: usize = 100_000;

/// Merchants whose name contains `query` (case-insensitive) or whose id is
/// `query`, in id order (the ids are UUIDv7: oldest first), at most
/// `limit`; an empty query matches every merchant. Reads at most
/// [`MERCHANT_SEARCH_SCAN_MAX`] rows (for the operator console).
pub fn search_merchants(kobo: &Env, query: &str, limit: usize) -> DomainResult<Vec<Merchant>> {
    let query = query.trim();
    if let Ok(id) = Uuid::parse_str(query) {
        return Ok(load_merchant(kobo, id)?.into_iter().collect());
    }
    let needle = query.to_lowercase();
    let read = kobo.store.read()?;
    let mut out = Vec::new();
    let mut seen = 0;
    read.scan_prefix(Table::Merchants, &[], None, |_, v| {
        seen += 1;
        let m: Merchant = kobo_storage::decode(v)?;
        if needle.is_empty() || m.name.to_lowercase().contains(&needle) {
            out.push(m);
        }
        Ok(out.len() < limit && seen < MERCHANT_SEARCH_SCAN_MAX)
    })?;
    Ok(out)
}
