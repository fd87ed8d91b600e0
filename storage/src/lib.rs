//! kobo's durable store: the table catalogue, the versioned codec, the
//! group-commit writer, and the two engines behind them: one embedded redb
//! file (the default) or a PostgreSQL database (`--store postgres://...`).
//!
//! Layout:
//! - [`tables`]: every table kobo keeps, and the composite-key builder.
//! - [`codec`]: how values are encoded (a version byte, then JSON or
//!   postcard).
//! - [`writer`]: the single writer thread; many callers' batches share one
//!   durable commit (group commit) and each caller is acknowledged only
//!   after that commit.
//! - [`Store`] / [`ReadTxn`]: the seam. Opening a store (with a clear error
//!   when another process holds it) and snapshot reads from any thread; the
//!   engine (redb here, PostgreSQL in [`pg`]) is chosen at open and is
//!   invisible above this crate.
//!
//! This crate knows nothing of HTTP, actix or the payments domain.

pub mod backup;
mod bloom;
pub mod codec;
pub mod fence;
mod journal;
mod key_index;
pub mod pg;
#[cfg(test)]
mod seam_tests;
pub mod tables;
mod trees;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redb::{Database, DatabaseError};
use serde::de::DeserializeOwned;

pub use codec::{decode, encode, encode_compact, CodecError, Compact};
pub use tables::{KeyBuf, Table};
pub use writer::{
    counters, Batch, CommitError, Op, Precondition, ReadLease, RecentCommits, Writer, WriterMetrics,
};

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
    #[error("the database is already in use by another kobo process ({0})")]
    DatabaseLocked(String),
    #[error("store error: {0}")]
    Redb(String),
    #[error("PostgreSQL: {0}")]
    Postgres(String),
    #[error("{0}")]
    Unsupported(String),
    #[error("--store {0}: expected a postgres:// (or postgresql://) URL, or `redb` for the embedded store in --data")]
    BadSpec(String),
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
    redb::CommitError,
    redb::Error
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

/// Removes the journal files beside a store file that does not exist:
/// they are left from a store that was deleted, and must never be
/// replayed into a new one. (A store file that exists, even empty, is the
/// one its journals belong to.)
pub(crate) fn forget_orphan_journals(store_file: &Path) -> std::io::Result<()> {
    if store_file.exists() {
        return Ok(());
    }
    remove_journals(store_file)
}

/// Removes the journal files of a closed store (which its file alone now
/// holds whole).
pub(crate) fn remove_journals(store_file: &Path) -> std::io::Result<()> {
    for journal in journal::journal_paths(store_file) {
        match std::fs::remove_file(&journal) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
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
/// 4: saved responses in their `idempotency_expiry` rows, found through
/// `idempotency_keys`, which a kobo of schema 3 does not read (it would
/// not replay them).
/// 5: saved responses in a layout of their own (`idempotency::SAVED_LAYOUT_2`),
/// and saved bodies and event objects packed with dictionary 2 (zstd),
/// which a kobo of schema 4 cannot decode.
/// 6: compact values in codec version 3 (timestamps as seconds and
/// nanoseconds: [`codec::timestamp`]), which a kobo of schema 5 cannot
/// decode.
pub const SCHEMA_VERSION: u32 = 6;

/// redb's page cache when not configured: 160 MiB (the server's
/// `--store-cache-mb` default).
pub const DEFAULT_CACHE_BYTES: usize = 160 << 20;

/// Which engine holds the store: `--store` / `KOBO_STORE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreSpec {
    /// The embedded redb file in the data directory (the default).
    Redb,
    /// A PostgreSQL database, by its connection URL.
    Postgres(String),
}

impl StoreSpec {
    /// Parses a `--store` value: `redb`, or a `postgres://` /
    /// `postgresql://` URL.
    pub fn parse(spec: &str) -> Result<StoreSpec, StoreError> {
        let s = spec.trim();
        if s == "redb" {
            Ok(StoreSpec::Redb)
        } else if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Ok(StoreSpec::Postgres(s.to_string()))
        } else {
            Err(StoreError::BadSpec(pg::redact(s)))
        }
    }

    /// `None` (no `--store`) is the embedded store.
    pub fn from_option(spec: Option<&str>) -> Result<StoreSpec, StoreError> {
        spec.map_or(Ok(StoreSpec::Redb), StoreSpec::parse)
    }
}

