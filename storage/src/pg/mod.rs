//! The PostgreSQL engine of the store (`--store postgres://...`).
//!
//! One table, `kobo_kv (k bytea PRIMARY KEY, v bytea NOT NULL)`, mirrors
//! redb's one physical table: the same physical keys (a table's id byte,
//! then its key), the same encoded values. bytea compares bytewise, so key
//! order, prefix scans and their direction are the embedded store's.
//!
//! - [`PgStore::open`]: connects the writer's connection, creates or
//!   migrates the schema ([`schema`]), and takes the database's writer lock
//!   (a session advisory lock held by that connection for the life of the
//!   process): one kobo writes a database at a time, as one holds a redb
//!   file. A cluster node ([`Mode::Cluster`]) takes the same lock SHARED:
//!   any number of nodes write together, and a single-process kobo and
//!   cluster nodes never mix on one database.
//! - The group commit ([`commit`]): one transaction per group of batches.
//! - The cluster's membership, leases and sequence blocks ([`lease`]).
//! - Reads ([`Snapshot`]): a REPEATABLE READ READ ONLY transaction on a
//!   pooled connection, one snapshot for every `get` and scan of a
//!   [`crate::ReadTxn`]; its BEGIN rides with the first read.
//!
//! Connections use TLS as the URL's `sslmode` and `sslrootcert` say
//! (libpq's meanings; [`tls`]).
//!
//! Every connection is driven by tokio-postgres on one small runtime of
//! this module's own ([`runtime`]). Callers are synchronous (actor threads
//! that are themselves inside actix's runtimes, where blocking on another
//! runtime's `block_on` panics), so a call hands its future to that runtime
//! and waits on a plain channel ([`call`]).

pub mod cluster;
mod commit;
pub mod lease;
#[cfg(test)]
mod lease_tests;
pub mod schema;
pub mod tls;
#[cfg(test)]
mod tls_tests;

use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};

use tokio_postgres::{Client, NoTls, Statement};

use tls::Target;

use crate::writer::Submission;
use crate::{Batch, CommitError, StoreError};

/// The advisory lock a writing kobo holds on its database (session level,
/// on the writer's connection): exclusive for a single process, shared by
/// cluster nodes.
const WRITER_LOCK: i64 = 0x6b6f_626f_0001;

/// How long [`PgStore::open`] waits for the writer lock: a kobo killed a
/// moment ago lets go of it when PostgreSQL notices its connection closed.
const WRITER_LOCK_WAIT: &str = "5s";

/// How long a cluster node's writer (or lease) session may sit inside a
/// transaction without sending anything before the server ends it: far
/// longer than a group commit's planning, shorter than a lease.
const PAUSED_SESSION_TIMEOUT: &str = "3s";

/// How long a lease operation waits for a row lock.
const LEASE_LOCK_TIMEOUT: &str = "2s";

/// Idle read connections kept for reuse.
const MAX_IDLE_READERS: usize = 16;

/// The first page of a scan; later pages grow fourfold up to
/// [`MAX_SCAN_PAGE`] (most scans stop after a list page or one row).
const FIRST_SCAN_PAGE: i64 = 32;
const MAX_SCAN_PAGE: i64 = 2048;

/// The runtime every PostgreSQL connection of the process runs on. Never
/// dropped (a runtime may not be dropped inside another's context, and
/// stores are dropped there).
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kobo-postgres")
            .enable_all()
            .build()
            .expect("start the PostgreSQL runtime")
    })
}

/// Runs `fut` on [`runtime`] and blocks the calling thread (any thread,
/// inside another runtime or not, but never one of [`runtime`]'s own) until
/// it is done.
pub(crate) fn call<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime().spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().expect("the PostgreSQL runtime runs every call")
}

/// Polls `fut` to completion on the calling thread (parking it between
/// wake-ups). For futures of an existing connection's client, which need
/// no runtime of their own: the connection's driver task on [`runtime`]
/// does the I/O and wakes this thread. Saves [`call`]'s two hand-overs on
/// every read.
fn block_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let std::task::Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

/// The statement that opens a read snapshot.
const BEGIN_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// A PostgreSQL error with its SQLSTATE and the server's message.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => {
            let mut s = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(inner) = source {
                s.push_str(": ");
                s.push_str(&inner.to_string());
                source = inner.source();
            }
            s
        }
    }
}

pub(crate) fn pg_err(e: tokio_postgres::Error) -> StoreError {
    StoreError::Postgres(describe(&e))
}

