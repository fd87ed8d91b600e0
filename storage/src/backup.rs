//! Backups: a consistent copy of the whole store in one self-checking file,
//! written from ONE read transaction while the writer keeps committing
//! (redb's MVCC: the snapshot is the store as of one commit, and writes are
//! never blocked by it), and restored into an empty data directory.
//!
//! File format (integers big-endian):
//!
//! ```text
//! magic     8 bytes   "KOBOBAK1"
//! header    u32 length, JSON {format, kobo_version, schema_version, created_at}
//! records   per key, in key order: 0x01, u32 key length, the physical key
//!           (table id byte + key), u32 value length, the value
//! end       0x00
//! manifest  u32 length, JSON [`Manifest`] (counts per table, high-water mark)
//! checksum  32 bytes: SHA-256 of every byte before it
//! ```
//!
//! A backup is written to a temporary file beside its destination, synced,
//! then linked to its name (never over an existing file) and the directory
//! synced: a file under the final name is always complete. A restore reads
//! the whole file and checks the checksum, the structure and the counts
//! before it writes anything; it then writes a new redb file
//! (`kobo.redb.restoring`) in large transactions, checks the checksum again
//! on that second read, syncs, and only then links it as `kobo.redb`. An
//! interrupted restore leaves only the `.restoring` file, which no kobo
//! opens as a store.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use redb::Durability;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::tables::Table;
use crate::trees::WriteTrees;
use crate::writer::{u64_from, META_SEQ_HIGH_WATER};
use crate::{Store, StoreError, SCHEMA_VERSION, STORE_FILE};

/// The first bytes of every backup file (the last one is the format).
pub const MAGIC: &[u8; 8] = b"KOBOBAK1";
/// The file format written today.
pub const FORMAT: u32 = 1;
/// Where a restore writes before the store is complete.
pub const RESTORING_FILE: &str = "kobo.redb.restoring";

const RECORD: u8 = 1;
const END: u8 = 0;
/// Longest key or value a backup may hold (a guard against a corrupt
/// length asking for gigabytes).
const MAX_ITEM: usize = 256 << 20;
/// Bytes of records one restore transaction takes.
const RESTORE_TXN_BYTES: usize = 64 << 20;
/// A backup syncs its file every this many bytes: the disk takes the copy
/// in steady slices instead of one burst of gigabytes at the end, which
/// would queue the writer's commits (their fsyncs) behind it.
const SYNC_EVERY: u64 = 32 << 20;

/// What the writer of a backup says about it.
#[derive(Debug, Clone)]
pub struct BackupInfo {
    pub kobo_version: String,
    /// RFC 3339.
    pub created_at: String,
}

/// The start of the file: enough to refuse a backup of a later format
/// before reading it all.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Header {
    format: u32,
    kobo_version: String,
    schema_version: u32,
    created_at: String,
}

/// The end of the file: what the backup holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub format: u32,
    pub kobo_version: String,
    pub schema_version: u32,
    pub created_at: String,
    /// The highest sequence number used (ids of lines, list order): a
    /// restored store continues after it.
    pub seq_high_water: u64,
    /// Keys in the backup.
    pub records: u64,
    /// Keys per table, every table named (zeros included).
    pub tables: BTreeMap<String, u64>,
}

/// A backup written, or a backup file checked.
#[derive(Debug, Clone)]
pub struct Summary {
    pub path: PathBuf,
    pub bytes: u64,
    /// The SHA-256 at the end of the file, hex.
    pub checksum: String,
    pub manifest: Manifest,
}

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{path} is not a usable backup: {why}")]
    Corrupt { path: PathBuf, why: String },
    #[error("{0}")]
    Refused(String),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> BackupError + '_ {
    move |source| BackupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl From<redb::Error> for BackupError {
    fn from(e: redb::Error) -> Self {
        redb_err(e)
    }
}

fn redb_err(e: impl std::fmt::Display) -> BackupError {
    BackupError::Store(StoreError::Redb(e.to_string()))
}

/// Writes that also feed a SHA-256, count bytes, and sync the file every
/// [`SYNC_EVERY`] bytes.
struct HashingWriter {
    inner: BufWriter<File>,
    hash: Sha256,
    bytes: u64,
    synced: u64,
}

