//! The idempotency key index on the embedded store, kept log-structured.
//!
//! `idempotency_keys` maps a client's Idempotency-Key (mostly random
//! UUIDv4s) to the expiry time of its saved response. In one B-tree every
//! save lands on a random leaf, so each commit copied one leaf and its
//! branch pages per create, and that tree's share grew with the store
//! (docs/performance.md, "the clients' random Idempotency-Keys"). Here the
//! table's writes never touch a random page:
//!
//! - **The log** (`idempotency_keys.log`): each write (a put, or a delete)
//!   is appended under `commit number | ordinal`, so new rows always come
//!   at the end of the tree. A commit that writes the table takes the next
//!   commit number.
//! - **Recent writes** in memory: every version the log holds, by key. A
//!   reader sees the versions of commits that had finished when its
//!   snapshot began ([`KeyIndex::begin_read`]), so what it reads here and
//!   in its redb snapshot are of the same moment.
//! - **Sorted runs** (`idempotency_keys.run.<id>`): immutable trees, each
//!   written in key order at once. When the recent writes reach
//!   [`FLUSH_AT`] versions, one transaction ([`KeyIndex::flush`]) writes
//!   their latest versions as a new run, empties the log, and merges the
//!   newest run into the one before it while it has at least half that
//!   one's rows (so at most ~log2(rows / FLUSH_AT) runs remain, and a row
//!   is rewritten that many times, always in key order). A delete is kept
//!   as a tombstone until a merge reaches the oldest run.
//! - **The state** (`idempotency_keys.runs`, one row): the runs, newest
//!   first, the next run's id and the last commit number folded into
//!   them.
//!
//! A lookup reads the recent writes, then the runs from the newest. A
//! flush's commit and the switch to the new runs happen while readers are
//! held from starting a snapshot ([`KeyIndex::begin_read`]), so each
//! reader's list of runs is the one its snapshot holds.
//!
//! Opening the store replays the log into memory (at most about
//! [`FLUSH_AT`] rows), and moves the rows of a store written before this
//! index (in the shared tree, in key order) into a first run.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use redb::{
    Database, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition,
    WriteTransaction,
};

use crate::prefix_end;
use crate::tables::{Def, Table, PHYSICAL};
use crate::trees::WriteTable;

/// The table kept log-structured.
pub(crate) const TABLE: Table = Table::IdempotencyKeys;

const LOG: Def = TableDefinition::new("idempotency_keys.log");
const STATE: Def = TableDefinition::new("idempotency_keys.runs");
const STATE_KEY: &[u8] = b"state";

/// Recent versions held before they are written as a run: ~64k saves
/// (about 10 MB in memory; a run of them is written in one commit).
pub(crate) const FLUSH_AT: usize = 65_536;

const PUT: u8 = 1;
const DELETE: u8 = 0;

fn run_name(id: u64) -> String {
    format!("idempotency_keys.run.{id}")
}

fn run_def(name: &str) -> TableDefinition<'_, &'static [u8], &'static [u8]> {
    TableDefinition::new(name)
}

/// A write of one commit: its number and the value (`None`: a delete).
type Version = (u64, Option<Vec<u8>>);

/// The writes the log holds, by key, each key's versions in commit order.
#[derive(Default)]
struct Recent {
    rows: BTreeMap<Vec<u8>, Vec<Version>>,
    versions: usize,
}

impl Recent {
    fn push(&mut self, key: &[u8], version: Version) {
        self.rows.entry(key.to_vec()).or_default().push(version);
        self.versions += 1;
    }

    /// The latest version of `key` among commits up to `visible`: `None`
    /// when there is none, `Some(None)` for a delete.
    fn latest(&self, key: &[u8], visible: u64) -> Option<Option<&[u8]>> {
        let versions = self.rows.get(key)?;
        versions
            .iter()
            .rev()
            .find(|(c, _)| *c <= visible)
            .map(|(_, v)| v.as_deref())
    }

    /// Removes the versions of commit `commit` (one that did not commit).
    fn retract(&mut self, commit: u64) {
        let mut removed = 0;
        self.rows.retain(|_, versions| {
            let before = versions.len();
            versions.retain(|(c, _)| *c != commit);
            removed += before - versions.len();
            !versions.is_empty()
        });
        self.versions -= removed;
    }
}

