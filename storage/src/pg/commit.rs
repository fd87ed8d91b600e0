//! The group commit on PostgreSQL: one transaction for a group of batches.
//!
//! Under the writer lock (one writing kobo per database) and the writer
//! thread (one transaction at a time), nothing but this transaction changes
//! `kobo_kv` between its first read and its COMMIT. So:
//!
//! 1. one `SELECT` reads every key the group's preconditions and counters
//!    need (the read set, [`read_set`]);
//! 2. the batches are evaluated in memory, in submission order, over those
//!    rows plus the group's own earlier writes ([`plan`]): a batch whose
//!    precondition fails is refused alone and leaves nothing behind, exactly
//!    as in the redb transaction, with no savepoint and no round trip;
//! 3. the final value of every written key goes in one `INSERT ... ON
//!    CONFLICT DO UPDATE` (and deleted keys in one `DELETE`), then COMMIT.
//!
//! BEGIN and the read are pipelined, and so are the writes and COMMIT: two
//! round trips and one WAL flush per group. The acknowledgements go out
//! only after COMMIT returned (synchronous_commit on: the WAL is flushed).
//!
//! Fences (cluster mode, [`crate::fence`]): the lease rows of the group's
//! fenced batches are read `FOR SHARE` in the same round trip as the read
//! set; a batch whose token is not the row's current one is refused alone
//! with [`CommitError::NotOwner`]. The row lock holds a takeover's `UPDATE`
//! off until this transaction ends, so no batch commits under a token
//! already replaced.
//!
//! Cluster mode (several writers on one database, the writer lock
//! shared): "nothing else changes `kobo_kv`" no longer holds by itself, so
//! the transaction first takes a transaction advisory lock on a 64-bit hash
//! of every read-set key ([`key_locks`]; sorted, one statement, pipelined
//! before the read): two nodes checking or counting the same key serialise,
//! and the read (READ COMMITTED: a fresh snapshot per statement) sees the
//! other's commit. The sequence high-water mark is not written (nodes take
//! numbers from `kobo_seq`, [`super::lease`]), and a group is split into
//! transactions of at most [`MAX_LOCKED_KEYS`] read-set keys, so one
//! transaction never fills PostgreSQL's lock table. A deadlock or
//! serialization failure (a row two nodes write in opposite orders) rolls
//! the transaction back and runs it again: nothing was acknowledged yet.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use sha2::{Digest, Sha256};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use crate::tables::Table;
use crate::writer::{counters, u64_from, META_SEQ_HIGH_WATER};
use crate::{Batch, CommitError, Op, Precondition};

use super::{describe, Mode, WriterConn};

/// The most read-set keys one cluster-mode transaction locks.
pub(crate) const MAX_LOCKED_KEYS: usize = 1024;

/// How many times a transaction the database aborted as a deadlock or a
/// serialization failure is run again before the writer gives up.
const RETRIES: usize = 8;

/// Every key whose current value the group needs: the keys its
/// preconditions name, the counters it adds to, and the sequence
/// high-water mark (`meta`, `None` in cluster mode) when a batch raises it.
/// Sorted, without repeats.
pub(crate) fn read_set<'a>(batches: &[&'a Batch], meta: Option<&'a [u8]>) -> Vec<&'a [u8]> {
    let mut keys: BTreeSet<&[u8]> = BTreeSet::new();
    for b in batches {
        for p in b.preconditions() {
            let Precondition::Absent(_, key) = p;
            keys.insert(key);
        }
        for op in b.ops() {
            if let Op::Add(_, key, _) = op {
                keys.insert(key);
            }
        }
    }
    if let Some(meta) = meta {
        if batches.iter().any(|b| b.seq_high_water() > 0) {
            keys.insert(meta);
        }
    }
    keys.into_iter().collect()
}

