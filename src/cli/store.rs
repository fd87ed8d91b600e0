//! The offline store commands, run on the host against a data directory no
//! server holds (or a backup file): `kobo backup`, `kobo restore`, `kobo
//! check`. A running server's store is locked; its backups come from `POST
//! /admin/v1/backups` (`kobo admin backup`).
//!
//! With a PostgreSQL store (`--store postgres://...`): `kobo check` reads
//! the database through one snapshot (a running server may keep writing);
//! `kobo migrate` brings its schema to this kobo's version; backups and
//! restores are PostgreSQL's own (pg_dump, pg_basebackup), and `kobo
//! backup` / `kobo restore` say so.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use chrono::{DateTime, Utc};

use kobo_actors::audit::{Audit, Record};
use kobo_actors::check::Report;
use kobo_actors::clock::{from_micros, micros};
use kobo_actors::timers::META_MANUAL_CLOCK;
use kobo_storage::backup::{self, RESTORING_FILE};
use kobo_storage::writer::{u64_from, META_SEQ_HIGH_WATER};
use kobo_storage::{Batch, Store, StoreError, StoreSpec, Table, STORE_FILE};

/// The page cache of an offline command.
const CACHE_BYTES: usize = 256 << 20;

/// The files kobo keeps beside the store, outside it (never in a backup):
/// a restore may find them already in place, and `--keys-from` copies them.
pub const KEY_FILES: &[&str] = &[
    crate::api::cards::FINGERPRINT_KEY_FILE,
    crate::checkout::CHECKOUT_KEY_FILE,
    crate::checkout::forms::FORM_KEY_FILE,
    crate::server::ADMIN_TOKEN_FILE,
];

