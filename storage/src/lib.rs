//! kobo's durable store: one redb file, the table catalogue, the versioned codec
//! and the group-commit writer.
//!
//! Layout:
//! - [`tables`]: every table kobo keeps, and the composite-key builder.
//! - [`codec`]: how values are encoded (a version byte, then JSON or
//!   postcard).
//! - [`writer`]: the single writer thread; many callers' batches share one
//!   durable redb commit (group commit) and each caller is acknowledged only
//!   after that commit.
//! - [`Store`] / [`ReadTxn`]: opening the file (with a clear error when another
//!   process holds it) and MVCC reads from any thread.
//!
//! This crate knows nothing of HTTP, actix or the payments domain.

pub mod backup;
pub mod codec;
pub mod tables;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{Database, DatabaseError, ReadableDatabase};
use serde::de::DeserializeOwned;

pub use codec::{decode, encode, encode_compact, CodecError, Compact};
pub use tables::{KeyBuf, Table};
pub use writer::{counters, Batch, CommitError, Op, RecentCommits, Writer, WriterMetrics};

/// Errors of opening or reading the store. Write failures never surface as
/// values: the writer stops the process instead (fail-stop), so memory is never
/// ahead of disk.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the data directory {0} is in use by another kobo process (the store is locked)")]
    Locked(PathBuf),
    #[error("cannot create the data directory {path}: {source}")]
    Directory {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("there is no store in {0} (no {STORE_FILE})")]
    Missing(PathBuf),
    #[error("store error: {0}")]
    Redb(String),
    #[error(transparent)]
    Codec(#[from] CodecError),
}

macro_rules! redb_err {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self { StoreError::Redb(e.to_string()) }
        }
    )*};
}
redb_err!(
    redb::StorageError,
    redb::TransactionError,
    redb::TableError,
    redb::CommitError
);

/// Creates the data directory (mode 0700) and an empty store file (mode
/// 0600) when they are missing, so the store's secrets (webhook signing
/// secrets, client secrets, bank account numbers) are never readable by
/// other users, not even for a moment. Existing ones keep their mode (see
/// [`loose_permissions`]). redb initialises an empty file as a new store.
fn create_private(dir: &Path, file: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(file)?;
    Ok(())
}

/// The data directory and the files in it that group or other users may
/// read, write or enter, with their modes (for a warning at start-up).
pub fn loose_permissions(dir: &Path) -> std::io::Result<Vec<(PathBuf, u32)>> {
    use std::os::unix::fs::PermissionsExt;
    let mut loose = Vec::new();
    let mut check = |path: PathBuf| -> std::io::Result<()> {
        let mode = std::fs::metadata(&path)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            loose.push((path, mode));
        }
        Ok(())
    };
    check(dir.to_path_buf())?;
    for entry in std::fs::read_dir(dir)? {
        check(entry?.path())?;
    }
    Ok(loose)
}

/// The store's file in the data directory.
pub const STORE_FILE: &str = "kobo.redb";

/// The version of the stored layout: the table catalogue's ids and the
/// codec. Raised when a change means an older kobo cannot read the store;
/// a backup records it, and a restore refuses a backup from a later one.
/// New tables appended at the end of the catalogue do not raise it (an
/// older kobo ignores their keys).
///
/// 2: payment intents and saved responses in the compact format (codec
/// version 2), which a kobo of schema 1 cannot decode.
/// 3: events and ledger lines in the compact format, and saved response bodies and event
/// objects packed against a preset dictionary ([`codec::packed`]), which a
/// kobo of schema 2 cannot decode.
pub const SCHEMA_VERSION: u32 = 3;

/// redb's page cache when not configured: 160 MiB (the server's
/// `--store-cache-mb` default).
pub const DEFAULT_CACHE_BYTES: usize = 160 << 20;

/// The opened store. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    db: Arc<Database>,
    path: PathBuf,
}

