//! Operator actions on merchants: create (with a default brand per mode and
//! a key per mode), update settings, roll keys. Changes to one merchant are
//! serialized by its merchant actor; creation needs none.

use std::sync::Arc;

use actix::prelude::*;
use serde_json::{json, Value};
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::audit::{Audit, AuditAction, Record};
use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::ids::{scope_key, Mode};
use crate::merchant::{key_hash, new_secret_key, ApiKey, Brand, Merchant, Settings};
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
    idem: Option<&crate::idempotency::IdempotencySave>,
) -> DomainResult<Value> {
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
    let view = brand.to_api();
    let mut batch = Batch::new();
    add_brand(&mut batch, &brand);
    if let Some(idem) = idem {
        idem.add_to(&mut batch, 201, &view.to_string(), now);
    }
    kobo.writer
        .commit(batch)
        .await
        .map_err(|e| DomainError::internal(e.to_string()))?;
    Ok(view)
}

/// Creates a merchant. Returns the operator view with both secret keys (the
/// only time they are shown, besides a roll). The audit entry commits with
/// it.
pub async fn create_merchant(
    kobo: &Env,
    name: String,
    settings: Settings,
    audit: &Audit,
) -> DomainResult<Value> {
    let now = kobo.clock.now();
    let id = crate::ids::new_id(now);
    let test_key = new_secret_key(Mode::Test);
    let live_key = new_secret_key(Mode::Live);
    let mut batch = Batch::new();
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
        settings,
        default_brand_test: brands[0],
        default_brand_live: brands[1],
        key_hash_test: key_hash(&test_key),
        key_hash_live: key_hash(&live_key),
        reserve_since: None,
    };
    let mut merchant = merchant;
    if merchant.settings.reserve.is_some() {
        merchant.reserve_since = Some(now);
    }
    batch.put(Table::Merchants, id.as_bytes().to_vec(), &merchant);
    for (mode, key) in [(Mode::Test, &test_key), (Mode::Live, &live_key)] {
        batch.put(
            Table::ApiKeys,
            key_hash(key).into_bytes(),
            &ApiKey {
                merchant: id,
                mode,
                created_at: now,
                revoked_at: None,
            },
        );
    }
    audit.add_to(
        kobo,
        &mut batch,
        Record::new(AuditAction::MerchantCreated, "merchant", id)
            .merchant(id)
            .after(merchant.to_api()),
    );
    kobo.writer
        .commit(batch)
        .await
        .map_err(|e| DomainError::internal(e.to_string()))?;
    let mut view = merchant.to_api();
    let o = view.as_object_mut().expect("object");
    o.insert("test_secret_key".into(), Value::from(test_key));
    o.insert("live_secret_key".into(), Value::from(live_key));
    Ok(view)
}

pub fn load_merchant(kobo: &Env, id: Uuid) -> DomainResult<Option<Merchant>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::Merchants, id.as_bytes())?)
}

/// Serializes changes to one merchant.
pub struct MerchantActor {
    activation: Activation<Self>,
}

#[derive(Debug, Clone)]
pub enum MerchantChange {
    Settings(Value),
    RollKey(Mode),
}

/// A change and who asked for it (its audit entry commits with it).
#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Value>")]
pub struct ChangeMerchant(pub MerchantChange, pub Audit);

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

impl Handler<ChangeMerchant> for MerchantActor {
    type Result = AtomicResponse<Self, DomainResult<Value>>;
    fn handle(&mut self, msg: ChangeMerchant, _: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let kobo = self.activation.deps.clone();
        let id = self.activation.key;
        run_once(self, change(kobo, id, msg.0, msg.1))
    }
}

async fn change(
    kobo: Arc<Env>,
    id: Uuid,
    change: MerchantChange,
    audit: Audit,
) -> DomainResult<Value> {
    let mut merchant =
        load_merchant(&kobo, id)?.ok_or_else(|| DomainError::not_found("merchant", id))?;
    let now = kobo.clock.now();
    let mut batch = Batch::new();
    let before = merchant.to_api();
    let view = match change {
        MerchantChange::Settings(patch) => {
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
            audit.add_to(
                &kobo,
                &mut batch,
                Record::new(action, "merchant", id)
                    .merchant(id)
                    .before(before)
                    .after(merchant.to_api()),
            );
            merchant.to_api()
        }
        MerchantChange::RollKey(mode) => {
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
            let new_key = ApiKey {
                merchant: id,
                mode,
                created_at: now,
                revoked_at: None,
            };
            batch.put(Table::ApiKeys, key_hash(&key).into_bytes(), &new_key);
            audit.add_to(
                &kobo,
                &mut batch,
                record.after(json!({ "mode": mode, "key": &new_key })),
            );
            json!({"object": "merchant_key", "mode": mode, "secret_key": key})
        }
    };
    batch.put(Table::Merchants, id.as_bytes().to_vec(), &merchant);
    kobo.writer
        .commit(batch)
        .await
        .map_err(|e| DomainError::internal(e.to_string()))?;
    Ok(view)
}
