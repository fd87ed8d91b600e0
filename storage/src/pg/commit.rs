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

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::tables::Table;
use crate::writer::{counters, u64_from, META_SEQ_HIGH_WATER};
use crate::{Batch, CommitError, Op, Precondition};

use super::{describe, WriterConn};

/// Every key whose current value the group needs: the keys its
/// preconditions name, the counters it adds to, and the sequence
/// high-water mark when a batch raises it. Sorted, without repeats.
pub(crate) fn read_set<'a>(batches: &[&'a Batch], meta: &'a [u8]) -> Vec<&'a [u8]> {
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
    if batches.iter().any(|b| b.seq_high_water() > 0) {
        keys.insert(meta);
    }
    keys.into_iter().collect()
}

/// What a group's transaction writes, and each batch's outcome.
#[derive(Debug, Default)]
pub(crate) struct Plan<'a> {
    pub outcomes: Vec<Result<(), CommitError>>,
    pub puts: Vec<(&'a [u8], Cow<'a, [u8]>)>,
    pub deletes: Vec<&'a [u8]>,
}

/// Evaluates the group in order over `current` (the read set's rows as
/// stored): the preconditions of a batch against the state its predecessors
/// left, then (when they hold) its operations, with redb's semantics
/// (`writer::apply_batch`).
pub(crate) fn plan<'a>(
    batches: &[&'a Batch],
    current: &'a HashMap<Vec<u8>, Vec<u8>>,
    meta: &'a [u8],
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
    if high_water > 0 {
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

/// Commits `batches` in one transaction on the writer's connection. The
/// error is a storage failure (the writer stops the process); refused
/// preconditions are outcomes.
pub(crate) async fn commit(
    conn: &WriterConn,
    batches: &[&Batch],
) -> Result<Vec<Result<(), CommitError>>, String> {
    let meta = Table::Meta.physical(META_SEQ_HIGH_WATER);
    let reads = read_set(batches, &meta);
    let client = &conn.client;
    let current: HashMap<Vec<u8>, Vec<u8>> = if reads.is_empty() {
        client
            .batch_execute("BEGIN")
            .await
            .map_err(|e| describe(&e))?;
        HashMap::new()
    } else {
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&reads];
        let (begun, rows) = tokio::join!(
            client.batch_execute("BEGIN"),
            client.query(&conn.select, &params)
        );
        begun.map_err(|e| describe(&e))?;
        rows.map_err(|e| describe(&e))?
            .into_iter()
            .map(|r| (r.get::<_, Vec<u8>>(0), r.get::<_, Vec<u8>>(1)))
            .collect()
    };
    let plan = plan(batches, &current, &meta);
    let keys: Vec<&[u8]> = plan.puts.iter().map(|(k, _)| *k).collect();
    let values: Vec<&[u8]> = plan.puts.iter().map(|(_, v)| v.as_ref()).collect();
    let upsert_params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&keys, &values];
    let delete_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&plan.deletes];
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
    upserted.map_err(|e| describe(&e))?;
    deleted.map_err(|e| describe(&e))?;
    committed.map_err(|e| describe(&e))?;
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
        assert_eq!(read_set(&batches, &meta).len(), 3);
        let plan = plan(&batches, &current, &meta);
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
