//! Secret keys: `svc_test_` / `svc_live_` + 40 base62 characters, stored
//! only as a SHA-256 hash (table `api_keys`).

use super::*;

/// A stored secret key (the key itself is never stored).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApiKey {
    pub merchant: Uuid,
    pub mode: Mode,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

pub fn new_secret_key(mode: Mode) -> String {
    format!("svc_{}_{}", mode.as_str(), random_base62(40))
}

/// Whether `s` has the shape of a secret key: prefix and 32+ base62 characters.
pub fn secret_key_mode(s: &str) -> Option<Mode> {
    let (mode, rest) = if let Some(r) = s.strip_prefix("svc_test_") {
        (Mode::Test, r)
    } else if let Some(r) = s.strip_prefix("svc_live_") {
        (Mode::Live, r)
    } else {
        return None;
    };
    (rest.len() >= 32 && rest.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(mode)
}

pub fn key_hash(secret: &str) -> String {
    sha256_hex(secret)
}
