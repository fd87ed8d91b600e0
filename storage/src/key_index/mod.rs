//! The idempotency key index on the embedded store, kept log-structured.
//!
//! `idempotency_keys` maps a client's Idempotency-Key (mostly random
//! UUIDv4s) to the expiry time of its saved response. In one B-tree every
//! save lands on a random leaf, so each commit copied one leaf and its
//! branch pages per create, and that tree's share grew with the store
//! (docs/performance.md, "the clients' random Idempotency-Keys"). Here the
//! table's writes never touch a random page:
//!
//! - **The log** (two trees, `idempotency_keys.log.0` and `.1`; one takes
//!   the writes): each write (a put, or a delete) is appended under
//!   `commit number | ordinal`, so new rows always come at the end of the
//!   tree. A transaction that writes the table takes the next commit
//!   number.
//! - **Recent versions** in memory: every version the log holds, by key.
//!   A reader sees the versions of commits that had finished when its
//!   snapshot began ([`KeyIndex::begin_read`]), so what it reads here and
//!   in its redb snapshot are of the same moment.
//! - **Sorted runs** (`idempotency_keys.run.<id>`): immutable trees, each
//!   written in key order. When the recent versions reach [`FLUSH_AT`],
//!   they are frozen (new writes go to fresh versions and the other log
//!   tree) and written as a new run. Runs merge size-tiered: when the
//!   newest [`MERGE_WIDTH`] runs are of a size (none more than twice the
//!   newest), they are merged into one, so runs come in tiers of
//!   FLUSH_AT, 4 x FLUSH_AT, 16 x FLUSH_AT ... rows, at most three of a
//!   tier, and a row is rewritten once a tier: ~log4(rows / FLUSH_AT)
//!   times, always in key order (merging two runs whenever the newer had
//!   half the older's rows rewrote a row ~log2 times: 4.4 times by
//!   1,000,000 keys against 1.8). A delete is kept as a tombstone until a
//!   merge reaches the oldest run.
//! - **Lookups** read the recent versions, the frozen ones, then the runs
//!   from the newest, skipping a run whose Bloom filter (written with it
//!   in `idempotency_keys.blooms`; [`crate::bloom`]) says it lacks the
//!   key: a new Idempotency-Key reads no run at all.
//! - **Paced building**: a run is written a slice at a time, inside the
//!   transactions that commit the writes ([`KeysWrite::step`]): each
//!   writes [`STEP_MIN`] rows plus a few per version it adds, and records
//!   where it stopped. So no commit stalls for a whole run; readers use
//!   the frozen versions (or the merged runs) until the run is complete,
//!   and switch to it after the commit that completes it, which also
//!   empties the frozen log tree.
//! - **The state** (`idempotency_keys.runs`, one row): the runs, newest
//!   first, the run being built and where, the log tree taking writes,
//!   the runs merged away and not yet deleted, and the next run's id.
//!
//! A run replaced by a merge is deleted only once no reader's view of the
//! index still lists it. The open replays the logs (the taking one,
//! and the frozen one of a flush under way) and moves the rows of a store
//! written before this index (in the shared tree, in key order) into a
//! first run.

mod ahead;
mod recent;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock, Weak};

use redb::{
    AccessGuard, Database, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable,
    TableDefinition, TableHandle, WriteTransaction,
};

use crate::bloom::Bloom;
use crate::prefix_end;
use crate::tables::{Def, Table, WriteTable, PHYSICAL};
use ahead::ReadAhead;
#[cfg(test)]
use ahead::CHUNK_ROWS;
use recent::Recent;

/// The table kept log-structured.
pub(crate) const TABLE: Table = Table::IdempotencyKeys;

const LOGS: [Def; 2] = [
    TableDefinition::new("idempotency_keys.log.0"),
    TableDefinition::new("idempotency_keys.log.1"),
];
const STATE: Def = TableDefinition::new("idempotency_keys.runs");
/// Each run's Bloom filter, by run id.
const BLOOMS: Def = TableDefinition::new("idempotency_keys.blooms");
const STATE_KEY: &[u8] = b"state";
const RUN_PREFIX: &str = "idempotency_keys.run.";

/// Recent versions that are frozen and written as a run: ~64k saves
/// (about 12 MB in memory, [`Recent`]; with the frozen ones and a
/// long merge's backlog, the index holds ~25-30 MB at 1M keys:
/// docs/performance.md, "Recent versions packed").
pub(crate) const FLUSH_AT: usize = 65_536;
/// Rows of the run being built that every writing transaction writes.
pub(crate) const STEP_MIN: usize = 64;
/// ... and at least this many per version it adds.
pub(crate) const STEP_PER_WRITE: usize = 4;
/// How many runs of a size merge into one.
pub(crate) const MERGE_WIDTH: usize = 4;
/// The most runs kept: past it, the two neighbours with the fewest rows
/// merge (runs left small by [`KeyIndex::settle`] would otherwise stay).
const MOST_RUNS: usize = 3 * MERGE_WIDTH;

const PUT: u8 = 1;
const DELETE: u8 = 0;

fn run_name(id: u64) -> String {
    format!("{RUN_PREFIX}{id}")
}

fn run_def(name: &str) -> TableDefinition<'_, &'static [u8], &'static [u8]> {
    TableDefinition::new(name)
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

type Versions = Arc<RwLock<Recent>>;

/// One sorted run: its id (its tree's name) and rows (tombstones
/// included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    id: u64,
    rows: u64,
}

/// A run being written: into tree `target`, from the frozen versions or
/// by merging runs; `after` is the last key written (`None`: none
/// yet), `rows` the rows written.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Build {
    target: u64,
    from: Source,
    after: Option<Vec<u8>>,
    rows: u64,
    keep_tombstones: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Source {
    /// The frozen versions (the log tree not taking writes).
    Frozen,
    /// Neighbouring runs, newest first (the state's order); the newest
    /// holding a key wins.
    Merge { runs: Vec<Run> },
}

impl Source {
    /// The rows the run being built can hold at most, for its filter.
    fn expected_rows(&self, frozen: Option<&Versions>) -> usize {
        match self {
            Source::Merge { runs } => runs.iter().map(|r| r.rows as usize).sum(),
            Source::Frozen => frozen.map_or(0, |f| f.read().expect("frozen keys").keys()),
        }
    }
}

/// The neighbouring runs due to merge, if any: the newest
/// [`MERGE_WIDTH`] when none of them holds more than twice the newest's
/// rows (so a tier's runs merge once it has that many, and a run left
/// small by a settle joins the next ones), else, past [`MOST_RUNS`], the
/// two neighbours with the fewest rows.
fn merge_due(runs: &[Run]) -> Option<std::ops::Range<usize>> {
    if let Some(newest) = runs.get(..MERGE_WIDTH) {
        let most = newest.iter().map(|r| r.rows).max().unwrap_or(0);
        if most <= 2 * newest[0].rows.max(1) {
            return Some(0..MERGE_WIDTH);
        }
    }
    if runs.len() > MOST_RUNS {
        let i = (0..runs.len() - 1).min_by_key(|&i| runs[i].rows + runs[i + 1].rows)?;
        return Some(i..i + 2);
    }
    None
}

/// The persisted state (the one row of `idempotency_keys.runs`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    /// Newest first.
    runs: Vec<Run>,
    next_run: u64,
    /// The log tree taking writes (0 or 1).
    log: u8,
    building: Option<Build>,
    /// Runs replaced by merges, to delete once no view lists them.
    retired: Vec<u64>,
}

impl Default for State {
    fn default() -> Self {
        State {
            runs: Vec::new(),
            next_run: 1,
            log: 0,
            building: None,
            retired: Vec::new(),
        }
    }
}

/// Reads big-endian numbers and byte strings off the front of a slice.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("the idempotency key index's state is cut short".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn run(&mut self) -> Result<Run, String> {
        Ok(Run {
            id: self.u64()?,
            rows: self.u64()?,
        })
    }
}

