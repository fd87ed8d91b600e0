//! Rows read on every request, kept decoded beside their stored bytes: the
//! merchant and the API key behind each secret-key request. A read still
//! goes to the store snapshot (so a change is seen by the next request, on
//! every node); only the decoding is skipped when the stored bytes are the
//! ones decoded before. Byte-for-byte equal rows decode to equal values, so
//! what a caller gets never depends on the cache.
//!
//! On the embedded store every reader that begins before the next commit
//! shares one snapshot (`ReadTxn::snapshot_serial`), and a snapshot never
//! changes: a row read under a serial is the row under that serial for as
//! long as it lasts. So the first request after a commit reads the row and
//! the requests sharing its snapshot take the value without a read (about
//! 20 creates share each commit at 64 connections; docs/performance.md,
//! "The merchant and key read once per snapshot"). On PostgreSQL, whose
//! snapshots have no serial, every request reads.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::de::DeserializeOwned;

use kobo_storage::{decode, ReadTxn, StoreError, Table};

/// How many rows one cache keeps; past it the cache starts again empty (a
/// load test with more merchants than this decodes as if there were none).
const CAPACITY: usize = 4096;

/// A row's stored bytes, the value decoded from them and the serial of the
/// last snapshot they were read in.
struct Decoded<T> {
    bytes: Vec<u8>,
    value: Arc<T>,
    read_in: Option<u64>,
}

/// Decoded values of one table's rows, by key, each with the bytes it was
/// decoded from.
pub struct DecodedRows<T> {
    table: Table,
    rows: Mutex<HashMap<Vec<u8>, Decoded<T>>>,
}

impl<T: DeserializeOwned> DecodedRows<T> {
    pub fn new(table: Table) -> DecodedRows<T> {
        DecodedRows {
            table,
            rows: Mutex::new(HashMap::new()),
        }
    }

    /// The row at `key` as `read` sees it, decoded (or `None` when absent).
    pub fn get(&self, read: &ReadTxn, key: &[u8]) -> Result<Option<Arc<T>>, StoreError> {
        let serial = read.snapshot_serial();
        if serial.is_some() {
            if let Some(row) = self.rows.lock().get(key) {
                if row.read_in == serial {
                    return Ok(Some(row.value.clone()));
                }
            }
        }
        let Some(bytes) = read.get(self.table, key)? else {
            return Ok(None);
        };
        if let Some(row) = self.rows.lock().get_mut(key) {
            if row.bytes == bytes {
                row.read_in = serial;
                return Ok(Some(row.value.clone()));
            }
        }
        let value = Arc::new(decode::<T>(&bytes)?);
        let mut rows = self.rows.lock();
        if rows.len() >= CAPACITY {
            rows.clear();
        }
        rows.insert(
            key.to_vec(),
            Decoded {
                bytes,
                value: value.clone(),
                read_in: serial,
            },
        );
        Ok(Some(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kobo_storage::{Batch, Store, WriterMetrics};
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Deserialize, Serialize, PartialEq)]
    struct Row {
        name: String,
    }

    async fn put(writer: &kobo_storage::Writer, key: &[u8], name: &str) {
        let mut batch = Batch::new();
        batch.put(Table::Merchants, key.to_vec(), &Row { name: name.into() });
        writer.commit(batch).await.unwrap();
    }

    /// A fresh store, its writer, and a cache of its merchants' rows.
    fn open() -> (
        tempfile::TempDir,
        Store,
        kobo_storage::Writer,
        DecodedRows<Row>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let writer = store.start_writer(WriterMetrics::default());
        (dir, store, writer, DecodedRows::new(Table::Merchants))
    }

    #[tokio::test]
    async fn a_row_that_changed_is_decoded_again_and_an_unchanged_one_is_shared() {
        let (_dir, store, writer, rows) = open();
        assert!(rows.get(&store.read().unwrap(), b"m1").unwrap().is_none());

        put(&writer, b"m1", "Ada").await;
        let earlier = store.read().unwrap();
        let first = rows.get(&earlier, b"m1").unwrap().unwrap();
        // Another row's commit: the next reader has a new snapshot, where
        // this row's bytes are the same.
        put(&writer, b"m2", "Chidi").await;
        let later = store.read().unwrap();
        assert_ne!(later.snapshot_serial(), earlier.snapshot_serial());
        let again = rows.get(&later, b"m1").unwrap().unwrap();
        assert_eq!(first.name, "Ada");
        assert!(
            Arc::ptr_eq(&first, &again),
            "unchanged bytes are not decoded again"
        );

        put(&writer, b"m1", "Bola").await;
        let changed = rows.get(&store.read().unwrap(), b"m1").unwrap().unwrap();
        assert_eq!(
            changed.name, "Bola",
            "a changed row is never answered from the cache"
        );
    }

    #[tokio::test]
    async fn each_snapshot_gets_the_row_it_holds_though_older_and_newer_readers_interleave() {
        let (_dir, store, writer, rows) = open();
        put(&writer, b"m1", "Ada").await;
        let old = store.read().unwrap();
        let ada = rows.get(&old, b"m1").unwrap().unwrap();
        // Readers of one snapshot share it, and its value.
        let same = store.read().unwrap();
        assert_eq!(same.snapshot_serial(), old.snapshot_serial());
        assert!(Arc::ptr_eq(&ada, &rows.get(&same, b"m1").unwrap().unwrap()));

        put(&writer, b"m1", "Bola").await;
        let new = store.read().unwrap();
        assert_ne!(new.snapshot_serial(), old.snapshot_serial());
        assert_eq!(
            rows.get(&new, b"m1").unwrap().unwrap().name,
            "Bola",
            "a newer snapshot never takes the value an older one read"
        );
        assert_eq!(rows.get(&old, b"m1").unwrap().unwrap().name, "Ada");
        assert_eq!(rows.get(&new, b"m1").unwrap().unwrap().name, "Bola");

        let mut batch = Batch::new();
        batch.delete(Table::Merchants, b"m1".to_vec());
        writer.commit(batch).await.unwrap();
        assert!(rows.get(&store.read().unwrap(), b"m1").unwrap().is_none());
        assert_eq!(rows.get(&new, b"m1").unwrap().unwrap().name, "Bola");
    }
}
