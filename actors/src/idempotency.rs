//! Saved responses of POST requests, keyed per merchant, mode, caller and
//! Idempotency-Key. A response that guards an effect is saved in the same
//! batch as the effect ([`IdempotencySave::add_to`]), so a crash can never
//! leave one without the other. Records are kept 24 hours, then pruned.
//!
//! Commands return an [`Outcome`] (what they did, with their object's
//! typed view); the HTTP endpoint chooses the status of each kind of outcome
//! ([`Statuses`]) and hands it down with the [`IdempotencySave`], so the
//! response saved with the effect and the one sent are the same by
//! construction: the status by [`Statuses::of`], the body by [`render`]. A
//! command that saved its response answers the saved body with its outcome
//! ([`Answer`]), and that is what the client is sent.
//!
//! The caller is part of the scope, so a customer holding a payment's
//! client secret (or its checkout page) can never use up, replay or
//! collide with a key of the merchant's server. Secret-key records keep
//! their original store key (`merchant | mode | key`); the others insert a
//! tag and the intent id before the key (`merchant | mode | tag | intent |
//! key`). Tags are control bytes, which an Idempotency-Key (visible ASCII)
//! never starts with, so the two forms never meet.
//!
//! Where a record is stored: Idempotency-Keys are the client's, mostly
//! random (UUIDv4), so the row found by key lands on a random page of the
//! store, and the writer copies that page for each save. The record itself
//! (fingerprint, status, the body) is therefore the value of its expiry
//! row (`idempotency_expiry`, keyed by the end of its 24 hours, so new rows
//! arrive at the end of the table), and the row found by key
//! (`idempotency_keys`) holds only the expiry time. On the embedded store
//! that table is log-structured (`kobo_storage`'s key index: a log in
//! commit order and sorted runs), so a save writes no random page at all
//! (docs/performance.md). The expiry row's value is
//! [`SAVED_LAYOUT_2`] (schema 5): the status, the fingerprint's 32 bytes
//! and the packed body, nothing else (the time saved is the row's key,
//! less 24 hours); rows written by schema 4 hold a compact
//! [`IdempotencyRecord`] and still read. A key saved twice in one
//! batch leaves one record; saved again after its 24 hours, the newer
//! record is found and the older one pruned alone. Responses saved before
//! this layout (schema 3) are whole under their key in `idempotency`, with
//! an empty expiry row; [`lookup`] still finds them and [`prune_batches`]
//! removes them after their 24 hours.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use uuid::Uuid;

use kobo_storage::{Batch, CodecError, KeyBuf, ReadTxn, StoreError, Table};

use crate::auth::Caller;
use crate::clock::micros;
use crate::ids::{scope_key, Mode};

/// How long a key is remembered.
pub fn retention() -> Duration {
    Duration::hours(24)
}

/// Longest accepted Idempotency-Key.
pub const MAX_KEY_LEN: usize = 255;

/// A saved response as found by [`lookup`].
#[derive(Debug, Clone)]
pub struct SavedResponse {
    /// SHA-256 of method, path and body of the first request.
    pub fingerprint: Fingerprint,
    pub status: u16,
    /// The response body, exactly as first sent.
    pub body: Box<RawValue>,
}

/// SHA-256 of a request's method, path and body.
pub type Fingerprint = [u8; 32];

/// The first byte of a saved response stored in its expiry row since
/// schema 5. After it: the status (2 bytes, big-endian), the fingerprint
/// (32 bytes), then the body packed by [`crate::stored_json`]. (Rows
/// written before start with the codec's version byte, 1 or 2.)
pub const SAVED_LAYOUT_2: u8 = 0x20;

/// A saved response's expiry row value ([`SAVED_LAYOUT_2`]).
fn encode_saved(status: u16, fingerprint: &Fingerprint, body: &RawValue) -> Vec<u8> {
    let packed = crate::stored_json::pack(body.get());
    let mut out = Vec::with_capacity(35 + packed.len());
    out.push(SAVED_LAYOUT_2);
    out.extend_from_slice(&status.to_be_bytes());
    out.extend_from_slice(fingerprint);
    out.extend_from_slice(&packed);
    out
}