impl HashingWriter {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.hash.update(b);
        self.bytes += b.len() as u64;
        self.inner.write_all(b)?;
        if self.bytes - self.synced >= SYNC_EVERY {
            self.inner.flush()?;
            self.inner.get_ref().sync_data()?;
            self.synced = self.bytes;
        }
        Ok(())
    }
    fn put_len(&mut self, n: usize) -> io::Result<()> {
        let n = u32::try_from(n).map_err(|_| io::Error::other("item longer than 4 GiB"))?;
        self.put(&n.to_be_bytes())
    }
}

/// A file name beside `out` that nothing else uses.
fn temp_beside(out: &Path, what: &str) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    out.with_file_name(format!(".{name}.{what}-{}-{nanos}", std::process::id()))
}

fn create_private_new(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Gives `temp` the name `dest`, never replacing an existing file: a hard
/// link (which fails when `dest` exists), then the temporary name removed,
/// then the directory synced.
fn publish(temp: &Path, dest: &Path) -> Result<(), BackupError> {
    match std::fs::hard_link(temp, dest) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(BackupError::Refused(format!(
                "{} already exists; it is never overwritten",
                dest.display()
            )))
        }
        Err(_) if !dest.exists() => {
            // A file system without hard links: a rename, which is atomic
            // but would replace; `dest` was just seen absent.
            std::fs::rename(temp, dest).map_err(io_err(dest))?;
        }
        Err(e) => return Err(io_err(dest)(e)),
    }
    let _ = std::fs::remove_file(temp);
    sync_dir(&parent_of(dest)).map_err(io_err(dest))
}