/// The opened store. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    engine: Engine,
}

/// The engine behind a [`Store`]: the whole seam is this enum and
/// [`Read`]; every method of `Store`, [`ReadTxn`] and the writer thread
/// dispatches on it.
#[derive(Clone)]
pub(crate) enum Engine {
    Redb {
        /// The read snapshot readers share until the next commit. Declared
        /// before `db`: it is dropped first, so no read transaction of it
        /// outlives the database.
        snapshot: Arc<trees::LatestSnapshot>,
        /// The log-structured idempotency key index ([`key_index`]).
        /// Declared before `db` too: its merge's read-ahead thread is
        /// stopped and waited for before the database closes.
        keys: Arc<key_index::KeyIndex>,
        db: Arc<Database>,
        path: PathBuf,
        /// Whether this open had to rebuild redb's allocator state.
        repaired: bool,
    },
    Postgres(Arc<pg::PgStore>),
}

impl Store {
    /// Opens the store `spec` names: the embedded one in `dir` (created if
    /// needed, like [`Store::open_with_cache`]), or a PostgreSQL database
    /// (its schema created or migrated first).
    pub fn open_spec(
        spec: &StoreSpec,
        dir: &Path,
        cache_bytes: usize,
    ) -> Result<Store, StoreError> {
        match spec {
            StoreSpec::Redb => Store::open_with_cache(dir, cache_bytes),
            StoreSpec::Postgres(url) => Store::connect(url),
        }
    }

    /// Like [`Store::open_spec`] for the offline tools: an embedded store
    /// must already exist ([`Store::open_existing`]).
    pub fn open_spec_existing(
        spec: &StoreSpec,
        dir: &Path,
        cache_bytes: usize,
    ) -> Result<Store, StoreError> {
        match spec {
            StoreSpec::Redb => Store::open_existing(dir, cache_bytes),
            StoreSpec::Postgres(url) => Store::connect(url),
        }
    }

    /// Connects to the PostgreSQL database at `url`, creates or migrates
    /// its schema, and takes the database's writer lock (refused with
    /// [`StoreError::DatabaseLocked`] while another kobo holds it).
    pub fn connect(url: &str) -> Result<Store, StoreError> {
        Ok(Store {
            engine: Engine::Postgres(Arc::new(pg::PgStore::open(url, pg::Mode::Single)?)),
        })
    }

    /// Connects to the PostgreSQL database at `url` as one node of a
    /// cluster (issue 21): creates or migrates its schema, takes the
    /// database's writer lock SHARED (with the other nodes; refused with
    /// [`StoreError::DatabaseLocked`] while a single-process kobo holds it,
    /// and a single-process kobo is refused while nodes hold it), and seeds
    /// the cluster's sequence above every number noted before. Its group
    /// commits check batches' fences and lock their read sets across nodes;
    /// [`Store::leases`] is the membership and leases.
    pub fn connect_cluster(url: &str) -> Result<Store, StoreError> {
        Ok(Store {
            engine: Engine::Postgres(Arc::new(pg::PgStore::open(url, pg::Mode::Cluster)?)),
        })
    }

    /// The cluster's membership, leases and sequence blocks: `Some` only for
    /// a store opened with [`Store::connect_cluster`].
    pub fn leases(&self) -> Option<Arc<dyn fence::Leases>> {
        match &self.engine {
            Engine::Postgres(pg) => pg.leases().map(|l| l as Arc<dyn fence::Leases>),
            Engine::Redb { .. } => None,
        }
    }

    /// The highest sequence number cluster nodes reserved on this store's
    /// database (0 on redb, or when no node ever did); sequences in use may
    /// reach it while the Meta high-water mark stays lower.
    pub fn reserved_sequence(&self) -> Result<u64, StoreError> {
        match &self.engine {
            Engine::Postgres(pg) => pg.reserved_sequence(),
            Engine::Redb { .. } => Ok(0),
        }
    }

    /// Whether this store is a cluster node's ([`Store::connect_cluster`]).
    pub fn is_cluster(&self) -> bool {
        match &self.engine {
            Engine::Postgres(pg) => pg.leases().is_some(),
            Engine::Redb { .. } => false,
        }
    }

