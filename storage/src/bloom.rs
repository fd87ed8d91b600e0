//! A Bloom filter over byte strings: whether a sorted run of the
//! idempotency key index may hold a key ([`crate::key_index`]), so a
//! lookup of a key no run holds (every new Idempotency-Key) reads no run.
//!
//! Sixteen bits and seven probes per key (about 0.07% false positives;
//! filters written before with ten bits a key, about 0.8%, read on with
//! the same probes: a filter's size is its own); the probes are double
//! hashing (Kirsch and Mitzenmacher) of one 64-bit SipHash-1-3 of the
//! key with fixed keys (the `siphasher` crate: an algorithm fixed by its
//! specification, unlike `std`'s `DefaultHasher`, which may change
//! between Rust releases), so a filter written to the store reads back
//! the same in any process and any build.

use std::hash::Hasher;

use siphasher::sip::SipHasher13;

/// Each false positive reads a run's pages, on a grown store from the
/// disk: at ten bits a key they were a third of the store's reads of
/// pages not in its cache at 800,000 intents (docs/performance.md, "A
/// grown store's reads").
const BITS_PER_KEY: usize = 16;
const PROBES: u64 = 7;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Bloom {
    words: Vec<u64>,
}

/// The 64-bit SipHash-1-3 of `key` the probes are made from (also the
/// key index's hash of its recent keys).
pub(crate) fn hash(key: &[u8]) -> u64 {
    let mut h = SipHasher13::new_with_keys(0, 0);
    h.write(key);
    h.finish()
}

impl Bloom {
    /// An empty filter sized for `keys` keys.
    pub(crate) fn new(keys: usize) -> Self {
        Bloom::sized(keys, BITS_PER_KEY)
    }

    /// An empty filter of `bits_per_key` bits for each of `keys` keys
    /// (at least 64).
    fn sized(keys: usize, bits_per_key: usize) -> Self {
        let bits = (keys.max(1) * bits_per_key).max(64);
        Bloom {
            words: vec![0; bits.div_ceil(64)],
        }
    }

    /// The word and bit of the `i`-th probe of a key hashed `h`.
    fn probe(&self, h: u64, i: u64) -> (usize, u64) {
        let m = self.words.len() as u64 * 64;
        let (h1, h2) = (h, h.rotate_left(32) | 1);
        let bit = h1.wrapping_add(i.wrapping_mul(h2)) % m;
        ((bit / 64) as usize, 1u64 << (bit % 64))
    }

    pub(crate) fn insert(&mut self, key: &[u8]) {
        let h = hash(key);
        for i in 0..PROBES {
            let (word, mask) = self.probe(h, i);
            self.words[word] |= mask;
        }
    }

    /// `false` only for a key never inserted.
    #[cfg(test)]
    pub(crate) fn may_contain(&self, key: &[u8]) -> bool {
        self.may_contain_hashed(hash(key))
    }

    /// [`Bloom::may_contain`] of a key whose [`hash`] is `h`: a lookup
    /// through many runs hashes its key once, and stops at the first probe
    /// that misses (about half the time the first, for a key never
    /// inserted).
    pub(crate) fn may_contain_hashed(&self, h: u64) -> bool {
        (0..PROBES).all(|i| {
            let (word, mask) = self.probe(h, i);
            self.words[word] & mask != 0
        })
    }

    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if bytes.is_empty() || !bytes.len().is_multiple_of(8) {
            return None;
        }
        Some(Bloom {
            words: bytes
                .chunks_exact(8)
                .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many of `absent` keys never inserted pass `bloom`.
    fn passed_of_absent(bloom: &Bloom, absent: u32) -> usize {
        (0..absent)
            .filter(|i| bloom.may_contain(format!("out-{i}").as_bytes()))
            .count()
    }

    #[test]
    fn every_inserted_key_is_found_and_few_others_are() {
        let mut bloom = Bloom::new(10_000);
        for i in 0..10_000u32 {
            bloom.insert(format!("in-{i}").as_bytes());
        }
        for i in 0..10_000u32 {
            assert!(bloom.may_contain(format!("in-{i}").as_bytes()));
        }
        let false_positives = passed_of_absent(&bloom, 10_000);
        assert!(false_positives < 300, "{false_positives} of 10,000");
        let back = Bloom::from_bytes(&bloom.to_bytes()).unwrap();
        assert_eq!(back, bloom);
        assert_eq!(Bloom::from_bytes(&[1, 2, 3]), None);
    }

    /// A false positive costs a read of a run's pages: fewer than 2 in
    /// 1,000 keys never inserted pass (about 70 in 100,000 expected at
    /// sixteen bits a key; ten bits let through about 820).
    #[test]
    fn under_two_in_a_thousand_absent_keys_pass_the_filter() {
        let mut bloom = Bloom::new(65_536);
        for i in 0..65_536u32 {
            bloom.insert(format!("in-{i}").as_bytes());
        }
        let false_positives = passed_of_absent(&bloom, 100_000);
        assert!(false_positives < 200, "{false_positives} of 100,000");
    }

    /// Filters written at ten bits a key, before, stay in the store: read
    /// back, they find every key they were written with.
    #[test]
    fn a_filter_stored_at_ten_bits_a_key_finds_its_keys() {
        let keys: Vec<String> = (0..1_000u32).map(|i| format!("key-{i}")).collect();
        let mut old = Bloom::sized(1_000, 10);
        for key in &keys {
            old.insert(key.as_bytes());
        }
        let back = Bloom::from_bytes(&old.to_bytes()).unwrap();
        assert!(keys.iter().all(|k| back.may_contain(k.as_bytes())));
        let false_positives = passed_of_absent(&back, 10_000);
        assert!(false_positives < 300, "{false_positives} of 10,000");
    }

    /// Filters are stored: a key's probes must stay where the filters
    /// already written put them (bit `(h1 + i * h2) mod m` for i in 0..7).
    #[test]
    fn the_probes_are_where_stored_filters_put_them() {
        let mut bloom = Bloom::new(1_000);
        let m = bloom.words.len() as u64 * 64;
        let mut expected = vec![0u64; bloom.words.len()];
        for i in 0..1_000u32 {
            let key = format!("key-{i}");
            bloom.insert(key.as_bytes());
            let h = hash(key.as_bytes());
            let (h1, h2) = (h, h.rotate_left(32) | 1);
            for p in 0..7u64 {
                let bit = h1.wrapping_add(p.wrapping_mul(h2)) % m;
                expected[(bit / 64) as usize] |= 1 << (bit % 64);
            }
            assert!(bloom.may_contain_hashed(h));
        }
        assert_eq!(bloom.words, expected);
    }

    // SipHash-1-3 with keys (0, 0); the second agrees with CPython's
    // `hash(b"idempotency key")` under PYTHONHASHSEED=0 (also SipHash-1-3
    // with zero keys), an implementation apart from this one.
    const PINNED_EMPTY: u64 = 15_130_871_412_783_076_140;
    const PINNED_KEY: u64 = 8_545_041_214_277_102_082;

    /// Filters are stored: the hash must never change.
    #[test]
    fn the_hash_is_pinned() {
        assert_eq!(hash(b""), PINNED_EMPTY);
        assert_eq!(hash(b"idempotency key"), PINNED_KEY);
    }
}