impl Store {
    /// Opens (creating if needed) `<dir>/kobo.redb` and makes sure every table
    /// exists, so readers never meet a missing table.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        Store::open_with_cache(dir, DEFAULT_CACHE_BYTES)
    }

    /// [`Store::open`] with redb's page cache limited to `cache_bytes` (the
    /// bulk of the process's resident memory under a large store).
    pub fn open_with_cache(dir: &Path, cache_bytes: usize) -> Result<Store, StoreError> {
        let path = dir.join(STORE_FILE);
        create_private(dir, &path).map_err(|source| StoreError::Directory {
            path: dir.to_path_buf(),
            source,
        })?;
        Store::open_file(&path, cache_bytes)
    }

    /// Opens the store of `dir` only if it exists (never creates one): for
    /// the offline tools (`kobo check`, `kobo backup`), which must not leave
    /// an empty store behind in a mistyped directory.
    pub fn open_existing(dir: &Path, cache_bytes: usize) -> Result<Store, StoreError> {
        let path = dir.join(STORE_FILE);
        if !path.is_file() {
            return Err(StoreError::Missing(dir.to_path_buf()));
        }
        Store::open_file(&path, cache_bytes)
    }

    /// Opens (creating when empty) the redb file at `path`.
    pub(crate) fn open_file(path: &Path, cache_bytes: usize) -> Result<Store, StoreError> {
        let path = path.to_path_buf();
        let db = match redb::Builder::new()
            .set_cache_size(cache_bytes)
            .create(&path)
        {
            Ok(db) => db,
            Err(DatabaseError::DatabaseAlreadyOpen) => return Err(StoreError::Locked(path)),
            Err(e) => return Err(StoreError::Redb(e.to_string())),
        };
        let txn = db.begin_write()?;
        txn.open_table(tables::PHYSICAL)?;
        txn.commit()?;
        Ok(Store {
            db: Arc::new(db),
            path,
        })
    }

    /// Commits one batch in its own durable write transaction, on the
    /// calling thread: for the offline tools, where no writer thread runs
    /// (in the server every write goes through the [`Writer`]). The batch's
    /// preconditions and sequence high-water mark apply as in the writer.
    pub fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(redb::Durability::Immediate)
            .map_err(|e| StoreError::Redb(e.to_string()))?;
        {
            let mut t = txn.open_table(tables::PHYSICAL)?;
            match writer::apply_batch(&mut t, batch).map_err(StoreError::Redb)? {
                Ok(()) => {}
                Err(e) => return Err(StoreError::Redb(e.to_string())),
            }
            writer::raise_high_water(&mut t, batch.seq_high_water()).map_err(StoreError::Redb)?;
        }
        txn.commit()?;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A consistent snapshot for reads (MVCC: never blocks the writer).
    pub fn read(&self) -> Result<ReadTxn, StoreError> {
        let txn = self.db.begin_read()?;
        Ok(ReadTxn {
            table: txn.open_table(tables::PHYSICAL)?,
        })
    }

    /// One last durable commit that records redb's allocator state
    /// (quick-repair), for a server that is stopping. The process ends with
    /// the store still open (the writer thread and the actors hold it), so
    /// redb never closes the file cleanly; without this record the next
    /// open rebuilds the allocator state by walking every page of the store
    /// (4.7 s at 1M payment intents; docs/performance.md), with it the open
    /// loads it. A commit after this one (a timer firing before the process
    /// is gone) makes the record stale and the next open rebuilds as
    /// before: never wrong, only slower.
    pub fn record_allocator_state(&self) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write()?;
        txn.set_quick_repair(true);
        txn.set_durability(redb::Durability::Immediate)
            .map_err(|e| StoreError::Redb(e.to_string()))?;
        txn.commit()?;
        Ok(())
    }

    /// How the file's pages are used (redb's statistics, from a write
    /// transaction that is dropped, never committed): for the offline
    /// tools (`kobo check --sizes`) while no writer runs.
    pub fn page_stats(&self) -> Result<PageStats, StoreError> {
        let txn = self.db.begin_write()?;
        let s = txn.stats()?;
        let stats = PageStats {
            page_size: s.page_size() as u64,
            allocated_pages: s.allocated_pages(),
            leaf_pages: s.leaf_pages(),
            branch_pages: s.branch_pages(),
            stored_bytes: s.stored_bytes(),
            metadata_bytes: s.metadata_bytes(),
            fragmented_bytes: s.fragmented_bytes(),
            tree_height: s.tree_height(),
        };
        txn.abort()?;
        Ok(stats)
    }

    /// Starts the single writer thread. Call once per process.
    pub fn start_writer(&self, metrics: WriterMetrics) -> Writer {
        writer::start(self.db.clone(), metrics)
    }
}

/// A read snapshot.
pub struct ReadTxn {
    table: redb::ReadOnlyTable<&'static [u8], &'static [u8]>,
}

impl ReadTxn {
    pub fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let found = self.table.get(table.physical(key).as_slice())?;
        Ok(found.map(|v| v.value().to_vec()))
    }

    pub fn get_decoded<T: DeserializeOwned>(
        &self,
        table: Table,
        key: &[u8],
    ) -> Result<Option<T>, StoreError> {
        match self.get(table, key)? {
            Some(bytes) => Ok(Some(decode(&bytes)?)),
            None => Ok(None),
        }
    }

    /// Visits the keys starting with `prefix`, from the greatest down, starting
    /// strictly below `before` when given. The visitor returns `false` to stop.
    pub fn scan_prefix_rev(
        &self,
        table: Table,
        prefix: &[u8],
        before: Option<&[u8]>,
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let lower = table.physical(prefix);
        let upper = match before {
            Some(b) => table.physical(b),
            None => prefix_end(&lower),
        };
        for item in self
            .table
            .range::<&[u8]>(lower.as_slice()..upper.as_slice())?
            .rev()
        {
            let (k, v) = item?;
            if !visit(&k.value()[1..], v.value())? {
                break;
            }
        }
        Ok(())
    }

    /// Visits the keys starting with `prefix` in ascending order, starting at
    /// `from` (inclusive) when given. The visitor returns `false` to stop.
    pub fn scan_prefix(
        &self,
        table: Table,
        prefix: &[u8],
        from: Option<&[u8]>,
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let lower = table.physical(from.unwrap_or(prefix));
        let upper = prefix_end(&table.physical(prefix));
        for item in self
            .table
            .range::<&[u8]>(lower.as_slice()..upper.as_slice())?
        {
            let (k, v) = item?;
            if !visit(&k.value()[1..], v.value())? {
                break;
            }
        }
        Ok(())
    }
}

