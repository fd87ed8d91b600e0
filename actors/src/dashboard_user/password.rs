//! Password hashing with argon2id (the `argon2` crate's defaults: 19 MiB,
//! two passes, one lane; a random salt per hash), run off the async
//! threads.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

use crate::error::{DomainError, DomainResult};

/// Shortest accepted password (characters).
pub const MIN_PASSWORD_CHARS: usize = 12;
/// Longest accepted password (characters).
pub const MAX_PASSWORD_CHARS: usize = 128;

/// A hash verified when the email is unknown, so both cases cost the same.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$8Dx/kSn8mRkmDJvdnkYxrwP1ERV9LxDjvwbgmCfs2tk";

pub(super) fn check_bounds(password: &str) -> DomainResult<()> {
    let n = password.chars().count();
    if !(MIN_PASSWORD_CHARS..=MAX_PASSWORD_CHARS).contains(&n) {
        return Err(DomainError::invalid(
            "password",
            format!("a password has {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters"),
        ));
    }
    Ok(())
}

/// The argon2id PHC string of `password`.
pub async fn hash_password(password: &str) -> DomainResult<String> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| DomainError::internal(format!("password hash: {e}")))
    })
    .await
    .map_err(|e| DomainError::internal(e.to_string()))?
}

/// Whether `password` matches `hash` (`None`: no password set; a dummy
/// hash is verified anyway and the answer is false).
pub async fn verify_password(password: &str, hash: Option<&str>) -> DomainResult<bool> {
    let password = password.to_owned();
    let (hash, real) = match hash {
        Some(h) => (h.to_owned(), true),
        None => (DUMMY_HASH.to_owned(), false),
    };
    tokio::task::spawn_blocking(move || {
        let Ok(parsed) = PasswordHash::new(&hash) else {
            return false;
        };
        let ok = Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
        ok && real
    })
    .await
    .map_err(|e| DomainError::internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_password_verifies_against_its_own_hash_only() {
        let h = hash_password("correct horse battery").await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password("correct horse battery", Some(&h))
            .await
            .unwrap());
        assert!(!verify_password("correct horse batterx", Some(&h))
            .await
            .unwrap());
        assert!(!verify_password("correct horse battery", None)
            .await
            .unwrap());
        assert!(PasswordHash::new(DUMMY_HASH).is_ok());
        assert!(check_bounds("short").is_err());
        assert!(check_bounds(&"x".repeat(129)).is_err());
        assert!(check_bounds("twelve chars").is_ok());
    }
}