impl State {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + 16 * self.runs.len());
        let run = |out: &mut Vec<u8>, r: &Run| {
            out.extend_from_slice(&r.id.to_be_bytes());
            out.extend_from_slice(&r.rows.to_be_bytes());
        };
        out.extend_from_slice(&self.next_run.to_be_bytes());
        out.push(self.log);
        out.extend_from_slice(&(self.runs.len() as u32).to_be_bytes());
        for r in &self.runs {
            run(&mut out, r);
        }
        match &self.building {
            None => out.push(0),
            Some(b) => {
                out.push(1);
                out.extend_from_slice(&b.target.to_be_bytes());
                out.extend_from_slice(&b.rows.to_be_bytes());
                out.push(u8::from(b.keep_tombstones));
                match &b.from {
                    Source::Frozen => out.push(0),
                    // (1 was a merge of two runs, read still.)
                    Source::Merge { runs } => {
                        out.push(2);
                        out.extend_from_slice(&(runs.len() as u32).to_be_bytes());
                        for r in runs {
                            run(&mut out, r);
                        }
                    }
                }
                match &b.after {
                    None => out.push(0),
                    Some(k) => {
                        out.push(1);
                        out.extend_from_slice(&(k.len() as u32).to_be_bytes());
                        out.extend_from_slice(k);
                    }
                }
            }
        }
        out.extend_from_slice(&(self.retired.len() as u32).to_be_bytes());
        for id in &self.retired {
            out.extend_from_slice(&id.to_be_bytes());
        }
        out
    }

    fn decode(bytes: &[u8]) -> Result<State, String> {
        let mut c = Cursor(bytes);
        let next_run = c.u64()?;
        let log = c.u8()?;
        let n = c.u32()? as usize;
        let mut runs = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            runs.push(c.run()?);
        }
        let building = match c.u8()? {
            0 => None,
            _ => {
                let target = c.u64()?;
                let rows = c.u64()?;
                let keep_tombstones = c.u8()? != 0;
                let from = match c.u8()? {
                    0 => Source::Frozen,
                    // Written by builds that merged two runs at a time.
                    1 => Source::Merge {
                        runs: vec![c.run()?, c.run()?],
                    },
                    2 => {
                        let n = c.u32()? as usize;
                        if n < 2 {
                            return Err(format!(
                                "the idempotency key index's state names a merge of {n} runs"
                            ));
                        }
                        let mut runs = Vec::with_capacity(n.min(64));
                        for _ in 0..n {
                            runs.push(c.run()?);
                        }
                        Source::Merge { runs }
                    }
                    other => {
                        return Err(format!(
                            "the idempotency key index's state names an unknown build ({other})"
                        ))
                    }
                };
                let after = match c.u8()? {
                    0 => None,
                    _ => {
                        let len = c.u32()? as usize;
                        Some(c.take(len)?.to_vec())
                    }
                };
                Some(Build {
                    target,
                    from,
                    after,
                    rows,
                    keep_tombstones,
                })
            }
        };
        let n = c.u32()? as usize;
        let mut retired = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            retired.push(c.u64()?);
        }
        Ok(State {
            runs,
            next_run,
            log,
            building,
            retired,
        })
    }

    fn read(table: &impl ReadableTable<&'static [u8], &'static [u8]>) -> Result<State, String> {
        match table.get(STATE_KEY).map_err(err)? {
            Some(v) => State::decode(v.value()),
            None => Ok(State::default()),
        }
    }
}

/// A run as the views of the index list it; once no view lists it, a
/// run replaced by a merge can be deleted.
struct RunRef {
    id: u64,
    /// The keys it holds (tombstones included).
    bloom: Bloom,
}

/// A view of the index: what readers and writers see between two
/// switches.
struct Generation {
    /// Newest first.
    runs: Vec<Arc<RunRef>>,
    /// Versions being written as a run.
    frozen: Option<Versions>,
    /// Versions taking writes.
    recent: Versions,
}

impl Generation {
    /// The latest version of `key` (whose [`crate::bloom::hash`] is
    /// `hash`) among commits up to `visible` in the recent and frozen
    /// versions.
    fn latest(&self, key: &[u8], hash: u64, visible: u64) -> Option<Option<Vec<u8>>> {
        if let Some(v) = self
            .recent
            .read()
            .expect("recent keys")
            .latest_hashed(key, hash, visible)
        {
            return Some(v.map(<[u8]>::to_vec));
        }
        let frozen = self.frozen.as_ref()?.read().expect("frozen keys");
        frozen
            .latest_hashed(key, hash, visible)
            .map(|v| v.map(<[u8]>::to_vec))
    }
}

/// A row: a physical key and a run value (kind, value).
type Row = (Vec<u8>, Vec<u8>);

impl Generation {
    /// The latest visible version of every key in `lower..upper` of the
    /// recent and frozen versions, in key order, as run values (a delete
    /// is a tombstone).
    fn visible_rows(&self, lower: &[u8], upper: &[u8], visible: u64) -> Vec<Row> {
        if lower >= upper {
            return Vec::new();
        }
        let recent = self.recent.read().expect("recent keys");
        let frozen = self.frozen.as_ref().map(|f| f.read().expect("frozen keys"));
        let mut rows: BTreeMap<&[u8], Option<&[u8]>> = BTreeMap::new();
        let sources = frozen.iter().map(|f| &**f).chain([&*recent]);
        // Frozen first, so the recent versions of a key replace them.
        for source in sources {
            for (k, versions) in source.range(lower, upper) {
                if let Some(v) = versions.latest(visible) {
                    rows.insert(k, v);
                }
            }
        }
        rows.into_iter()
            .map(|(k, v)| (k.to_vec(), run_value(v)))
            .collect()
    }
}