#[derive(clap::Args, Debug, Clone)]
pub struct BackupArgs {
    /// The data directory of a stopped server (a running server's store is
    /// locked: use `kobo admin backup`).
    #[arg(long, env = "KOBO_DATA", default_value = "./data")]
    pub data: PathBuf,
    /// The backup file to write (never overwritten).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Refused unless `redb`: a PostgreSQL store is backed up with
    /// PostgreSQL's own tools.
    #[arg(long, env = "KOBO_STORE", value_name = "URL")]
    pub store: Option<String>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct RestoreArgs {
    /// The backup file.
    #[arg(long, value_name = "FILE")]
    pub from: PathBuf,
    /// The data directory to restore into: missing or empty (kobo's key
    /// files, and nothing else, may already be there).
    #[arg(long)]
    pub data: PathBuf,
    /// Copy kobo's key files (card-fingerprint-key, checkout-credential-key,
    /// sandbox-form-key, admin-token) from this directory: the old data
    /// directory or where they are kept apart from backups.
    #[arg(long, value_name = "DIR")]
    pub keys_from: Option<PathBuf>,
    /// Refused unless `redb`: a PostgreSQL store is restored with
    /// PostgreSQL's own tools.
    #[arg(long, env = "KOBO_STORE", value_name = "URL")]
    pub store: Option<String>,
}

#[derive(clap::Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["data", "from", "store"])))]
pub struct CheckArgs {
    /// A PostgreSQL store (`postgres://...`), checked through one snapshot
    /// (a server may be running on it).
    #[arg(long, env = "KOBO_STORE", value_name = "URL")]
    pub store: Option<String>,
    /// The data directory of a stopped server.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// A backup file (checked whole, restored into a scratch directory,
    /// then checked).
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Where `--from` restores to (default: the system's temporary
    /// directory); removed afterwards.
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// Instead of the checks, print what each table of `--data` holds: rows,
    /// key and value bytes, and values by codec version (JSON = 1, compact
    /// = 2 and 3; a saved response's own layout counts in neither); one line per
    /// table (scripts/store_bytes.sh reads them).
    #[arg(long, requires = "data")]
    pub sizes: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct MigrateArgs {
    /// The PostgreSQL store (`postgres://...`). The embedded store needs no
    /// command: it is brought up to date when a server opens it.
    #[arg(long, env = "KOBO_STORE", value_name = "URL")]
    pub store: String,
}

/// Refuses `kobo backup` / `kobo restore` on a PostgreSQL store.
fn embedded_only(store: Option<&str>, command: &str) -> Result<()> {
    match StoreSpec::from_option(store)? {
        StoreSpec::Redb => Ok(()),
        StoreSpec::Postgres(_) => bail!(
            "`kobo {command}` works on the embedded store's files; a PostgreSQL store is backed up and restored with PostgreSQL's own tools (pg_dump and pg_restore, or pg_basebackup with WAL archiving for point-in-time recovery; docs/operations.md)"
        ),
    }
}

/// `kobo migrate --store URL`: creates or upgrades the database's schema.
pub fn migrate(args: MigrateArgs) -> Result<()> {
    let StoreSpec::Postgres(url) = StoreSpec::parse(&args.store)? else {
        bail!(
            "the embedded store needs no migration: a server brings it up to date when it opens it"
        );
    };
    let (from, to) = kobo_storage::pg::migrate(&url)?;
    if from == to {
        println!("kobo migrate: the schema is at version {to}; nothing to do");
    } else {
        println!("kobo migrate: schema version {from} -> {to}");
    }
    Ok(())
}

/// Opens the store of a stopped server, explaining a locked one.
fn open_offline(data: &Path, what: &str) -> Result<Store> {
    match Store::open_existing(data, CACHE_BYTES) {
        Ok(s) => Ok(s),
        Err(StoreError::Locked(_)) => bail!(
            "the data directory {} is in use by a running kobo (its store is locked); {what}",
            data.display()
        ),
        Err(e) => Err(e).with_context(|| format!("opening the store in {}", data.display())),
    }
}

/// The time an offline command stamps its audit entry with: now, or the
/// store's manual clock when that is later (so the entry sorts after
/// everything the store recorded).
fn stamp(store: &Store) -> Result<DateTime<Utc>> {
    let now = from_micros(Utc::now().timestamp_micros());
    let manual = store
        .read()?
        .get(Table::Meta, META_MANUAL_CLOCK)?
        .map(|v| from_micros(u64_from(&v) as i64));
    Ok(manual.map_or(now, |m| m.max(now)))
}

/// Commits `record` into `store` as a host command's audit entry.
fn record_offline(store: &Store, command: &'static str, record: Record) -> Result<()> {
    let seq = store
        .read()?
        .get(Table::Meta, META_SEQ_HIGH_WATER)?
        .map(|v| u64_from(&v))
        .unwrap_or(0)
        + 1;
    let mut batch = Batch::new();
    Audit::command(command).add_at(&mut batch, record, seq, stamp(store)?);
    store.apply(&batch)?;
    Ok(())
}

/// `kobo backup --data DIR --out FILE`.
pub fn backup(args: BackupArgs) -> Result<()> {
    embedded_only(args.store.as_deref(), "backup")?;
    let store = open_offline(
        &args.data,
        "ask that server for a backup instead: `kobo admin backup` (POST /admin/v1/backups)",
    )?;
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::backup::private_dir(dir)?;
    }
    let now = stamp(&store)?;
    let summary = backup::write(&store, &args.out, &crate::backup::info(now))?;
    record_offline(&store, "kobo backup", crate::backup::audit_record(&summary))
        .context("the backup is complete, but its audit entry was not recorded")?;
    println!(
        "{}",
        serde_json::to_string_pretty(&crate::backup::view(&summary))?
    );
    Ok(())
}

/// Refuses a directory that holds anything but kobo's key files.
fn check_empty(data: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(data) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", data.display())),
    };
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name == STORE_FILE {
            bail!(
                "{} already holds a store ({STORE_FILE}); restore into an empty directory",
                data.display()
            );
        }
        if name == RESTORING_FILE {
            bail!(
                "{} holds {RESTORING_FILE}, left by an interrupted restore; remove it and restore again",
                data.display()
            );
        }
        if !KEY_FILES.contains(&name.as_str()) {
            bail!(
                "{} is not empty (it holds {name}); restore into an empty directory",
                data.display()
            );
        }
    }
    Ok(())
}

/// Copies kobo's key files from `from` into `data` (mode 0600), never
/// replacing a different one already there.
fn copy_keys(from: &Path, data: &Path) -> Result<Vec<&'static str>> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    crate::backup::private_dir(data)?;
    let mut copied = Vec::new();
    for name in KEY_FILES {
        let src = from.join(name);
        let Ok(bytes) = std::fs::read(&src) else {
            continue;
        };
        let dest = data.join(name);
        if let Ok(existing) = std::fs::read(&dest) {
            if existing != bytes {
                bail!(
                    "{} differs from {}; remove one of them",
                    dest.display(),
                    src.display()
                );
            }
            continue;
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&dest)
            .with_context(|| format!("creating {}", dest.display()))?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        copied.push(*name);
    }
    Ok(copied)
}

/// `kobo restore --from FILE --data DIR [--keys-from DIR]`.
pub fn restore(args: RestoreArgs) -> Result<()> {
    embedded_only(args.store.as_deref(), "restore")?;
    check_empty(&args.data)?;
    let restoring = backup::restore(&args.from, &args.data, CACHE_BYTES)?;
    record_offline(
        restoring.store(),
        "kobo restore",
        crate::backup::restore_record(&restoring.summary),
    )?;
    let summary = restoring.finish()?;
    let copied = match &args.keys_from {
        Some(from) => copy_keys(from, &args.data)?,
        None => Vec::new(),
    };
    let mut view = crate::backup::view(&summary);
    view["object"] = "restore".into();
    view["data"] = args.data.display().to_string().into();
    view["key_files_copied"] = copied.into();
    println!("{}", serde_json::to_string_pretty(&view)?);
    if args.keys_from.is_none() {
        let missing: Vec<_> = KEY_FILES
            .iter()
            .filter(|f| !args.data.join(f).exists())
            .collect();
        if !missing.is_empty() {
            eprintln!(
                "kobo: note: {} not in {} (backups never hold them); without the old ones, `kobo serve` makes new ones: replays of card requests and open checkout links of the old server stop matching. Copy them from where they are kept (--keys-from).",
                missing.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "),
                args.data.display()
            );
        }
    }
    Ok(())
}

