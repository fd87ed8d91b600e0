//! A merge's runs read ahead of the writer, on a thread of their own.
//!
//! A merge ([`super::build_by_merging`]) reads its runs in key order. On a
//! grown store most of their pages are not in redb's cache, and the store
//! file is written with `O_DIRECT`, so each page the merge reads is a
//! `pread` from the disk on the one writer thread (docs/performance.md,
//! "A grown store's reads"). Here a thread of its own (`key-index-merge`)
//! merges the runs the same way, in short read transactions of its own,
//! into [`Chunk`]s of rows a few chunks ahead; the writer's steps take the
//! rows from the chunks and only insert them.
//!
//! The chunks are a cache and never the only way to the rows: a chunk
//! holds *every* merged row with a key in `(after, last]`, so the writer
//! uses one only when it covers the key the build stands at, and reads the
//! runs itself where none does (the thread behind or stopped, or a step
//! whose transaction did not commit, which leaves the build behind rows
//! already taken).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;

use redb::{Database, ReadableDatabase};

use super::{run_def, run_name, Merged, Run};

/// Rows in one chunk: each read transaction of the thread reads this many.
pub(super) const CHUNK_ROWS: usize = 4096;
/// Chunks the thread keeps ready (an idempotency key's row is about 80
/// bytes, so ~1.3 MB, and the one the writer is taking rows from).
const CHUNKS_AHEAD: usize = 4;

/// Merged rows (the newest run's version of each key, tombstones kept)
/// in key order: every one with a key in `(after, last]`.
pub(super) struct Chunk {
    after: Option<Vec<u8>>,
    /// The rows' keys and values, one after another.
    bytes: Vec<u8>,
    /// Where each row's key and value end in `bytes`.
    ends: Vec<(usize, usize)>,
    /// Whether no merged row comes after the last.
    end: bool,
}

impl Chunk {
    fn len(&self) -> usize {
        self.ends.len()
    }

    /// Row `i`: its key and value.
    pub(super) fn row(&self, i: usize) -> (&[u8], &[u8]) {
        let start = if i == 0 { 0 } else { self.ends[i - 1].1 };
        let (key_end, value_end) = self.ends[i];
        (&self.bytes[start..key_end], &self.bytes[key_end..value_end])
    }

    /// Whether every merged row after `after` up to the chunk's last is in
    /// it (`None`: from the first key).
    fn covers(&self, after: Option<&[u8]>) -> bool {
        match (&self.after, after) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(from), Some(at)) => from.as_slice() <= at,
        }
    }

    /// The first row with a key after `after`.
    fn first_after(&self, after: Option<&[u8]>) -> usize {
        match after {
            None => 0,
            Some(at) => {
                let (mut low, mut high) = (0, self.len());
                while low < high {
                    let mid = (low + high) / 2;
                    if self.row(mid).0 <= at {
                        low = mid + 1;
                    } else {
                        high = mid;
                    }
                }
                low
            }
        }
    }
}

/// What the chunks hold after the key a build stands at.
pub(super) enum Covered<'a> {
    /// The next rows, in key order.
    Rows(&'a Chunk, Range<usize>),
    /// No row comes after it: the merge is complete.
    End,
    /// Nothing ready covers it: the writer reads the runs itself.
    Not,
}

#[derive(Default)]
struct Queue {
    chunks: VecDeque<Chunk>,
    stop: bool,
    /// The thread has read its last chunk, or given up.
    finished: bool,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when a chunk is taken, and on stop.
    space: Condvar,
    /// Signalled when a chunk is ready, and when the thread finishes.
    ready: Condvar,
}

/// The read-ahead of one merge (the build writing run `target`).
pub(super) struct ReadAhead {
    target: u64,
    shared: Arc<Shared>,
    /// The chunk the writer takes rows from.
    current: Option<Chunk>,
    thread: Option<JoinHandle<()>>,
    /// Rows builds have taken from chunks (the index's count).
    taken: Arc<AtomicU64>,
}

impl ReadAhead {
    /// Starts reading the merge of `runs` into run `target` from the key
    /// after `after`; `None` if no thread could start.
    pub(super) fn start(
        db: Weak<Database>,
        target: u64,
        runs: &[Run],
        after: Option<Vec<u8>>,
        taken: Arc<AtomicU64>,
    ) -> Option<ReadAhead> {
        let shared = Arc::new(Shared::default());
        let names: Vec<String> = runs.iter().map(|r| run_name(r.id)).collect();
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("key-index-merge".into())
            .spawn(move || read_ahead(&db, &names, after, &theirs))
            .ok()?;
        Some(ReadAhead {
            target,
            shared,
            current: None,
            thread: Some(thread),
            taken,
        })
    }