/// The index's state in memory; one per open redb store.
pub(crate) struct KeyIndex {
    current: RwLock<Arc<Generation>>,
    /// The persisted state as of the last transaction that wrote it (a
    /// mirror: the transaction writing the index holds [`KeyIndex::busy`]).
    state: Mutex<State>,
    /// Whether a write transaction is writing the index (from its first
    /// write until its [`Published`] is done or dropped).
    busy: Mutex<bool>,
    free: Condvar,
    /// Runs replaced by merges, as the views still listing them hold
    /// them: one is deleted only once no view does.
    retired: Mutex<Vec<(Weak<RunRef>, u64)>>,
    /// The Bloom filter of the run being built, so far.
    building_bloom: Mutex<Option<Bloom>>,
    /// The database, for the merges' read-ahead ([`KeyIndex::attach`]).
    db: OnceLock<Weak<Database>>,
    /// The read-ahead of the merge under way, if one is.
    ahead: Mutex<Option<ReadAhead>>,
    /// Rows merges have taken from their read-ahead.
    rows_read_ahead: Arc<AtomicU64>,
    /// The last commit number whose commit has finished.
    committed: AtomicU64,
    /// How many write transactions have committed since the open (any
    /// of them, whether or not it wrote the index): raised by
    /// [`Published::done`], after the commit, before it is acknowledged.
    commits: AtomicU64,
    next_commit: AtomicU64,
    flush_at: AtomicUsize,
    step_min: AtomicUsize,
    step_per_write: AtomicUsize,
    /// Run by the next `begin_read` between its two loads (tests).
    #[cfg(test)]
    between_loads: Mutex<Option<Box<dyn FnOnce() + Send>>>,
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
    let mut c = Cursor(bytes);
    let kind = c.u8()?;
    let len = c.u32()? as usize;
    let key = c.take(len)?;
    Ok((key, (kind == PUT).then_some(c.0)))
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

/// A Bloom filter of the rows of run `id`, sized for `expected` keys.
fn bloom_of_run(txn: &WriteTransaction, id: u64, expected: usize) -> Result<Bloom, String> {
    let name = run_name(id);
    let run = txn.open_table(run_def(&name)).map_err(err)?;
    let mut bloom = Bloom::new(expected);
    for row in run.iter().map_err(err)? {
        bloom.insert(row.map_err(err)?.0.value());
    }
    Ok(bloom)
}

/// Replays one log tree into `into`; returns its last commit number.
fn replay(
    log: &impl ReadableTable<&'static [u8], &'static [u8]>,
    into: &mut Recent,
) -> Result<u64, String> {
    let mut last = 0;
    for row in log.iter().map_err(err)? {
        let (k, v) = row.map_err(err)?;
        let commit = u64::from_be_bytes(k.value()[..8].try_into().map_err(err)?);
        let (key, value) = parse_log_value(v.value())?;
        into.push(key, (commit, value.map(Box::from)));
        last = last.max(commit);
    }
    Ok(last)
}

impl KeyIndex {
    /// Loads the index inside the store's opening transaction (see the
    /// module comment).
    pub(crate) fn open(txn: &WriteTransaction) -> Result<KeyIndex, String> {
        let mut state_table = txn.open_table(STATE).map_err(err)?;
        let mut state = State::read(&state_table)?;
        let mut changed = false;
        {
            let mut shared = txn.open_table(PHYSICAL).map_err(err)?;
            let lower = TABLE.physical(&[]);
            let upper = prefix_end(&lower);
            let mut moved = 0u64;
            let id = state.next_run;
            let name = run_name(id);
            let mut run: Option<WriteTable> = None;
            for row in shared
                .extract_from_if(lower.as_slice()..upper.as_slice(), |_, _| true)
                .map_err(err)?
            {
                let (k, v) = row.map_err(err)?;
                if run.is_none() {
                    run = Some(txn.open_table(run_def(&name)).map_err(err)?);
                }
                run.as_mut()
                    .expect("opened above")
                    .insert(k.value(), run_value(Some(v.value())).as_slice())
                    .map_err(err)?;
                moved += 1;
            }
            if moved > 0 {
                state.next_run += 1;
                state.runs.push(Run { id, rows: moved });
                changed = true;
            }
        }
        // Run trees the state does not list (none, unless a store was
        // changed by hand): never read, so deleted.
        let listed: Vec<String> = state
            .runs
            .iter()
            .map(|r| r.id)
            .chain(state.building.as_ref().map(|b| b.target))
            .chain(state.retired.iter().copied())
            .map(run_name)
            .collect();
        let orphans: Vec<String> = txn
            .list_tables()
            .map_err(err)?
            .map(|t| t.name().to_string())
            .filter(|n| n.starts_with(RUN_PREFIX) && !listed.contains(n))
            .collect();
        for name in orphans {
            txn.delete_table(run_def(&name)).map_err(err)?;
        }
        let freezing = matches!(
            state.building,
            Some(Build {
                from: Source::Frozen,
                ..
            })
        );
        let mut recent = Recent::default();
        let mut frozen = Recent::default();
        let mut last = 0;
        for (side, def) in LOGS.iter().enumerate() {
            let log = txn.open_table(*def).map_err(err)?;
            // The other log tree holds versions only while a flush
            // writes them as a run (it is emptied when the run is done).
            let into = if freezing && side as u8 != state.log {
                &mut frozen
            } else {
                &mut recent
            };
            last = last.max(replay(&log, into)?);
        }
        if changed {
            state_table
                .insert(STATE_KEY, state.encode().as_slice())
                .map_err(err)?;
        }
        let mut runs = Vec::with_capacity(state.runs.len());
        {
            let mut blooms = txn.open_table(BLOOMS).map_err(err)?;
            for r in &state.runs {
                let stored = blooms
                    .get(r.id.to_be_bytes().as_slice())
                    .map_err(err)?
                    .and_then(|v| Bloom::from_bytes(v.value()));
                let bloom = match stored {
                    Some(bloom) => bloom,
                    // A run moved from a store written before the index.
                    None => {
                        let bloom = bloom_of_run(txn, r.id, r.rows as usize)?;
                        blooms
                            .insert(r.id.to_be_bytes().as_slice(), bloom.to_bytes().as_slice())
                            .map_err(err)?;
                        bloom
                    }
                };
                runs.push(Arc::new(RunRef { id: r.id, bloom }));
            }
        }
        // The keys of the run being built, so far.
        let building_bloom = match &state.building {
            None => None,
            Some(b) => {
                let expected = match &b.from {
                    Source::Frozen => frozen.keys(),
                    merge => merge.expected_rows(None),
                };
                Some(bloom_of_run(txn, b.target, expected)?)
            }
        };
        let generation = Generation {
            runs,
            frozen: freezing.then(|| Arc::new(RwLock::new(frozen))),
            recent: Arc::new(RwLock::new(recent)),
        };
        if let Some(frozen) = &generation.frozen {
            sort_aside(frozen);
        }
        Ok(KeyIndex {
            current: RwLock::new(Arc::new(generation)),
            state: Mutex::new(state),
            busy: Mutex::new(false),
            free: Condvar::new(),
            retired: Mutex::new(Vec::new()),
            building_bloom: Mutex::new(building_bloom),
            db: OnceLock::new(),
            ahead: Mutex::new(None),
            rows_read_ahead: Arc::default(),
            committed: AtomicU64::new(last),
            commits: AtomicU64::new(0),
            next_commit: AtomicU64::new(last + 1),
            flush_at: AtomicUsize::new(FLUSH_AT),
            step_min: AtomicUsize::new(STEP_MIN),
            step_per_write: AtomicUsize::new(STEP_PER_WRITE),
            #[cfg(test)]
            between_loads: Mutex::new(None),
        })
    }

    /// Gives the index its database once open, so merges can read their
    /// runs ahead of the writer ([`ahead`]); without it they read them on
    /// the writer thread.
    pub(crate) fn attach(&self, db: &Arc<Database>) {
        let _ = self.db.set(Arc::downgrade(db));
    }

    /// Stops the read-ahead of a merge, if one is under way, and waits for
    /// its thread: before a database is closed or taken apart.
    pub(crate) fn stop_reading_ahead(&self) {
        drop(self.ahead.lock().expect("read-ahead").take());
    }

    /// Starts reading ahead the merge `state` has under way, unless one
    /// for it is running.
    fn start_reading_ahead(&self, state: &State) {
        let Some(Build {
            target,
            from: Source::Merge { runs },
            after,
            ..
        }) = &state.building
        else {
            return;
        };
        let Some(db) = self.db.get() else { return };
        let mut ahead = self.ahead.lock().expect("read-ahead");
        if ahead.as_ref().is_some_and(|a| a.target() == *target) {
            return;
        }
        // One for an earlier build is stopped first.
        drop(ahead.take());
        *ahead = ReadAhead::start(
            db.clone(),
            *target,
            runs,
            after.clone(),
            self.rows_read_ahead.clone(),
        );
    }

    /// Sets how many recent versions are frozen into a run, and the rows
    /// every writing transaction builds (tests use small ones).
    #[cfg(test)]
    pub(crate) fn set_pace(&self, flush_at: usize, step_min: usize, step_per_write: usize) {
        self.flush_at.store(flush_at, Ordering::Relaxed);
        self.step_min.store(step_min, Ordering::Relaxed);
        self.step_per_write.store(step_per_write, Ordering::Relaxed);
    }

    /// Begins a read snapshot with the index as of the same moment: the
    /// view is taken before the snapshot, so it never lists a run the
    /// snapshot lacks (a view switches only after the commit that
    /// completes a run), and the versions of commits finished by then.
    pub(crate) fn begin_read(
        &self,
        db: &Database,
    ) -> Result<(ReadTransaction, KeysRead), redb::Error> {
        // `committed` first, then the view: a version of a commit up to
        // `visible` is in any view installed since (its recent or frozen
        // versions, or a run the view lists). The other order could pair
        // an old view with a later `visible` and miss the versions written
        // into a newer view's fresh recent versions after a freeze.
        let visible = self.committed.load(Ordering::Acquire);
        #[cfg(test)]
        if let Some(between) = self.between_loads.lock().expect("hook").take() {
            between();
        }
        let generation = self.current.read().expect("key index").clone();
        let txn = db.begin_read()?;
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

    /// How many write transactions have committed since the open: a read
    /// snapshot begun after this returned `n` sees the first `n`
    /// ([`crate::trees::LatestSnapshot`]).
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Acquire)
    }

    fn view(&self) -> Arc<Generation> {
        self.current.read().expect("key index").clone()
    }

    fn claim(&self) {
        let mut busy = self.busy.lock().expect("key index writer");
        while *busy {
            busy = self.free.wait(busy).expect("key index writer");
        }
        *busy = true;
    }

    fn release(&self) {
        *self.busy.lock().expect("key index writer") = false;
        self.free.notify_one();
    }

    /// Whether anything is left to write as runs: a build under way, or
    /// recent versions.
    fn unsettled(&self) -> bool {
        let state = self.state.lock().expect("key index state");
        state.building.is_some() || self.view().recent.read().expect("recent keys").versions > 0
    }

    /// Writes every recent version into runs and finishes every merge
    /// they call for, in durable transactions of their own: for restores
    /// (which end with every key in a run) and tests.
    pub(crate) fn settle(self: &Arc<Self>, db: &Database) -> Result<(), String> {
        while self.unsettled() {
            let mut txn = db.begin_write().map_err(err)?;
            txn.set_durability(redb::Durability::Immediate)
                .map_err(err)?;
            let published = {
                let mut keys = KeysWrite::new(self.clone());
                keys.step_with(&txn, usize::MAX, true)?;
                keys.commit()
            };
            txn.commit().map_err(err)?;
            published.done();
        }
        Ok(())
    }
}

/// The index as one write transaction sees it: it appends this
/// transaction's writes to the log and to the recent versions, and builds
/// a slice of the run under way ([`KeysWrite::step`]).
pub(crate) struct KeysWrite<'txn> {
    index: Arc<KeyIndex>,
    /// This transaction's commit number, from its first write.
    commit: Option<u64>,
    /// The view it writes into, from its first write or step.
    generation: Option<Arc<Generation>>,
    /// The view and state once it commits (it froze versions or completed
    /// a run).
    next: Option<(Arc<Generation>, State)>,
    ordinal: u32,
    written: usize,
    /// Whether [`KeysWrite::step_with`] ran.
    stepped: bool,
    log: Option<WriteTable<'txn>>,
}