/// Writes a backup of `store` to `out` (which must not exist) from one read
/// transaction. The writer is never blocked: it keeps committing while the
/// snapshot is read.
pub fn write(store: &Store, out: &Path, info: &BackupInfo) -> Result<Summary, BackupError> {
    if out.exists() {
        return Err(BackupError::Refused(format!(
            "{} already exists; it is never overwritten",
            out.display()
        )));
    }
    let temp = temp_beside(out, "partial");
    let result = write_temp(store, &temp, info).and_then(|s| {
        publish(&temp, out)?;
        Ok(Summary {
            path: out.to_path_buf(),
            ..s
        })
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

fn write_temp(store: &Store, temp: &Path, info: &BackupInfo) -> Result<Summary, BackupError> {
    let file = create_private_new(temp).map_err(io_err(temp))?;
    let mut w = HashingWriter {
        inner: BufWriter::with_capacity(1 << 20, file),
        hash: Sha256::new(),
        bytes: 0,
        synced: 0,
    };
    let header = Header {
        format: FORMAT,
        kobo_version: info.kobo_version.clone(),
        schema_version: SCHEMA_VERSION,
        created_at: info.created_at.clone(),
    };
    let header_json = serde_json::to_vec(&header).expect("a header serializes");
    let mut counts: BTreeMap<u8, u64> = BTreeMap::new();
    let mut records = 0u64;
    let failed = |source: io::Error| BackupError::Io {
        path: temp.to_path_buf(),
        source,
    };
    w.put(MAGIC).map_err(failed)?;
    w.put_len(header_json.len()).map_err(failed)?;
    w.put(&header_json).map_err(failed)?;
    let seq_high_water = {
        // The one read transaction: every record below is the store as of
        // one commit.
        let trees = store.read_trees()?;
        let high_water = trees
            .get(Table::Meta, &Table::Meta.physical(META_SEQ_HIGH_WATER))
            .map_err(redb_err)?
            .map(|v| u64_from(&v))
            .unwrap_or(0);
        trees.visit_all(|k, v| -> Result<(), BackupError> {
            w.put(&[RECORD]).map_err(failed)?;
            w.put_len(k.len()).map_err(failed)?;
            w.put(k).map_err(failed)?;
            w.put_len(v.len()).map_err(failed)?;
            w.put(v).map_err(failed)?;
            *counts.entry(k.first().copied().unwrap_or(0)).or_default() += 1;
            records += 1;
            Ok(())
        })?;
        high_water
    };
    w.put(&[END]).map_err(failed)?;
    let manifest = Manifest {
        format: FORMAT,
        kobo_version: info.kobo_version.clone(),
        schema_version: SCHEMA_VERSION,
        created_at: info.created_at.clone(),
        seq_high_water,
        records,
        tables: table_counts(&counts),
    };
    let manifest_json = serde_json::to_vec(&manifest).expect("a manifest serializes");
    w.put_len(manifest_json.len()).map_err(io_err(temp))?;
    w.put(&manifest_json).map_err(io_err(temp))?;
    let checksum = w.hash.clone().finalize();
    w.inner.write_all(&checksum).map_err(io_err(temp))?;
    let bytes = w.bytes + checksum.len() as u64;
    let file = w
        .inner
        .into_inner()
        .map_err(|e| io_err(temp)(e.into_error()))?;
    file.sync_all().map_err(io_err(temp))?;
    Ok(Summary {
        path: temp.to_path_buf(),
        bytes,
        checksum: format!("{checksum:x}"),
        manifest,
    })
}

/// Counts by table name, every table named.
fn table_counts(by_id: &BTreeMap<u8, u64>) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = Table::ALL
        .iter()
        .map(|t| {
            (
                t.name().to_string(),
                by_id.get(&t.id()).copied().unwrap_or(0),
            )
        })
        .collect();
    for (id, n) in by_id {
        if !Table::ALL.iter().any(|t| t.id() == *id) {
            out.insert(format!("unknown_table_{id}"), *n);
        }
    }
    out
}

/// Reads a backup file front to back, hashing as it goes.
struct Reader {
    path: PathBuf,
    inner: BufReader<File>,
    hash: Sha256,
    /// Bytes left before the checksum.
    left: u64,
}

impl Reader {
    fn open(path: &Path) -> Result<Reader, BackupError> {
        let file = File::open(path).map_err(io_err(path))?;
        let len = file.metadata().map_err(io_err(path))?.len();
        let min = (MAGIC.len() + 4 + 1 + 4 + 32) as u64;
        let mut r = Reader {
            path: path.to_path_buf(),
            inner: BufReader::with_capacity(1 << 20, file),
            hash: Sha256::new(),
            left: len.saturating_sub(32),
        };
        if len < min {
            return Err(r.corrupt("the file is too short (truncated?)"));
        }
        let magic = r.take(MAGIC.len())?;
        if magic != MAGIC {
            if magic.starts_with(b"KOBOBAK") {
                return Err(BackupError::Refused(format!(
                    "{} is a backup of a later format ({}); restore it with that kobo",
                    path.display(),
                    magic[7] as char
                )));
            }
            return Err(r.corrupt("it does not start with the kobo backup magic"));
        }
        r.left = len - 32 - MAGIC.len() as u64;
        Ok(r)
    }

    fn corrupt(&self, why: impl Into<String>) -> BackupError {
        BackupError::Corrupt {
            path: self.path.clone(),
            why: why.into(),
        }
    }

    fn take_into(&mut self, buf: &mut Vec<u8>, n: usize) -> Result<(), BackupError> {
        if n as u64 > self.left {
            return Err(self.corrupt("it ends early (truncated)"));
        }
        buf.resize(n, 0);
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => self.corrupt("it ends early (truncated)"),
            _ => io_err(&self.path)(e),
        })?;
        self.hash.update(&buf[..]);
        self.left -= n as u64;
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<Vec<u8>, BackupError> {
        let mut b = Vec::new();
        self.take_into(&mut b, n)?;
        Ok(b)
    }

    fn byte(&mut self) -> Result<u8, BackupError> {
        Ok(self.take(1)?[0])
    }

    fn len(&mut self) -> Result<usize, BackupError> {
        let b = self.take(4)?;
        let n = u32::from_be_bytes(b.try_into().expect("4 bytes")) as usize;
        if n > MAX_ITEM {
            return Err(self.corrupt(format!("an item claims {n} bytes")));
        }
        Ok(n)
    }

    fn json<T: serde::de::DeserializeOwned>(&mut self, what: &str) -> Result<T, BackupError> {
        let n = self.len()?;
        let b = self.take(n)?;
        serde_json::from_slice(&b)
            .map_err(|e| self.corrupt(format!("its {what} is not valid: {e}")))
    }

    /// The stored checksum, compared with what was read.
    fn finish(mut self) -> Result<String, BackupError> {
        if self.left != 0 {
            return Err(self.corrupt(format!("{} unexpected bytes after the manifest", self.left)));
        }
        let mut stored = [0u8; 32];
        self.inner
            .read_exact(&mut stored)
            .map_err(|e| match e.kind() {
                io::ErrorKind::UnexpectedEof => self.corrupt("it ends early (truncated)"),
                _ => io_err(&self.path)(e),
            })?;
        let computed = self.hash.clone().finalize();
        if computed.as_slice() != stored {
            return Err(self.corrupt(
                "the checksum does not match its contents (the file was changed or damaged)",
            ));
        }
        Ok(format!("{computed:x}"))
    }
}

/// Reads every record of the backup at `path`, in order, handing each
/// physical key and value to `visit`; checks the header, the key order,
/// the table ids, the counts against the manifest and the checksum. Nothing
/// `visit` did can be trusted until this returns `Ok`.
pub fn read(
    path: &Path,
    mut visit: impl FnMut(&[u8], &[u8]) -> Result<(), BackupError>,
) -> Result<Summary, BackupError> {
    let bytes = std::fs::metadata(path).map_err(io_err(path))?.len();
    let mut r = Reader::open(path)?;
    let header: Header = r.json("header")?;
    if header.format != FORMAT {
        return Err(BackupError::Refused(format!(
            "{} has backup format {}; this kobo reads format {FORMAT}",
            path.display(),
            header.format
        )));
    }
    // Refusals that read the file's contents wait for the checksum: a
    // damaged file is reported as damaged, not as something it is not.
    let mut refusal = None;
    if header.schema_version > SCHEMA_VERSION {
        refusal = Some(format!(
            "{} holds a store of schema version {} (kobo {}); this kobo knows version {SCHEMA_VERSION}: restore it with that kobo or a later one",
            path.display(),
            header.schema_version,
            header.kobo_version
        ));
    }
    let mut counts: BTreeMap<u8, u64> = BTreeMap::new();
    let mut records = 0u64;
    let (mut key, mut value, mut previous) = (Vec::new(), Vec::new(), Vec::<u8>::new());
    loop {
        match r.byte()? {
            END => break,
            RECORD => {}
            other => return Err(r.corrupt(format!("unexpected record tag {other}"))),
        }
        let n = r.len()?;
        r.take_into(&mut key, n)?;
        let n = r.len()?;
        r.take_into(&mut value, n)?;
        if key.is_empty() || (records > 0 && key <= previous) {
            return Err(r.corrupt("its keys are not in order"));
        }
        let id = key[0];
        *counts.entry(id).or_default() += 1;
        records += 1;
        if !Table::ALL.iter().any(|t| t.id() == id) {
            refusal.get_or_insert_with(|| {
                format!(
                    "{} holds table id {id}, unknown to this kobo (a backup of a later kobo?)",
                    path.display()
                )
            });
        } else if refusal.is_none() {
            visit(&key, &value)?;
        }
        std::mem::swap(&mut previous, &mut key);
    }
    let manifest: Manifest = r.json("manifest")?;
    let checksum = r.finish()?;
    let same_header = manifest.format == header.format
        && manifest.kobo_version == header.kobo_version
        && manifest.schema_version == header.schema_version
        && manifest.created_at == header.created_at;
    let corrupt = |why: &str| BackupError::Corrupt {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    if !same_header {
        return Err(corrupt("its header and manifest disagree"));
    }
    if manifest.records != records || manifest.tables != table_counts(&counts) {
        return Err(corrupt(
            "its manifest's counts differ from the records it holds (incomplete?)",
        ));
    }
    if let Some(why) = refusal {
        return Err(BackupError::Refused(why));
    }
    Ok(Summary {
        path: path.to_path_buf(),
        bytes,
        checksum,
        manifest,
    })
}

/// Checks the backup at `path` whole (checksum, structure, counts) without
/// writing anything.
pub fn verify(path: &Path) -> Result<Summary, BackupError> {
    read(path, |_, _| Ok(()))
}

/// A restore written but not yet made the store: [`Restoring::store`] is
/// open on the new file (for a last batch, such as an audit entry), and
/// [`Restoring::finish`] makes it `kobo.redb`. Dropped unfinished, it
/// removes its file.
pub struct Restoring {
    store: Option<Store>,
    temp: PathBuf,
    target: PathBuf,
    pub summary: Summary,
}

impl Restoring {
    pub fn store(&self) -> &Store {
        self.store.as_ref().expect("open until finished")
    }

    /// Closes the new store, syncs it, and links it as the directory's
    /// `kobo.redb` (never over an existing one).
    pub fn finish(mut self) -> Result<Summary, BackupError> {
        let store = self.store.take().expect("finished once");
        let db = match store.engine {
            crate::Engine::Redb {
                db, snapshot, keys, ..
            } => {
                // No read transaction may outlive the database's close.
                snapshot.release();
                keys.stop_reading_ahead();
                db
            }
            crate::Engine::Postgres(_) => unreachable!("a restore writes a redb file"),
        };
        let db = Arc::try_unwrap(db).map_err(|_| {
            BackupError::Refused("the restored store is still in use; cannot finish".into())
        })?;
        // Closing checkpoints the journals into the file.
        drop(db);
        File::open(&self.temp)
            .and_then(|f| f.sync_all())
            .map_err(io_err(&self.temp))?;
        crate::remove_journals(&self.temp).map_err(io_err(&self.temp))?;
        publish(&self.temp, &self.target)?;
        Ok(self.summary.clone())
    }
}

impl Drop for Restoring {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            drop(store);
            let _ = std::fs::remove_file(&self.temp);
            let _ = crate::remove_journals(&self.temp);
        }
    }
}

