//! [`Journaled`] as redb's storage backend: reads through the layers,
//! writes into the active one, `sync_data` as one group appended and
//! synced, and redb's file locks passed to the store file.

use std::io;
use std::os::unix::fs::FileExt;

use redb::{BackendError, StorageBackend};

use super::{blocks_of, group, Journaled, BLOCK};

impl StorageBackend for Journaled {
    fn len(&self) -> io::Result<u64> {
        Ok(self.state().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let mut from_file = Vec::new();
        let file_len;
        {
            let s = self.state();
            if offset + out.len() as u64 > s.len {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "read past the end of the store",
                ));
            }
            file_len = s.file_len;
            for (n, from, to, at) in blocks_of(offset, out.len()) {
                let part = &mut out[at..at + to - from];
                let answer = s
                    .active
                    .answer(n)
                    .or_else(|| s.frozen.as_ref().and_then(|f| f.answer(n)));
                match answer {
                    Some(Some(block)) => part.copy_from_slice(&block[from..to]),
                    Some(None) => part.fill(0),
                    None => from_file.push((n * BLOCK as u64 + from as u64, at, to - from)),
                }
            }
        }
        for (position, at, len) in from_file {
            let part = &mut out[at..at + len];
            let inside = file_len.saturating_sub(position).min(len as u64) as usize;
            self.store_file
                .read_exact_at(&mut part[..inside], position)?;
            part[inside..].fill(0);
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.state();
        if len < s.len {
            let keep = len.div_ceil(BLOCK as u64);
            s.active.blocks.retain(|n, _| *n < keep);
            s.dirty.retain(|n| *n < keep);
            s.active.cut = Some(s.active.cut.map_or(keep, |c| c.min(keep)));
            if !len.is_multiple_of(BLOCK as u64) {
                // The block the store now ends in: its tail reads as zero.
                let n = len / BLOCK as u64;
                let tail = (len % BLOCK as u64) as usize;
                self.slot(&mut s, n, false)?[tail..].fill(0);
            }
            s.shrink = s.shrink.min(len);
        }
        s.len = len;
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut journals = self.journals.lock().unwrap();
        let mut bytes = std::mem::take(&mut journals.group);
        {
            let mut s = self.state();
            if let Some(e) = &s.failed {
                return Err(io::Error::other(e.clone()));
            }
            if s.dirty.is_empty() && s.shrink == group::NO_SHRINK && s.synced_len == s.len {
                // Every change is in a group already synced.
                journals.group = bytes;
                return Ok(());
            }
            let mut dirty = std::mem::take(&mut s.dirty);
            dirty.sort_unstable();
            let head = group::Head {
                generation: journals.generation,
                number: journals.number,
                len: s.len,
                shrink: s.shrink,
            };
            s.shrink = group::NO_SHRINK;
            s.synced_len = s.len;
            for n in &dirty {
                s.active
                    .blocks
                    .get_mut(n)
                    .expect("a dirty block is held")
                    .dirty = false;
            }
            let active = &s.active;
            group::encode_reusing(
                &mut bytes,
                head,
                dirty.iter().map(|n| (*n, &active.blocks[n].block[..])),
            );
            dirty.clear();
            s.dirty = dirty;
        }
        let active = journals.active;
        let written = match &journals.direct[active] {
            Some(direct) => direct.write_all_at(&bytes, journals.position),
            None => journals.files[active].write_all_at(&bytes, journals.position),
        };
        match written {
            Err(e)
                if e.raw_os_error() == Some(libc::EINVAL) && journals.direct[active].is_some() =>
            {
                // The file system takes no direct writes after all.
                journals.direct = [None, None];
                journals.files[active].write_all_at(&bytes, journals.position)?;
            }
            other => other?,
        }
        journals.files[active].sync_data()?;
        journals.position += bytes.len() as u64;
        journals.number += 1;
        journals.group = bytes;
        if journals.position >= self.rotate_bytes {
            self.rotate(&mut journals)?;
        }
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut s = self.state();
        for (n, from, to, at) in blocks_of(offset, data.len()) {
            let whole = to - from == BLOCK;
            self.slot(&mut s, n, whole)?[from..to].copy_from_slice(&data[at..at + to - from]);
        }
        s.len = s.len.max(offset + data.len() as u64);
        Ok(())
    }

    fn close(&self) -> io::Result<()> {
        let checkpointed = self.checkpoint_all();
        let closed = self.store.close();
        checkpointed?;
        closed
    }

    fn try_lock_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.store.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.store.try_lock_shared_range(start, end)
    }

    fn lock_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<(), BackendError> {
        self.store.lock_range(start, end)
    }

    fn lock_shared_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<(), BackendError> {
        self.store.lock_shared_range(start, end)
    }

    fn unlock_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<(), BackendError> {
        self.store.unlock_range(start, end)
    }

    fn query_lock_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.store.query_lock_range(start, end)
    }
}