/// One sorted run: its id (its tree's name) and rows (tombstones
/// included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    id: u64,
    rows: u64,
}

/// The persisted state (the one row of `idempotency_keys.runs`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct State {
    /// Newest first.
    runs: Vec<Run>,
    next_run: u64,
    /// The last commit number whose writes are in the runs.
    flushed_through: u64,
}

impl State {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + 16 * self.runs.len());
        out.extend_from_slice(&self.flushed_through.to_be_bytes());
        out.extend_from_slice(&self.next_run.to_be_bytes());
        out.extend_from_slice(&(self.runs.len() as u32).to_be_bytes());
        for run in &self.runs {
            out.extend_from_slice(&run.id.to_be_bytes());
            out.extend_from_slice(&run.rows.to_be_bytes());
        }
        out
    }

    fn decode(bytes: &[u8]) -> Result<State, String> {
        let u64_at = |at: usize| -> Result<u64, String> {
            bytes
                .get(at..at + 8)
                .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
                .ok_or_else(|| "the idempotency key index's state is cut short".to_string())
        };
        let n = bytes
            .get(16..20)
            .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")) as usize)
            .ok_or("the idempotency key index's state is cut short")?;
        let mut runs = Vec::with_capacity(n);
        for i in 0..n {
            runs.push(Run {
                id: u64_at(20 + 16 * i)?,
                rows: u64_at(28 + 16 * i)?,
            });
        }
        Ok(State {
            flushed_through: u64_at(0)?,
            next_run: u64_at(8)?,
            runs,
        })
    }

    fn read(table: &impl ReadableTable<&'static [u8], &'static [u8]>) -> Result<State, String> {
        match table.get(STATE_KEY).map_err(|e| e.to_string())? {
            Some(v) => State::decode(v.value()),
            None => Ok(State {
                next_run: 1,
                ..State::default()
            }),
        }
    }
}

/// What readers and writers share between two flushes.
struct Generation {
    runs: Vec<Run>,
    recent: RwLock<Recent>,
}

/// The index's state in memory; one per open redb store.
pub(crate) struct KeyIndex {
    current: RwLock<Arc<Generation>>,
    /// The last commit number whose commit has finished.
    committed: AtomicU64,
    next_commit: AtomicU64,
    flush_at: AtomicUsize,
}

fn log_key(commit: u64, ordinal: u32) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..8].copy_from_slice(&commit.to_be_bytes());
    k[8..].copy_from_slice(&ordinal.to_be_bytes());
    k
}

/// A log row's value: the kind, the key's length, the key, the value.
fn log_value(key: &[u8], value: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + key.len() + value.map_or(0, <[u8]>::len));
    out.push(if value.is_some() { PUT } else { DELETE });
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value.unwrap_or_default());
    out
}

fn parse_log_value(bytes: &[u8]) -> Result<(&[u8], Option<&[u8]>), String> {
    let cut = || "an idempotency key log row is cut short".to_string();
    let kind = *bytes.first().ok_or_else(cut)?;
    let len = bytes
        .get(1..5)
        .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")) as usize)
        .ok_or_else(cut)?;
    let key = bytes.get(5..5 + len).ok_or_else(cut)?;
    let value = &bytes[5 + len..];
    Ok((key, (kind == PUT).then_some(value)))
}

/// A run row's value: the kind, then the value.
fn run_value(value: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + value.map_or(0, <[u8]>::len));
    out.push(if value.is_some() { PUT } else { DELETE });
    out.extend_from_slice(value.unwrap_or_default());
    out
}

