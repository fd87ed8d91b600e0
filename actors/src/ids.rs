//! Modes and the byte forms of ids used in store keys.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Test keys see test data only; live keys live data only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Test,
    Live,
}

impl Mode {
    pub fn livemode(self) -> bool {
        self == Mode::Live
    }
    pub fn byte(self) -> u8 {
        match self {
            Mode::Test => 0,
            Mode::Live => 1,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Test => "test",
            Mode::Live => "live",
        }
    }
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "test" => Some(Mode::Test),
            "live" => Some(Mode::Live),
            _ => None,
        }
    }
}

/// The key prefix of everything a merchant owns in one mode.
pub fn scope_key(merchant: Uuid, mode: Mode) -> kobo_storage::KeyBuf {
    kobo_storage::KeyBuf::new()
        .bytes(merchant.as_bytes())
        .u8(mode.byte())
}

pub fn id_key(id: Uuid) -> Vec<u8> {
    id.as_bytes().to_vec()
}

/// A new object id: a UUIDv7 stamped with the service clock (its tail is
/// random). New objects land near the end of the store's B-tree instead of on
/// a random page, which keeps the writer's page work flat as the store grows.
/// Ordering comes from the creation sequence, never from ids.
pub fn new_id(now: chrono::DateTime<chrono::Utc>) -> Uuid {
    let ts = uuid::Timestamp::from_unix(
        uuid::NoContext,
        now.timestamp().max(0) as u64,
        now.timestamp_subsec_nanos(),
    );
    Uuid::new_v7(ts)
}

/// A random base62 string (keys, secrets, capability codes in URLs): each
/// character uniformly from 62 (`gen_range` rejects biased draws), about
/// 5.95 bits, drawn from `thread_rng`, a CSPRNG (ChaCha12 seeded from the
/// OS and reseeded periodically).
pub fn random_base62(len: usize) -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let mut code = String::with_capacity(len);
    for _ in 0..len {
        code.push(BASE62[rng.gen_range(0..BASE62.len())] as char);
    }
    code
}

/// A capability code for a URL (`/c/<code>`): the creation time in
/// milliseconds as 8 base62 characters, then `random_len` random base62
/// characters. The time prefix keeps new codes at the end of the store's
/// B-tree like [`new_id`] (random keys cost the writer a page each); it says
/// when a link was made, which its page shows anyway, and nothing about how
/// many links exist (every code made at one instant has the same prefix).
pub fn time_ordered_code(now: chrono::DateTime<chrono::Utc>, random_len: usize) -> String {
    let mut ms = now.timestamp_millis().max(0) as u64;
    let mut prefix = [b'0'; TIME_PREFIX_LEN];
    for slot in prefix.iter_mut().rev() {
        *slot = BASE62[(ms % 62) as usize];
        ms /= 62;
    }
    let mut code = String::from_utf8(prefix.to_vec()).expect("base62 is ASCII");
    code.push_str(&random_base62(random_len));
    code
}

/// Characters of [`time_ordered_code`]'s time prefix: 62^8 ms is about
/// 6,900 years from 1970.
pub const TIME_PREFIX_LEN: usize = 8;

/// Characters of a 128-bit id in base62: 62^22 > 2^128.
pub const ID_BASE62_LEN: usize = 22;

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// `id` as [`ID_BASE62_LEN`] base62 characters, most significant first
/// (leading zeros kept, so every id has the same length).
pub fn id_base62(id: Uuid) -> String {
    let mut n = id.as_u128();
    let mut digits = [b'0'; ID_BASE62_LEN];
    for slot in digits.iter_mut().rev() {
        *slot = BASE62[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8(digits.to_vec()).expect("base62 is ASCII")
}

/// The id [`id_base62`] wrote as `text`: `None` for text of another
/// length, a character outside base62, or a number past 128 bits.
pub fn id_from_base62(text: &str) -> Option<Uuid> {
    if text.len() != ID_BASE62_LEN {
        return None;
    }
    let mut n: u128 = 0;
    for b in text.bytes() {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'A'..=b'Z' => b - b'A' + 10,
            b'a'..=b'z' => b - b'a' + 36,
            _ => return None,
        };
        n = n.checked_mul(62)?.checked_add(u128::from(digit))?;
    }
    Some(Uuid::from_u128(n))
}

/// Compares two secrets without stopping at the first difference.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Hex SHA-256, used to store secrets (API keys, client secrets) as hashes.
/// Hashed on every secret-key request: `encode_to_slice` writes the 64
/// digits straight into a buffer (`hex::encode` goes a char at a time).
pub fn sha256_hex(s: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut digits = [0u8; 64];
    hex::encode_to_slice(Sha256::digest(s.as_bytes()), &mut digits)
        .expect("64 digits for 32 bytes");
    String::from_utf8(digits.to_vec()).expect("hex digits are ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_random_code_has_its_length_in_base62_characters() {
        for len in [0, 1, 24, 40] {
            let code = random_base62(len);
            assert_eq!(code.len(), len);
            assert!(code.bytes().all(|b| b.is_ascii_alphanumeric()), "{code}");
        }
        assert_ne!(random_base62(24), random_base62(24));
    }

    #[test]
    fn a_secrets_hash_is_its_sha256_in_lowercase_hex() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        use sha2::Digest;
        assert_eq!(sha256_hex("abc"), hex::encode(sha2::Sha256::digest(b"abc")));
    }
}
