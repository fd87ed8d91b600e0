//! A journal's groups on disk, and replaying them into the store file.
//!
//! One group is what one `sync_data` made durable: a head (magic, flags,
//! generation, number, the store's length after the group, the smallest
//! length it was cut to, the count of blocks, a CRC-32 of the whole
//! group, then the blocks' numbers), padded to whole blocks, then the
//! blocks' bytes. A journal's groups begin at offset 0 and follow one
//! another; the first group names the journal's generation, and each
//! next group must carry the same generation and the next number. A
//! replay stops at the first group that is torn (short, wrong magic,
//! wrong CRC) or that belongs to an older use of the file (another
//! generation, a number out of order): what follows is not journal.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::BLOCK;

const MAGIC: &[u8; 4] = b"KJRN";
/// The fixed part of a head: magic, flags, generation, number, len,
/// shrink, count, crc.
const FIXED: usize = 4 + 4 + 8 + 8 + 8 + 8 + 4 + 4;
const CRC_AT: usize = FIXED - 4;
/// A group without blocks that only names the journal's generation: a
/// journal whose every group is already in the store file.
const FLAG_MARKER: u32 = 1;
/// "Never cut" in a head's shrink field.
pub(super) const NO_SHRINK: u64 = u64::MAX;

/// What a group says besides its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Head {
    pub generation: u64,
    pub number: u64,
    /// The store's length once the group is applied.
    pub len: u64,
    /// The smallest length the store was cut to since the group before
    /// ([`NO_SHRINK`] when it was not): bytes past it read as zero unless
    /// a block of this group or a later one wrote them.
    pub shrink: u64,
}

/// The bytes of one group: `blocks` are `(number, bytes)` pairs, each
/// `bytes` one whole block.
#[cfg(test)]
pub(super) fn encode<'a>(
    head: Head,
    blocks: impl ExactSizeIterator<Item = (u64, &'a [u8])>,
) -> Aligned {
    let mut out = Aligned::default();
    encode_into(&mut out, head, 0, blocks);
    out
}

/// [`encode`] into `out`, reusing its memory: a group per commit would
/// otherwise allocate (and the allocator map and unmap) fresh pages each
/// time.
pub(super) fn encode_reusing<'a>(
    out: &mut Aligned,
    head: Head,
    blocks: impl ExactSizeIterator<Item = (u64, &'a [u8])>,
) {
    encode_into(out, head, 0, blocks)
}

/// A marker group: generation `generation`, nothing to apply.
pub(super) fn marker(generation: u64) -> Aligned {
    let head = Head {
        generation,
        number: 0,
        len: 0,
        shrink: NO_SHRINK,
    };
    let mut out = Aligned::default();
    encode_into(&mut out, head, FLAG_MARKER, std::iter::empty());
    out
}

fn head_len(count: usize) -> usize {
    (FIXED + 8 * count).div_ceil(BLOCK) * BLOCK
}

/// Bytes starting at a block-aligned address (what a write through
/// `O_DIRECT` needs): a group's, or a checkpoint's run of blocks.
#[derive(Default)]
pub(super) struct Aligned {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    /// Makes room for `len` bytes, the first `zeroed` of them zero (the
    /// rest are about to be overwritten).
    pub(super) fn reset(&mut self, len: usize, zeroed: usize) {
        if self.buf.len() < len + BLOCK {
            self.buf = vec![0u8; len + BLOCK];
            self.start = self.buf.as_ptr().align_offset(BLOCK);
        }
        self.len = len;
        self[..zeroed].fill(0);
    }
}

impl std::ops::Deref for Aligned {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }
}

