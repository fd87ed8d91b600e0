//! Rendezvous (highest-random-weight) assignment of shards to live nodes:
//! each shard goes to the node with the highest weight
//! `first 8 bytes of sha256(node_id || shard as big-endian u16)`. A node
//! joining or leaving moves only the shards it wins or held.

use sha2::{Digest, Sha256};

use kobo_storage::fence::SHARDS;

/// The weight of `node_id` for `shard`.
pub fn weight(node_id: &str, shard: u16) -> u64 {
    let mut h = Sha256::new();
    h.update(node_id.as_bytes());
    h.update(shard.to_be_bytes());
    let d = h.finalize();
    u64::from_be_bytes(d[..8].try_into().expect("sha256 has 32 bytes"))
}

/// The node among `nodes` that should own `shard` (ties go to the lowest id).
pub fn owner<'a, I>(shard: u16, nodes: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    nodes
        .into_iter()
        .map(|n| (weight(n, shard), std::cmp::Reverse(n), n))
        .max()
        .map(|(_, _, n)| n)
}

/// The shards `me` should own among `nodes` (`me` included or not).
pub fn wanted(me: &str, nodes: &[&str]) -> Vec<u16> {
    (0..SHARDS)
        .filter(|&s| owner(s, nodes.iter().copied().chain(std::iter::once(me))) == Some(me))
        .collect()
}
