//! The store file's pages through a write-ahead journal: redb's storage
//! backend for the embedded store.
//!
//! redb makes a commit durable by writing every page it touched in place
//! (about 40 pages in 20 runs scattered over the file per group commit)
//! and then `fdatasync`. Here those writes land in memory, in 4 KiB
//! blocks of the *active layer*, and `sync_data` appends the blocks
//! dirtied since the last one to the active journal file as one group
//! (one sequential write) and `fdatasync`s that: a commit is durable once
//! its group is, and acknowledged only after. Reads see the layers over
//! the file.
//!
//! Once the active journal passes [`ROTATE_BYTES`] (and no checkpoint is
//! running), the active layer is *frozen* and the other journal file
//! becomes active; the `kobo-checkpoint` thread writes the frozen
//! layer's blocks into the store file in order, syncs it, and drops the
//! layer. A journal is reused only after the layer it holds is in the
//! synced store file, so at any moment the store file and the two
//! journals, applied in generation order, are the store
//! ([`group::apply`]). Opening replays both journals into the store file
//! before redb reads anything, syncs it, and marks both journals as
//! applied; closing checkpoints everything and marks them too.
//!
//! The journal files (`kobo.redb.journal-a`, `kobo.redb.journal-b`) are
//! part of the store until it is closed: copying `kobo.redb` alone after
//! a crash loses the commits only they hold.

mod backend;
mod group;

use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use redb::backends::FileBackend;

/// The unit the journal keeps and writes: redb's page size.
pub(crate) const BLOCK: usize = 4096;
/// How far the active journal grows before its layer is checkpointed.
const ROTATE_BYTES: u64 = 16 << 20;
const JOURNALS: [&str; 2] = ["journal-a", "journal-b"];
/// The most blocks a checkpoint writes in one `pwrite`.
const CHECKPOINT_RUN_BLOCKS: usize = 256;

/// The journal files beside the store file at `path`.
pub(crate) fn journal_paths(path: &Path) -> [PathBuf; 2] {
    JOURNALS.map(|suffix| {
        let mut name = path.as_os_str().to_owned();
        name.push(".");
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// Why a store file could not be opened with its journals.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// Another process has the store open.
    Locked,
    Io(io::Error),
}

impl From<io::Error> for OpenError {
    fn from(e: io::Error) -> Self {
        OpenError::Io(e)
    }
}

type Block = Box<[u8; BLOCK]>;

fn zeroed() -> Block {
    vec![0u8; BLOCK]
        .into_boxed_slice()
        .try_into()
        .expect("BLOCK bytes")
}

/// One block of a layer.
struct Slot {
    block: Block,
    /// Changed since the last group: the next `sync_data` journals it.
    dirty: bool,
}

/// Blocks written over the layers and the file below.
#[derive(Default)]
struct Layer {
    blocks: HashMap<u64, Slot>,
    /// Blocks numbered from here up read as zero unless this layer holds
    /// them: the store was cut below them while this layer was active.
    cut: Option<u64>,
    /// The store's length when the layer was frozen.
    len: u64,
}

impl Layer {
    /// Whether this layer answers for block `n`, and with what (`None`:
    /// zeros).
    fn answer(&self, n: u64) -> Option<Option<&Block>> {
        match self.blocks.get(&n) {
            Some(slot) => Some(Some(&slot.block)),
            None if self.cut.is_some_and(|c| n >= c) => Some(None),
            None => None,
        }
    }
}

struct State {
    len: u64,
    active: Layer,
    /// The active blocks changed since the last group, each once.
    dirty: Vec<u64>,
    /// The store's length when the last group was written.
    synced_len: u64,
    /// The smallest length the store was cut to since the last group.
    shrink: u64,
    /// The layer the checkpoint thread is writing into the store file.
    frozen: Option<Arc<Layer>>,
    /// The store file's own length.
    file_len: u64,
    /// A checkpoint that failed: every later sync fails with it.
    failed: Option<String>,
}

/// The journal files and where the next group goes: only `sync_data`
/// (redb's committing thread) and `close` take it.
struct Journals {
    files: [File; 2],
    /// The same files opened with `O_DIRECT`, for the groups (no copy
    /// into the page cache); `None` where the file system refuses it.
    direct: [Option<File>; 2],
    active: usize,
    generation: u64,
    number: u64,
    position: u64,
    /// The group being written, its memory kept from one to the next.
    group: group::Aligned,
}

/// The checkpoint thread and the way to hand it frozen layers.
type Checkpointer = (mpsc::Sender<Arc<Layer>>, JoinHandle<()>);

/// redb's [`StorageBackend`] over the store file and its journals.
pub(crate) struct Journaled {
    store: Arc<FileBackend>,
    store_file: Arc<File>,
    state: Arc<Mutex<State>>,
    journals: Mutex<Journals>,
    checkpoint: Mutex<Option<Checkpointer>>,
    rotate_bytes: u64,
    /// Held (an exclusive `flock` on journal-a) from before the replay
    /// until the store closes, so no second process replays or writes.
    _lock: File,
}

impl fmt::Debug for Journaled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Journaled")
    }
}

fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
}

/// `path` opened for writes that bypass the page cache, if the file
/// system allows it.
fn open_direct(path: &Path) -> Option<File> {
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .ok()
}

fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    File::open(dir.unwrap_or(Path::new(".")))?.sync_all()
}

impl Journaled {
    /// Opens the store file at `path` with its journals: takes the lock,
    /// replays whatever the journals hold into the store file, syncs it,
    /// and marks the journals applied.
    pub(crate) fn open(path: &Path) -> Result<Journaled, OpenError> {
        Journaled::open_rotating_at(path, ROTATE_BYTES, true)
    }

    /// [`Journaled::open`] rotating at `rotate_bytes`; without
    /// `checkpoints` (for tests) a frozen layer is never written into the
    /// store file.
    fn open_rotating_at(
        path: &Path,
        rotate_bytes: u64,
        checkpoints: bool,
    ) -> Result<Journaled, OpenError> {
        let paths = journal_paths(path);
        let files = [open_rw(&paths[0])?, open_rw(&paths[1])?];
        let lock = files[0].try_clone()?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(OpenError::Locked),
            Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
        }
        let store_file = open_rw(path)?;
        sync_dir(path)?;
        let next_generation = replay(&store_file, &files)?;
        for file in &files {
            file.write_all_at(&group::marker(next_generation), 0)?;
            file.sync_data()?;
        }
        let file_len = store_file.metadata()?.len();
        let store_file = Arc::new(store_file);
        let store = Arc::new(
            FileBackend::new(store_file.try_clone()?)
                .map_err(|e| OpenError::Io(io::Error::other(e.to_string())))?,
        );
        let state = Arc::new(Mutex::new(State {
            len: file_len,
            active: Layer::default(),
            dirty: Vec::new(),
            synced_len: file_len,
            shrink: group::NO_SHRINK,
            frozen: None,
            file_len,
            failed: None,
        }));
        let (sender, receiver) = mpsc::channel::<Arc<Layer>>();
        let thread = {
            let state = state.clone();
            let file = store_file.clone();
            let direct = open_direct(path);
            std::thread::Builder::new()
                .name("kobo-checkpoint".into())
                .spawn(move || {
                    for layer in receiver {
                        if !checkpoints {
                            continue;
                        }
                        let done = checkpoint(&file, direct.as_ref(), &layer);
                        let mut s = state.lock().unwrap();
                        match done {
                            Ok(()) => {
                                s.file_len = layer.len;
                                s.frozen = None;
                            }
                            Err(e) => {
                                s.failed =
                                    Some(format!("writing the journal into the store file: {e}"));
                            }
                        }
                    }
                })?
        };
        Ok(Journaled {
            store,
            store_file,
            state,
            journals: Mutex::new(Journals {
                direct: [open_direct(&paths[0]), open_direct(&paths[1])],
                files,
                active: 0,
                generation: next_generation,
                number: 0,
                position: 0,
                group: group::Aligned::default(),
            }),
            checkpoint: Mutex::new(Some((sender, thread))),
            rotate_bytes,
            _lock: lock,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// Block `n`'s current bytes when the active layer does not hold it:
    /// zeros past the active layer's cut, else the frozen layer's, else
    /// the store file's (zeros past its end).
    fn base(&self, s: &State, n: u64) -> io::Result<Block> {
        if s.active.cut.is_some_and(|c| n >= c) {
            return Ok(zeroed());
        }
        if let Some(answer) = s.frozen.as_ref().and_then(|f| f.answer(n)) {
            return Ok(answer.cloned().unwrap_or_else(zeroed));
        }
        let mut block = zeroed();
        let at = n * BLOCK as u64;
        if at < s.file_len {
            let end = (s.file_len - at).min(BLOCK as u64) as usize;
            self.store_file.read_exact_at(&mut block[..end], at)?;
        }
        Ok(block)
    }

    /// Active block `n`, marked dirty, for a change: taken from below
    /// first unless the change overwrites it `whole`.
    fn slot<'s>(&self, s: &'s mut State, n: u64, whole: bool) -> io::Result<&'s mut Block> {
        if !s.active.blocks.contains_key(&n) {
            let block = if whole { zeroed() } else { self.base(s, n)? };
            s.active.blocks.insert(
                n,
                Slot {
                    block,
                    dirty: false,
                },
            );
        }
        let slot = s.active.blocks.get_mut(&n).expect("inserted");
        if !slot.dirty {
            slot.dirty = true;
            s.dirty.push(n);
        }
        Ok(&mut slot.block)
    }