/// The transaction advisory locks of `keys` (cluster mode): the first 8
/// bytes of each key's SHA-256 (stable across builds and nodes), sorted and
/// without repeats so two transactions always lock in the same order, as
/// the two `int4` halves `pg_advisory_xact_lock(int4, int4)` takes (a key
/// space apart from the `bigint` writer and migration locks).
pub(crate) fn key_locks(keys: &[&[u8]]) -> (Vec<i32>, Vec<i32>) {
    let mut hashes: Vec<u64> = keys
        .iter()
        .map(|k| {
            let digest = Sha256::digest(k);
            u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
        })
        .collect();
    hashes.sort_unstable();
    hashes.dedup();
    hashes
        .iter()
        .map(|h| ((h >> 32) as u32 as i32, *h as u32 as i32))
        .unzip()
}

/// The group split into runs of consecutive batches whose read sets hold at
/// most [`MAX_LOCKED_KEYS`] keys (at least one batch per run): cluster
/// mode's transactions. A single process commits the group whole.
pub(crate) fn chunks<'a, 'b>(batches: &'b [&'a Batch], mode: Mode) -> Vec<&'b [&'a Batch]> {
    if mode == Mode::Single {
        return vec![batches];
    }
    let mut runs = Vec::new();
    let (mut start, mut keys) = (0, 0);
    for (i, b) in batches.iter().enumerate() {
        let n = b.preconditions().len()
            + b.ops()
                .iter()
                .filter(|op| matches!(op, Op::Add(..)))
                .count();
        if i > start && keys + n > MAX_LOCKED_KEYS {
            runs.push(&batches[start..i]);
            (start, keys) = (i, 0);
        }
        keys += n;
    }
    if start < batches.len() {
        runs.push(&batches[start..]);
    }
    runs
}

/// What a group's transaction writes, and each batch's outcome.
#[derive(Debug, Default)]
pub(crate) struct Plan<'a> {
    pub outcomes: Vec<Result<(), CommitError>>,
    pub puts: Vec<(&'a [u8], Cow<'a, [u8]>)>,
    pub deletes: Vec<&'a [u8]>,
}

/// Evaluates the group in order over `current` (the read set's rows as
/// stored) and `tokens` (the current token of each fenced shard's lease):
/// a fenced batch whose token is not current is refused first; then the
/// preconditions of a batch against the state its predecessors left, then
/// (when they hold) its operations, with redb's semantics
/// (`writer::apply_batch`). The sequence high-water mark goes to `meta`
/// (`None`: not kept, cluster mode).
pub(crate) fn plan<'a>(
    batches: &[&'a Batch],
    current: &'a HashMap<Vec<u8>, Vec<u8>>,
    tokens: &HashMap<u16, i64>,
    meta: Option<&'a [u8]>,
) -> Plan<'a> {
    let mut overlay: BTreeMap<&'a [u8], Option<Cow<'a, [u8]>>> = BTreeMap::new();
    let value =
        |overlay: &BTreeMap<&'a [u8], Option<Cow<'a, [u8]>>>, key: &[u8]| -> Option<Vec<u8>> {
            match overlay.get(key) {
                Some(v) => v.as_ref().map(|v| v.to_vec()),
                None => current.get(key).cloned(),
            }
        };
    let present =
        |overlay: &BTreeMap<&'a [u8], Option<Cow<'a, [u8]>>>, key: &[u8]| match overlay.get(key) {
            Some(v) => v.is_some(),
            None => current.contains_key(key),
        };
    let mut outcomes = Vec::with_capacity(batches.len());
    let mut high_water = 0u64;
    for b in batches {
        if let Some(fence) = b.fence() {
            if tokens.get(&fence.shard) != Some(&fence.token) {
                outcomes.push(Err(CommitError::NotOwner { shard: fence.shard }));
                continue;
            }
        }
        let refused = b.preconditions().iter().find_map(|p| {
            let Precondition::Absent(table, key) = p;
            present(&overlay, key).then(|| CommitError::Conflict {
                table: table.name(),
                key: key[1..].to_vec(),
            })
        });
        if let Some(e) = refused {
            outcomes.push(Err(e));
            continue;
        }
        for op in b.ops() {
            match op {
                Op::Put(_, k, v) => {
                    overlay.insert(k, Some(Cow::Borrowed(v)));
                }
                Op::Delete(_, k) => {
                    overlay.insert(k, None);
                }
                Op::Add(_, k, deltas) => {
                    let mut values = value(&overlay, k).map(|v| counters(&v)).unwrap_or_default();
                    if values.len() < deltas.len() {
                        values.resize(deltas.len(), 0);
                    }
                    for (v, d) in values.iter_mut().zip(deltas) {
                        *v = v.saturating_add(*d);
                    }
                    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
                    overlay.insert(k, Some(Cow::Owned(bytes)));
                }
            }
        }
        high_water = high_water.max(b.seq_high_water());
        outcomes.push(Ok(()));
    }
    if let (Some(meta), true) = (meta, high_water > 0) {
        let stored = value(&overlay, meta).map(|v| u64_from(&v)).unwrap_or(0);
        if high_water > stored {
            overlay.insert(meta, Some(Cow::Owned(high_water.to_be_bytes().to_vec())));
        }
    }
    let mut plan = Plan {
        outcomes,
        ..Plan::default()
    };
    for (k, v) in overlay {
        match v {
            Some(v) => plan.puts.push((k, v)),
            None => plan.deletes.push(k),
        }
    }
    plan
}