    /// The run its merge writes.
    pub(super) fn target(&self) -> u64 {
        self.target
    }

    /// The next rows after `after` (at most `most`) if a chunk ready
    /// covers them.
    pub(super) fn covered(&mut self, after: Option<&[u8]>, most: usize) -> Covered<'_> {
        loop {
            if self.current.is_none() {
                let mut queue = self.shared.queue.lock().expect("read-ahead queue");
                self.current = queue.chunks.pop_front();
                drop(queue);
                if self.current.is_none() {
                    return Covered::Not;
                }
                self.shared.space.notify_one();
            }
            let chunk = self.current.as_ref().expect("taken above");
            if !chunk.covers(after) {
                return Covered::Not;
            }
            let first = chunk.first_after(after);
            if first < chunk.len() {
                let chunk = self.current.as_ref().expect("taken above");
                return Covered::Rows(chunk, first..chunk.len().min(first + most));
            }
            if chunk.end {
                return Covered::End;
            }
            // Every row of it is behind the build: the next chunk.
            self.current = None;
        }
    }

    /// Counts rows a build took from [`ReadAhead::covered`].
    pub(super) fn took(&self, rows: usize) {
        self.taken.fetch_add(rows as u64, Ordering::Relaxed);
    }

    /// Waits until the thread has its chunks ready or has finished (tests).
    #[cfg(test)]
    pub(super) fn wait_ready(&self) {
        let mut queue = self.shared.queue.lock().expect("read-ahead queue");
        while queue.chunks.len() < CHUNKS_AHEAD && !queue.finished {
            queue = self.shared.ready.wait(queue).expect("read-ahead queue");
        }
    }
}

/// Stops the thread and waits for it: it holds the database only while it
/// reads a chunk, so once this returns it holds nothing.
impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.shared.queue.lock().expect("read-ahead queue").stop = true;
        self.shared.space.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread: reads chunks after `after` until the runs are used up, the
/// read-ahead is stopped, the database is gone or a read fails (the
/// writer then reads the runs itself and reports what failed).
fn read_ahead(db: &Weak<Database>, names: &[String], mut after: Option<Vec<u8>>, shared: &Shared) {
    loop {
        {
            let mut queue = shared.queue.lock().expect("read-ahead queue");
            while queue.chunks.len() >= CHUNKS_AHEAD && !queue.stop {
                queue = shared.space.wait(queue).expect("read-ahead queue");
            }
            if queue.stop {
                break;
            }
        }
        let Some(db) = db.upgrade() else { break };
        let chunk = read_chunk(&db, names, after.clone(), shared);
        drop(db);
        let Ok(Some(chunk)) = chunk else { break };
        let end = chunk.end;
        if let Some(last) = chunk.len().checked_sub(1) {
            after = Some(chunk.row(last).0.to_vec());
        }
        shared
            .queue
            .lock()
            .expect("read-ahead queue")
            .chunks
            .push_back(chunk);
        shared.ready.notify_all();
        if end {
            break;
        }
    }
    shared.queue.lock().expect("read-ahead queue").finished = true;
    shared.ready.notify_all();
}

/// Merges up to [`CHUNK_ROWS`] rows of the runs `names` (newest first)
/// after `after`, as [`super::build_by_merging`] does; `None` once
/// stopped.
fn read_chunk(
    db: &Database,
    names: &[String],
    after: Option<Vec<u8>>,
    shared: &Shared,
) -> Result<Option<Chunk>, redb::Error> {
    let txn = db.begin_read()?;
    let tables = names
        .iter()
        .map(|name| txn.open_table(run_def(name)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut merged = Merged::after(&tables, after.as_deref())?;
    let mut chunk = Chunk {
        after,
        bytes: Vec::with_capacity(CHUNK_ROWS * 96),
        ends: Vec::with_capacity(CHUNK_ROWS),
        end: false,
    };
    while chunk.len() < CHUNK_ROWS {
        if chunk.len() % 256 == 255 && shared.queue.lock().expect("read-ahead queue").stop {
            return Ok(None);
        }
        let Some((key, value)) = merged.next()? else {
            chunk.end = true;
            break;
        };
        chunk.bytes.extend_from_slice(key.value());
        let key_end = chunk.bytes.len();
        chunk.bytes.extend_from_slice(value.value());
        chunk.ends.push((key_end, chunk.bytes.len()));
    }
    // A chunk that ends with the runs says so, for the build to end on it.
    chunk.end |= merged.used_up();
    Ok(Some(chunk))
}