/// `url` with its password (if any) replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match (authority.rfind('@'), authority.find(':')) {
        (Some(at), Some(colon)) if colon < at => format!(
            "{}{}:***{}",
            &url[..scheme_end + 3],
            &authority[..colon],
            &rest[at..]
        ),
        _ => url.to_string(),
    }
}

fn target(url: &str) -> Result<Target, StoreError> {
    Target::parse(url)
}

/// Opens one connection (its driver spawned on [`runtime`]), with TLS as
/// the target's `sslmode` says.
async fn connect(target: Target) -> Result<Client, StoreError> {
    fn drive<F>(connection: F)
    where
        F: Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
    {
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %describe(&e), "a PostgreSQL connection closed");
            }
        });
    }
    let Target {
        config, tls, mode, ..
    } = target;
    let refused = |e: tokio_postgres::Error| {
        let mut message = describe(&e);
        if message.contains("TLS") {
            message = format!("TLS to PostgreSQL (sslmode={}): {message}", mode.as_str());
        }
        if message.contains("pg_hba.conf") && message.contains("no encryption") {
            message.push_str(
                " (the server accepts this client only over TLS: sslmode=disable forbids it)",
            );
        }
        StoreError::Postgres(message)
    };
    match tls {
        None => {
            let (client, connection) = config.connect(NoTls).await.map_err(refused)?;
            drive(connection);
            Ok(client)
        }
        Some(tls) => {
            let (client, connection) = config.connect(tls).await.map_err(refused)?;
            drive(connection);
            Ok(client)
        }
    }
}

/// How a store writes its database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The only writer (the writer lock exclusive): `kobo serve --store`.
    Single,
    /// One of several nodes (the writer lock shared): `--cluster`.
    Cluster,
}

/// The writer's connection and its statements.
pub(crate) struct WriterConn {
    client: Client,
    mode: Mode,
    select: Statement,
    upsert: Statement,
    delete: Statement,
    /// Cluster mode: transaction advisory locks on the read set's keys.
    lock_keys: Statement,
    /// The lease rows of the group's fences, `FOR SHARE`.
    fences: Statement,
}

/// A reader's connection and its statements.
struct ReadConn {
    client: Client,
    get: Statement,
    asc: Statement,
    desc: Statement,
}

/// The PostgreSQL engine of one [`crate::Store`].
pub struct PgStore {
    target: Target,
    /// Behind an async mutex: the writer thread's group commits and
    /// [`PgStore::apply`] never share the connection's transaction.
    /// `None` for a read-only store.
    writer: Option<Arc<tokio::sync::Mutex<WriterConn>>>,
    idle: Arc<Mutex<Vec<Arc<ReadConn>>>>,
    /// A cluster node's membership and leases.
    leases: Option<Arc<lease::PgLeases>>,
}

impl PgStore {
    /// Connects, migrates the schema, and takes the writer lock (exclusive,
    /// or shared for a cluster node).
    pub(crate) fn open(url: &str, mode: Mode) -> Result<PgStore, StoreError> {
        let target = target(url)?;
        target.warn_if_weak(url);
        let c = target.clone();
        let writer = call(async move {
            let client = connect(c).await?;
            schema::migrate(&client).await?;
            take_writer_lock(&client, mode).await?;
            match mode {
                // Sequence blocks start above every number noted before.
                Mode::Cluster => {
                    lease::reserve(&client, 0).await?;
                }
                // Numbers reserved by cluster nodes count as used.
                Mode::Single => raise_high_water_to_reserved(&client).await?,
            }
            // Every acknowledgement follows a durable COMMIT, whatever the
            // server's default.
            let sync: String = client
                .query_one("SHOW synchronous_commit", &[])
                .await
                .map_err(pg_err)?
                .get(0);
            if matches!(sync.as_str(), "off" | "local") {
                client
                    .batch_execute("SET synchronous_commit TO on")
                    .await
                    .map_err(pg_err)?;
            }
            if mode == Mode::Cluster {
                // A node paused (SIGSTOP, a stalled VM) inside a group
                // commit holds its lease rows FOR SHARE: the server ends
                // that session, so the takeover waits for this, not for
                // the node to wake up.
                client
                    .batch_execute(&format!(
                        "SET idle_in_transaction_session_timeout TO '{PAUSED_SESSION_TIMEOUT}'"
                    ))
                    .await
                    .map_err(pg_err)?;
            }
            let select = client
                .prepare("SELECT k, v FROM kobo_kv WHERE k = ANY($1::bytea[])")
                .await
                .map_err(pg_err)?;
            let upsert = client
                .prepare(
                    "INSERT INTO kobo_kv (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[]) \
                     ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
                )
                .await
                .map_err(pg_err)?;
            let delete = client
                .prepare("DELETE FROM kobo_kv WHERE k = ANY($1::bytea[])")
                .await
                .map_err(pg_err)?;
            let lock_keys = client
                .prepare(
                    "SELECT pg_advisory_xact_lock(h, l) FROM unnest($1::int4[], $2::int4[]) AS t(h, l)",
                )
                .await
                .map_err(pg_err)?;
            let fences = client
                .prepare(
                    "SELECT shard, token FROM kobo_leases WHERE shard = ANY($1::int4[]) \
                     ORDER BY shard FOR SHARE",
                )
                .await
                .map_err(pg_err)?;
            Ok::<_, StoreError>(WriterConn {
                client,
                mode,
                select,
                upsert,
                delete,
                lock_keys,
                fences,
            })
        })?;
        let leases = (mode == Mode::Cluster).then(|| {
            // A lease operation never waits long on a row lock (a paused
            // node's, until its session is ended): the tick fails and the
            // next one tries again.
            let mut t = target.clone();
            t.config.options(format!(
                "-c lock_timeout={LEASE_LOCK_TIMEOUT} -c idle_in_transaction_session_timeout={PAUSED_SESSION_TIMEOUT}"
            ));
            Arc::new(lease::PgLeases::new(t))
        });
        Ok(PgStore {
            target,
            writer: Some(Arc::new(tokio::sync::Mutex::new(writer))),
            idle: Arc::default(),
            leases,
        })
    }