impl<'txn> KeysWrite<'txn> {
    pub(crate) fn new(index: Arc<KeyIndex>) -> Self {
        KeysWrite {
            index,
            commit: None,
            generation: None,
            next: None,
            ordinal: 0,
            written: 0,
            stepped: false,
            log: None,
        }
    }

    /// The view this transaction works on; the first call claims the
    /// index until the transaction's [`Published`] is done or dropped.
    fn generation(&mut self) -> Arc<Generation> {
        if let Some(g) = &self.generation {
            return g.clone();
        }
        self.index.claim();
        let g = self.index.view();
        self.generation = Some(g.clone());
        g
    }

    /// Adds a put (`Some`) or a delete (`None`) of the physical key `key`.
    pub(crate) fn write(
        &mut self,
        txn: &'txn WriteTransaction,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), String> {
        let generation = self.generation();
        let commit = *self
            .commit
            .get_or_insert_with(|| self.index.next_commit.fetch_add(1, Ordering::Relaxed));
        if self.log.is_none() {
            let side = self.index.state.lock().expect("key index state").log;
            self.log = Some(txn.open_table(LOGS[usize::from(side)]).map_err(err)?);
        }
        let log = self.log.as_mut().expect("opened above");
        log.insert(
            log_key(commit, self.ordinal).as_slice(),
            log_value(key, value).as_slice(),
        )
        .map_err(err)?;
        self.ordinal += 1;
        self.written += 1;
        generation
            .recent
            .write()
            .expect("recent keys")
            .push(key, (commit, value.map(Box::from)));
        Ok(())
    }

    /// The value of the physical key `key`, this transaction's writes
    /// included.
    pub(crate) fn get(
        &mut self,
        txn: &WriteTransaction,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, String> {
        let generation = self.generation();
        let hash = crate::bloom::hash(key);
        if let Some(v) = generation.latest(key, hash, u64::MAX) {
            return Ok(v);
        }
        for run in &generation.runs {
            if !run.bloom.may_contain_hashed(hash) {
                continue;
            }
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

    /// Builds this transaction's slice of the run under way (starting a
    /// build when one is due): [`STEP_MIN`] rows, plus per version it
    /// wrote two and one per [`FLUSH_AT`] rows the build under way
    /// writes ([`STEP_PER_WRITE`] at least), so a merge finishes within
    /// the next FLUSH_AT versions; times one more for each FLUSH_AT
    /// recent versions waiting. Call once, after its writes.
    pub(crate) fn step(&mut self, txn: &'txn WriteTransaction) -> Result<(), String> {
        let generation = self.generation();
        let versions = generation.recent.read().expect("recent keys").versions;
        let flush_at = self.index.flush_at.load(Ordering::Relaxed).max(1);
        let building = self
            .index
            .state
            .lock()
            .expect("key index state")
            .building
            .as_ref()
            .map_or(0, |b| b.from.expected_rows(generation.frozen.as_ref()));
        let per_write = self
            .index
            .step_per_write
            .load(Ordering::Relaxed)
            .max(2 + building / flush_at);
        // Recent versions pile up only while a build (a long merge) holds
        // the next flush back: the further behind, the larger the slice,
        // so memory stays near FLUSH_AT versions.
        let behind = 1 + versions / flush_at;
        let budget =
            self.index.step_min.load(Ordering::Relaxed) + per_write * self.written * behind;
        self.step_with(txn, budget, false)
    }

    fn step_with(
        &mut self,
        txn: &'txn WriteTransaction,
        mut budget: usize,
        settle: bool,
    ) -> Result<(), String> {
        let claimed = self.generation();
        let mut generation = claimed.clone();
        // Drop the log tree's handle: a completed flush deletes a log tree.
        self.log = None;
        let mut state = self.index.state.lock().expect("key index state").clone();
        let before = state.clone();
        delete_retired(txn, &mut state, &self.index)?;
        let mut bloom = self.index.building_bloom.lock().expect("building bloom");
        let mut ahead = self.index.ahead.lock().expect("read-ahead");
        self.stepped = true;
        loop {
            if state.building.is_none()
                && !start_build(&mut state, &mut generation, &self.index, settle)
            {
                break;
            }
            if bloom.is_none() {
                let build = state.building.as_ref().expect("started above");
                let expected = build.from.expected_rows(generation.frozen.as_ref());
                // A build resumed after a transaction that did not commit:
                // its filter is rebuilt from the rows committed so far.
                *bloom = Some(match build.after {
                    Some(_) => bloom_of_run(txn, build.target, expected)?,
                    None => Bloom::new(expected),
                });
            }
            let filter = bloom.as_mut().expect("made above");
            if budget == 0 {
                break;
            }
            let build = state.building.as_mut().expect("started above");
            let (done, used) = match build.from.clone() {
                Source::Frozen => {
                    let frozen = generation
                        .frozen
                        .clone()
                        .expect("a flush has frozen versions");
                    let frozen = frozen.read().expect("frozen keys");
                    // Frozen versions being sorted aside are waited for
                    // only by a settle, or once the recent versions have
                    // filled an eighth of a flush (a sort that never
                    // finished is then done here).
                    let flush_at = self.index.flush_at.load(Ordering::Relaxed);
                    if !frozen.sorted()
                        && !settle
                        && frozen.keys() > SORT_IN_PLACE
                        && generation.recent.read().expect("recent keys").versions < flush_at / 8
                    {
                        break;
                    }
                    build_from_frozen(txn, build, &frozen, filter, budget)?
                }
                Source::Merge { runs } => {
                    build_by_merging(txn, build, &runs, filter, budget, ahead.as_mut())?
                }
            };
            budget = budget.saturating_sub(used);
            if !done {
                break;
            }
            let filter = bloom.take().expect("made above");
            // A merge's read-ahead has nothing more to read.
            drop(ahead.take());
            generation = complete_build(txn, &mut state, &generation, &self.index, filter)?;
        }
        if state != before {
            let mut table = txn.open_table(STATE).map_err(err)?;
            table
                .insert(STATE_KEY, state.encode().as_slice())
                .map_err(err)?;
            self.next = Some((generation, state));
        }
        Ok(())
    }

    /// What to do once the transaction has committed (or not).
    pub(crate) fn commit(&mut self) -> Published {
        self.log = None;
        Published {
            index: self.index.clone(),
            commit: self.commit.take(),
            generation: self.generation.take(),
            next: self.next.take(),
            stepped: std::mem::take(&mut self.stepped),
        }
    }
}

/// A write transaction that ends before [`KeysWrite::commit`] (an error,
/// a refused precondition) takes its versions back out and lets the next
/// one work on the index.
impl Drop for KeysWrite<'_> {
    fn drop(&mut self) {
        if self.generation.is_some() {
            drop(Published {
                index: self.index.clone(),
                commit: self.commit.take(),
                generation: self.generation.take(),
                next: None,
                stepped: self.stepped,
            });
        }
    }
}

/// Frozen versions of more keys than this are put in key order on a
/// thread of their own ([`sort_aside`]); fewer are sorted by the first
/// step of their build (4,096 keys in well under a millisecond).
const SORT_IN_PLACE: usize = 4096;

/// Puts frozen versions in key order on a thread of its own, so the
/// writer's steps find them sorted (a flush's 65,536 keys, about a
/// million key comparisons: docs/performance.md, "Recent versions by
/// hash").
fn sort_aside(frozen: &Versions) {
    if frozen.read().expect("frozen keys").keys() <= SORT_IN_PLACE {
        return;
    }
    let frozen = frozen.clone();
    // If no thread starts, the build sorts them itself (`step_with`).
    let _ = std::thread::Builder::new()
        .name("key-index-sort".into())
        .spawn(move || {
            frozen.read().expect("frozen keys").sort();
        });
}

/// Starts a build when one is due (a merge the runs call for, or frozen
/// recent versions), switching the view to frozen versions for a flush;
/// returns whether one started.
fn start_build(
    state: &mut State,
    generation: &mut Arc<Generation>,
    index: &KeyIndex,
    settle: bool,
) -> bool {
    let id = state.next_run;
    if let Some(merged) = merge_due(&state.runs) {
        state.next_run += 1;
        state.building = Some(Build {
            target: id,
            keep_tombstones: merged.end < state.runs.len(),
            from: Source::Merge {
                runs: state.runs[merged].to_vec(),
            },
            after: None,
            rows: 0,
        });
        return true;
    }
    let versions = generation.recent.read().expect("recent keys").versions;
    let due = if settle {
        versions > 0
    } else {
        versions >= index.flush_at.load(Ordering::Relaxed)
    };
    if !due {
        return false;
    }
    state.next_run += 1;
    state.log ^= 1;
    state.building = Some(Build {
        target: id,
        from: Source::Frozen,
        after: None,
        rows: 0,
        keep_tombstones: !state.runs.is_empty(),
    });
    // Readers with the old view read the same versions (the frozen ones
    // are its recent ones); the new recent versions are of commits after
    // this one, which a reader sees only with a view taken after this
    // view is installed (`KeyIndex::begin_read`).
    *generation = Arc::new(Generation {
        runs: generation.runs.clone(),
        frozen: Some(generation.recent.clone()),
        recent: Arc::new(RwLock::new(Recent::default())),
    });
    sort_aside(generation.frozen.as_ref().expect("frozen above"));
    true
}

/// Writes up to `budget` rows of the frozen versions after the build's
/// last key; returns whether all are written, and the rows looked at.
fn build_from_frozen(
    txn: &WriteTransaction,
    build: &mut Build,
    frozen: &Recent,
    bloom: &mut Bloom,
    budget: usize,
) -> Result<(bool, usize), String> {
    let name = run_name(build.target);
    let mut run = txn.open_table(run_def(&name)).map_err(err)?;
    let mut used = 0;
    let mut last = None;
    let mut done = true;
    for (key, versions) in frozen.after(build.after.as_deref()) {
        if used == budget {
            done = false;
            break;
        }
        used += 1;
        last = Some(key);
        let value = versions.latest(u64::MAX).expect("a key has versions");
        if value.is_none() && !build.keep_tombstones {
            continue;
        }
        run.insert(key, run_value(value).as_slice()).map_err(err)?;
        bloom.insert(key);
        build.rows += 1;
    }
    if let Some(key) = last {
        build.after = Some(key.to_vec());
    }
    Ok((done, used))
}

/// A run's next row, as a merge reads it.
type Head<'a> = Option<(
    AccessGuard<'a, &'static [u8]>,
    AccessGuard<'a, &'static [u8]>,
)>;

/// Runs (newest first) merged in key order from a key on: each key once,
/// with the newest run's row for it.
struct Merged<'a> {
    sources: Vec<redb::Range<'a, &'static [u8], &'static [u8]>>,
    /// Each run's next row.
    heads: Vec<Head<'a>>,
}