/// A saved response's expiry row value, in either layout.
pub(crate) fn decode_saved(value: &[u8]) -> Result<SavedResponse, CodecError> {
    let layout = |e: String| CodecError::Layout(format!("saved response: {e}"));
    if value.first() == Some(&SAVED_LAYOUT_2) {
        let (Some(status), Some(fingerprint), Some(packed)) =
            (value.get(1..3), value.get(3..35), value.get(35..))
        else {
            return Err(layout("shorter than its layout".into()));
        };
        let text = crate::stored_json::unpack_text(packed).map_err(layout)?;
        return Ok(SavedResponse {
            status: u16::from_be_bytes(status.try_into().expect("2 bytes")),
            fingerprint: fingerprint.try_into().expect("32 bytes"),
            body: RawValue::from_string(text).map_err(CodecError::Json)?,
        });
    }
    let old: IdempotencyRecord = kobo_storage::decode(value)?;
    Ok(old.into_saved())
}

/// A saved response as schemas 1 to 4 stored it (compact since schema 2):
/// whole under its key in `idempotency` until schema 4, in its expiry row
/// in schema 4.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    /// SHA-256 of method, path and body of the first request, in hex.
    pub fingerprint: String,
    pub status: u16,
    /// The response body, exactly as first sent (kept as raw JSON, so it is
    /// stored once and not re-escaped inside the record; in the compact
    /// format compressed against kobo's dictionary, [`crate::stored_json`],
    /// where replay gets the same bytes back).
    #[serde(with = "crate::stored_json::raw")]
    pub body: Box<serde_json::value::RawValue>,
    pub created_at: DateTime<Utc>,
}

/// Stored in the compact format (kobo_storage::codec), the body packed
/// ([`crate::stored_json`]); pinned by
/// `tests::the_stored_layout_of_a_saved_response_is_pinned`.
impl kobo_storage::Compact for IdempotencyRecord {}

impl IdempotencyRecord {
    /// As [`lookup`] gives it. A fingerprint that is not a SHA-256 in hex
    /// (none was ever written) matches no request.
    fn into_saved(self) -> SavedResponse {
        let mut fingerprint = [0; 32];
        if hex::decode_to_slice(&self.fingerprint, &mut fingerprint).is_err() {
            fingerprint = [0; 32];
        }
        SavedResponse {
            fingerprint,
            status: self.status,
            body: self.body,
        }
    }
}

/// What a command did. The domain says what happened; the HTTP endpoint
/// gives each kind its status ([`Statuses`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A new object was made.
    Created,
    /// An existing object took the command (whether or not it changed).
    Updated,
    /// What was asked for was there already, and nothing was made (a bank
    /// account or a wallet added a second time).
    Existing,
}

/// A command's result: what it did, with the typed public view of its
/// object.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<V> {
    Created(V),
    Updated(V),
    Existing(V),
}

impl<V> Outcome<V> {
    pub fn new(kind: Kind, view: V) -> Self {
        match kind {
            Kind::Created => Outcome::Created(view),
            Kind::Updated => Outcome::Updated(view),
            Kind::Existing => Outcome::Existing(view),
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Outcome::Created(_) => Kind::Created,
            Outcome::Updated(_) => Kind::Updated,
            Outcome::Existing(_) => Kind::Existing,
        }
    }

    pub fn view(&self) -> &V {
        match self {
            Outcome::Created(v) | Outcome::Updated(v) | Outcome::Existing(v) => v,
        }
    }

    pub fn into_view(self) -> V {
        match self {
            Outcome::Created(v) | Outcome::Updated(v) | Outcome::Existing(v) => v,
        }
    }

    /// The same kind of outcome with another view.
    pub fn map<W>(self, f: impl FnOnce(V) -> W) -> Outcome<W> {
        let kind = self.kind();
        Outcome::new(kind, f(self.into_view()))
    }
}

/// The HTTP status of each kind of outcome: chosen by the endpoint (the
/// HTTP layer) and handed down in the [`IdempotencySave`], so the response
/// a command saves with its effect has the status the endpoint answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statuses {
    pub created: u16,
    pub updated: u16,
    pub existing: u16,
}

