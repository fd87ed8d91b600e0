//! The operator audit log: one entry per operator action (merchant create
//! and settings changes, live approval, key rolls, payout approval and
//! rejection, FX rate publishes, USDT wallet adds and removals, clock moves,
//! backups, restores, dashboard invitations, a webhook signing secret shown
//! in the dashboard; the same actions taken by a
//! merchant's owner in the dashboard carry origin `dashboard`), written in the SAME batch as the action's effect, so
//! there is never an effect without its entry or an entry without its
//! effect. A core leaf: the resources call [`Audit::add_to`] with their own
//! before and after views.
//!
//! An entry holds the time, the action, the target, who asked (the operator
//! API's request id, or the host command), the SHA-256 digests of the target
//! before and after (of its JSON with secrets removed, keys sorted: see
//! [`digest`]), and the names (never the values) of the fields that changed.
//! Secrets never enter an entry: digests are taken after [`redacted`]
//! removes every secret field, and `detail` only carries facts chosen here
//! (a rate, a clock's times, a backup's file name and checksum).
//!
//! The log is append-only: nothing in kobo updates or deletes these rows,
//! and no route offers to.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::{Batch, KeyBuf, Table};

use crate::clock::micros;
use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::paging::Page;

macro_rules! actions {
    ($($variant:ident => $name:literal = $byte:literal,)*) => {
        /// What an operator did.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
        pub enum AuditAction {
            $(#[serde(rename = $name)] $variant,)*
        }
        impl AuditAction {
            pub const ALL: &'static [AuditAction] = &[$(AuditAction::$variant,)*];
            pub fn as_str(self) -> &'static str {
                match self { $(AuditAction::$variant => $name,)* }
            }
            /// Part of the action index's keys: fixed forever.
            pub fn byte(self) -> u8 {
                match self { $(AuditAction::$variant => $byte,)* }
            }
        }
    };
}

actions! {
    MerchantCreated => "merchant.created" = 1,
    MerchantSettingsUpdated => "merchant.settings_updated" = 2,
    MerchantLiveApproved => "merchant.live_approved" = 3,
    MerchantKeyRolled => "merchant.key_rolled" = 4,
    PayoutApproved => "payout.approved" = 5,
    PayoutRejected => "payout.rejected" = 6,
    FxRatePublished => "fx_rate.published" = 7,
    UsdtWalletAdded => "usdt_wallet.added" = 8,
    UsdtWalletRemoved => "usdt_wallet.removed" = 9,
    ClockAdvanced => "clock.advanced" = 10,
    ClockSet => "clock.set" = 11,
    BackupCreated => "backup.created" = 12,
    StoreRestored => "store.restored" = 13,
    DashboardUserInvited => "dashboard_user.invited" = 14,
    WebhookSecretRevealed => "webhook_endpoint.secret_revealed" = 15,
}

impl AuditAction {
    pub fn parse(s: &str) -> Option<AuditAction> {
        AuditAction::ALL.iter().copied().find(|a| a.as_str() == s)
    }
}

/// Who asked for an action: an operator API request (its `Request-Id`), or
/// a command run on the host (`kobo serve --clock-start`, `kobo backup`,
/// `kobo restore`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audit {
    pub request_id: Option<String>,
    pub origin: &'static str,
}

impl Audit {
    /// An operator API request.
    pub fn request(request_id: impl Into<String>) -> Audit {
        Audit {
            request_id: Some(request_id.into()),
            origin: "admin_api",
        }
    }

    /// An operator console request (its `Request-Id`).
    pub fn console(request_id: impl Into<String>) -> Audit {
        Audit {
            request_id: Some(request_id.into()),
            origin: "console",
        }
    }

    /// A merchant's owner, from the dashboard (the request's id).
    pub fn dashboard(request_id: impl Into<String>) -> Audit {
        Audit {
            request_id: Some(request_id.into()),
            origin: "dashboard",
        }
    }

    /// A command on the host (`"kobo serve"`, `"kobo backup"`, ...).
    pub fn command(name: &'static str) -> Audit {
        Audit {
            request_id: None,
            origin: name,
        }
    }

    /// Adds the entry for `record` to `batch`, stamped with the service
    /// clock and the next sequence number.
    pub fn add_to(&self, env: &Env, batch: &mut Batch, record: Record) -> AuditEntry {
        self.add_at(batch, record, env.seq.next(), env.clock.now())
    }