fn parse_run_value(bytes: &[u8]) -> Option<&[u8]> {
    (bytes.first() == Some(&PUT)).then(|| &bytes[1..])
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl KeyIndex {
    /// Loads the index inside the store's opening transaction: moves the
    /// rows of a store written before it into a first run, then replays
    /// the log.
    pub(crate) fn open(txn: &WriteTransaction) -> Result<KeyIndex, String> {
        let mut state_table = txn.open_table(STATE).map_err(err)?;
        let mut state = State::read(&state_table)?;
        let log = txn.open_table(LOG).map_err(err)?;
        {
            let mut shared = txn.open_table(PHYSICAL).map_err(err)?;
            let lower = TABLE.physical(&[]);
            let upper = prefix_end(&lower);
            let moved: Vec<(Vec<u8>, Vec<u8>)> = shared
                .extract_from_if(lower.as_slice()..upper.as_slice(), |_, _| true)
                .map_err(err)?
                .map(|r| r.map(|(k, v)| (k.value().to_vec(), v.value().to_vec())))
                .collect::<Result<_, _>>()
                .map_err(err)?;
            if !moved.is_empty() {
                let id = state.next_run;
                state.next_run += 1;
                let name = run_name(id);
                let mut run = txn.open_table(run_def(&name)).map_err(err)?;
                for (k, v) in &moved {
                    run.insert(k.as_slice(), run_value(Some(v)).as_slice())
                        .map_err(err)?;
                }
                state.runs.push(Run {
                    id,
                    rows: moved.len() as u64,
                });
                state_table
                    .insert(STATE_KEY, state.encode().as_slice())
                    .map_err(err)?;
            }
        }
        let mut recent = Recent::default();
        let mut last = state.flushed_through;
        for row in log.iter().map_err(err)? {
            let (k, v) = row.map_err(err)?;
            let commit = u64::from_be_bytes(k.value()[..8].try_into().map_err(err)?);
            let (key, value) = parse_log_value(v.value())?;
            recent.push(key, (commit, value.map(<[u8]>::to_vec)));
            last = last.max(commit);
        }
        Ok(KeyIndex {
            current: RwLock::new(Arc::new(Generation {
                runs: state.runs,
                recent: RwLock::new(recent),
            })),
            committed: AtomicU64::new(last),
            next_commit: AtomicU64::new(last + 1),
            flush_at: AtomicUsize::new(FLUSH_AT),
        })
    }

    /// Sets how many recent versions make a flush (tests use small ones).
    #[cfg(test)]
    pub(crate) fn set_flush_at(&self, versions: usize) {
        self.flush_at.store(versions, Ordering::Relaxed);
    }

    /// Begins a read snapshot with the index as of the same moment: the
    /// runs its snapshot holds and the recent versions of finished
    /// commits.
    pub(crate) fn begin_read(&self, db: &Database) -> Result<(ReadTransaction, KeysRead), redb::Error> {
        let current = self.current.read().expect("key index");
        let generation = current.clone();
        let visible = self.committed.load(Ordering::Acquire);
        let txn = db.begin_read()?;
        drop(current);
        let runs = generation.runs.iter().map(|_| OnceLock::new()).collect();
        Ok((
            txn,
            KeysRead {
                generation,
                visible,
                runs,
            },
        ))
    }

    /// Whether the recent versions are due to be written as a run.
    pub(crate) fn due(&self) -> bool {
        let generation = self.current.read().expect("key index").clone();
        let versions = generation.recent.read().expect("recent keys").versions;
        versions >= self.flush_at.load(Ordering::Relaxed)
    }

    /// Writes the recent versions as a run and merges runs (see the module
    /// comment), in one durable transaction; nothing when there are none.
    /// Call between commits (it waits for any other write transaction).
    pub(crate) fn flush(&self, db: &Database) -> Result<(), String> {
        let mut txn = db.begin_write().map_err(err)?;
        txn.set_durability(redb::Durability::Immediate)
            .map_err(err)?;
        // No other write transaction runs now, so every recent version is
        // of a finished commit.
        let generation = self.current.read().expect("key index").clone();
        let (rows, through) = {
            let recent = generation.recent.read().expect("recent keys");
            if recent.versions == 0 {
                return Ok(());
            }
            let through = recent
                .rows
                .values()
                .flat_map(|v| v.iter().map(|(c, _)| *c))
                .max()
                .unwrap_or(0);
            let rows: Vec<(Vec<u8>, Vec<u8>)> = recent
                .rows
                .iter()
                .filter_map(|(k, versions)| {
                    let (_, v) = versions.last()?;
                    Some((k.clone(), run_value(v.as_deref())))
                })
                .collect();
            (rows, through)
        };
        let runs = {
            let mut state_table = txn.open_table(STATE).map_err(err)?;
            let mut state = State::read(&state_table)?;
            let id = state.next_run;
            state.next_run += 1;
            {
                let name = run_name(id);
                let mut run = txn.open_table(run_def(&name)).map_err(err)?;
                for (k, v) in &rows {
                    run.insert(k.as_slice(), v.as_slice()).map_err(err)?;
                }
            }
            state.runs.insert(
                0,
                Run {
                    id,
                    rows: rows.len() as u64,
                },
            );
            while state.runs.len() >= 2 && state.runs[0].rows * 2 >= state.runs[1].rows {
                let (newer, older) = (state.runs[0], state.runs[1]);
                let id = state.next_run;
                state.next_run += 1;
                let keep_tombstones = state.runs.len() > 2;
                let rows = merge(&txn, newer, older, id, keep_tombstones)?;
                state.runs.splice(0..2, [Run { id, rows }]);
            }
            state.flushed_through = state.flushed_through.max(through);
            state_table
                .insert(STATE_KEY, state.encode().as_slice())
                .map_err(err)?;
            state.runs
        };
        txn.delete_table(LOG).map_err(err)?;
        drop(txn.open_table(LOG).map_err(err)?);
        let next = Arc::new(Generation {
            runs,
            recent: RwLock::new(Recent::default()),
        });
        // Readers wait here, so none pairs the new snapshot with the old
        // runs (which this commit may delete) or the other way round.
        let mut current = self.current.write().expect("key index");
        txn.commit().map_err(err)?;
        *current = next;
        Ok(())
    }

    /// Writes the recent versions as a run when they are due.
    pub(crate) fn flush_if_due(&self, db: &Database) -> Result<(), String> {
        if self.due() {
            self.flush(db)?;
        }
        Ok(())
    }
}

/// Merges two runs (`newer` wins on a shared key) into a new run `id`,
/// deleting both; drops tombstones unless `keep_tombstones` (an older run
/// may still hold the key). Returns the new run's rows.
fn merge(
    txn: &WriteTransaction,
    newer: Run,
    older: Run,
    id: u64,
    keep_tombstones: bool,
) -> Result<u64, String> {
    let (newer_name, older_name, name) = (run_name(newer.id), run_name(older.id), run_name(id));
    let mut rows = 0;
    {
        let a = txn.open_table(run_def(&newer_name)).map_err(err)?;
        let b = txn.open_table(run_def(&older_name)).map_err(err)?;
        let mut out = txn.open_table(run_def(&name)).map_err(err)?;
        let mut a_rows = a.iter().map_err(err)?.peekable();
        let mut b_rows = b.iter().map_err(err)?.peekable();
        loop {
            let order = match (a_rows.peek(), b_rows.peek()) {
                (None, None) => break,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(Ok((xk, _))), Some(Ok((yk, _)))) => xk.value().cmp(yk.value()),
                // An error is taken (and returned) first.
                (Some(Err(_)), _) => std::cmp::Ordering::Less,
                (_, Some(Err(_))) => std::cmp::Ordering::Greater,
            };
            if order == std::cmp::Ordering::Equal {
                // The newer run's version wins.
                b_rows.next().expect("peeked").map_err(err)?;
            }
            let take_a = order != std::cmp::Ordering::Greater;
            let row = if take_a { a_rows.next() } else { b_rows.next() };
            let (k, v) = row.expect("peeked").map_err(err)?;
            if keep_tombstones || parse_run_value(v.value()).is_some() {
                out.insert(k.value(), v.value()).map_err(err)?;
                rows += 1;
            }
        }
    }
    txn.delete_table(run_def(&newer_name)).map_err(err)?;
    txn.delete_table(run_def(&older_name)).map_err(err)?;
    Ok(rows)
}