/// `kobo check`: 0 clean, 1 breaches, 2 the check could not run.
pub fn check(args: CheckArgs) -> i32 {
    if args.sizes {
        return super::sync(print_sizes(&args));
    }
    match check_inner(&args) {
        Ok(report) if report.is_clean() => 0,
        Ok(_) => 1,
        Err(e) => {
            eprintln!("kobo: {e:#}");
            2
        }
    }
}

fn check_inner(args: &CheckArgs) -> Result<Report> {
    if let Some(spec) = &args.store {
        if let StoreSpec::Postgres(url) = StoreSpec::parse(spec)? {
            let store = Store::connect_read_only(&url)?;
            let report = kobo_actors::check::check(&store)?;
            print_report(&kobo_storage::pg::redact(&url), &report);
            return Ok(report);
        }
    }
    match (&args.data, &args.from) {
        (Some(data), _) => {
            let store = open_offline(
                data,
                "check a backup of it instead: `kobo admin backup`, then `kobo check --from FILE`",
            )?;
            let report = kobo_actors::check::check(&store)?;
            print_report(&data.display().to_string(), &report);
            Ok(report)
        }
        (None, Some(file)) => {
            let base = args.scratch.clone().unwrap_or_else(std::env::temp_dir);
            let scratch = base.join(format!(
                "kobo-check-{}-{}",
                std::process::id(),
                micros(Utc::now())
            ));
            let result = (|| {
                let restoring = backup::restore(file, &scratch, CACHE_BYTES)?;
                let report = kobo_actors::check::check(restoring.store())?;
                print_report(
                    &format!(
                        "{} (backup of {}, checksum {})",
                        file.display(),
                        restoring.summary.manifest.created_at,
                        restoring.summary.checksum
                    ),
                    &report,
                );
                Ok(report)
            })();
            let _ = std::fs::remove_dir_all(&scratch);
            result
        }
        (None, None) => bail!("give --data DIR, --from FILE or --store URL"),
    }
}

/// `kobo check --sizes`: one line per table holding rows.
fn print_sizes(args: &CheckArgs) -> Result<()> {
    let data = args.data.as_deref().context("--sizes needs --data")?;
    let store = open_offline(data, "stop the server first")?;
    let sizes = store.read()?.table_sizes()?;
    println!(
        "{:<34} {:>10} {:>12} {:>14} {:>9} {:>9}",
        "table", "rows", "key_bytes", "value_bytes", "json", "compact"
    );
    for s in sizes {
        println!(
            "{:<34} {:>10} {:>12} {:>14} {:>9} {:>9}",
            s.table,
            s.rows,
            s.key_bytes,
            s.value_bytes,
            s.by_format[1],
            s.by_format[2] + s.by_format[3]
        );
    }
    let p = store.page_stats()?;
    println!(
        "# pages: {} allocated of {} bytes ({} leaf, {} branch, tree height {}); stored {} bytes, metadata {} bytes, fragmented {} bytes; file {} bytes",
        p.allocated_pages,
        p.page_size,
        p.leaf_pages,
        p.branch_pages,
        p.tree_height,
        p.stored_bytes,
        p.metadata_bytes,
        p.fragmented_bytes,
        store
            .path()
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len())
    );
    Ok(())
}

fn print_report(what: &str, report: &Report) {
    println!(
        "kobo check: {what} (sequence high-water mark {})",
        report.seq_high_water
    );
    for s in &report.sections {
        let status = if s.found == 0 { "ok" } else { "BREACH" };
        println!(
            "  {status:<7} {:<18} {:>10} rows  {}",
            s.name, s.examined, s.what
        );
    }
    for s in &report.sections {
        for b in &s.breaches {
            println!("BREACH {}: {b}", s.name);
        }
        if s.found > s.breaches.len() as u64 {
            println!(
                "BREACH {}: ... and {} more",
                s.name,
                s.found - s.breaches.len() as u64
            );
        }
    }
    let failed = report.sections.iter().filter(|s| s.found > 0).count();
    if failed == 0 {
        println!(
            "kobo check: clean ({} checks passed)",
            report.sections.len()
        );
    } else {
        println!(
            "kobo check: {} breaches in {failed} of {} checks",
            report.breaches(),
            report.sections.len()
        );
    }
}