impl Statuses {
    /// One status for every kind.
    pub const fn all(status: u16) -> Self {
        Statuses {
            created: status,
            updated: status,
            existing: status,
        }
    }

    /// The status of `kind`: the one function both the saved response and
    /// the sent one take their status from.
    pub const fn of(&self, kind: Kind) -> u16 {
        match kind {
            Kind::Created => self.created,
            Kind::Updated => self.updated,
            Kind::Existing => self.existing,
        }
    }
}

/// The one rendering of a view as a response body: its serde form as a
/// JSON value (object keys in order), for the saved response and the sent
/// one alike.
pub fn render<V: Serialize>(view: &V) -> Value {
    serde_json::to_value(view).expect("a public view serializes")
}

/// [`render`]'s text, written in one pass ([`crate::sorted_json`]): what
/// is saved and sent.
pub fn render_text<V: Serialize>(view: &V) -> Box<RawValue> {
    crate::sorted_json::to_sorted_raw(view).expect("a public view serializes")
}

/// A command's outcome after its commit, with the response body it saved
/// with its effect (when it was given an [`IdempotencySave`]). The HTTP
/// layer sends exactly the saved bytes, so the first answer and every
/// replay are the same, and the view is rendered once.
#[derive(Debug)]
pub struct Answer<V> {
    pub outcome: Outcome<V>,
    /// The body as saved; `None` when nothing was saved.
    pub saved: Option<Box<RawValue>>,
}

impl<V> Answer<V> {
    /// The outcome's view.
    pub fn view(&self) -> &V {
        self.outcome.view()
    }

    /// An outcome whose response was not saved (no Idempotency-Key, or
    /// nothing to commit: the HTTP layer saves it).
    pub fn unsaved(outcome: Outcome<V>) -> Self {
        Answer {
            outcome,
            saved: None,
        }
    }
}

impl<V: Serialize> Answer<V> {
    /// Adds the response to `outcome` to `batch` when `idem` is given: the
    /// endpoint's status for its kind, and the view's [`render_text`].
    pub fn save(
        outcome: Outcome<V>,
        idem: Option<&IdempotencySave>,
        batch: &mut Batch,
        now: DateTime<Utc>,
    ) -> Self {
        let saved = idem.map(|idem| {
            let body = render_text(outcome.view());
            idem.put_raw(batch, idem.statuses.of(outcome.kind()), body, now)
        });
        Answer { outcome, saved }
    }

    /// [`Answer::save`] of a view already written (`body`: the outcome's
    /// view's [`render_text`]).
    pub fn save_text(
        outcome: Outcome<V>,
        body: Box<RawValue>,
        idem: Option<&IdempotencySave>,
        batch: &mut Batch,
        now: DateTime<Utc>,
    ) -> Self {
        let saved =
            idem.map(|idem| idem.put_raw(batch, idem.statuses.of(outcome.kind()), body, now));
        Answer { outcome, saved }
    }

    /// [`Answer::save`] of a view already rendered (`body`, [`render`] of
    /// the outcome's view).
    pub fn save_rendered(
        outcome: Outcome<V>,
        body: &Value,
        idem: Option<&IdempotencySave>,
        batch: &mut Batch,
        now: DateTime<Utc>,
    ) -> Self {
        let saved = idem.map(|idem| idem.put(batch, idem.statuses.of(outcome.kind()), body, now));
        Answer { outcome, saved }
    }
}

/// What an effect needs to save its response with itself.
#[derive(Debug, Clone)]
pub struct IdempotencySave {
    pub merchant: Uuid,
    pub mode: Mode,
    /// Whose key it is.
    pub caller: Caller,
    pub key: String,
    pub fingerprint: Fingerprint,
    /// The endpoint's status for each kind of outcome.
    pub statuses: Statuses,
}

impl IdempotencySave {
    /// Adds a response (`status`, `body`) to `batch`.
    pub fn add_to(&self, batch: &mut Batch, status: u16, body: &str, now: DateTime<Utc>) {
        let body = RawValue::from_string(body.to_string()).expect("saved responses are JSON");
        self.put_raw(batch, status, body, now);
    }

