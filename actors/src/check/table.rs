//! The generic object check: an object table and its indexes, both ways.

use serde::de::DeserializeOwned;
use uuid::Uuid;

use kobo_storage::{decode, StoreError, Table};

use super::{hex, uuid_of, Checker};
use crate::ids::{scope_key, Mode};

/// An index an object belongs in: its table and the object's keys in it.
pub(super) struct Index<T> {
    pub table: Table,
    pub keys: fn(&T) -> Vec<Vec<u8>>,
}

pub(super) fn index<T>(table: Table, keys: fn(&T) -> Vec<Vec<u8>>) -> Index<T> {
    Index { table, keys }
}

/// Checks one object table: each object decodes and is stored under its
/// id; it is in each of its indexes (forward); each entry of those indexes
/// names an object that lists that key (backward). `each` sees every
/// decoded object.
pub(super) fn object_table<T: DeserializeOwned>(
    c: &mut Checker,
    table: Table,
    what: &str,
    id_of: fn(&T) -> Uuid,
    seq_of: fn(&T) -> Option<u64>,
    indexes: &[Index<T>],
    mut each: impl FnMut(&mut Checker, &T) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    // In chunks, so a large table is never held in memory.
    let mut from: Option<Vec<u8>> = None;
    loop {
        let mut chunk = Vec::with_capacity(4096);
        c.read.scan_prefix(table, &[], from.as_deref(), |k, v| {
            if from.as_deref() == Some(k) {
                return Ok(true);
            }
            chunk.push((k.to_vec(), v.to_vec()));
            Ok(chunk.len() < 4096)
        })?;
        let Some((last, _)) = chunk.last() else { break };
        from = Some(last.clone());
        for (k, v) in &chunk {
            if let Some(o) = forward(c, k, v, what, id_of, seq_of, indexes)? {
                each(c, &o)?;
            }
        }
    }
    for ix in indexes {
        backward(c, table, what, ix)?;
    }
    Ok(())
}

/// One object: it decodes, is stored under its id and is in each of its
/// indexes. Returns it decoded.
fn forward<T: DeserializeOwned>(
    c: &mut Checker,
    k: &[u8],
    v: &[u8],
    what: &str,
    id_of: fn(&T) -> Uuid,
    seq_of: fn(&T) -> Option<u64>,
    indexes: &[Index<T>],
) -> Result<Option<T>, StoreError> {
    c.examined("indexes", 1);
    let Ok(o) = decode::<T>(v) else {
        c.breach(
            "decode",
            format!("{what} {} does not decode as a {what}", hex(k)),
        );
        return Ok(None);
    };
    let id = id_of(&o);
    if id.as_bytes() != k {
        c.breach(
            "indexes",
            format!("{what} {id} is stored under another id ({})", hex(k)),
        );
    }
    if let Some(seq) = seq_of(&o) {
        c.seq(seq, || format!("{what} {id}"));
    }
    for ix in indexes {
        for key in (ix.keys)(&o) {
            if let Some(b) = listed(c, what, id, ix.table, &key)? {
                c.breach("indexes", b);
            }
        }
    }
    Ok(Some(o))
}

/// Object `id` must be the one `table` names under `key`: the breach if
/// it is not.
pub(super) fn listed(
    c: &Checker,
    what: &str,
    id: Uuid,
    table: Table,
    key: &[u8],
) -> Result<Option<String>, StoreError> {
    Ok(match c.read.get(table, key)? {
        Some(v) if v == id.as_bytes() => None,
        Some(v) => Some(format!(
            "{what} {id} is not in {}: its key {} names {}",
            table.name(),
            hex(key),
            uuid_of(&v)
                .map(|u| u.to_string())
                .unwrap_or_else(|| hex(&v))
        )),
        None => Some(format!(
            "{what} {id} is missing from {} (key {})",
            table.name(),
            hex(key)
        )),
    })
}

/// Each entry of `ix` names an object of `table` that lists that key.
fn backward<T: DeserializeOwned>(
    c: &mut Checker,
    table: Table,
    what: &str,
    ix: &Index<T>,
) -> Result<(), StoreError> {
    let mut bad = Vec::new();
    let mut n = 0;
    c.each(ix.table, |k, v| {
        n += 1;
        let Some(id) = uuid_of(v) else {
            bad.push(format!(
                "{} entry {} holds no id ({} bytes)",
                ix.table.name(),
                hex(k),
                v.len()
            ));
            return Ok(());
        };
        match c.read.get(table, id.as_bytes())? {
            None => bad.push(format!(
                "{} entry {} points at {what} {id}, which does not exist",
                ix.table.name(),
                hex(k)
            )),
            Some(ov) => {
                if let Ok(o) = decode::<T>(&ov) {
                    if !(ix.keys)(&o).iter().any(|key| key == k) {
                        bad.push(format!(
                            "{} entry {} points at {what} {id}, which belongs under another key",
                            ix.table.name(),
                            hex(k)
                        ));
                    }
                }
            }
        }
        Ok(())
    })?;
    c.examined("indexes", n);
    for b in bad {
        c.breach("indexes", b);
    }
    Ok(())
}

pub(super) fn list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}