/// The index as one write transaction sees it: it appends this
/// transaction's writes to the log and to the recent versions.
pub(crate) struct KeysWrite<'txn> {
    index: Arc<KeyIndex>,
    /// This transaction's commit number and generation, from its first
    /// write.
    writing: Option<(u64, Arc<Generation>)>,
    ordinal: u32,
    log: Option<WriteTable<'txn>>,
}

impl<'txn> KeysWrite<'txn> {
    pub(crate) fn new(index: Arc<KeyIndex>) -> Self {
        KeysWrite {
            index,
            writing: None,
            ordinal: 0,
            log: None,
        }
    }

    /// Adds a put (`Some`) or a delete (`None`) of the physical key `key`.
    pub(crate) fn write(
        &mut self,
        txn: &'txn WriteTransaction,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), String> {
        let (commit, generation) = self.writing.get_or_insert_with(|| {
            (
                self.index.next_commit.fetch_add(1, Ordering::Relaxed),
                self.index.current.read().expect("key index").clone(),
            )
        });
        if self.log.is_none() {
            self.log = Some(txn.open_table(LOG).map_err(err)?);
        }
        let log = self.log.as_mut().expect("opened above");
        log.insert(
            log_key(*commit, self.ordinal).as_slice(),
            log_value(key, value).as_slice(),
        )
        .map_err(err)?;
        self.ordinal += 1;
        generation
            .recent
            .write()
            .expect("recent keys")
            .push(key, (*commit, value.map(<[u8]>::to_vec)));
        Ok(())
    }