    /// [`Audit::add_to`] with the sequence number and time given (the
    /// offline commands, which run no [`Env`]).
    pub fn add_at(
        &self,
        batch: &mut Batch,
        record: Record,
        seq: u64,
        now: DateTime<Utc>,
    ) -> AuditEntry {
        let before = record.before.as_ref().map(redacted);
        let after = record.after.as_ref().map(redacted);
        let mut changed = Vec::new();
        changed_paths(
            "",
            before.as_ref().unwrap_or(&Value::Null),
            after.as_ref().unwrap_or(&Value::Null),
            0,
            &mut changed,
        );
        let entry = AuditEntry {
            id: crate::ids::new_id(now),
            seq,
            at: now,
            action: record.action,
            merchant: record.merchant,
            target_type: record.target_type.to_string(),
            target_id: record.target_id,
            request_id: self.request_id.clone(),
            origin: self.origin.to_string(),
            before_digest: before.as_ref().map(canonical_digest),
            after_digest: after.as_ref().map(canonical_digest),
            changed,
            detail: record.detail.map(|d| redacted(&d)),
        };
        entry.add_to(batch);
        entry
    }
}

/// What an action did, for its entry: built by the resource that does it.
#[derive(Debug, Clone)]
pub struct Record {
    action: AuditAction,
    merchant: Option<Uuid>,
    target_type: &'static str,
    target_id: String,
    before: Option<Value>,
    after: Option<Value>,
    detail: Option<Value>,
}

impl Record {
    pub fn new(action: AuditAction, target_type: &'static str, target_id: impl ToString) -> Self {
        Record {
            action,
            merchant: None,
            target_type,
            target_id: target_id.to_string(),
            before: None,
            after: None,
            detail: None,
        }
    }
    /// The merchant whose account the action touched.
    pub fn merchant(mut self, merchant: Uuid) -> Self {
        self.merchant = Some(merchant);
        self
    }
    /// The target before the action (digested, never kept).
    pub fn before(mut self, view: Value) -> Self {
        self.before = Some(view);
        self
    }
    /// The target after the action (digested, never kept).
    pub fn after(mut self, view: Value) -> Self {
        self.after = Some(view);
        self
    }
    /// Facts worth reading in the entry itself (no secrets: secret fields
    /// are removed all the same).
    pub fn detail(mut self, detail: Value) -> Self {
        self.detail = Some(detail);
        self
    }
}

/// A stored entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: Uuid,
    pub seq: u64,
    pub at: DateTime<Utc>,
    pub action: AuditAction,
    pub merchant: Option<Uuid>,
    pub target_type: String,
    pub target_id: String,
    pub request_id: Option<String>,
    pub origin: String,
    pub before_digest: Option<String>,
    pub after_digest: Option<String>,
    pub changed: Vec<String>,
    pub detail: Option<Value>,
}

/// The `object` value of an audit entry.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum AuditEntryObject {
    #[serde(rename = "audit_entry")]
    AuditEntry,
}

/// What an action was done to.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AuditTarget {
    /// `merchant`, `payout`, `fx_rate`, `usdt_wallet`, `clock`, `backup`,
    /// `store`, `dashboard_user` or `webhook_endpoint`.
    #[serde(rename = "type")]
    pub target_type: String,
    /// The object's id (a backup: its file name).
    pub id: String,
}

/// One operator action, as `GET /admin/v1/audit` lists it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AuditEntry)]
pub struct AuditEntryView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: AuditEntryObject,
    /// When the action took effect (the service clock).
    pub created_at: DateTime<Utc>,
    pub action: AuditAction,
    /// The merchant whose account it touched, if any.
    #[schema(required = true)]
    pub merchant: Option<Uuid>,
    pub target: AuditTarget,
    /// The operator API request's `Request-Id`; null for host commands.
    #[schema(required = true)]
    pub request_id: Option<String>,
    /// `admin_api`, or the host command (`kobo serve`, `kobo backup`,
    /// `kobo restore`).
    pub origin: String,
    /// SHA-256 (hex) of the target's JSON before the action, secrets
    /// removed and keys sorted; null when it did not exist.
    #[schema(required = true)]
    pub before_digest: Option<String>,
    /// The same digest after the action; null when it no longer exists.
    #[schema(required = true)]
    pub after_digest: Option<String>,
    /// Names of the fields that changed (dotted paths; never values).
    pub changed: Vec<String>,
    /// Facts of the action (a rate, a clock's times, a backup's file and
    /// checksum); never a secret.
    #[schema(required = true, value_type = Option<Object>)]
    pub detail: Option<Value>,
}