impl std::ops::DerefMut for Aligned {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

fn encode_into<'a>(
    out: &mut Aligned,
    head: Head,
    flags: u32,
    blocks: impl ExactSizeIterator<Item = (u64, &'a [u8])>,
) {
    let count = blocks.len();
    let head_bytes = head_len(count);
    out.reset(head_bytes + count * BLOCK, head_bytes);
    out[..4].copy_from_slice(MAGIC);
    out[4..8].copy_from_slice(&flags.to_le_bytes());
    out[8..16].copy_from_slice(&head.generation.to_le_bytes());
    out[16..24].copy_from_slice(&head.number.to_le_bytes());
    out[24..32].copy_from_slice(&head.len.to_le_bytes());
    out[32..40].copy_from_slice(&head.shrink.to_le_bytes());
    out[40..44].copy_from_slice(&(count as u32).to_le_bytes());
    for (i, (number, bytes)) in blocks.enumerate() {
        assert_eq!(bytes.len(), BLOCK, "a journal block is whole");
        out[FIXED + 8 * i..FIXED + 8 * i + 8].copy_from_slice(&number.to_le_bytes());
        out[head_bytes + i * BLOCK..head_bytes + (i + 1) * BLOCK].copy_from_slice(bytes);
    }
    let crc = crc32fast::hash(out);
    out[CRC_AT..FIXED].copy_from_slice(&crc.to_le_bytes());
}

/// One group read back.
pub(super) struct Group<'a> {
    pub head: Head,
    pub blocks: Vec<(u64, &'a [u8])>,
}

/// The journal in `bytes`: its generation (`None` when even its first
/// group is torn or absent) and its whole groups, in order.
pub(super) fn parse(bytes: &[u8]) -> (Option<u64>, Vec<Group<'_>>) {
    let mut groups = Vec::new();
    let mut generation = None;
    let mut at = 0usize;
    while let Some((group, flags, size)) = read_one(&bytes[at..]) {
        match generation {
            None => generation = Some(group.head.generation),
            Some(g) if g != group.head.generation => break,
            Some(_) => {}
        }
        if flags & FLAG_MARKER != 0 {
            break;
        }
        let expected = groups.len() as u64;
        if group.head.number != expected {
            break;
        }
        groups.push(group);
        at += size;
    }
    (generation, groups)
}

fn read_one(bytes: &[u8]) -> Option<(Group<'_>, u32, usize)> {
    if bytes.len() < BLOCK || &bytes[..4] != MAGIC {
        return None;
    }
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
    let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
    let flags = u32_at(4);
    let count = u32_at(40) as usize;
    let head_bytes = head_len(count);
    let size = head_bytes.checked_add(count.checked_mul(BLOCK)?)?;
    if size > bytes.len() {
        return None;
    }
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&bytes[..CRC_AT]);
    hasher.update(&[0; 4]);
    hasher.update(&bytes[FIXED..size]);
    if hasher.finalize() != u32_at(CRC_AT) {
        return None;
    }
    let head = Head {
        generation: u64_at(8),
        number: u64_at(16),
        len: u64_at(24),
        shrink: u64_at(32),
    };
    let blocks = (0..count)
        .map(|i| {
            let at = head_bytes + i * BLOCK;
            (u64_at(FIXED + 8 * i), &bytes[at..at + BLOCK])
        })
        .collect();
    Some((Group { head, blocks }, flags, size))
}

/// Applies `groups` to the store file in order: each cuts the file to its
/// shrink, writes its blocks, and sets the length it ends with. Applying
/// a journal again over a file that already holds it changes nothing.
pub(super) fn apply(file: &File, groups: &[Group<'_>]) -> io::Result<()> {
    for group in groups {
        let len = file.metadata()?.len();
        if group.head.shrink < len {
            file.set_len(group.head.shrink)?;
        }
        for (number, bytes) in &group.blocks {
            file.write_all_at(bytes, number * BLOCK as u64)?;
        }
        file.set_len(group.head.len)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(generation: u64, number: u64) -> Head {
        Head {
            generation,
            number,
            len: 3 * BLOCK as u64,
            shrink: NO_SHRINK,
        }
    }

    #[test]
    fn groups_read_back_until_a_torn_or_foreign_one() {
        let block = vec![7u8; BLOCK];
        let mut journal = encode(head(5, 0), [(2u64, &block[..])].into_iter()).to_vec();
        journal.extend_from_slice(&encode(head(5, 1), [(0u64, &block[..])].into_iter()));
        let whole = journal.len();
        // An older use of the file: generation 4 after the two groups.
        journal.extend_from_slice(&encode(head(4, 2), [(1u64, &block[..])].into_iter()));
        let (generation, groups) = parse(&journal);
        assert_eq!(generation, Some(5));
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].blocks[0].0, 2);
        assert_eq!(groups[1].head, head(5, 1));

        // The second group torn: one byte of its block flipped.
        journal[whole - 1] ^= 1;
        assert_eq!(parse(&journal).1.len(), 1);
        // Cut short.
        assert_eq!(parse(&journal[..whole - 1]).1.len(), 1);
        // A marker names its generation and holds nothing.
        assert_eq!(
            encode(head(5, 0), std::iter::empty()).as_ptr() as usize % BLOCK,
            0
        );
        let mut marked = marker(9).to_vec();
        marked.extend(&journal);
        assert_eq!(parse(&marked).0, Some(9));
        assert!(parse(&marked).1.is_empty());
        assert_eq!(parse(&[0u8; 10]).0, None);
    }

    #[test]
    fn a_head_spills_into_more_blocks_when_it_names_many() {
        let block = vec![1u8; BLOCK];
        let blocks: Vec<(u64, &[u8])> = (0..1_000u64).map(|n| (n * 3, &block[..])).collect();
        let bytes = encode(head(1, 0), blocks.iter().copied());
        assert_eq!(bytes.len(), 2 * BLOCK + 1_000 * BLOCK);
        let (_, groups) = parse(&bytes);
        assert_eq!(groups[0].blocks.len(), 1_000);
        assert_eq!(groups[0].blocks[999].0, 2_997);
    }
}