    /// The value of the physical key `key`, this transaction's writes
    /// included.
    pub(crate) fn get(&self, txn: &WriteTransaction, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let generation = match &self.writing {
            Some((_, g)) => g.clone(),
            None => self.index.current.read().expect("key index").clone(),
        };
        if let Some(v) = generation
            .recent
            .read()
            .expect("recent keys")
            .latest(key, u64::MAX)
        {
            return Ok(v.map(<[u8]>::to_vec));
        }
        for run in &generation.runs {
            let name = run_name(run.id);
            let t = txn.open_table(run_def(&name)).map_err(err)?;
            let found = t
                .get(key)
                .map_err(err)?
                .map(|v| parse_run_value(v.value()).map(<[u8]>::to_vec));
            if let Some(v) = found {
                return Ok(v);
            }
        }
        Ok(None)
    }

    /// What to do once the transaction has committed (or not).
    pub(crate) fn commit(&mut self) -> Published {
        Published {
            index: self.index.clone(),
            writing: self.writing.take(),
        }
    }
}

/// A write transaction's versions, to be made visible once it commits
/// ([`Published::done`]); dropped without that (the commit failed or was
/// abandoned), they are taken back out of the recent versions.
#[must_use]
pub(crate) struct Published {
    index: Arc<KeyIndex>,
    writing: Option<(u64, Arc<Generation>)>,
}

impl Published {
    /// The transaction committed: readers beginning from now see it.
    pub(crate) fn done(mut self) {
        if let Some((commit, _)) = self.writing.take() {
            self.index.committed.fetch_max(commit, Ordering::AcqRel);
        }
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        if let Some((commit, generation)) = self.writing.take() {
            generation
                .recent
                .write()
                .expect("recent keys")
                .retract(commit);
        }
    }
}

type ReadTable = ReadOnlyTable<&'static [u8], &'static [u8]>;

/// The index as one read snapshot sees it.
pub(crate) struct KeysRead {
    generation: Arc<Generation>,
    visible: u64,
    runs: Vec<OnceLock<ReadTable>>,
}

impl KeysRead {
    fn run(&self, txn: &ReadTransaction, i: usize) -> Result<&ReadTable, redb::Error> {
        if let Some(t) = self.runs[i].get() {
            return Ok(t);
        }
        let name = run_name(self.generation.runs[i].id);
        let opened = txn.open_table(run_def(&name))?;
        Ok(self.runs[i].get_or_init(|| opened))
    }

    /// The value of the physical key `key`.
    pub(crate) fn get(&self, txn: &ReadTransaction, key: &[u8]) -> Result<Option<Vec<u8>>, redb::Error> {
        if let Some(v) = self
            .generation
            .recent
            .read()
            .expect("recent keys")
            .latest(key, self.visible)
        {
            return Ok(v.map(<[u8]>::to_vec));
        }
        for i in 0..self.runs.len() {
            if let Some(v) = self.run(txn, i)?.get(key)? {
                return Ok(parse_run_value(v.value()).map(<[u8]>::to_vec));
            }
        }
        Ok(None)
    }