impl AuditEntry {
    pub fn view(&self) -> AuditEntryView {
        AuditEntryView {
            id: self.id,
            object: AuditEntryObject::AuditEntry,
            created_at: self.at,
            action: self.action,
            merchant: self.merchant,
            target: AuditTarget {
                target_type: self.target_type.clone(),
                id: self.target_id.clone(),
            },
            request_id: self.request_id.clone(),
            origin: self.origin.clone(),
            before_digest: self.before_digest.clone(),
            after_digest: self.after_digest.clone(),
            changed: self.changed.clone(),
            detail: self.detail.clone(),
        }
    }

    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("an audit entry serializes")
    }

    fn time_seq(&self) -> KeyBuf {
        KeyBuf::new().u64(micros(self.at)).u64(self.seq)
    }

    /// Its keys in the three indexes: (table, key).
    pub fn index_keys(&self) -> Vec<(Table, Vec<u8>)> {
        let mut keys = vec![
            (Table::AuditIndex, self.time_seq().build()),
            (
                Table::AuditActionIndex,
                KeyBuf::new()
                    .u8(self.action.byte())
                    .u64(micros(self.at))
                    .u64(self.seq)
                    .build(),
            ),
        ];
        if let Some(m) = self.merchant {
            keys.push((
                Table::AuditMerchantIndex,
                KeyBuf::new()
                    .bytes(m.as_bytes())
                    .u64(micros(self.at))
                    .u64(self.seq)
                    .build(),
            ));
        }
        keys
    }

    fn add_to(&self, batch: &mut Batch) {
        batch.put(Table::AuditLog, self.id.as_bytes().to_vec(), self);
        for (table, key) in self.index_keys() {
            batch.put_raw(table, key, self.id.as_bytes().to_vec());
        }
        batch.note_seq(self.seq);
    }
}

/// Field names whose values are secrets (or, for account numbers, too
/// personal to digest: a 10-digit number's digest is easily reversed).
/// [`redacted`] removes them at any depth.
pub const SECRET_FIELDS: &[&str] = &[
    "secret_key",
    "test_secret_key",
    "live_secret_key",
    "secret",
    "client_secret",
    "client_secret_hash",
    "webhook_secret",
    "signing_secret",
    "admin_token",
    "token",
    "otp",
    "pin",
    "cvc",
    "card_number",
    "account_number",
    "key_hash",
    "key_hash_test",
    "key_hash_live",
    "password",
];

/// `v` without any [`SECRET_FIELDS`], at any depth.
pub fn redacted(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !SECRET_FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), redacted(v)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(redacted).collect()),
        other => other.clone(),
    }
}

/// The canonical text of `v`: JSON with object keys sorted, no spaces.
pub fn canonical(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    write(&m[k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}

fn canonical_digest(v: &Value) -> String {
    hex::encode(Sha256::digest(canonical(v).as_bytes()))
}

/// The digest an entry records for `view`: SHA-256 (hex) of the canonical
/// JSON of `view` with secrets removed. An auditor holding a copy of the
/// object computes the same.
pub fn digest(view: &Value) -> String {
    canonical_digest(&redacted(view))
}

/// Dotted paths (up to three deep) where `a` and `b` differ.
fn changed_paths(prefix: &str, a: &Value, b: &Value, depth: usize, out: &mut Vec<String>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) if depth < 3 => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                changed_paths(
                    &path,
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    depth + 1,
                    out,
                );
            }
        }
        _ if prefix.is_empty() => {}
        _ => out.push(prefix.to_string()),
    }
}

/// Filters of `GET /admin/v1/audit`.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub merchant: Option<Uuid>,
    pub action: Option<AuditAction>,
    /// Inclusive.
    pub from: Option<DateTime<Utc>>,
    /// Inclusive.
    pub to: Option<DateTime<Utc>>,
}

impl AuditFilter {
    fn accepts(&self, e: &AuditEntry) -> bool {
        self.merchant.is_none_or(|m| e.merchant == Some(m))
            && self.action.is_none_or(|a| e.action == a)
            && self.from.is_none_or(|f| e.at >= f)
            && self.to.is_none_or(|t| e.at <= t)
    }