impl<'a> Merged<'a> {
    /// The rows of `runs` with keys after `after` (`None`: all).
    fn after<T: ReadableTable<&'static [u8], &'static [u8]>>(
        runs: &'a [T],
        after: Option<&[u8]>,
    ) -> Result<Merged<'a>, redb::StorageError> {
        let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut sources = runs
            .iter()
            .map(|t| t.range::<&[u8]>((lower, Bound::Unbounded)))
            .collect::<Result<Vec<_>, _>>()?;
        let heads = sources
            .iter_mut()
            .map(|s| s.next().transpose())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Merged { sources, heads })
    }

    /// The run whose next row comes next: the one with the smallest next
    /// key, and of runs holding it the newest (the first); `None` when
    /// every run is used up.
    fn pick(&self) -> Option<usize> {
        let mut pick: Option<usize> = None;
        for (i, head) in self.heads.iter().enumerate() {
            let Some((key, _)) = head else { continue };
            let smaller = match pick.and_then(|p| self.heads[p].as_ref()) {
                Some((least, _)) => key.value() < least.value(),
                None => true,
            };
            if smaller {
                pick = Some(i);
            }
        }
        pick
    }

    /// Whether every run is used up.
    fn used_up(&self) -> bool {
        self.heads.iter().all(Option::is_none)
    }

    /// The next row (older runs' versions of its key passed over).
    fn next(&mut self) -> Result<Head<'a>, redb::StorageError> {
        let Some(p) = self.pick() else {
            return Ok(None);
        };
        let (key, value) = self.heads[p].take().expect("picked");
        for i in p + 1..self.heads.len() {
            if self.heads[i]
                .as_ref()
                .is_some_and(|(k, _)| k.value() == key.value())
            {
                self.heads[i] = self.sources[i].next().transpose()?;
            }
        }
        self.heads[p] = self.sources[p].next().transpose()?;
        Ok(Some((key, value)))
    }
}