    /// Connects to the PostgreSQL database at `url` for reading only (its
    /// schema created or migrated first), without the writer lock: `kobo
    /// check` beside a running server. Such a store has no writer:
    /// [`Store::apply`] and [`Store::start_writer`] refuse.
    pub fn connect_read_only(url: &str) -> Result<Store, StoreError> {
        Ok(Store {
            engine: Engine::Postgres(Arc::new(pg::PgStore::open_read_only(url)?)),
        })
    }

    /// Which engine this store runs on, for logs and errors: `redb` or
    /// `postgres`.
    pub fn engine_name(&self) -> &'static str {
        match &self.engine {
            Engine::Redb { .. } => "redb",
            Engine::Postgres(_) => "postgres",
        }
    }

    /// The redb database, for the embedded store's own tools (backup and
    /// restore); on PostgreSQL an [`StoreError::Unsupported`] naming the
    /// database's own tools.
    pub(crate) fn redb(&self) -> Result<&Arc<Database>, StoreError> {
        match &self.engine {
            Engine::Redb { db, .. } => Ok(db),
            Engine::Postgres(_) => Err(StoreError::Unsupported(
                "kobo's backup files are of the embedded redb store; back up a PostgreSQL store with PostgreSQL's own tools (pg_dump, or pg_basebackup with WAL archiving for point-in-time recovery)".into(),
            )),
        }
    }

    /// The redb database and its idempotency key index, for restores.
    pub(crate) fn redb_with_keys(
        &self,
    ) -> Result<(&Arc<Database>, &Arc<key_index::KeyIndex>), StoreError> {
        match &self.engine {
            Engine::Redb { db, keys, .. } => Ok((db, keys)),
            Engine::Postgres(_) => self
                .redb()
                .map(|_| unreachable!("redb() refuses PostgreSQL")),
        }
    }

    /// A read snapshot of the embedded store's trees, for backups.
    pub(crate) fn read_trees(&self) -> Result<trees::ReadTrees, StoreError> {
        let (db, keys) = self.redb_with_keys()?;
        Ok(trees::ReadTrees::begin(db, keys)?)
    }

    /// Opens (creating if needed) `<dir>/kobo.redb` and makes sure every table
    /// exists, so readers never meet a missing table.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        Store::open_with_cache(dir, DEFAULT_CACHE_BYTES)
    }

    /// [`Store::open`] with redb's page cache limited to `cache_bytes` (the
    /// bulk of the process's resident memory under a large store).
    pub fn open_with_cache(dir: &Path, cache_bytes: usize) -> Result<Store, StoreError> {
        let path = dir.join(STORE_FILE);
        forget_orphan_journals(&path).map_err(|source| StoreError::Directory {
            path: dir.to_path_buf(),
            source,
        })?;
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
        // redb calls this only when the file was left without its allocator
        // state (not closed cleanly and nothing recorded): it then walks
        // every page of the store to rebuild it.
        let repair = Arc::new(AtomicBool::new(false));
        let seen = repair.clone();
        let backend = match journal::Journaled::open(&path) {
            Ok(b) => b,
            Err(journal::OpenError::Locked) => return Err(StoreError::Locked(path)),
            Err(journal::OpenError::Io(e)) => {
                return Err(StoreError::Redb(format!(
                    "opening {} with its journals: {e}",
                    path.display()
                )))
            }
        };
        let db = match redb::Builder::new()
            .set_cache_size(cache_bytes)
            .set_repair_callback(move |_| seen.store(true, Ordering::Relaxed))
            .create_with_backend(backend)
        {
            Ok(db) => db,
            Err(DatabaseError::DatabaseAlreadyOpen) => return Err(StoreError::Locked(path)),
            Err(e) => return Err(StoreError::Redb(e.to_string())),
        };
        let txn = db.begin_write()?;
        trees::open_all(&txn)?;
        let keys = key_index::KeyIndex::open(&txn).map_err(StoreError::Redb)?;
        txn.commit()?;
        let db = Arc::new(db);
        keys.attach(&db);
        Ok(Store {
            engine: Engine::Redb {
                snapshot: Default::default(),
                keys: Arc::new(keys),
                db,
                path,
                repaired: repair.load(Ordering::Relaxed),
            },
        })
    }

    /// Commits one batch in its own durable write transaction, on the
    /// calling thread: for the offline tools, where no writer thread runs
    /// (in the server every write goes through the [`Writer`]). The batch's
    /// preconditions and sequence high-water mark apply as in the writer.
    pub fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        let (db, keys, snapshot) = match &self.engine {
            Engine::Redb {
                db, keys, snapshot, ..
            } => (db, keys, snapshot),
            Engine::Postgres(pg) => return pg.apply(batch),
        };
        let mut txn = db.begin_write()?;
        txn.set_durability(redb::Durability::Immediate)
            .map_err(|e| StoreError::Redb(e.to_string()))?;
        let published = {
            let mut trees = trees::WriteTrees::new(&txn, keys.clone())?;
            match writer::apply_batch(&mut trees, batch).map_err(StoreError::Redb)? {
                Ok(()) => {}
                Err(e) => return Err(StoreError::Redb(e.to_string())),
            }
            writer::raise_high_water(&mut trees, batch.seq_high_water())
                .map_err(StoreError::Redb)?;
            trees.finish().map_err(StoreError::Redb)?;
            trees.published().map_err(StoreError::Redb)?
        };
        txn.commit()?;
        published.done();
        snapshot.release();
        Ok(())
    }

    /// Whether this is the embedded redb store (kobo's own backups, restores
    /// and file locks are of it).
    pub fn is_embedded(&self) -> bool {
        matches!(self.engine, Engine::Redb { .. })
    }

    /// The redb file, or (on PostgreSQL) `None`.
    pub fn path(&self) -> Option<&Path> {
        match &self.engine {
            Engine::Redb { path, .. } => Some(path),
            Engine::Postgres(_) => None,
        }
    }

    /// A consistent snapshot for reads (MVCC: never blocks the writer): it
    /// sees every commit acknowledged before this call, and nothing
    /// committed after its first read. On redb the newest snapshot, shared
    /// with every reader that begins before the next commit. On PostgreSQL
    /// a REPEATABLE READ READ ONLY transaction on a pooled connection,
    /// begun with the first read and held until the `ReadTxn` drops.
    pub fn read(&self) -> Result<ReadTxn, StoreError> {
        let read = match &self.engine {
            Engine::Redb {
                db, keys, snapshot, ..
            } => Read::Redb(snapshot.read(db, keys)?),
            Engine::Postgres(pg) => Read::Postgres(pg.snapshot()?),
        };
        Ok(ReadTxn { read })
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
    /// On PostgreSQL there is nothing to record (the database keeps its
    /// own state).
    pub fn record_allocator_state(&self) -> Result<(), StoreError> {
        let Engine::Redb { db, .. } = &self.engine else {
            return Ok(());
        };
        let mut txn = db.begin_write()?;
        txn.set_quick_repair(true);
        txn.set_durability(redb::Durability::Immediate)
            .map_err(|e| StoreError::Redb(e.to_string()))?;
        txn.commit()?;
        Ok(())
    }

    /// Whether opening the store had to rebuild redb's allocator state by
    /// walking every page (seconds on a large store): the last process to
    /// hold it ended without [`Store::record_allocator_state`] as its last
    /// commit (a crash, a kill -9, a commit after that record). Never on
    /// PostgreSQL.
    pub fn repaired_on_open(&self) -> bool {
        matches!(self.engine, Engine::Redb { repaired: true, .. })
    }

    /// How the file's pages are used (redb's statistics, from a write
    /// transaction that is dropped, never committed): for the offline
    /// tools (`kobo check --sizes`) while no writer runs. The embedded
    /// store only (an [`StoreError::Unsupported`] on PostgreSQL).
    pub fn page_stats(&self) -> Result<PageStats, StoreError> {
        let txn = self.redb()?.begin_write()?;
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
        writer::start(self.engine.clone(), metrics)
    }
}

