//! Saved responses of POST requests, keyed per merchant, mode and
//! Idempotency-Key. A response that guards an effect is saved in the same
//! batch as the effect ([`IdempotencySave::add_to`]), so a crash can never
//! leave one without the other. Records are kept 24 hours, then pruned.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use kobo_storage::{Batch, KeyBuf, ReadTxn, StoreError, Table};

use crate::clock::micros;
use crate::ids::{scope_key, Mode};

/// How long a key is remembered.
pub fn retention() -> Duration {
    Duration::hours(24)
}

/// Longest accepted Idempotency-Key.
pub const MAX_KEY_LEN: usize = 255;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    /// SHA-256 of method, path and body of the first request.
    pub fingerprint: String,
    pub status: u16,
    /// The response body, exactly as first sent (kept as raw JSON, so it is
    /// stored once and not re-escaped inside the record).
    pub body: Box<serde_json::value::RawValue>,
    pub created_at: DateTime<Utc>,
}

/// What an effect needs to save its response with itself.
#[derive(Debug, Clone)]
pub struct IdempotencySave {
    pub merchant: Uuid,
    pub mode: Mode,
    pub key: String,
    pub fingerprint: String,
}

impl IdempotencySave {
    pub fn add_to(&self, batch: &mut Batch, status: u16, body: &str, now: DateTime<Utc>) {
        let record = IdempotencyRecord {
            fingerprint: self.fingerprint.clone(),
            status,
            body: serde_json::value::RawValue::from_string(body.to_string())
                .expect("saved responses are JSON"),
            created_at: now,
        };
        batch.put(
            Table::Idempotency,
            record_key(self.merchant, self.mode, &self.key),
            &record,
        );
        batch.put_raw(
            Table::IdempotencyExpiry,
            expiry_key(now + retention(), self.merchant, self.mode, &self.key),
            Vec::new(),
        );
    }
}

pub fn record_key(merchant: Uuid, mode: Mode, key: &str) -> Vec<u8> {
    scope_key(merchant, mode).str(key).build()
}

fn expiry_key(expires: DateTime<Utc>, merchant: Uuid, mode: Mode, key: &str) -> Vec<u8> {
    KeyBuf::new()
        .u64(micros(expires))
        .bytes(merchant.as_bytes())
        .u8(mode.byte())
        .str(key)
        .build()
}

/// A saved record still within its 24 hours.
pub fn lookup(
    read: &ReadTxn,
    merchant: Uuid,
    mode: Mode,
    key: &str,
    now: DateTime<Utc>,
) -> Result<Option<IdempotencyRecord>, StoreError> {
    let rec: Option<IdempotencyRecord> =
        read.get_decoded(Table::Idempotency, &record_key(merchant, mode, key))?;
    Ok(rec.filter(|r| r.created_at + retention() > now))
}

/// Deletes records whose 24 hours ended at or before `now`; at most `max`
/// per call. Returns the batch (empty when nothing expired).
pub fn prune_batch(read: &ReadTxn, now: DateTime<Utc>, max: usize) -> Result<Batch, StoreError> {
    let mut batch = Batch::new();
    let limit = KeyBuf::new().u64(micros(now) + 1).build();
    let mut n = 0;
    read.scan_prefix(Table::IdempotencyExpiry, &[], None, |k, _| {
        if k >= limit.as_slice() || n >= max {
            return Ok(false);
        }
        // expiry(8) | merchant(16) | mode(1) | key\0
        let record = k[8..].to_vec();
        batch.delete(Table::Idempotency, record);
        batch.delete(Table::IdempotencyExpiry, k.to_vec());
        n += 1;
        Ok(true)
    })?;
    Ok(batch)
}
