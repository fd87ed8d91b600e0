//! The index's recent versions: every version its log holds, by key, in
//! memory (the module comment of [`super`]).
//!
//! Kept in a hash table rather than in key order. Nearly every key is new
//! (clients' random Idempotency-Keys), and adding one to an ordered map
//! searched ~17 boxed keys elsewhere in memory on the one writer thread
//! (2.8% of a flow's samples: docs/performance.md, "Recent versions by
//! hash"); here an add, and a lookup of a key no version holds, is one
//! probe by the hash the runs' Bloom filters use. The key order is needed
//! only to write the versions as a run, once they are frozen: it is made
//! then, once ([`Recent::sort`]), off the writer thread for a full flush.

use std::sync::OnceLock;

use hashbrown::hash_table::Entry as Slot;
use hashbrown::HashTable;

/// A write of one commit: its number and the value (`None`: a delete).
pub(super) type Version = (u64, Option<Box<[u8]>>);

/// One key's versions in commit order. A key mostly has one (a second
/// comes only when a key is written again before its flush), kept inline:
/// with the key in a boxed slice, a version costs two allocations (key and
/// value) (docs/performance.md, "Recent versions packed").
pub(super) enum KeyVersions {
    One(Version),
    Many(Vec<Version>),
}

impl KeyVersions {
    fn as_slice(&self) -> &[Version] {
        match self {
            KeyVersions::One(v) => std::slice::from_ref(v),
            KeyVersions::Many(vs) => vs,
        }
    }

    fn push(&mut self, version: Version) {
        match self {
            KeyVersions::Many(vs) => vs.push(version),
            KeyVersions::One(first) => {
                let first = std::mem::take(first);
                *self = KeyVersions::Many(vec![first, version]);
            }
        }
    }

    /// The latest version among commits up to `visible`: `None` when
    /// there is none, `Some(None)` for a delete.
    pub(super) fn latest(&self, visible: u64) -> Option<Option<&[u8]>> {
        self.as_slice()
            .iter()
            .rev()
            .find(|(c, _)| *c <= visible)
            .map(|(_, v)| v.as_deref())
    }
}

/// A key, its hash ([`crate::bloom::hash`]) and its versions.
struct Keyed {
    hash: u64,
    key: Box<[u8]>,
    versions: KeyVersions,
}

/// Versions by key, each key's in commit order.
#[derive(Default)]
pub(super) struct Recent {
    /// In the order their keys were first written.
    keys: Vec<Keyed>,
    /// Each key's place in `keys`, by its hash.
    places: HashTable<u32>,
    /// How many versions `keys` holds.
    pub(super) versions: usize,
    /// The places of `keys` in key order, once sorted; emptied by any
    /// change.
    order: OnceLock<Box<[u32]>>,
}

impl Recent {
    pub(super) fn push(&mut self, key: &[u8], version: Version) {
        self.push_hashed(key, crate::bloom::hash(key), version);
    }

    fn push_hashed(&mut self, key: &[u8], hash: u64, version: Version) {
        if self.order.get().is_some() {
            self.order = OnceLock::new();
        }
        let keys = &self.keys;
        let slot = self.places.entry(
            hash,
            |&at| {
                let k = &keys[at as usize];
                k.hash == hash && *k.key == *key
            },
            |&at| keys[at as usize].hash,
        );
        match slot {
            Slot::Occupied(at) => {
                let at = *at.get() as usize;
                self.keys[at].versions.push(version);
            }
            Slot::Vacant(free) => {
                let at = u32::try_from(self.keys.len()).expect("fewer than 2^32 recent keys");
                free.insert(at);
                self.keys.push(Keyed {
                    hash,
                    key: key.into(),
                    versions: KeyVersions::One(version),
                });
            }
        }
        self.versions += 1;
    }

    /// How many keys have versions.
    pub(super) fn keys(&self) -> usize {
        self.keys.len()
    }

    /// The latest version of `key` among commits up to `visible`: `None`
    /// when there is none, `Some(None)` for a delete.
    #[cfg(test)]
    pub(super) fn latest(&self, key: &[u8], visible: u64) -> Option<Option<&[u8]>> {
        self.latest_hashed(key, crate::bloom::hash(key), visible)
    }

    /// [`Recent::latest`] of a key whose hash is `hash`.
    pub(super) fn latest_hashed(
        &self,
        key: &[u8],
        hash: u64,
        visible: u64,
    ) -> Option<Option<&[u8]>> {
        let at = self.places.find(hash, |&at| {
            let k = &self.keys[at as usize];
            k.hash == hash && *k.key == *key
        })?;
        self.keys[*at as usize].versions.latest(visible)
    }