/// redb's page statistics of the store ([`Store::page_stats`]): the file
/// holds `allocated_pages` pages of `page_size` bytes, of which leaves and
/// branches hold `stored_bytes` of keys and values, `metadata_bytes` of
/// their headers and `fragmented_bytes` unused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageStats {
    pub page_size: u64,
    pub allocated_pages: u64,
    pub leaf_pages: u64,
    pub branch_pages: u64,
    pub stored_bytes: u64,
    pub metadata_bytes: u64,
    pub fragmented_bytes: u64,
    pub tree_height: u32,
}

/// What one table holds: its rows and their key and value bytes (keys
/// without the table's one-byte prefix), and its values by codec version
/// (`by_format[v]`: values whose first byte is `v`, for v < 4; meaningful
/// for the codec-encoded tables, whose first byte is the version).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableSize {
    pub table: &'static str,
    pub rows: u64,
    pub key_bytes: u64,
    pub value_bytes: u64,
    pub by_format: [u64; 4],
}

impl ReadTxn {
    /// Every table that holds rows, with its sizes (a full scan: for the
    /// offline tools, `kobo check --sizes`).
    pub fn table_sizes(&self) -> Result<Vec<TableSize>, StoreError> {
        let mut sizes: Vec<TableSize> = Table::ALL
            .iter()
            .map(|t| TableSize {
                table: t.name(),
                ..TableSize::default()
            })
            .collect();
        use redb::ReadableTable;
        for item in self.table.iter()? {
            let (k, v) = item?;
            let (k, v) = (k.value(), v.value());
            let Some(s) = k
                .first()
                .and_then(|id| sizes.get_mut(usize::from(*id).wrapping_sub(1)))
            else {
                continue;
            };
            s.rows += 1;
            s.key_bytes += k.len() as u64 - 1;
            s.value_bytes += v.len() as u64;
            if let Some(n) = v.first().and_then(|f| s.by_format.get_mut(usize::from(*f))) {
                *n += 1;
            }
        }
        sizes.retain(|s| s.rows > 0);
        Ok(sizes)
    }
}

/// The smallest key greater than every key starting with `prefix`; empty when
/// there is none (the prefix is all 0xff). Physical keys start with a table
/// id below 0xff, so for them it is never empty.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_carries_over_0xff() {
        assert_eq!(prefix_end(&[1, 2]), vec![1, 3]);
        assert_eq!(prefix_end(&[1, 0xff]), vec![2]);
        assert_eq!(prefix_end(&[0xff, 0xff]), Vec::<u8>::new());
    }

    #[test]
    fn table_sizes_count_each_tables_rows_bytes_and_formats() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut batch = Batch::new();
        batch
            .put(Table::Events, b"e1".to_vec(), &"x")
            .put(Table::Events, b"e22".to_vec(), &"yy")
            .put_raw(Table::EventIndex, b"k".to_vec(), vec![7; 16]);
        store.apply(&batch).unwrap();
        let sizes = store.read().unwrap().table_sizes().unwrap();
        let events = sizes.iter().find(|s| s.table == "events").unwrap();
        assert_eq!(events.rows, 2);
        assert_eq!(events.key_bytes, 5);
        // A version byte, then the JSON string with its quotes.
        assert_eq!(events.value_bytes, 4 + 5);
        assert_eq!(events.by_format, [0, 2, 0, 0]);
        let index = sizes.iter().find(|s| s.table == "event_index").unwrap();
        assert_eq!((index.rows, index.key_bytes, index.value_bytes), (1, 1, 16));
        assert!(sizes.iter().all(|s| s.rows > 0));
    }

    #[test]
    fn a_second_open_of_the_same_directory_is_refused_as_locked() {
        let dir = tempfile::tempdir().unwrap();
        let _first = Store::open(dir.path()).unwrap();
        match Store::open(dir.path()) {
            Err(StoreError::Locked(_)) => {}
            Err(e) => panic!("expected Locked, got {e}"),
            Ok(_) => panic!("expected Locked, got a second store"),
        }
    }
}