    /// The highest sequence number cluster nodes reserved (`kobo_seq`; 0
    /// when none did): numbers up to it may be in use although the Meta
    /// high-water mark, which cluster nodes do not write, is lower.
    pub(crate) fn reserved_sequence(&self) -> Result<u64, StoreError> {
        let target = self.target.clone();
        call(async move {
            let client = connect(target).await?;
            Ok(lease::reserved_and_noted(&client).await?.0)
        })
    }

    /// A cluster node's leases (`None` for a single process).
    pub(crate) fn leases(&self) -> Option<Arc<lease::PgLeases>> {
        self.leases.clone()
    }

    /// Connects and migrates, without the writer lock or a writer.
    pub(crate) fn open_read_only(url: &str) -> Result<PgStore, StoreError> {
        let target = target(url)?;
        let c = target.clone();
        call(async move {
            let client = connect(c).await?;
            schema::migrate(&client).await
        })?;
        Ok(PgStore {
            target,
            writer: None,
            idle: Arc::default(),
            leases: None,
        })
    }

    fn writer_conn(&self) -> Result<Arc<tokio::sync::Mutex<WriterConn>>, StoreError> {
        self.writer
            .clone()
            .ok_or_else(|| StoreError::Unsupported("this store was opened for reading only".into()))
    }

    /// The writer thread's handle on the writer connection.
    pub(crate) fn writer(&self) -> PgWriter {
        PgWriter {
            conn: self
                .writer_conn()
                .expect("a writer is started on a store opened for writing"),
        }
    }

    /// Commits one batch in its own transaction (the offline tools).
    pub(crate) fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        let conn = self.writer_conn()?;
        let batch = batch.clone();
        call(async move {
            let conn = conn.lock().await;
            commit::commit(&conn, &[&batch]).await
        })
        .map_err(StoreError::Postgres)?
        .pop()
        .expect("one outcome per batch")
        .map_err(|e| StoreError::Postgres(e.to_string()))
    }

    /// A new read snapshot on an idle (or a new) connection.
    pub(crate) fn snapshot(&self) -> Result<Snapshot, StoreError> {
        let idle = self
            .idle
            .lock()
            .expect("idle readers")
            .pop()
            .filter(|c| !c.client.is_closed());
        let conn = match idle {
            Some(conn) => conn,
            None => {
                let target = self.target.clone();
                Arc::new(call(read_conn(target))?)
            }
        };
        Ok(Snapshot {
            conn: Some(conn),
            begun: std::sync::atomic::AtomicBool::new(false),
            idle: self.idle.clone(),
        })
    }
}

