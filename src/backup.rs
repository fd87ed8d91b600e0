//! Backups as the operator sees them: file names, the answer of `POST
//! /admin/v1/backups` and `kobo backup`, and their audit entries. The file
//! format and the snapshot are the store's (`kobo_storage::backup`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};

use kobo_actors::audit::{AuditAction, Record};
use kobo_storage::backup::{self, BackupInfo, Summary};
use kobo_storage::Store;

/// The ending of backup files kobo names.
pub const EXTENSION: &str = "kobo-backup";

/// The name `POST /admin/v1/backups` gives a backup made at `now`:
/// `kobo-YYYYMMDDTHHMMSSZ-<8 random>.kobo-backup` (sorts by time; never
/// collides with another one of the same second).
pub fn file_name(now: DateTime<Utc>) -> String {
    format!(
        "kobo-{}-{}.{EXTENSION}",
        now.format("%Y%m%dT%H%M%SZ"),
        kobo_actors::ids::random_base62(8)
    )
}

/// What a backup file says about its maker.
pub fn info(now: DateTime<Utc>) -> BackupInfo {
    BackupInfo {
        kobo_version: env!("CARGO_PKG_VERSION").to_string(),
        created_at: now.to_rfc3339_opts(SecondsFormat::Micros, true),
    }
}

/// Creates `dir` (mode 0700) when missing: backups hold the store's
/// secrets.
pub fn private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating the backup directory {}", dir.display()))
}

/// [`write_into`] on a thread of its own at the lowest CPU priority (nice
/// 19): on a busy machine the request threads and the store writer run
/// first, and the backup takes the time that is left (docs/performance.md,
/// "Backups"). The snapshot is the store as of the moment the thread
/// starts reading.
pub async fn write_in_background(
    store: Store,
    dir: PathBuf,
    now: DateTime<Utc>,
) -> Result<Summary> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("kobo-backup".into())
        .spawn(move || {
            lowest_priority();
            let _ = tx.send(write_into(&store, &dir, now));
        })
        .context("starting the backup thread")?;
    rx.await.context("the backup thread stopped")?
}

/// Gives the calling thread the lowest CPU priority. Linux's
/// setpriority(2) on a thread id changes that thread only.
fn lowest_priority() {
    // SAFETY: plain system calls on the calling thread's own id; failure
    // (no permission to lower, which never happens) only keeps the default.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19);
    }
}

/// A backup of `store` into `dir` under a new name.
pub fn write_into(store: &Store, dir: &Path, now: DateTime<Utc>) -> Result<Summary> {
    private_dir(dir)?;
    let out: PathBuf = dir.join(file_name(now));
    Ok(backup::write(store, &out, &info(now))?)
}

fn file_of(summary: &Summary) -> String {
    summary
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The answer to a backup: `object: backup`, the file, its size, checksum
/// and manifest.
pub fn view(summary: &Summary) -> Value {
    json!({
        "object": "backup",
        "file": file_of(summary),
        "path": summary.path.display().to_string(),
        "bytes": summary.bytes,
        "checksum": summary.checksum,
        "manifest": summary.manifest,
    })
}

/// The audit entry of a backup (its manifest digested, its file and
/// checksum in `detail`).
pub fn audit_record(summary: &Summary) -> Record {
    Record::new(AuditAction::BackupCreated, "backup", file_of(summary))
        .after(json!({ "checksum": summary.checksum, "manifest": summary.manifest }))
        .detail(json!({
            "file": file_of(summary),
            "bytes": summary.bytes,
            "checksum": summary.checksum,
            "seq_high_water": summary.manifest.seq_high_water,
        }))
}

/// The audit entry of a restore, written into the restored store.
pub fn restore_record(summary: &Summary) -> Record {
    Record::new(AuditAction::StoreRestored, "store", file_of(summary))
        .after(json!({ "checksum": summary.checksum, "manifest": summary.manifest }))
        .detail(json!({
            "file": file_of(summary),
            "checksum": summary.checksum,
            "backup_created_at": summary.manifest.created_at,
            "seq_high_water": summary.manifest.seq_high_water,
        }))
}