/// Restores the backup at `path` into `dir`, which must hold no store (and
/// no interrupted restore). The file is checked whole first (nothing is
/// written for a corrupt or incomplete one), then written into a new redb
/// file in large transactions while its checksum is computed again.
pub fn restore(path: &Path, dir: &Path, cache_bytes: usize) -> Result<Restoring, BackupError> {
    let checked = verify(path)?;
    let target = dir.join(STORE_FILE);
    let temp = dir.join(RESTORING_FILE);
    if target.exists() {
        return Err(BackupError::Refused(format!(
            "{} already holds a store ({}); restore into an empty directory",
            dir.display(),
            target.display()
        )));
    }
    if temp.exists() {
        return Err(BackupError::Refused(format!(
            "{} is left from an interrupted restore; remove it and restore again",
            temp.display()
        )));
    }
    crate::forget_orphan_journals(&temp).map_err(io_err(dir))?;
    crate::create_private(dir, &temp).map_err(io_err(dir))?;
    let store = match Store::open_file(&temp, cache_bytes) {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            return Err(e.into());
        }
    };
    let mut restoring = Restoring {
        store: Some(store),
        temp,
        target,
        summary: checked.clone(),
    };
    let summary = load(restoring.store(), path)?;
    if summary.checksum != checked.checksum {
        return Err(BackupError::Corrupt {
            path: path.to_path_buf(),
            why: "it changed while it was being restored".into(),
        });
    }
    restoring.summary = summary;
    Ok(restoring)
}