async fn take_writer_lock(client: &Client, mode: Mode) -> Result<(), StoreError> {
    client
        .batch_execute(&format!("SET lock_timeout = '{WRITER_LOCK_WAIT}'"))
        .await
        .map_err(pg_err)?;
    let take = match mode {
        Mode::Single => "SELECT pg_advisory_lock($1)",
        Mode::Cluster => "SELECT pg_advisory_lock_shared($1)",
    };
    let locked = client.execute(take, &[&WRITER_LOCK]).await;
    client
        .batch_execute("RESET lock_timeout")
        .await
        .map_err(pg_err)?;
    match locked {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) => {
            Err(StoreError::DatabaseLocked(match mode {
                Mode::Single => format!(
                    "its writer lock, advisory lock {WRITER_LOCK}, is held by another session: \
                     another single-process kobo, or cluster nodes (kobo serve --cluster); \
                     a single-process kobo never shares its database"
                ),
                Mode::Cluster => format!(
                    "its writer lock, advisory lock {WRITER_LOCK}, is held exclusively by a \
                     single-process kobo (kobo serve without --cluster); cluster nodes share a \
                     database only with each other"
                ),
            }))
        }
        Err(e) => Err(pg_err(e)),
    }
}

/// Raises the sequence high-water mark in Meta to the highest number
/// cluster nodes reserved (`kobo_seq`), so a single-process kobo started on
/// a database that ran as a cluster never reuses their numbers.
async fn raise_high_water_to_reserved(client: &Client) -> Result<(), StoreError> {
    let meta = crate::Table::Meta.physical(crate::writer::META_SEQ_HIGH_WATER);
    let (reserved, noted) = lease::reserved_and_noted(client).await?;
    if reserved > noted {
        client
            .execute(
                "INSERT INTO kobo_kv (k, v) VALUES ($1, $2) \
                 ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
                &[&meta, &reserved.to_be_bytes().to_vec()],
            )
            .await
            .map_err(pg_err)?;
    }
    Ok(())
}

async fn read_conn(target: Target) -> Result<ReadConn, StoreError> {
    let client = connect(target).await?;
    let get = client
        .prepare("SELECT v FROM kobo_kv WHERE k = $1")
        .await
        .map_err(pg_err)?;
    let asc = client
        .prepare("SELECT k, v FROM kobo_kv WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3")
        .await
        .map_err(pg_err)?;
    let desc = client
        .prepare("SELECT k, v FROM kobo_kv WHERE k >= $1 AND k < $2 ORDER BY k DESC LIMIT $3")
        .await
        .map_err(pg_err)?;
    Ok(ReadConn {
        client,
        get,
        asc,
        desc,
    })
}

/// The writer thread's side of the engine.
pub(crate) struct PgWriter {
    conn: Arc<tokio::sync::Mutex<WriterConn>>,
}

impl PgWriter {
    /// One transaction for the whole group (see [`commit`]). Called on the
    /// writer thread, which is no runtime's: it may block on [`runtime`].
    pub(crate) fn commit_group(
        &self,
        group: &[Submission],
    ) -> Result<Vec<Result<(), CommitError>>, String> {
        let batches: Vec<&Batch> = group.iter().map(|s| &s.batch).collect();
        hold_while_asked();
        runtime().block_on(async {
            let conn = self.conn.lock().await;
            let mut outcomes = Vec::with_capacity(batches.len());
            for run in commit::chunks(&batches, conn.mode) {
                outcomes.extend(commit::commit(&conn, run).await?);
            }
            Ok(outcomes)
        })
    }
}

/// The fault a cluster test injects to show the database's fence at work
/// (debug builds only): while the file `KOBO_TEST_HOLD_COMMITS` names
/// exists, the writer holds the group in hand, its fences already
/// stamped, before it reaches the database (and says so by creating the
/// same path with `.held` appended, removed when it lets go). The test
/// pauses the node past its leases meanwhile, removes the file and wakes
/// it: the group reaches the database with stale tokens.
fn hold_while_asked() {
    if !cfg!(debug_assertions) {
        return;
    }
    static ASKED: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let Some(path) =
        ASKED.get_or_init(|| std::env::var_os("KOBO_TEST_HOLD_COMMITS").map(Into::into))
    else {
        return;
    };
    if !path.exists() {
        return;
    }
    let mut held = path.clone().into_os_string();
    held.push(".held");
    let _ = std::fs::write(&held, b"");
    while path.exists() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _ = std::fs::remove_file(&held);
}

/// A read snapshot: an open REPEATABLE READ READ ONLY transaction on one
/// connection. Dropping it rolls the transaction back and returns the
/// connection to the idle list.
pub(crate) struct Snapshot {
    conn: Option<Arc<ReadConn>>,
    /// Whether BEGIN was sent: it goes out with the first read, in the same
    /// round trip (the snapshot is then the database as of that read,
    /// never older than [`crate::Store::read`]).
    begun: std::sync::atomic::AtomicBool,
    idle: Arc<Mutex<Vec<Arc<ReadConn>>>>,
}