    /// Adds the response (`status`, `body`) to `batch`; returns the body as
    /// saved.
    fn put(
        &self,
        batch: &mut Batch,
        status: u16,
        body: &Value,
        now: DateTime<Utc>,
    ) -> Box<RawValue> {
        let body = serde_json::value::to_raw_value(body).expect("saved responses are JSON");
        self.put_raw(batch, status, body, now)
    }

    fn put_raw(
        &self,
        batch: &mut Batch,
        status: u16,
        body: Box<RawValue>,
        now: DateTime<Utc>,
    ) -> Box<RawValue> {
        let key = record_key(self.merchant, self.mode, self.caller, &self.key);
        let expires = micros(now + retention());
        batch
            .put_raw(
                Table::IdempotencyExpiry,
                expiry_key(expires, &key),
                encode_saved(status, &self.fingerprint, &body),
            )
            .put_raw(Table::IdempotencyKeys, key, expires.to_be_bytes().to_vec());
        body
    }
}

#[cfg(test)]
impl IdempotencySave {
    /// A secret key's save under the key "k" in test mode, answered 201,
    /// of a request fingerprinted [`fingerprint_for_tests`]`(request)`.
    pub(crate) fn of_secret_key_for_tests(merchant: Uuid, request: &str) -> Self {
        IdempotencySave {
            merchant,
            mode: Mode::Test,
            caller: Caller::SecretKey,
            key: "k".into(),
            fingerprint: fingerprint_for_tests(request),
            statuses: Statuses::all(201),
        }
    }
}

/// The fingerprint of a request whose method, path and body are `request`.
#[cfg(test)]
pub(crate) fn fingerprint_for_tests(request: &str) -> Fingerprint {
    use sha2::Digest;
    sha2::Sha256::digest(request.as_bytes()).into()
}

/// The part of the store key between mode and Idempotency-Key: nothing for
/// secret keys (their records are stored as they always were), a tag and
/// the intent id for the one-intent credentials, a tag for the dashboard.
fn caller_part(buf: KeyBuf, caller: Caller) -> KeyBuf {
    match caller {
        Caller::SecretKey => buf,
        Caller::ClientSecret(id) => buf.u8(CLIENT_SECRET_TAG).bytes(id.as_bytes()),
        Caller::Checkout(id) => buf.u8(CHECKOUT_TAG).bytes(id.as_bytes()),
        Caller::Dashboard => buf.u8(DASHBOARD_TAG),
    }
}

const CLIENT_SECRET_TAG: u8 = 0x01;
const CHECKOUT_TAG: u8 = 0x02;
const DASHBOARD_TAG: u8 = 0x03;

pub fn record_key(merchant: Uuid, mode: Mode, caller: Caller, key: &str) -> Vec<u8> {
    caller_part(scope_key(merchant, mode), caller)
        .str(key)
        .build()
}

/// The expiry row of the record stored under `record` (a [`record_key`]):
/// the end of its 24 hours (unix micros), then the record's key.
fn expiry_key(expires: u64, record: &[u8]) -> Vec<u8> {
    KeyBuf::new().u64(expires).bytes(record).build()
}

/// A saved record still within its 24 hours.
pub fn lookup(
    read: &ReadTxn,
    merchant: Uuid,
    mode: Mode,
    caller: Caller,
    key: &str,
    now: DateTime<Utc>,
) -> Result<Option<SavedResponse>, StoreError> {
    let key = record_key(merchant, mode, caller, key);
    match read.get(Table::IdempotencyKeys, &key)? {
        Some(expires) => {
            let expires = kobo_storage::writer::u64_from(&expires);
            if expires <= micros(now) {
                return Ok(None);
            }
            read.get(Table::IdempotencyExpiry, &expiry_key(expires, &key))?
                .map(|value| decode_saved(&value).map_err(StoreError::from))
                .transpose()
        }
        // Saved before schema 4: the whole record under its key.
        None => Ok(read
            .get_decoded::<IdempotencyRecord>(Table::Idempotency, &key)?
            .filter(|r| r.created_at + retention() > now)
            .map(IdempotencyRecord::into_saved)),
    }
}