/// Merges up to `budget` rows of `runs` (newest first) after the build's
/// last key (the newest run holding a key wins); returns whether all are
/// used up, and the rows looked at. Rows the merge's read-ahead has ready
/// are taken from it; the runs are read here only where it has none.
fn build_by_merging(
    txn: &WriteTransaction,
    build: &mut Build,
    runs: &[Run],
    bloom: &mut Bloom,
    budget: usize,
    ahead: Option<&mut ReadAhead>,
) -> Result<(bool, usize), String> {
    let name = run_name(build.target);
    let mut out = txn.open_table(run_def(&name)).map_err(err)?;
    let mut used = 0;
    let mut keep = |key: &[u8], value: &[u8], build: &mut Build| {
        if build.keep_tombstones || parse_run_value(value).is_some() {
            out.insert(key, value).map_err(err)?;
            bloom.insert(key);
            build.rows += 1;
        }
        Ok::<_, String>(())
    };
    if let Some(ahead) = ahead.filter(|a| a.target() == build.target) {
        while used < budget {
            let (chunk, rows) = match ahead.covered(build.after.as_deref(), budget - used) {
                ahead::Covered::Rows(chunk, rows) => (chunk, rows),
                ahead::Covered::End => return Ok((true, used)),
                ahead::Covered::Not => break,
            };
            let last = rows.end - 1;
            let rows_len = rows.len();
            for i in rows {
                let (key, value) = chunk.row(i);
                keep(key, value, build)?;
                used += 1;
            }
            build.after = Some(chunk.row(last).0.to_vec());
            ahead.took(rows_len);
        }
        if used == budget {
            // The runs are not read at all (not even their first pages).
            return Ok((false, used));
        }
    }
    let names: Vec<String> = runs.iter().map(|r| run_name(r.id)).collect();
    let tables = names
        .iter()
        .map(|name| txn.open_table(run_def(name)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    let after = build.after.clone();
    let mut merged = Merged::after(&tables, after.as_deref()).map_err(err)?;
    let mut last = None;
    let done = loop {
        if merged.used_up() {
            break true;
        }
        if used == budget {
            break false;
        }
        used += 1;
        let (key, value) = merged.next().map_err(err)?.expect("not used up");
        keep(key.value(), value.value(), build)?;
        last = Some(key);
    };
    if let Some(key) = last {
        build.after = Some(key.value().to_vec());
    }
    Ok((done, used))
}

/// Ends the build: the run joins the state's runs (replacing the merged
/// ones, deleted once no view lists them; after a flush the frozen log
/// tree is emptied); returns the view readers switch to once this
/// transaction commits.
fn complete_build(
    txn: &WriteTransaction,
    state: &mut State,
    generation: &Arc<Generation>,
    index: &KeyIndex,
    bloom: Bloom,
) -> Result<Arc<Generation>, String> {
    let build = state.building.take().expect("a build under way");
    let run = Run {
        id: build.target,
        rows: build.rows,
    };
    txn.open_table(BLOOMS)
        .map_err(err)?
        .insert(run.id.to_be_bytes().as_slice(), bloom.to_bytes().as_slice())
        .map_err(err)?;
    let made = Arc::new(RunRef { id: run.id, bloom });
    let mut runs = generation.runs.clone();
    match build.from {
        Source::Frozen => {
            state.runs.insert(0, run);
            runs.insert(0, made);
            // Readers never read the log trees: the frozen one goes now
            // (deleting a whole tree is cheap: ~1 ms for 64k rows, where
            // deleting its rows one by one took ~90 ms of writer time).
            let frozen_log = LOGS[usize::from(state.log ^ 1)];
            txn.delete_table(frozen_log).map_err(err)?;
            drop(txn.open_table(frozen_log).map_err(err)?);
        }
        Source::Merge { runs: merged } => {
            // Neither list changes while a build is under way.
            let at = state
                .runs
                .iter()
                .position(|r| r.id == merged[0].id)
                .expect("the merged runs are listed");
            let span = at..at + merged.len();
            debug_assert_eq!(state.runs[span.clone()], merged[..]);
            state.runs.splice(span.clone(), [run]);
            state.retired.extend(merged.iter().map(|r| r.id));
            let mut retired = index.retired.lock().expect("retired runs");
            for old in runs.splice(span, [made]) {
                debug_assert!(merged.iter().any(|r| r.id == old.id));
                retired.push((Arc::downgrade(&old), old.id));
            }
        }
    }
    Ok(Arc::new(Generation {
        runs,
        frozen: None,
        recent: generation.recent.clone(),
    }))
}

/// Deletes the trees of runs replaced by merges that no view lists any
/// more.
fn delete_retired(
    txn: &WriteTransaction,
    state: &mut State,
    index: &KeyIndex,
) -> Result<(), String> {
    if state.retired.is_empty() {
        return Ok(());
    }
    let listed: Vec<u64> = {
        let mut retired = index.retired.lock().expect("retired runs");
        retired.retain(|(weak, _)| weak.strong_count() > 0);
        retired.iter().map(|(_, id)| *id).collect()
    };
    let mut deleted = Vec::new();
    for id in state.retired.iter().copied() {
        if !listed.contains(&id) {
            txn.delete_table(run_def(&run_name(id))).map_err(err)?;
            txn.open_table(BLOOMS)
                .map_err(err)?
                .remove(id.to_be_bytes().as_slice())
                .map_err(err)?;
            deleted.push(id);
        }
    }
    state.retired.retain(|id| !deleted.contains(id));
    Ok(())
}

/// A write transaction's effect on the index, settled once it has
/// committed ([`Published::done`]: its versions become visible, and
/// readers switch to the view of a run it completed); dropped without
/// that (the commit failed or was abandoned), its versions are taken back
/// out.
#[must_use]
pub(crate) struct Published {
    index: Arc<KeyIndex>,
    commit: Option<u64>,
    /// The view it claimed (its versions went to its recent ones).
    generation: Option<Arc<Generation>>,
    next: Option<(Arc<Generation>, State)>,
    /// Whether it built part of a run (and so changed the run's Bloom
    /// filter in memory).
    stepped: bool,
}

impl Published {
    /// The transaction committed: readers beginning from now see it.
    pub(crate) fn done(mut self) {
        self.stepped = false;
        if let Some((view, state)) = self.next.take() {
            self.index.start_reading_ahead(&state);
            *self.index.state.lock().expect("key index state") = state;
            *self.index.current.write().expect("key index") = view;
        }
        if let Some(commit) = self.commit.take() {
            self.index.committed.fetch_max(commit, Ordering::AcqRel);
        }
        // Last: a reader that sees the new count sees the commit, and the
        // index's view and versions of it.
        self.index.commits.fetch_add(1, Ordering::AcqRel);
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        if self.stepped {
            // The filter holds keys of rows that were never committed,
            // or lacks some that were: the next step rebuilds it from the
            // run's committed rows.
            *self.index.building_bloom.lock().expect("building bloom") = None;
        }
        let Some(generation) = self.generation.take() else {
            return;
        };
        if let Some(commit) = self.commit.take() {
            generation
                .recent
                .write()
                .expect("recent keys")
                .retract(commit);
        }
        self.index.release();
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
    pub(crate) fn get(
        &self,
        txn: &ReadTransaction,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, redb::Error> {
        let hash = crate::bloom::hash(key);
        if let Some(v) = self.generation.latest(key, hash, self.visible) {
            return Ok(v);
        }
        for i in 0..self.runs.len() {
            if !self.generation.runs[i].bloom.may_contain_hashed(hash) {
                continue;
            }
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
        if lower >= upper {
            return Ok(());
        }
        // Source 0 is the recent versions, then the runs from the newest:
        // on a key in several sources the lowest-numbered one holds its
        // latest version. Values are run values (kind, value).
        let recent = self.generation.visible_rows(lower, upper, self.visible);
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
                r.map(
                    |(k, v): (redb::AccessGuard<&[u8]>, redb::AccessGuard<&[u8]>)| {
                        (k.value().to_vec(), v.value().to_vec())
                    },
                )
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

/// The runs' rows (newest first) and the logs', for tests.
#[cfg(test)]
pub(crate) fn shape(db: &Database) -> (Vec<u64>, u64) {
    use redb::ReadableTableMetadata;
    let txn = db.begin_read().unwrap();
    let state = State::read(&txn.open_table(STATE).unwrap()).unwrap();
    let log = LOGS
        .iter()
        .map(|def| txn.open_table(*def).unwrap().len().unwrap())
        .sum();
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

    /// Writes `key` (a put of `value`, or a delete when `None`) into
    /// `batch` and the model alike.
    fn write_both(
        batch: &mut Batch,
        model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) {
        match value {
            None => {
                model.remove(&key);
                batch.delete(TABLE, key);
            }
            Some(value) => {
                model.insert(key.clone(), value.clone());
                batch.put_raw(TABLE, key, value);
            }
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
        index(&store).set_pace(7, 1, 1);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let space = 60;
        let mut most_runs = 0;
        // Reads and reopens met builds under way of both kinds.
        let (mut seen_flushing, mut seen_merging) = (0, 0);
        for step in 0..400 {
            let mut batch = Batch::new();
            for _ in 0..=rng.below(3) {
                let key = format!("k{:03}", rng.below(space)).into_bytes();
                let value = (rng.below(4) != 0).then(|| format!("v{step}").into_bytes());
                write_both(&mut batch, &mut model, key, value);
            }
            // Another table's row in the same commit.
            batch.put_raw(Table::Meta, b"step".to_vec(), vec![1]);
            store.apply(&batch).unwrap();
            {
                let building = index(&store).state.lock().unwrap().building.clone();
                match building.map(|b| b.from) {
                    Some(Source::Frozen) => seen_flushing += 1,
                    Some(Source::Merge { .. }) => seen_merging += 1,
                    None => {}
                }
            }
            if step % 37 == 0 {
                assert_reads(&store, &model, space, &format!("at step {step}"));
            }
            if step % 29 == 28 {
                drop(store);
                store = Store::open(dir.path()).unwrap();
                index(&store).set_pace(7, 1, 1);
                assert_reads(&store, &model, space, &format!("reopened at step {step}"));
            }
            let (runs, _) = shape(store.redb().unwrap());
            most_runs = most_runs.max(runs.len());
        }
        assert_reads(&store, &model, space, "at the end");
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_reads(&store, &model, space, "reopened at the end");
        assert!(most_runs <= MOST_RUNS, "at most {most_runs} runs");
        assert!(
            seen_flushing > 0 && seen_merging > 0,
            "flushing {seen_flushing}, merging {seen_merging}"
        );
        index(&store).settle(store.redb().unwrap()).unwrap();
        assert_reads(&store, &model, space, "settled");
        let (runs, log) = shape(store.redb().unwrap());
        assert_eq!(log, 0);
        // No merge is left due.
        let listed: Vec<Run> = runs.iter().map(|&rows| Run { id: 0, rows }).collect();
        assert_eq!(merge_due(&listed), None, "runs {runs:?}");
        // One more commit deletes the runs merged away.
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        let mut b = Batch::new();
        b.put_raw(Table::Meta, b"step".to_vec(), vec![2]);
        store.apply(&b).unwrap();
        assert_eq!(run_trees(store.redb().unwrap()), runs.len());
        assert_eq!(shape(store.redb().unwrap()), (runs, 0));
        assert_reads(&store, &model, space, "emptied");
    }

    #[test]
    fn a_flush_too_large_to_sort_in_place_is_sorted_aside_and_written_as_a_run() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let flush_at = SORT_IN_PLACE + 904;
        index(&store).set_pace(flush_at, 64, 4);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        // Nearly every key new, so the frozen versions hold more keys than
        // are sorted in place.
        let space = 16 * flush_at as u64;
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let (mut froze, mut waited, mut done) = (false, 0, false);
        for step in 0..200 {
            let mut batch = Batch::new();
            for _ in 0..100 {
                let key = format!("k{:03}", rng.below(space)).into_bytes();
                let value = format!("v{step}").into_bytes();
                model.insert(key.clone(), value.clone());
                batch.put_raw(TABLE, key, value);
            }
            store.apply(&batch).unwrap();
            let building = index(&store).state.lock().unwrap().building.clone();
            match building {
                Some(b) if b.from == Source::Frozen => {
                    froze = true;
                    waited += usize::from(b.after.is_none());
                }
                None if froze => {
                    done = true;
                    break;
                }
                _ => {}
            }
        }
        assert!(done, "the flush finished (steps without a row: {waited})");
        let (runs, _) = shape(store.redb().unwrap());
        assert_eq!(runs.len(), 1, "one run: {runs:?}");
        assert!(runs[0] as usize > SORT_IN_PLACE, "{runs:?}");
        assert_reads(&store, &model, space, "after the flush");
    }

    fn run_trees(db: &Database) -> usize {
        let txn = db.begin_read().unwrap();
        txn.list_tables()
            .unwrap()
            .filter(|t| t.name().starts_with(RUN_PREFIX))
            .count()
    }

    #[test]
    fn a_reopen_while_a_flush_is_under_way_reads_the_latest_versions() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        index(&store).set_pace(40, 0, 0);
        let mut latest = BTreeMap::new();
        let mut since_freeze = 0;
        for i in 0..500u32 {
            let key = format!("k{}", i % 31).into_bytes();
            let mut b = Batch::new();
            b.put_raw(TABLE, key.clone(), i.to_be_bytes().to_vec());
            store.apply(&b).unwrap();
            latest.insert(key, i.to_be_bytes().to_vec());
            let state = index(&store).state.lock().unwrap().clone();
            let flushing = matches!(
                state.building,
                Some(Build {
                    from: Source::Frozen,
                    ..
                })
            );
            // The frozen log tree (1) replays after the one taking writes
            // (0), which by now holds newer versions of the same keys:
            // the frozen ones must not pass for the latest.
            since_freeze = if flushing && state.log == 0 {
                since_freeze + 1
            } else {
                0
            };
            if since_freeze == 2 {
                drop(store);
                store = Store::open(dir.path()).unwrap();
                let read = store.read().unwrap();
                for (k, v) in &latest {
                    assert_eq!(read.get(TABLE, k).unwrap().as_ref(), Some(v), "at {i}");
                }
                return;
            }
        }
        panic!("no reopen during a flush into log tree 0");
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
        index(&store).settle(store.redb().unwrap()).unwrap();
        for other in ["c", "d"] {
            put(other, "1");
            index(&store).settle(store.redb().unwrap()).unwrap();
        }
        assert_eq!(shape(store.redb().unwrap()).0, vec![1, 1, 1]);
        put("a", "2");
        put("b", "1");
        let before = store.read().unwrap();
        // The fourth flush writes a run of the others' size: the four
        // merge, and their trees are deleted.
        index(&store).settle(store.redb().unwrap()).unwrap();
        assert_eq!(shape(store.redb().unwrap()).0, vec![4]);
        put("b", "2");
        let after = store.read().unwrap();
        assert_eq!(before.get(TABLE, b"a").unwrap().unwrap(), b"2");
        assert_eq!(before.get(TABLE, b"b").unwrap().unwrap(), b"1");
        assert_eq!(after.get(TABLE, b"b").unwrap().unwrap(), b"2");
        assert_eq!(after.get(TABLE, b"a").unwrap().unwrap(), b"2");
        let mut rows = Vec::new();
        before
            .scan_prefix(TABLE, &[], None, |k, v| {
                rows.push((k.to_vec(), v.to_vec()));
                Ok(true)
            })
            .unwrap();
        assert_eq!(
            rows,
            vec![
                (b"a".to_vec(), b"2".to_vec()),
                (b"b".to_vec(), b"1".to_vec()),
                (b"c".to_vec(), b"1".to_vec()),
                (b"d".to_vec(), b"1".to_vec())
            ]
        );
    }

    /// Puts "lost" in a write transaction that is aborted, after its
    /// commit step (`published`) or before it.
    fn abandon_a_write(store: &Store, published: bool) {
        let (db, keys) = store.redb_with_keys().unwrap();
        let txn = db.begin_write().unwrap();
        let key = TABLE.physical(b"lost");
        let mut trees = crate::trees::WriteTrees::new(&txn, keys.clone()).unwrap();
        trees.put(TABLE, &key, b"1").unwrap();
        assert!(trees.contains(TABLE, &key).unwrap());
        let published = published.then(|| trees.published().unwrap());
        drop(trees);
        txn.abort().unwrap();
        drop(published);
    }

    #[test]
    fn a_write_transaction_that_never_commits_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        abandon_a_write(&store, true);
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
    fn a_write_transaction_dropped_before_its_commit_step_lets_the_next_one_in() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // A failure between its first use of the index and `published`
        // (a refused precondition, a storage error).
        abandon_a_write(&store, false);
        // The next writer is not held out (this would hang), and the
        // dropped one's version is gone.
        let (done, wait) = std::sync::mpsc::channel();
        let writer = store.clone();
        std::thread::spawn(move || {
            let mut b = Batch::new();
            b.put_raw(TABLE, b"kept".to_vec(), b"1".to_vec());
            done.send(writer.apply(&b)).unwrap();
        });
        wait.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the next write transaction got the index")
            .unwrap();
        let read = store.read().unwrap();
        assert_eq!(read.get(TABLE, b"lost").unwrap(), None);
        assert_eq!(read.get(TABLE, b"kept").unwrap().unwrap(), b"1");
    }

    /// Whether a merge is under way.
    fn merging(store: &Store) -> bool {
        let state = index(store).state.lock().unwrap();
        matches!(
            state.building.as_ref().map(|b| &b.from),
            Some(Source::Merge { .. })
        )
    }

    /// Waits until the merge under way's read-ahead has its chunks ready;
    /// whether one is running.
    fn wait_for_read_ahead(store: &Store) -> bool {
        let ahead = index(store).ahead.lock().unwrap();
        ahead.as_ref().inspect(|a| a.wait_ready()).is_some()
    }

    fn rows_read_ahead(store: &Store) -> u64 {
        index(store).rows_read_ahead.load(Ordering::Relaxed)
    }

    /// Writes 100 random puts and deletes of keys below `space`.
    fn write_some(
        store: &Store,
        model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
        rng: &mut Rng,
        step: u64,
        space: u64,
    ) {
        let mut batch = Batch::new();
        for _ in 0..100 {
            let key = format!("k{:03}", rng.below(space)).into_bytes();
            let value = (rng.below(5) != 0).then(|| format!("v{step}").into_bytes());
            write_both(&mut batch, model, key, value);
        }
        store.apply(&batch).unwrap();
    }

    /// Random writes in runs of `flush_at` versions, built 16 rows a step
    /// plus one per write, for `steps` commits; after each commit that
    /// leaves a merge under way, once its read-ahead has its chunks ready,
    /// `merging_step` runs. Then every read of the table is checked, as it
    /// stands, once settled, and reopened; returns how many times
    /// `merging_step` returned `true`.
    fn merges_read_ahead(
        flush_at: usize,
        space: u64,
        steps: u64,
        seed: u64,
        mut merging_step: impl FnMut(&Store) -> bool,
    ) -> usize {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        index(&store).set_pace(flush_at, 16, 1);
        let mut model = BTreeMap::new();
        let mut rng = Rng(seed);
        let mut counted = 0;
        for step in 0..steps {
            write_some(&store, &mut model, &mut rng, step, space);
            if merging(&store) && wait_for_read_ahead(&store) && merging_step(&store) {
                counted += 1;
            }
        }
        assert_reads(&store, &model, space, "after merges read ahead");
        index(&store).settle(store.redb().unwrap()).unwrap();
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_reads(&store, &model, space, "settled and reopened");
        counted
    }

    #[test]
    fn a_merge_takes_the_rows_its_read_ahead_has_ready_and_writes_every_one() {
        // Merges of four runs of ~1,400 keys: more than a chunk.
        let mut taken = 0;
        let waited = merges_read_ahead(1500, 9000, 200, 0x51_7cc1_b727_220a, |store| {
            taken = rows_read_ahead(store);
            true
        });
        assert!(waited > 0, "no merge was read ahead");
        assert!(
            taken > CHUNK_ROWS as u64,
            "{taken} rows taken from read-ahead"
        );
    }

    /// A step of `budget` rows in a write transaction that never commits.
    fn abandon_a_step(store: &Store, budget: usize) {
        let (db, keys) = store.redb_with_keys().unwrap();
        let txn = db.begin_write().unwrap();
        let published = {
            let mut write = KeysWrite::new(keys.clone());
            write.step_with(&txn, budget, false).unwrap();
            write.commit()
        };
        txn.abort().unwrap();
        drop(published);
    }

    #[test]
    fn a_step_that_never_commits_leaves_its_merge_behind_the_read_ahead_and_the_run_whole() {
        // Merges of four runs of ~2,500 keys: over two chunks.
        let abandoned = merges_read_ahead(3000, 20_000, 300, 0x2f_0b5e_91d3_4a77, |store| {
            // The abandoned step takes a chunk's worth of rows, into the
            // next chunk; the build stays where the last commit left it,
            // behind the chunk now first.
            let before = rows_read_ahead(store);
            abandon_a_step(store, CHUNK_ROWS);
            rows_read_ahead(store) > before
        });
        assert!(abandoned > 0, "no abandoned step took rows read ahead");
    }

    fn put(store: &Store, key: &[u8]) {
        let mut b = Batch::new();
        b.put_raw(TABLE, key.to_vec(), b"v".to_vec());
        store.apply(&b).unwrap();
    }

    #[test]
    fn a_reader_sees_every_version_of_the_commits_it_counts_as_finished_across_a_freeze() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        index(&store).set_pace(1, 1, 1);
        // Between the reader's two loads: a commit that freezes the
        // recent versions (and switches the view), then one more write.
        let writer = store.clone();
        *index(&store).between_loads.lock().unwrap() = Some(Box::new(move || {
            put(&writer, b"k1");
            put(&writer, b"k2");
        }));
        let (db, keys) = store.redb_with_keys().unwrap();
        let (txn, read) = keys.begin_read(db).unwrap();
        for (key, commit) in [(&b"k1"[..], 1), (b"k2", 2)] {
            if read.visible >= commit {
                let found = read.get(&txn, &TABLE.physical(key)).unwrap();
                assert!(found.is_some(), "{key:?}");
            }
        }
        let (txn, read) = keys.begin_read(db).unwrap();
        assert!(read.visible >= 2);
        for key in [&b"k1"[..], b"k2"] {
            let found = read.get(&txn, &TABLE.physical(key)).unwrap();
            assert!(found.is_some(), "{key:?} after");
        }
    }

    #[test]
    fn a_run_completed_by_a_transaction_that_never_commits_keeps_every_key_in_its_filter() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        index(&store).set_pace(8, 0, 0);
        let keys: Vec<Vec<u8>> = (0..8).map(|i| format!("k{i}").into_bytes()).collect();
        for k in &keys {
            put(&store, k);
        }
        // The eighth write froze the versions and wrote part of the run.
        let state = index(&store).state.lock().unwrap().clone();
        let build = state.building.expect("a flush under way");
        assert!(build.after.is_some() && build.rows < 8, "{build:?}");
        {
            // A transaction completes the run, then never commits.
            let (db, index) = store.redb_with_keys().unwrap();
            let txn = db.begin_write().unwrap();
            let published = {
                let mut write = KeysWrite::new(index.clone());
                write.step_with(&txn, usize::MAX, false).unwrap();
                write.commit()
            };
            drop(published);
            txn.abort().unwrap();
        }
        // The run is completed again by later commits.
        for i in 0..8 {
            put(&store, format!("later{i}").as_bytes());
        }
        assert!(!shape(store.redb().unwrap()).0.is_empty());
        let read = store.read().unwrap();
        for k in &keys {
            assert!(read.get(TABLE, k).unwrap().is_some(), "{k:?}");
        }
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
        index(&store).settle(store.redb().unwrap()).unwrap();
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
        let mut state = State {
            runs: vec![Run { id: 7, rows: 3 }, Run { id: 2, rows: 90 }],
            next_run: 9,
            log: 1,
            building: Some(Build {
                target: 8,
                from: Source::Merge {
                    runs: vec![Run { id: 7, rows: 3 }, Run { id: 2, rows: 90 }],
                },
                after: Some(b"key".to_vec()),
                rows: 2,
                keep_tombstones: true,
            }),
            retired: vec![3, 5],
        };
        let written = state.encode();
        assert_eq!(State::decode(&written).unwrap(), state);
        assert!(State::decode(&written[..30]).is_err());
        // A merge of two runs as builds before size tiers wrote it: the
        // source's tag 1 and the two runs, without a count.
        let tag = 8 + 1 + 4 + 2 * 16 + 1 + 8 + 8 + 1;
        assert_eq!(written[tag], 2);
        let mut two_way = written[..tag].to_vec();
        two_way.push(1);
        two_way.extend_from_slice(&written[tag + 5..]);
        assert_eq!(State::decode(&two_way).unwrap(), state);
        let mut unknown = written.clone();
        unknown[tag] = 9;
        assert!(State::decode(&unknown).is_err());
        // A merge of fewer than two runs is refused.
        let mut one = written[..tag + 1].to_vec();
        one.extend_from_slice(&1u32.to_be_bytes());
        one.extend_from_slice(&written[tag + 5..tag + 5 + 16]);
        one.extend_from_slice(&written[tag + 5 + 2 * 16..]);
        assert!(State::decode(&one).is_err());
        let mut two = written[..tag + 1].to_vec();
        two.extend_from_slice(&2u32.to_be_bytes());
        two.extend_from_slice(&written[tag + 5..]);
        assert_eq!(State::decode(&two).unwrap(), state);
        state.building = Some(Build {
            target: 8,
            from: Source::Frozen,
            after: None,
            rows: 0,
            keep_tombstones: false,
        });
        assert_eq!(State::decode(&state.encode()).unwrap(), state);
        state.building = None;
        assert_eq!(State::decode(&state.encode()).unwrap(), state);
    }

    #[test]
    fn runs_merge_four_of_a_size_and_past_the_most_the_smallest_neighbours() {
        let runs = |rows: &[u64]| -> Vec<Run> {
            rows.iter()
                .enumerate()
                .map(|(i, &rows)| Run { id: i as u64, rows })
                .collect()
        };
        let f = 65_536;
        assert_eq!(merge_due(&runs(&[f, f, f])), None);
        assert_eq!(merge_due(&runs(&[f, f, f, f])), Some(0..4));
        // A tier's runs shrink a little as merges drop tombstones.
        assert_eq!(
            merge_due(&runs(&[4 * f, 4 * f - 9, 4 * f, 4 * f])),
            Some(0..4)
        );
        assert_eq!(merge_due(&runs(&[f, f, f, 4 * f])), None);
        assert_eq!(merge_due(&runs(&[f, f, f, 4 * f, 4 * f])), None);
        // A small run left by a settle joins the next ones.
        assert_eq!(merge_due(&runs(&[f, 10, f, f, 4 * f])), Some(0..4));
        assert_eq!(merge_due(&runs(&[10, f, f, f])), None);
        // Past the most runs, the two neighbours with the fewest rows.
        let mut many = vec![1_000; MOST_RUNS + 1];
        many[0] = 1;
        many[5] = 3;
        many[6] = 4;
        assert_eq!(merge_due(&runs(&many)), Some(5..7));
        // Rows written a run at a time, merged as due: a key is written
        // into runs about once a tier. By 15 runs' worth of keys
        // (~1,000,000) the flush and 12 / 15 merges: 1.8 times, where
        // merging two runs whenever the newer had half the older's rows
        // wrote it 4.47 times; by 153 (~10,000,000) 1 + 424 / 153 = 3.77
        // times, against 8.19.
        let (mut listed, mut written) = (Vec::new(), 0);
        for id in 1..=153 {
            listed.insert(0, Run { id, rows: f });
            while let Some(due) = merge_due(&listed) {
                let rows = listed[due.clone()].iter().map(|r| r.rows).sum();
                written += rows;
                listed.splice(
                    due,
                    [Run {
                        id: 1_000 + id,
                        rows,
                    }],
                );
            }
            match id {
                15 => assert_eq!((written, listed.len()), (12 * f, 6)),
                153 => assert_eq!((written, listed.len()), (424 * f, 6)),
                _ => {}
            }
        }
    }

    #[test]
    fn past_the_most_runs_two_neighbours_in_the_middle_merge_and_the_newer_wins() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        // Runs of these sizes, oldest first, each holding keys k000..
        // (the last k100..: so k000-k002 are read from the merged pair)
        // and written by a settle: no four newest are ever of a size, so
        // the thirteenth run passes the most kept, and the two neighbours
        // with the fewest rows (the two runs of three) merge.
        let sizes = [700, 300, 140, 140, 60, 60, 60, 25, 25, 25, 3, 3, 8];
        for (run, &size) in sizes.iter().enumerate() {
            let mut b = Batch::new();
            let first = if run == 12 { 100 } else { 0 };
            for k in first..first + size {
                let key = format!("k{k:03}").into_bytes();
                // The second run of three deletes a key the older runs hold.
                let value = (run != 11 || k != 2).then(|| format!("v{run}").into_bytes());
                write_both(&mut b, &mut model, key, value);
            }
            store.apply(&b).unwrap();
            index(&store).settle(store.redb().unwrap()).unwrap();
        }
        let merged = vec![8, 3, 25, 25, 25, 60, 60, 60, 140, 140, 300, 700];
        assert_eq!(shape(store.redb().unwrap()), (merged.clone(), 0));
        assert_reads(&store, &model, 700, "merged");
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_reads(&store, &model, 700, "reopened");
        // One more commit deletes the two runs merged away.
        let mut b = Batch::new();
        b.put_raw(Table::Meta, b"step".to_vec(), vec![1]);
        store.apply(&b).unwrap();
        assert_eq!(run_trees(store.redb().unwrap()), merged.len());
    }

    #[test]
    fn a_log_row_carries_its_key_and_value_or_a_delete() {
        let put = log_value(b"key", Some(b"v"));
        assert_eq!(
            parse_log_value(&put).unwrap(),
            (&b"key"[..], Some(&b"v"[..]))
        );
        let delete = log_value(b"key", None);
        assert_eq!(parse_log_value(&delete).unwrap(), (&b"key"[..], None));
        assert!(parse_log_value(&put[..6]).is_err());
    }
}