    /// The index to walk and the prefix of its keys before `time|seq`.
    fn index(&self) -> (Table, Vec<u8>) {
        match (self.merchant, self.action) {
            (Some(m), _) => (Table::AuditMerchantIndex, m.as_bytes().to_vec()),
            (None, Some(a)) => (Table::AuditActionIndex, vec![a.byte()]),
            (None, None) => (Table::AuditIndex, Vec::new()),
        }
    }
}

pub fn load(env: &Env, id: Uuid) -> DomainResult<Option<AuditEntry>> {
    Ok(env
        .store
        .read()?
        .get_decoded(Table::AuditLog, id.as_bytes())?)
}

/// A newest-first page of the log (by time, then sequence), through the
/// index that fits the filter: a merchant's entries, an action's, or all;
/// the time range bounds the walk.
pub fn list(
    env: &Env,
    filter: &AuditFilter,
    limit: usize,
    starting_after: Option<Uuid>,
) -> DomainResult<Page> {
    let read = env.store.read()?;
    let (table, prefix) = filter.index();
    let key = |at: DateTime<Utc>, seq: u64| {
        let mut k = prefix.clone();
        k.extend_from_slice(&micros(at).to_be_bytes());
        k.extend_from_slice(&seq.to_be_bytes());
        k
    };
    let mut before = filter.to.map(|t| {
        let mut k = prefix.clone();
        k.extend_from_slice(&(micros(t) + 1).to_be_bytes());
        k
    });
    if let Some(id) = starting_after {
        match read.get_decoded::<AuditEntry>(Table::AuditLog, id.as_bytes())? {
            Some(e) if filter.accepts(&e) => {
                let k = key(e.at, e.seq);
                before = Some(match before {
                    Some(b) if b < k => b,
                    _ => k,
                });
            }
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("starting_after names no entry of this list: {id}"),
                ))
            }
        }
    }
    let from = filter.from.map(micros);
    let mut data = Vec::new();
    let mut has_more = false;
    read.scan_prefix_rev(table, &prefix, before.as_deref(), |k, v| {
        let at = u64::from_be_bytes(
            k[prefix.len()..prefix.len() + 8]
                .try_into()
                .expect("audit index keys hold a time"),
        );
        if from.is_some_and(|f| at < f) {
            return Ok(false);
        }
        let Ok(id) = Uuid::from_slice(v) else {
            return Ok(true);
        };
        let Some(e) = read.get_decoded::<AuditEntry>(Table::AuditLog, id.as_bytes())? else {
            return Ok(true);
        };
        if !filter.accepts(&e) {
            return Ok(true);
        }
        if data.len() == limit {
            has_more = true;
            return Ok(false);
        }
        data.push(e.to_api());
        Ok(true)
    })?;
    Ok(Page { data, has_more })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_never_reach_a_digest_or_the_changed_fields() {
        let a = json!({"name": "Ada", "test_secret_key": "svc_test_x", "settings": {"live_approved": false}, "bank": {"account_number": "0123456789", "last4": "6789"}});
        let b = json!({"name": "Ada", "test_secret_key": "svc_test_y", "settings": {"live_approved": true}, "bank": {"account_number": "9999999999", "last4": "6789"}});
        let r = redacted(&a);
        assert!(!r.to_string().contains("svc_test_x"));
        assert!(!r.to_string().contains("0123456789"));
        let mut changed = Vec::new();
        changed_paths("", &redacted(&a), &redacted(&b), 0, &mut changed);
        assert_eq!(changed, vec!["settings.live_approved"]);
        // The digest does not move with a secret.
        let c = json!({"name": "Ada", "test_secret_key": "other", "settings": {"live_approved": false}, "bank": {"account_number": "1", "last4": "6789"}});
        assert_eq!(digest(&a), digest(&c));
        assert_ne!(digest(&a), digest(&b));
    }

    #[test]
    fn the_canonical_form_sorts_keys_at_every_depth() {
        let v = json!({"b": 1, "a": {"d": [1, {"f": 2, "e": 3}], "c": "x"}});
        assert_eq!(
            canonical(&v),
            r#"{"a":{"c":"x","d":[1,{"e":3,"f":2}]},"b":1}"#
        );
    }

    #[test]
    fn action_names_and_bytes_are_unique_and_parse_back() {
        let mut bytes: Vec<u8> = AuditAction::ALL.iter().map(|a| a.byte()).collect();
        bytes.sort();
        bytes.dedup();
        assert_eq!(bytes.len(), AuditAction::ALL.len());
        for a in AuditAction::ALL {
            assert_eq!(AuditAction::parse(a.as_str()), Some(*a));
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
        }
    }
}