/// Deletes records whose 24 hours ended at or before `now`; at most `max`
/// per call. Returns one batch per merchant (each names its merchant: on a
/// cluster only its owner commits it); none when nothing expired.
pub fn prune_batches(
    read: &ReadTxn,
    now: DateTime<Utc>,
    max: usize,
) -> Result<Vec<Batch>, StoreError> {
    let mut batches: std::collections::BTreeMap<[u8; 16], Batch> = Default::default();
    let limit = KeyBuf::new().u64(micros(now) + 1).build();
    let mut n = 0;
    read.scan_prefix(Table::IdempotencyExpiry, &[], None, |k, record_row| {
        if k >= limit.as_slice() || n >= max {
            return Ok(false);
        }
        // expiry(8) | the record's key: merchant(16) | mode(1) | [tag(1) |
        // intent(16)] | key\0
        let record = k[8..].to_vec();
        let Some(merchant) = k.get(8..24).and_then(|m| <[u8; 16]>::try_from(m).ok()) else {
            return Ok(true);
        };
        let batch = batches.entry(merchant).or_insert_with(|| {
            let mut b = Batch::new();
            b.owned_by(&merchant);
            b
        });
        if record_row.is_empty() {
            // Saved before schema 4: the whole record under its key.
            batch.delete(Table::Idempotency, record);
        } else if read.get(Table::IdempotencyKeys, &record)?.as_deref() == Some(&k[..8]) {
            // The key's row goes with its record, unless a later save of
            // the same key (after this one's 24 hours) took it over.
            batch.delete(Table::IdempotencyKeys, record);
        }
        batch.delete(Table::IdempotencyExpiry, k.to_vec());
        n += 1;
        Ok(true)
    })?;
    Ok(batches.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_key_records_keep_their_store_key_and_other_callers_get_their_own() {
        let (m, id) = (Uuid::new_v4(), Uuid::new_v4());
        let old_form = scope_key(m, Mode::Test).str("order-2000").build();
        assert_eq!(
            record_key(m, Mode::Test, Caller::SecretKey, "order-2000"),
            old_form
        );
        let keys = [
            record_key(m, Mode::Test, Caller::SecretKey, "order-2000"),
            record_key(m, Mode::Test, Caller::ClientSecret(id), "order-2000"),
            record_key(m, Mode::Test, Caller::Checkout(id), "order-2000"),
            record_key(
                m,
                Mode::Test,
                Caller::ClientSecret(Uuid::new_v4()),
                "order-2000",
            ),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[tokio::test]
    async fn each_caller_finds_its_own_record_and_pruning_removes_every_kind() {
        let dir = tempfile::tempdir().unwrap();
        let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
        let now = kobo.clock.now();
        let (m, id) = (Uuid::new_v4(), Uuid::new_v4());
        let callers = [
            Caller::SecretKey,
            Caller::ClientSecret(id),
            Caller::Checkout(id),
        ];
        let mut batch = Batch::new();
        for (i, caller) in callers.into_iter().enumerate() {
            let save = IdempotencySave {
                merchant: m,
                mode: Mode::Test,
                caller,
                key: "k".into(),
                fingerprint: fingerprint_for_tests(&format!("f{i}")),
                statuses: Statuses::all(200),
            };
            save.add_to(&mut batch, 200, "{}", now);
        }
        kobo.writer.commit(batch).await.unwrap();
        let read = kobo.store.read().unwrap();
        for (i, caller) in callers.into_iter().enumerate() {
            let rec = lookup(&read, m, Mode::Test, caller, "k", now)
                .unwrap()
                .expect("saved");
            assert_eq!(rec.fingerprint, fingerprint_for_tests(&format!("f{i}")));
        }
        drop(read);
        let later = now + retention();
        let prune = prune_batches(&kobo.store.read().unwrap(), later, 100).unwrap();
        assert_eq!(prune.len(), 1, "one merchant's records, one batch");
        for batch in prune {
            kobo.writer.commit(batch).await.unwrap();
        }
        let read = kobo.store.read().unwrap();
        let left: usize = [
            Table::Idempotency,
            Table::IdempotencyKeys,
            Table::IdempotencyExpiry,
        ]
        .into_iter()
        .map(|table| rows(&read, table))
        .sum();
        assert_eq!(left, 0);
    }

    fn rows(read: &ReadTxn, table: Table) -> usize {
        let mut n = 0;
        read.scan_prefix(table, &[], None, |_, _| {
            n += 1;
            Ok(true)
        })
        .unwrap();
        n
    }

    /// A store of its own, its clock's time and a merchant id.
    fn fresh() -> (
        tempfile::TempDir,
        std::sync::Arc<crate::runtime::Kobo>,
        DateTime<Utc>,
        Uuid,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
        let now = kobo.clock.now();
        (dir, kobo, now, Uuid::new_v4())
    }

    /// The response `m`'s secret key saved under "k" in test mode, at `now`.
    fn find(kobo: &crate::runtime::Kobo, m: Uuid, now: DateTime<Utc>) -> Option<SavedResponse> {
        lookup(
            &kobo.store.read().unwrap(),
            m,
            Mode::Test,
            Caller::SecretKey,
            "k",
            now,
        )
        .unwrap()
    }

    async fn prune_all(kobo: &crate::runtime::Kobo, at: DateTime<Utc>) {
        let batches = prune_batches(&kobo.store.read().unwrap(), at, 100).unwrap();
        for batch in batches {
            kobo.writer.commit(batch).await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_response_saved_before_schema_4_is_found_under_its_key_and_pruned() {
        let (_dir, kobo, now, m) = fresh();
        let key = record_key(m, Mode::Test, Caller::SecretKey, "k");
        let record = IdempotencyRecord {
            fingerprint: hex::encode(fingerprint_for_tests("f")),
            status: 201,
            body: RawValue::from_string(BODY.into()).unwrap(),
            created_at: now,
        };
        // The rows exactly as schema 3 wrote them: the whole record under
        // its key (codec version 2: the time as text, as an unmarked field
        // is in version 3 too), and an expiry row with an empty value.
        let mut row = kobo_storage::encode_compact(&record);
        row[0] = kobo_storage::codec::FORMAT_V2;
        let mut batch = Batch::new();
        batch.put_raw(Table::Idempotency, key.clone(), row).put_raw(
            Table::IdempotencyExpiry,
            expiry_key(micros(now + retention()), &key),
            Vec::new(),
        );
        kobo.writer.commit(batch).await.unwrap();
        let rec = find(&kobo, m, now).expect("found under its key");
        assert_eq!(rec.body.get(), BODY);
        assert_eq!(rec.fingerprint, fingerprint_for_tests("f"));
        prune_all(&kobo, now + retention()).await;
        let read = kobo.store.read().unwrap();
        assert_eq!(rows(&read, Table::Idempotency), 0);
        assert_eq!(rows(&read, Table::IdempotencyExpiry), 0);
    }

    #[tokio::test]
    async fn pruning_an_expired_response_keeps_a_later_save_of_the_same_key() {
        let dir = tempfile::tempdir().unwrap();
        let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
        let first = kobo.clock.now();
        let m = Uuid::new_v4();
        let save = |fingerprint: &str| IdempotencySave::of_secret_key_for_tests(m, fingerprint);
        let mut batch = Batch::new();
        save("first").add_to(&mut batch, 201, "{}", first);
        kobo.writer.commit(batch).await.unwrap();
        // The first response's 24 hours are over but it is not pruned yet
        // when the key is used again.
        let second = first + retention() + Duration::seconds(1);
        let mut batch = Batch::new();
        save("second").add_to(&mut batch, 201, "{}", second);
        kobo.writer.commit(batch).await.unwrap();
        prune_all(&kobo, second).await;
        let read = kobo.store.read().unwrap();
        let rec = lookup(&read, m, Mode::Test, Caller::SecretKey, "k", second)
            .unwrap()
            .expect("the second save outlives the first one's pruning");
        assert_eq!(rec.fingerprint, fingerprint_for_tests("second"));
        assert_eq!(rows(&read, Table::IdempotencyKeys), 1);
        assert_eq!(rows(&read, Table::IdempotencyExpiry), 1);
        drop(read);
        prune_all(&kobo, second + retention()).await;
        let read = kobo.store.read().unwrap();
        for table in [Table::IdempotencyKeys, Table::IdempotencyExpiry] {
            assert_eq!(rows(&read, table), 0, "{}", table.name());
        }
    }

    /// A response body with spacing, escapes and non-ASCII text, as a
    /// handler could have sent it.
    const BODY: &str = "{\"id\": \"pi_1\",  \"name\":\"Adé \\u00e9\\n\", \"n\":[1,2.50]}";

    #[tokio::test]
    async fn a_saved_response_is_stored_compact_and_replays_byte_identical() {
        let (_dir, kobo, now, m) = fresh();
        let save = IdempotencySave::of_secret_key_for_tests(m, "f");
        let mut batch = Batch::new();
        save.add_to(&mut batch, 201, BODY, now);
        kobo.writer.commit(batch).await.unwrap();
        let read = kobo.store.read().unwrap();
        let key = record_key(m, Mode::Test, Caller::SecretKey, "k");
        let expires = read.get(Table::IdempotencyKeys, &key).unwrap().unwrap();
        assert_eq!(expires, micros(now + retention()).to_be_bytes());
        let raw = read
            .get(
                Table::IdempotencyExpiry,
                &expiry_key(micros(now + retention()), &key),
            )
            .unwrap()
            .unwrap();
        // Layout 2: the status, the fingerprint, the body packed against
        // dictionary 2; the time saved is the key's.
        assert_eq!(raw[..3], [SAVED_LAYOUT_2, 0, 201]);
        assert_eq!(raw[3..35], fingerprint_for_tests("f"));
        assert_eq!(raw[35..], crate::stored_json::pack(BODY));
        assert_eq!(raw[35], crate::stored_json::DICTIONARY.tag());
        let rec = lookup(&read, m, Mode::Test, Caller::SecretKey, "k", now)
            .unwrap()
            .unwrap();
        assert_eq!(rec.body.get(), BODY);
        assert_eq!(
            (rec.status, rec.fingerprint),
            (201, fingerprint_for_tests("f"))
        );
        // Found until the end of its 24 hours, not at it.
        drop(read);
        let last = now + retention() - Duration::microseconds(1);
        assert!(find(&kobo, m, last).is_some());
        assert!(find(&kobo, m, now + retention()).is_none());
    }

    #[tokio::test]
    async fn a_response_saved_by_schema_4_in_its_expiry_row_still_replays() {
        let (_dir, kobo, now, m) = fresh();
        let key = record_key(m, Mode::Test, Caller::SecretKey, "k");
        let expires = micros(now + retention());
        // The row exactly as schema 4 wrote it: the compact record, its
        // body packed against dictionary 1 (the pinned bytes below).
        let mut batch = Batch::new();
        batch
            .put_raw(
                Table::IdempotencyExpiry,
                expiry_key(expires, &key),
                hex::decode(SCHEMA_4_RECORD.concat()).unwrap(),
            )
            .put_raw(Table::IdempotencyKeys, key, expires.to_be_bytes().to_vec());
        kobo.writer.commit(batch).await.unwrap();
        let rec = find(&kobo, m, now).expect("found through its key row");
        assert_eq!((rec.status, rec.body.get()), (201, BODY));
        // Its fingerprint was "f00d": not a SHA-256, so it matches nothing.
        assert_eq!(rec.fingerprint, [0; 32]);
    }

    /// The record's fields, in order, with the body deflated: what the
    /// compact format wrote before the dictionary.
    #[derive(Serialize)]
    struct DeflatedRecord {
        fingerprint: String,
        status: u16,
        #[serde(with = "kobo_storage::codec::deflated_json")]
        body: Box<RawValue>,
        created_at: DateTime<Utc>,
    }
    impl kobo_storage::Compact for DeflatedRecord {}

    #[tokio::test]
    async fn a_response_saved_deflated_before_the_dictionary_still_replays_byte_identical() {
        let (_dir, kobo, now, m) = fresh();
        let key = record_key(m, Mode::Test, Caller::SecretKey, "k");
        let mut row = kobo_storage::encode_compact(&DeflatedRecord {
            fingerprint: hex::encode(fingerprint_for_tests("f")),
            status: 201,
            body: RawValue::from_string(BODY.into()).unwrap(),
            created_at: now,
        });
        // As codec version 2 wrote it: the time as text, as an unmarked
        // field is in version 3 too.
        row[0] = kobo_storage::codec::FORMAT_V2;
        let mut batch = Batch::new();
        batch.put_raw(Table::Idempotency, key, row);
        kobo.writer.commit(batch).await.unwrap();
        let read = kobo.store.read().unwrap();
        let rec = lookup(&read, m, Mode::Test, Caller::SecretKey, "k", now)
            .unwrap()
            .unwrap();
        assert_eq!(rec.body.get(), BODY);
        assert_eq!(
            (rec.status, rec.fingerprint),
            (201, fingerprint_for_tests("f"))
        );
    }

    /// A compact [`IdempotencyRecord`] (fingerprint "f00d", status 201,
    /// [`BODY`] packed against dictionary 1, saved 2025-03-03T09:00:00Z)
    /// as schema 4 wrote it.
    const SCHEMA_4_RECORD: [&str; 3] = [
        "020466303064c901390e35000000f3027b226964223a202270695f31222c2020229f05f00e4164c3a9",
        "205c75303065395c6e222c20226e223a5b312c322e35305d7d14323032352d30332d30335430393a30",
        "303a30305a",
    ];

    /// postcard stores fields by position, and the body's bytes are
    /// dictionary 1's: a change to either changes how stored records read
    /// (then the change needs a new format version or dictionary number,
    /// not a new pinned value).
    #[test]
    fn the_stored_layout_of_a_saved_response_is_pinned() {
        let back = decode_saved(&hex::decode(SCHEMA_4_RECORD.concat()).unwrap()).unwrap();
        assert_eq!((back.status, back.body.get()), (201, BODY));
        let old: IdempotencyRecord =
            kobo_storage::decode(&hex::decode(SCHEMA_4_RECORD.concat()).unwrap()).unwrap();
        assert_eq!(old.fingerprint, "f00d");
        assert_eq!(
            old.created_at,
            "2025-03-03T09:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        // Layout 2, byte by byte around its packed body (zstd's bytes may
        // differ between library versions; any of them unpacks).
        let fingerprint = fingerprint_for_tests("POST /v1/payment_intents\n{}");
        let row = encode_saved(
            201,
            &fingerprint,
            &RawValue::from_string(BODY.into()).unwrap(),
        );
        assert_eq!(row[..3], [0x20, 0x00, 0xc9]);
        assert_eq!(row[3..35], fingerprint);
        assert_eq!(row[35], (2 << 3) | 0b110, "dictionary 2");
        let back = decode_saved(&row).unwrap();
        assert_eq!(
            (back.status, back.fingerprint, back.body.get()),
            (201, fingerprint, BODY)
        );
        for cut in [0, 1, 3, 34, 35, 36, row.len() - 1] {
            assert!(decode_saved(&row[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[tokio::test]
    async fn a_response_saved_as_json_before_the_compact_format_still_replays() {
        let (_dir, kobo, now, m) = fresh();
        let key = record_key(m, Mode::Test, Caller::SecretKey, "k");
        // The row exactly as the JSON format (version 1) wrote it.
        let mut row = vec![kobo_storage::codec::FORMAT_V1];
        row.extend_from_slice(
            format!(
                "{{\"fingerprint\":\"f\",\"status\":201,\"body\":{BODY},\"created_at\":\"{}\"}}",
                now.to_rfc3339()
            )
            .as_bytes(),
        );
        let mut batch = Batch::new();
        batch.put_raw(Table::Idempotency, key, row);
        kobo.writer.commit(batch).await.unwrap();
        let read = kobo.store.read().unwrap();
        let rec = lookup(&read, m, Mode::Test, Caller::SecretKey, "k", now)
            .unwrap()
            .unwrap();
        assert_eq!(rec.body.get(), BODY);
        assert_eq!(rec.status, 201);
    }
}
