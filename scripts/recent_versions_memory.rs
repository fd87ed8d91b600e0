//! Resident memory per recent version of the idempotency key index
//! (storage/src/key_index/), for the map shape it used before and the
//! packed one it uses now (docs/performance.md, "Recent versions packed"):
//! 65,536 keys of 60 bytes, one 8-byte value each, as the index holds
//! them between two flushes.
//!
//!   rustc -O scripts/recent_versions_memory.rs -o /tmp/rvm && /tmp/rvm vec && /tmp/rvm packed
use std::collections::BTreeMap;

/// Before: a `Vec` of versions per key, each value a `Vec`.
type VecVersion = (u64, Option<Vec<u8>>);
/// Now: the key's one version inline, each value a boxed slice.
type PackedVersion = (u64, Option<Box<[u8]>>);
#[allow(dead_code)]
enum KeyVersions {
    One(PackedVersion),
    Many(Vec<PackedVersion>),
}

fn resident() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc");
    let pages: usize = statm.split(' ').nth(1).and_then(|p| p.parse().ok()).expect("statm");
    pages * 4096
}

/// A record key's shape: a 24-byte scope, then a 36-character key; as
/// the index gets it, a slice it copies (`to_vec` or `into`, both
/// allocating exactly its 60 bytes).
fn key(i: u64) -> [u8; 60] {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut k = [7u8; 60];
    for b in &mut k[24..] {
        *b = b'a' + (x % 26) as u8;
        x = x.rotate_left(5) ^ i;
    }
    k
}

fn main() {
    let n = 65_536u64;
    let shape = std::env::args().nth(1).unwrap_or_default();
    let before = resident();
    match shape.as_str() {
        "vec" => {
            let mut m: BTreeMap<Vec<u8>, Vec<VecVersion>> = BTreeMap::new();
            for i in 0..n {
                let v = (i, Some(i.to_be_bytes().to_vec()));
                m.entry(key(i).to_vec()).or_default().push(v);
            }
            println!("vec: {} bytes a version", (resident() - before) / n as usize);
            std::mem::forget(m);
        }
        "packed" => {
            let mut m: BTreeMap<Box<[u8]>, KeyVersions> = BTreeMap::new();
            for i in 0..n {
                let v = (i, Some(Box::from(&i.to_be_bytes()[..])));
                m.insert(key(i)[..].into(), KeyVersions::One(v));
            }
            println!("packed: {} bytes a version", (resident() - before) / n as usize);
            std::mem::forget(m);
        }
        _ => eprintln!("usage: rvm vec|packed"),
    }
}