impl Snapshot {
    fn conn(&self) -> &ReadConn {
        self.conn.as_deref().expect("open until dropped")
    }

    /// Runs `query` in the snapshot, sending BEGIN before it (pipelined,
    /// one round trip) on the first call.
    fn run<T>(
        &self,
        query: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, StoreError> {
        let conn = self.conn();
        if self.begun.swap(true, std::sync::atomic::Ordering::Relaxed) {
            return block_on(query).map_err(pg_err);
        }
        let (begun, result) =
            block_on(async { tokio::join!(conn.client.batch_execute(BEGIN_SNAPSHOT), query) });
        begun.map_err(pg_err)?;
        result.map_err(pg_err)
    }

    pub(crate) fn get(&self, key: Vec<u8>) -> Result<Option<Vec<u8>>, StoreError> {
        let conn = self.conn();
        let row = self.run(conn.client.query_opt(&conn.get, &[&key]))?;
        Ok(row.map(|r| r.get::<_, Vec<u8>>(0)))
    }

    /// Visits the physical keys in `[lower, upper)`, ascending or (`rev`)
    /// descending, with the table id byte stripped, page by page until the
    /// visitor returns `false` or the range ends.
    pub(crate) fn scan(
        &self,
        mut lower: Vec<u8>,
        mut upper: Vec<u8>,
        rev: bool,
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let mut page = FIRST_SCAN_PAGE;
        let conn = self.conn();
        let stmt = if rev { &conn.desc } else { &conn.asc };
        loop {
            let rows = self.run(conn.client.query(stmt, &[&lower, &upper, &page]))?;
            let full = rows.len() as i64 == page;
            let mut last = None;
            for row in rows {
                let k: &[u8] = row.get(0);
                let v: &[u8] = row.get(1);
                if !visit(&k[1..], v)? {
                    return Ok(());
                }
                last = Some(k.to_vec());
            }
            match last {
                Some(k) if full => {
                    if rev {
                        upper = k;
                    } else {
                        lower = k;
                        lower.push(0);
                    }
                }
                _ => return Ok(()),
            }
            page = (page * 4).min(MAX_SCAN_PAGE);
        }
    }
}

impl Drop for Snapshot {
    /// Ends the transaction and makes the connection idle at once: the
    /// ROLLBACK is queued on the connection here (tokio-postgres sends a
    /// request on its future's first poll, and a connection's requests go
    /// out in order), so the next snapshot's BEGIN follows it without this
    /// thread waiting for the answer; the answer is read on [`runtime`]. A
    /// connection that fails is not reused (`is_closed`).
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if !*self.begun.get_mut() {
            self.idle.lock().expect("idle readers").push(conn);
            return;
        }
        let rolling = conn.clone();
        let mut rollback = Box::pin(async move {
            let _ = rolling.client.batch_execute("ROLLBACK").await;
        });
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if rollback.as_mut().poll(&mut cx).is_pending() {
            runtime().spawn(rollback);
        }
        if !conn.client.is_closed() {
            let mut idle = self.idle.lock().expect("idle readers");
            if idle.len() < MAX_IDLE_READERS {
                idle.push(conn);
            }
        }
    }
}

/// `kobo migrate`: brings the database at `url` to this kobo's schema
/// (without taking the writer lock: a migration is its own transaction
/// under its own lock). Returns the versions before and after.
pub fn migrate(url: &str) -> Result<(i32, i32), StoreError> {
    let target = target(url)?;
    call(async move {
        let client = connect(target).await?;
        schema::migrate(&client).await
    })
}

/// Runs `sql` on the database at `url` (operators' and tests' one-off
/// statements; never on the write path).
pub fn execute(url: &str, sql: &str) -> Result<(), StoreError> {
    let target = target(url)?;
    let sql = sql.to_string();
    call(async move {
        let client = connect(target).await?;
        client.batch_execute(&sql).await.map_err(pg_err)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_a_url_is_redacted() {
        assert_eq!(
            redact("postgres://kobo:s3cret@db.internal:5432/kobo"),
            "postgres://kobo:***@db.internal:5432/kobo"
        );
        assert_eq!(
            redact("postgres://kobo@db/kobo?host=/tmp"),
            "postgres://kobo@db/kobo?host=/tmp"
        );
        assert_eq!(redact("postgresql:///kobo"), "postgresql:///kobo");
    }
}