/// A failed transaction: its message, and whether running it again may
/// succeed (the database aborted it as a deadlock or serialization failure).
struct Failure {
    message: String,
    retry: bool,
}

fn failure(e: tokio_postgres::Error) -> Failure {
    let retry = matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
    );
    Failure {
        message: describe(&e),
        retry,
    }
}

/// Commits `batches` in one transaction on the writer's connection (run
/// again, up to [`RETRIES`] times, when the database aborts it as a
/// deadlock). The error is a storage failure (the writer stops the
/// process); refused preconditions and stale fences are outcomes.
pub(crate) async fn commit(
    conn: &WriterConn,
    batches: &[&Batch],
) -> Result<Vec<Result<(), CommitError>>, String> {
    let mut tries = 0;
    loop {
        match attempt(conn, batches).await {
            Ok(outcomes) => return Ok(outcomes),
            Err(f) => {
                // Ends the transaction when a failure left it open (a
                // warning, not an error, when it is already over).
                let _ = conn.client.batch_execute("ROLLBACK").await;
                tries += 1;
                if !f.retry || tries > RETRIES {
                    return Err(f.message);
                }
                tracing::warn!(error = %f.message, tries, "a group commit was aborted by the database; running it again");
            }
        }
    }
}

async fn attempt(
    conn: &WriterConn,
    batches: &[&Batch],
) -> Result<Vec<Result<(), CommitError>>, Failure> {
    let meta_key = Table::Meta.physical(META_SEQ_HIGH_WATER);
    let cluster = conn.mode == Mode::Cluster;
    let meta = (!cluster).then_some(meta_key.as_slice());
    let reads = read_set(batches, meta);
    let (hi, lo) = if cluster {
        key_locks(&reads)
    } else {
        (Vec::new(), Vec::new())
    };
    let mut shards: Vec<i32> = batches
        .iter()
        .filter_map(|b| b.fence().map(|f| i32::from(f.shard)))
        .collect();
    shards.sort_unstable();
    shards.dedup();
    let client = &conn.client;
    let lock_params: [&(dyn ToSql + Sync); 2] = [&hi, &lo];
    let fence_params: [&(dyn ToSql + Sync); 1] = [&shards];
    let read_params: [&(dyn ToSql + Sync); 1] = [&reads];
    // One round trip: BEGIN, the key locks, the fenced lease rows, the
    // read set, in this order on the connection (each request goes out on
    // its future's first poll, and `join!` polls them in order).
    let locks = async {
        if hi.is_empty() {
            Ok(0)
        } else {
            client.execute(&conn.lock_keys, &lock_params).await
        }
    };
    let fences = async {
        if shards.is_empty() {
            Ok(Vec::new())
        } else {
            client.query(&conn.fences, &fence_params).await
        }
    };
    let rows = async {
        if reads.is_empty() {
            Ok(Vec::new())
        } else {
            client.query(&conn.select, &read_params).await
        }
    };
    let (begun, locked, fences, rows) =
        tokio::join!(client.batch_execute("BEGIN"), locks, fences, rows);
    begun.map_err(failure)?;
    locked.map_err(failure)?;
    let tokens: HashMap<u16, i64> = fences
        .map_err(failure)?
        .iter()
        .map(|r| (r.get::<_, i32>(0) as u16, r.get::<_, i64>(1)))
        .collect();
    let current: HashMap<Vec<u8>, Vec<u8>> = rows
        .map_err(failure)?
        .into_iter()
        .map(|r| (r.get::<_, Vec<u8>>(0), r.get::<_, Vec<u8>>(1)))
        .collect();
    let plan = plan(batches, &current, &tokens, meta);
    let keys: Vec<&[u8]> = plan.puts.iter().map(|(k, _)| *k).collect();
    let values: Vec<&[u8]> = plan.puts.iter().map(|(_, v)| v.as_ref()).collect();
    let upsert_params: [&(dyn ToSql + Sync); 2] = [&keys, &values];
    let delete_params: [&(dyn ToSql + Sync); 1] = [&plan.deletes];
    let upsert = async {
        if keys.is_empty() {
            Ok(0)
        } else {
            client.execute(&conn.upsert, &upsert_params).await
        }
    };
    let delete = async {
        if plan.deletes.is_empty() {
            Ok(0)
        } else {
            client.execute(&conn.delete, &delete_params).await
        }
    };
    // COMMIT of a transaction a failed statement aborted answers ROLLBACK
    // without an error: every result is checked, and any failure stops the
    // process before an acknowledgement goes out.
    let (upserted, deleted, committed) =
        tokio::join!(upsert, delete, client.batch_execute("COMMIT"));
    upserted.map_err(failure)?;
    deleted.map_err(failure)?;
    committed.map_err(failure)?;
    Ok(plan.outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> Vec<u8> {
        vec![n]
    }

    #[test]
    fn a_refused_batch_leaves_nothing_and_later_batches_see_earlier_ones() {
        let meta = Table::Meta.physical(META_SEQ_HIGH_WATER);
        let mut a = Batch::new();
        a.require_absent(Table::Events, key(1))
            .put_raw(Table::Events, key(1), b"a".to_vec())
            .add(Table::Balances, key(9), &[5])
            .note_seq(7);
        // Refused: a put key 1 earlier in the group.
        let mut b = Batch::new();
        b.require_absent(Table::Events, key(1))
            .put_raw(Table::Events, key(2), b"b".to_vec())
            .add(Table::Balances, key(9), &[100])
            .note_seq(99);
        let mut c = Batch::new();
        c.add(Table::Balances, key(9), &[1, 1])
            .delete(Table::Events, key(3));
        let current: HashMap<Vec<u8>, Vec<u8>> = [(
            Table::Balances.physical(&key(9)),
            10i64.to_be_bytes().to_vec(),
        )]
        .into_iter()
        .collect();
        let batches = [&a, &b, &c];
        assert_eq!(read_set(&batches, Some(&meta)).len(), 3);
        let plan = plan(&batches, &current, &HashMap::new(), Some(&meta));
        assert!(plan.outcomes[0].is_ok());
        assert!(matches!(
            plan.outcomes[1],
            Err(CommitError::Conflict { .. })
        ));
        assert!(plan.outcomes[2].is_ok());
        let puts: HashMap<Vec<u8>, Vec<u8>> = plan
            .puts
            .iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(puts[&Table::Events.physical(&key(1))], b"a".to_vec());
        assert!(!puts.contains_key(&Table::Events.physical(&key(2))));
        assert_eq!(
            counters(&puts[&Table::Balances.physical(&key(9))]),
            vec![16, 1]
        );
        assert_eq!(u64_from(&puts[&meta]), 7);
        assert_eq!(
            plan.deletes,
            vec![Table::Events.physical(&key(3)).as_slice()]
        );
    }
}