    /// Visits the rows with physical keys in `lower..upper`, ascending
    /// (descending when `rev`); the visitor returns `false` to stop.
    pub(crate) fn visit<E: From<redb::Error>>(
        &self,
        txn: &ReadTransaction,
        lower: &[u8],
        upper: &[u8],
        rev: bool,
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<bool, E>,
    ) -> Result<(), E> {
        // Source 0 is the recent versions, then the runs from the newest:
        // on a key in several sources the lowest-numbered one holds its
        // latest version. Values are run values (kind, value).
        type Row = (Vec<u8>, Vec<u8>);
        let recent: Vec<Row> = {
            let recent = self.generation.recent.read().expect("recent keys");
            recent
                .rows
                .range::<[u8], _>((
                    std::ops::Bound::Included(lower),
                    std::ops::Bound::Excluded(upper),
                ))
                .filter_map(|(k, _)| {
                    let v = recent.latest(k, self.visible)?;
                    Some((k.clone(), run_value(v)))
                })
                .collect()
        };
        let mut sources: Vec<Box<dyn Iterator<Item = Result<Row, redb::Error>> + '_>> = Vec::new();
        if rev {
            sources.push(Box::new(recent.into_iter().rev().map(Ok)));
        } else {
            sources.push(Box::new(recent.into_iter().map(Ok)));
        }
        for i in 0..self.runs.len() {
            let range = self
                .run(txn, i)?
                .range::<&[u8]>(lower..upper)
                .map_err(redb::Error::from)?;
            let rows = move |r: Result<_, redb::StorageError>| {
                r.map(|(k, v): (redb::AccessGuard<&[u8]>, redb::AccessGuard<&[u8]>)| {
                    (k.value().to_vec(), v.value().to_vec())
                })
                .map_err(redb::Error::from)
            };
            if rev {
                sources.push(Box::new(range.rev().map(rows)));
            } else {
                sources.push(Box::new(range.map(rows)));
            }
        }
        let mut heads: Vec<Option<Row>> = Vec::with_capacity(sources.len());
        for s in sources.iter_mut() {
            heads.push(s.next().transpose()?);
        }
        loop {
            // The next key, and the first source holding it.
            let mut best: Option<usize> = None;
            for (i, head) in heads.iter().enumerate() {
                let Some((k, _)) = head else { continue };
                let better = match best.and_then(|b| heads[b].as_ref()) {
                    None => true,
                    Some((bk, _)) => {
                        if rev {
                            k > bk
                        } else {
                            k < bk
                        }
                    }
                };
                if better {
                    best = Some(i);
                }
            }
            let Some(b) = best else { return Ok(()) };
            let (key, value) = heads[b].take().expect("chosen");
            for (i, head) in heads.iter_mut().enumerate() {
                if i == b || head.as_ref().is_some_and(|(k, _)| *k == key) {
                    *head = sources[i].next().transpose()?;
                }
            }
            if let Some(v) = parse_run_value(&value) {
                if !visit(&key, v)? {
                    return Ok(());
                }
            }
        }
    }
}