/// A read snapshot.
pub struct ReadTxn {
    read: Read,
}

enum Read {
    Redb(Arc<trees::ReadTrees>),
    Postgres(pg::Snapshot),
}

impl ReadTxn {
    /// A number no other snapshot in this process shares, on the embedded
    /// store (`None` on PostgreSQL, whose snapshots are not shared). A
    /// snapshot never changes, so two reads under one serial read the same
    /// rows: a row read once under it need not be read again (the decoded
    /// merchant and API key of every request, `kobo_actors::decoded`).
    pub fn snapshot_serial(&self) -> Option<u64> {
        match &self.read {
            Read::Redb(t) => Some(t.serial),
            Read::Postgres(_) => None,
        }
    }

    pub fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let key = table.physical(key);
        match &self.read {
            Read::Redb(t) => Ok(t.get(table, &key)?),
            Read::Postgres(s) => s.get(key),
        }
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
        match &self.read {
            Read::Redb(t) => t.visit(table, &lower, &upper, true, |k, v| visit(&k[1..], v)),
            Read::Postgres(s) => s.scan(lower, upper, true, visit),
        }
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
        match &self.read {
            Read::Redb(t) => t.visit(table, &lower, &upper, false, |k, v| visit(&k[1..], v)),
            Read::Postgres(s) => s.scan(lower, upper, false, visit),
        }
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
        for (table, s) in Table::ALL.iter().zip(sizes.iter_mut()) {
            self.scan_prefix(*table, &[], None, |k, v| {
                s.rows += 1;
                s.key_bytes += k.len() as u64;
                s.value_bytes += v.len() as u64;
                if let Some(n) = v.first().and_then(|f| s.by_format.get_mut(usize::from(*f))) {
                    *n += 1;
                }
                Ok(true)
            })?;
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

    /// The store file as a process that ends with the store still open
    /// leaves it (the server's writer thread and actors hold it to the
    /// end, so redb's own close never runs): a copy taken while it is open.
    fn left_open(store: &Store, dir: &Path) -> std::path::PathBuf {
        let copy = dir.join("copy");
        std::fs::create_dir(&copy).unwrap();
        let path = store.path().unwrap();
        std::fs::copy(path, copy.join(STORE_FILE)).unwrap();
        for (from, to) in journal::journal_paths(path)
            .iter()
            .zip(journal::journal_paths(&copy.join(STORE_FILE)))
        {
            std::fs::copy(from, to).unwrap();
        }
        copy
    }

    #[test]
    fn journals_left_beside_a_deleted_store_are_never_replayed_into_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("a")).unwrap();
        one_batch(&store);
        let copy = left_open(&store, dir.path());
        // The copy, whole, holds the batch (its journals do).
        let whole = dir.path().join("whole");
        std::fs::create_dir(&whole).unwrap();
        for entry in std::fs::read_dir(&copy).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), whole.join(entry.file_name())).unwrap();
        }
        let reopened = Store::open(&whole).unwrap();
        assert!(reopened
            .read()
            .unwrap()
            .get(Table::Events, b"e1")
            .unwrap()
            .is_some());
        // Without its store file, the journals are dropped, not replayed.
        std::fs::remove_file(copy.join(STORE_FILE)).unwrap();
        let fresh = Store::open(&copy).unwrap();
        assert!(fresh
            .read()
            .unwrap()
            .get(Table::Events, b"e1")
            .unwrap()
            .is_none());
    }

    fn one_batch(store: &Store) {
        let mut batch = Batch::new();
        batch.put(Table::Events, b"e1".to_vec(), &"x");
        store.apply(&batch).unwrap();
    }

    #[test]
    fn a_store_left_open_after_its_allocator_state_is_recorded_reopens_without_a_repair() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("a")).unwrap();
        one_batch(&store);
        store.record_allocator_state().unwrap();
        let reopened = Store::open(&left_open(&store, dir.path())).unwrap();
        assert!(!reopened.repaired_on_open());
        let events = reopened.read().unwrap().table_sizes().unwrap();
        assert!(events.iter().any(|s| s.table == "events" && s.rows == 1));
    }

    #[test]
    fn a_store_left_open_without_the_record_is_repaired_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("a")).unwrap();
        one_batch(&store);
        let reopened = Store::open(&left_open(&store, dir.path())).unwrap();
        assert!(reopened.repaired_on_open());
        // A commit after the record makes it stale: repaired again.
        store.record_allocator_state().unwrap();
        one_batch(&store);
        drop(reopened);
        std::fs::remove_dir_all(dir.path().join("copy")).unwrap();
        let reopened = Store::open(&left_open(&store, dir.path())).unwrap();
        assert!(reopened.repaired_on_open());
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