    /// Freezes the active layer for the checkpoint thread and makes the
    /// other journal active, unless a checkpoint is still running (then
    /// the active journal grows until it is done).
    fn rotate(&self, journals: &mut Journals) -> io::Result<()> {
        let layer = {
            let mut s = self.state();
            if s.frozen.is_some() || !s.dirty.is_empty() {
                return Ok(());
            }
            let mut layer = std::mem::take(&mut s.active);
            layer.len = s.len;
            let layer = Arc::new(layer);
            s.frozen = Some(layer.clone());
            layer
        };
        journals.active ^= 1;
        journals.generation += 1;
        journals.number = 0;
        journals.position = 0;
        let checkpoint = self.checkpoint.lock().unwrap();
        let (sender, _) = checkpoint
            .as_ref()
            .ok_or_else(|| io::Error::other("the store is closing"))?;
        sender
            .send(layer)
            .map_err(|_| io::Error::other("the checkpoint thread is gone"))
    }

    /// Writes every layer into the store file and syncs it, then marks
    /// the journals applied: the store file alone is the store.
    fn checkpoint_all(&self) -> io::Result<()> {
        let running = self.checkpoint.lock().unwrap().take();
        if let Some((sender, thread)) = running {
            drop(sender);
            let _ = thread.join();
        }
        let mut journals = self.journals.lock().unwrap();
        let mut s = self.state();
        if let Some(e) = &s.failed {
            return Err(io::Error::other(e.clone()));
        }
        if let Some(frozen) = s.frozen.take() {
            checkpoint(&self.store_file, None, &frozen)?;
        }
        let mut active = std::mem::take(&mut s.active);
        active.len = s.len;
        checkpoint(&self.store_file, None, &active)?;
        s.file_len = s.len;
        s.dirty.clear();
        s.shrink = group::NO_SHRINK;
        journals.generation += 1;
        for file in &journals.files {
            file.write_all_at(&group::marker(journals.generation), 0)?;
            file.sync_data()?;
        }
        journals.number = 0;
        journals.position = 0;
        Ok(())
    }
}

/// Replays both journals into `store` in generation order and syncs it;
/// returns the generation the next journal is to carry.
fn replay(store: &File, files: &[File; 2]) -> io::Result<u64> {
    let mut read = Vec::new();
    for file in files {
        let len = file.metadata()?.len() as usize;
        let mut bytes = vec![0u8; len];
        file.read_exact_at(&mut bytes, 0)?;
        read.push(bytes);
    }
    let mut parsed: Vec<_> = read.iter().map(|b| group::parse(b)).collect();
    parsed.sort_by_key(|(generation, _)| *generation);
    let mut newest = 0;
    for (generation, groups) in &parsed {
        if let Some(g) = generation {
            newest = newest.max(*g);
        }
        group::apply(store, groups)?;
    }
    store.sync_data()?;
    Ok(newest + 1)
}

/// Writes `layer` into the store file (its cut first, then its blocks in
/// order, then its length) and syncs it. Runs of consecutive blocks go
/// out in one write each (up to [`CHECKPOINT_RUN_BLOCKS`]), through
/// `direct` (the file opened with `O_DIRECT`) when there is one.
fn checkpoint(file: &File, direct: Option<&File>, layer: &Layer) -> io::Result<()> {
    if let Some(cut) = layer.cut {
        let cut = cut * BLOCK as u64;
        if cut < file.metadata()?.len() {
            file.set_len(cut)?;
        }
    }
    let mut numbers: Vec<u64> = layer.blocks.keys().copied().collect();
    numbers.sort_unstable();
    let mut direct = direct;
    let mut run = group::Aligned::default();
    run.reset(CHECKPOINT_RUN_BLOCKS * BLOCK, 0);
    let mut first = 0;
    let mut count = 0;
    for (i, n) in numbers.iter().enumerate() {
        if count == 0 {
            first = *n;
        }
        run[count * BLOCK..(count + 1) * BLOCK].copy_from_slice(&layer.blocks[n].block[..]);
        count += 1;
        let next_follows = numbers.get(i + 1) == Some(&(n + 1));
        if !next_follows || count == CHECKPOINT_RUN_BLOCKS {
            let bytes = &run[..count * BLOCK];
            let at = first * BLOCK as u64;
            match direct.map(|d| d.write_all_at(bytes, at)) {
                Some(Ok(())) => {}
                Some(Err(e)) if e.raw_os_error() == Some(libc::EINVAL) => {
                    direct = None;
                    file.write_all_at(bytes, at)?;
                }
                Some(Err(e)) => return Err(e),
                None => file.write_all_at(bytes, at)?,
            }
            count = 0;
        }
    }
    file.set_len(layer.len)?;
    file.sync_data()
}

fn blocks_of(offset: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    // (block, from within the block, to within the block, at within the buffer)
    let end = offset + len as u64;
    let first = offset / BLOCK as u64;
    let last = end.div_ceil(BLOCK as u64);
    (first..last).map(move |n| {
        let start = n * BLOCK as u64;
        let from = offset.max(start) - start;
        let to = end.min(start + BLOCK as u64) - start;
        let at = (start + from - offset) as usize;
        (n, from as usize, to as usize, at)
    })
}

#[cfg(test)]
mod tests;