/// The runs' rows (newest first) and the log's, for tests.
#[cfg(test)]
pub(crate) fn shape(db: &Database) -> (Vec<u64>, u64) {
    use redb::ReadableTableMetadata;
    let txn = db.begin_read().unwrap();
    let state = State::read(&txn.open_table(STATE).unwrap()).unwrap();
    let log = txn.open_table(LOG).unwrap().len().unwrap();
    (state.runs.iter().map(|r| r.rows).collect(), log)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Batch, Store};

    fn index(store: &Store) -> &Arc<KeyIndex> {
        store.redb_with_keys().unwrap().1
    }

    /// A small deterministic generator (xorshift64*).
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
        }
    }

    /// Every read of the table through the store: each key of the model's
    /// key space by `get`, and the whole table by scans both ways and by a
    /// prefix scan.
    fn assert_reads(store: &Store, model: &BTreeMap<Vec<u8>, Vec<u8>>, space: u64, at: &str) {
        let read = store.read().unwrap();
        for k in 0..space {
            let key = format!("k{k:03}").into_bytes();
            assert_eq!(
                read.get(TABLE, &key).unwrap().as_ref(),
                model.get(&key),
                "get {k} {at}"
            );
        }
        let mut up = Vec::new();
        read.scan_prefix(TABLE, &[], None, |k, v| {
            up.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })
        .unwrap();
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(up, want, "scan {at}");
        let mut down = Vec::new();
        read.scan_prefix_rev(TABLE, &[], None, |k, v| {
            down.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })
        .unwrap();
        down.reverse();
        assert_eq!(down, want, "reverse scan {at}");
        let mut ones = Vec::new();
        read.scan_prefix(TABLE, b"k01", Some(b"k015"), |k, _| {
            ones.push(k.to_vec());
            Ok(true)
        })
        .unwrap();
        let want_ones: Vec<_> = model
            .keys()
            .filter(|k| k.starts_with(b"k01") && k.as_slice() >= b"k015".as_slice())
            .cloned()
            .collect();
        assert_eq!(ones, want_ones, "prefix scan {at}");
    }

    #[test]
    fn reads_match_a_plain_map_through_puts_deletes_flushes_merges_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        index(&store).set_flush_at(7);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let space = 60;
        let mut most_runs = 0;
        for step in 0..400 {
            let mut batch = Batch::new();
            for _ in 0..=rng.below(3) {
                let key = format!("k{:03}", rng.below(space)).into_bytes();
                if rng.below(4) == 0 {
                    model.remove(&key);
                    batch.delete(TABLE, key);
                } else {
                    let value = format!("v{step}").into_bytes();
                    model.insert(key.clone(), value.clone());
                    batch.put_raw(TABLE, key, value);
                }
            }
            // Another table's row in the same commit.
            batch.put_raw(Table::Meta, b"step".to_vec(), vec![1]);
            store.apply(&batch).unwrap();
            if step % 37 == 0 {
                assert_reads(&store, &model, space, &format!("at step {step}"));
            }
            if step % 101 == 100 {
                drop(store);
                store = Store::open(dir.path()).unwrap();
                index(&store).set_flush_at(7);
                assert_reads(&store, &model, space, &format!("reopened at step {step}"));
            }
            let (runs, _) = shape(store.redb().unwrap());
            most_runs = most_runs.max(runs.len());
        }
        assert_reads(&store, &model, space, "at the end");
        let (runs, log) = shape(store.redb().unwrap());
        assert!(!runs.is_empty() && log < 7 + 4, "runs {runs:?}, log {log}");
        // Each newer run holds less than half the rows of the one before.
        for pair in runs.windows(2) {
            assert!(pair[0] * 2 < pair[1], "runs {runs:?}");
        }
        assert!(most_runs <= 8, "at most {most_runs} runs");
    }

    #[test]
    fn a_snapshot_keeps_reading_its_moment_across_a_flush_and_a_merge() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let put = |k: &str, v: &str| {
            let mut b = Batch::new();
            b.put_raw(TABLE, k.as_bytes().to_vec(), v.as_bytes().to_vec());
            store.apply(&b).unwrap();
        };
        put("a", "1");
        index(&store).flush(store.redb().unwrap()).unwrap();
        put("a", "2");
        put("b", "1");
        let before = store.read().unwrap();
        // The second flush writes a run as large as the first: the two
        // merge, and the first run's tree is deleted.
        index(&store).flush(store.redb().unwrap()).unwrap();
        assert_eq!(shape(store.redb().unwrap()).0, vec![2]);
        put("b", "2");
        let after = store.read().unwrap();
        assert_eq!(before.get(TABLE, b"a").unwrap().unwrap(), b"2");
        assert_eq!(before.get(TABLE, b"b").unwrap().unwrap(), b"1");
        assert_eq!(after.get(TABLE, b"b").unwrap().unwrap(), b"2");
        let mut rows = Vec::new();
        before
            .scan_prefix(TABLE, &[], None, |k, v| {
                rows.push((k.to_vec(), v.to_vec()));
                Ok(true)
            })
            .unwrap();
        assert_eq!(
            rows,
            vec![(b"a".to_vec(), b"2".to_vec()), (b"b".to_vec(), b"1".to_vec())]
        );
    }

    #[test]
    fn a_write_transaction_that_never_commits_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (db, keys) = store.redb_with_keys().unwrap();
        {
            let txn = db.begin_write().unwrap();
            let key = TABLE.physical(b"lost");
            let mut trees = crate::trees::WriteTrees::new(&txn, keys.clone()).unwrap();
            trees.put(TABLE, &key, b"1").unwrap();
            assert!(trees.contains(TABLE, &key).unwrap());
            let published = trees.published();
            drop(trees);
            txn.abort().unwrap();
            drop(published);
        }
        // A later commit's number covers the abandoned one's.
        let mut b = Batch::new();
        b.put_raw(TABLE, b"kept".to_vec(), b"1".to_vec());
        store.apply(&b).unwrap();
        let read = store.read().unwrap();
        assert_eq!(read.get(TABLE, b"lost").unwrap(), None);
        assert_eq!(read.get(TABLE, b"kept").unwrap().unwrap(), b"1");
        drop(read);
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.read().unwrap().get(TABLE, b"lost").unwrap(), None);
    }

    #[test]
    fn a_store_written_before_the_index_has_its_keys_moved_into_a_run_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(crate::STORE_FILE);
        {
            let db = Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut t = txn.open_table(PHYSICAL).unwrap();
                for key in [&b"b"[..], b"a", b"c"] {
                    t.insert(TABLE.physical(key).as_slice(), key).unwrap();
                }
                t.insert(Table::Meta.physical(b"m").as_slice(), &b"m"[..])
                    .unwrap();
            }
            txn.commit().unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(shape(store.redb().unwrap()), (vec![3], 0));
        let read = store.read().unwrap();
        for key in [&b"a"[..], b"b", b"c"] {
            assert_eq!(read.get(TABLE, key).unwrap().as_deref(), Some(key));
        }
        assert_eq!(read.get(Table::Meta, b"m").unwrap().unwrap(), b"m");
    }

    #[tokio::test]
    async fn a_backup_carries_the_keys_of_the_log_and_the_runs_and_restores_them_as_a_run() {
        let src = tempfile::tempdir().unwrap();
        let store = Store::open(src.path()).unwrap();
        let mut b = Batch::new();
        for k in ["a", "c", "e"] {
            b.put_raw(TABLE, k.as_bytes().to_vec(), b"run".to_vec());
        }
        store.apply(&b).unwrap();
        index(&store).flush(store.redb().unwrap()).unwrap();
        let mut b = Batch::new();
        b.put_raw(TABLE, b"b".to_vec(), b"log".to_vec())
            .put_raw(TABLE, b"c".to_vec(), b"log".to_vec())
            .delete(TABLE, b"e".to_vec())
            .put_raw(Table::Meta, b"m".to_vec(), b"m".to_vec())
            .put_raw(Table::Events, b"x".to_vec(), b"x".to_vec());
        store.apply(&b).unwrap();
        let out = src.path().join("b.kobo-backup");
        let info = crate::backup::BackupInfo {
            kobo_version: "0.1.0".into(),
            created_at: "2025-01-01T00:00:00Z".into(),
        };
        let written = crate::backup::write(&store, &out, &info).unwrap();
        assert_eq!(written.manifest.tables[TABLE.name()], 3);
        let dst = tempfile::tempdir().unwrap();
        let target = dst.path().join("data");
        crate::backup::restore(&out, &target, 1 << 24)
            .unwrap()
            .finish()
            .unwrap();
        let back = Store::open_existing(&target, 1 << 24).unwrap();
        assert_eq!(shape(back.redb().unwrap()), (vec![3], 0));
        let read = back.read().unwrap();
        let mut rows = Vec::new();
        read.scan_prefix(TABLE, &[], None, |k, v| {
            rows.push((String::from_utf8_lossy(k).into_owned(), v.to_vec()));
            Ok(true)
        })
        .unwrap();
        assert_eq!(
            rows,
            vec![
                ("a".to_string(), b"run".to_vec()),
                ("b".to_string(), b"log".to_vec()),
                ("c".to_string(), b"log".to_vec()),
            ]
        );
        assert_eq!(read.get(Table::Events, b"x").unwrap().unwrap(), b"x");
        assert_eq!(read.get(Table::Meta, b"m").unwrap().unwrap(), b"m");
    }

    #[test]
    fn the_state_row_reads_back_what_was_written() {
        let state = State {
            runs: vec![Run { id: 7, rows: 3 }, Run { id: 2, rows: 90 }],
            next_run: 8,
            flushed_through: 41,
        };
        assert_eq!(State::decode(&state.encode()).unwrap(), state);
        assert!(State::decode(&state.encode()[..30]).is_err());
    }

    #[test]
    fn a_log_row_carries_its_key_and_value_or_a_delete() {
        let put = log_value(b"key", Some(b"v"));
        assert_eq!(parse_log_value(&put).unwrap(), (&b"key"[..], Some(&b"v"[..])));
        let delete = log_value(b"key", None);
        assert_eq!(parse_log_value(&delete).unwrap(), (&b"key"[..], None));
        assert!(parse_log_value(&put[..6]).is_err());
    }
}