/// Writes every record of the backup into `store`, in transactions of about
/// [`RESTORE_TXN_BYTES`]; the last commit is durable (and makes the earlier
/// ones so).
fn load(store: &Store, path: &Path) -> Result<Summary, BackupError> {
    let mut pending: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut pending_bytes = 0usize;
    let flush = |pending: &mut Vec<(Vec<u8>, Vec<u8>)>, durability| -> Result<(), BackupError> {
        let (db, keys) = store.redb_with_keys()?;
        let mut txn = db.begin_write().map_err(redb_err)?;
        txn.set_durability(durability).map_err(redb_err)?;
        let published = {
            let mut trees = WriteTrees::new(&txn, keys.clone()).map_err(redb_err)?;
            for (k, v) in pending.drain(..) {
                trees.restore_row(&k, &v).map_err(redb_err)?;
            }
            trees.published().map_err(redb_err)?
        };
        txn.commit().map_err(redb_err)?;
        published.done();
        Ok(())
    };
    let summary = read(path, |k, v| {
        pending_bytes += k.len() + v.len();
        pending.push((k.to_vec(), v.to_vec()));
        if pending_bytes >= RESTORE_TXN_BYTES {
            flush(&mut pending, Durability::None)?;
            pending_bytes = 0;
        }
        Ok(())
    })?;
    flush(&mut pending, Durability::Immediate)?;
    // The restored idempotency keys as sorted runs, not a log replayed at
    // every open.
    let (db, keys) = store.redb_with_keys()?;
    keys.settle(db).map_err(redb_err)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Batch, WriterMetrics};

    fn info() -> BackupInfo {
        BackupInfo {
            kobo_version: "0.1.0".into(),
            created_at: "2025-01-01T00:00:00Z".into(),
        }
    }

    async fn filled(dir: &Path, n: u64) -> Store {
        let store = Store::open(dir).unwrap();
        let writer = store.start_writer(WriterMetrics::new());
        let mut b = Batch::new();
        for i in 0..n {
            b.put_raw(Table::Events, i.to_be_bytes().to_vec(), vec![7; 100])
                .note_seq(i + 1);
        }
        writer.commit(b).await.unwrap();
        store
    }

    #[tokio::test]
    async fn a_backup_restores_to_the_same_keys_and_values() {
        let src = tempfile::tempdir().unwrap();
        let store = filled(src.path(), 1000).await;
        let out = src.path().join("b.kobo-backup");
        let written = write(&store, &out, &info()).unwrap();
        assert_eq!(written.manifest.tables["events"], 1000);
        assert_eq!(written.manifest.seq_high_water, 1000);
        assert_eq!(verify(&out).unwrap().checksum, written.checksum);
        let dst = tempfile::tempdir().unwrap();
        let target = dst.path().join("data");
        let restored = restore(&out, &target, 1 << 24).unwrap().finish().unwrap();
        assert_eq!(restored.manifest, written.manifest);
        let back = Store::open_existing(&target, 1 << 24).unwrap();
        let r = back.read().unwrap();
        let mut n = 0;
        r.scan_prefix(Table::Events, &[], None, |_, v| {
            assert_eq!(v, &[7; 100][..]);
            n += 1;
            Ok(true)
        })
        .unwrap();
        assert_eq!(n, 1000);
        assert!(!target.join(RESTORING_FILE).exists());
        // Never over an existing backup, never into a directory with a store.
        assert!(matches!(
            write(&store, &out, &info()),
            Err(BackupError::Refused(_))
        ));
        drop(r);
        drop(back);
        assert!(matches!(
            restore(&out, &target, 1 << 24),
            Err(BackupError::Refused(_))
        ));
    }

    #[tokio::test]
    async fn a_damaged_or_truncated_backup_is_refused_before_anything_is_written() {
        let src = tempfile::tempdir().unwrap();
        let store = filled(src.path(), 50).await;
        let out = src.path().join("b.kobo-backup");
        write(&store, &out, &info()).unwrap();
        let good = std::fs::read(&out).unwrap();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("flipped", {
                let mut b = good.clone();
                let at = b.len() / 2;
                b[at] ^= 0x40;
                b
            }),
            ("truncated", good[..good.len() - 100].to_vec()),
            ("short", good[..20].to_vec()),
            ("extended", [good.clone(), vec![0; 10]].concat()),
        ];
        for (name, bytes) in cases {
            let bad = src.path().join(name);
            std::fs::write(&bad, bytes).unwrap();
            let dst = tempfile::tempdir().unwrap();
            let target = dst.path().join("data");
            match restore(&bad, &target, 1 << 24) {
                Err(BackupError::Corrupt { .. }) => {}
                Err(e) => panic!("{name}: {e}"),
                Ok(_) => panic!("{name}: restored"),
            }
            assert!(!target.exists(), "{name}: wrote into the directory");
        }
    }
}