    /// Every key in `lower..upper` with its versions, in no order.
    pub(super) fn range<'a>(
        &'a self,
        lower: &'a [u8],
        upper: &'a [u8],
    ) -> impl Iterator<Item = (&'a [u8], &'a KeyVersions)> + 'a {
        self.keys
            .iter()
            .filter(move |k| *k.key >= *lower && *k.key < *upper)
            .map(|k| (&*k.key, &k.versions))
    }

    /// Puts the keys in key order, unless they are already (a flush's
    /// 65,536, about a million key comparisons). [`Recent::after`] waits
    /// for a sort under way on another thread.
    pub(super) fn sort(&self) -> &[u32] {
        self.order.get_or_init(|| {
            let mut order: Vec<u32> = (0..self.keys.len() as u32).collect();
            order.sort_unstable_by(|&a, &b| {
                self.keys[a as usize].key.cmp(&self.keys[b as usize].key)
            });
            order.into()
        })
    }

    /// Whether the keys are in key order already.
    pub(super) fn sorted(&self) -> bool {
        self.order.get().is_some()
    }

    /// The keys after `after` (all of them for `None`), in key order,
    /// with their versions; sorts them first if need be.
    pub(super) fn after<'a>(
        &'a self,
        after: Option<&[u8]>,
    ) -> impl Iterator<Item = (&'a [u8], &'a KeyVersions)> + 'a {
        let order = self.sort();
        let from = match after {
            None => 0,
            Some(last) => order.partition_point(|&at| *self.keys[at as usize].key <= *last),
        };
        order[from..].iter().map(|&at| {
            let k = &self.keys[at as usize];
            (&*k.key, &k.versions)
        })
    }

    /// Removes the versions of commit `commit` (one that did not commit).
    pub(super) fn retract(&mut self, commit: u64) {
        let all = std::mem::take(&mut self.keys);
        let before = self.versions;
        self.places.clear();
        self.versions = 0;
        self.order = OnceLock::new();
        for Keyed {
            hash,
            key,
            versions,
        } in all
        {
            let versions = match versions {
                KeyVersions::One(v) => vec![v],
                KeyVersions::Many(vs) => vs,
            };
            for version in versions {
                if version.0 != commit {
                    self.push_hashed(&key, hash, version);
                }
            }
        }
        debug_assert!(self.versions <= before);
    }
}

/// Freeing a flush's worth of versions (~130k allocations) takes
/// milliseconds: done on a thread of its own rather than by the writer
/// or a request that happens to drop the last view holding them.
impl Drop for Recent {
    fn drop(&mut self) {
        if self.versions >= 4096 {
            let keys = std::mem::take(&mut self.keys);
            std::thread::spawn(move || drop(keys));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_versions_keep_commit_order_and_give_back_a_retracted_commit() {
        let mut recent = Recent::default();
        let v = |c: u64, value: Option<&[u8]>| (c, value.map(Box::from));
        recent.push(b"a", v(1, Some(b"a1")));
        recent.push(b"b", v(1, Some(b"b1")));
        recent.push(b"a", v(2, None));
        recent.push(b"a", v(3, Some(b"a3")));
        recent.push(b"c", v(3, Some(b"c3")));
        assert_eq!(recent.versions, 5);
        assert_eq!(recent.latest(b"a", 1), Some(Some(&b"a1"[..])));
        assert_eq!(recent.latest(b"a", 2), Some(None));
        assert_eq!(recent.latest(b"a", 9), Some(Some(&b"a3"[..])));
        assert_eq!(recent.latest(b"a", 0), None);
        assert_eq!(recent.latest(b"d", 9), None);
        // Commit 3 did not commit: a key with one version of it goes, a
        // key with others keeps them.
        recent.retract(3);
        assert_eq!(recent.versions, 3);
        assert_eq!(recent.latest(b"a", 9), Some(None));
        assert_eq!(recent.latest(b"c", 9), None);
        assert_eq!(recent.keys(), 2);
        recent.retract(1);
        assert_eq!(recent.versions, 1);
        assert_eq!(recent.latest(b"b", 9), None);
        assert_eq!(recent.latest(b"a", 9), Some(None));
        recent.retract(2);
        assert_eq!((recent.versions, recent.keys()), (0, 0));
        assert_eq!(recent.places.len(), 0);
    }

    fn keys_after(recent: &Recent, after: Option<&[u8]>) -> Vec<Vec<u8>> {
        recent.after(after).map(|(k, _)| k.to_vec()).collect()
    }

    #[test]
    fn keys_come_in_key_order_after_a_key_and_a_change_sorts_them_again() {
        let mut recent = Recent::default();
        for k in [&b"m"[..], b"c", b"x", b"a", b"q"] {
            recent.push(k, (1, Some(k.into())));
        }
        assert!(!recent.sorted());
        let all: Vec<Vec<u8>> = [&b"a"[..], b"c", b"m", b"q", b"x"]
            .iter()
            .map(|k| k.to_vec())
            .collect();
        assert_eq!(keys_after(&recent, None), all);
        assert!(recent.sorted());
        // After a key held, and after one between two.
        assert_eq!(keys_after(&recent, Some(b"c")), all[2..]);
        assert_eq!(keys_after(&recent, Some(b"n")), all[3..]);
        assert_eq!(keys_after(&recent, Some(b"z")), Vec::<Vec<u8>>::new());
        // A new key, and a retraction, are in the next order.
        recent.push(b"b", (2, None));
        assert!(!recent.sorted());
        assert_eq!(
            keys_after(&recent, Some(b"a"))[..2],
            [b"b".to_vec(), b"c".to_vec()]
        );
        recent.retract(2);
        assert_eq!(keys_after(&recent, Some(b"a"))[0], b"c".to_vec());
        let mut ranged: Vec<&[u8]> = recent.range(b"b", b"q").map(|(k, _)| k).collect();
        ranged.sort();
        assert_eq!(ranged, [&b"c"[..], b"m"]);
    }

    #[test]
    fn a_sort_on_another_thread_is_waited_for() {
        let mut recent = Recent::default();
        for i in 0..50_000u32 {
            let k = (i.wrapping_mul(2_654_435_761)).to_be_bytes();
            recent.push(&k, (1, Some(k.into())));
        }
        let recent = std::sync::Arc::new(recent);
        let sorter = {
            let recent = recent.clone();
            std::thread::spawn(move || recent.sort().len())
        };
        let keys: Vec<&[u8]> = recent.after(None).map(|(k, _)| k).collect();
        assert_eq!(keys.len(), 50_000);
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(sorter.join().unwrap(), 50_000);
    }
}
