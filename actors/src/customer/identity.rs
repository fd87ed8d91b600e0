//! Identity checks (BVN with a bank account) behind a provider trait.
//!
//! The BVN is a [`Bvn`]: `Debug` never shows it, its memory is wiped when
//! dropped, and only its last four digits are kept (like card numbers).
//! The provider is given the BVN once, at the request, and answers later
//! by the check's reference.
//!
//! Sandbox (test mode): a BVN ending `0000` fails (`bvn_mismatch`), one
//! ending `1111` stays pending, any other verifies; the answer is found at
//! the next check (a durable timer 5 minutes after the request, then every
//! 5 minutes). The sandbox keeps only its verdict per reference, in the
//! store, as a real provider keeps its records across our restarts. Live
//! mode has no provider on this build (409 `provider_not_configured`).

use std::fmt;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use kobo_storage::{Batch, Store, Table, Writer};

use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::ids::Mode;

/// A Bank Verification Number: 11 digits. Never stored, logged or echoed.
#[derive(Clone)]
pub struct Bvn(String);

impl Bvn {
    /// 11 digits, else `None`.
    pub fn parse(s: &str) -> Option<Bvn> {
        (s.len() == 11 && s.bytes().all(|b| b.is_ascii_digit())).then(|| Bvn(s.to_string()))
    }
    pub fn last4(&self) -> String {
        self.0[self.0.len() - 4..].to_string()
    }
    fn ends_with(&self, tail: &str) -> bool {
        self.0.ends_with(tail)
    }
}

impl fmt::Debug for Bvn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Bvn(..)")
    }
}

impl Drop for Bvn {
    fn drop(&mut self) {
        // SAFETY: zero bytes are valid UTF-8.
        for b in unsafe { self.0.as_bytes_mut() } {
            // A volatile write is not optimized away as a dead store.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
        self.0.clear();
    }
}

/// What the merchant sends to verify a customer.
#[derive(Debug, Clone)]
pub struct IdentityRequest {
    pub bvn: Bvn,
    /// A CBN bank code (checked against the bank list by the caller).
    pub bank_code: String,
    /// Ten digits.
    pub account_number: String,
}

/// The provider's answer about one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityAnswer {
    Pending,
    Verified,
    /// Failed, with the provider's reason.
    Failed(String),
}

pub trait IdentityProvider: Send + Sync {
    /// Hands the check `reference` to the provider (the BVN goes no
    /// further).
    fn submit<'a>(
        &'a self,
        reference: Uuid,
        request: &'a IdentityRequest,
    ) -> BoxFuture<'a, DomainResult<()>>;
    /// The provider's answer about `reference`.
    fn status(&self, reference: Uuid) -> BoxFuture<'_, DomainResult<IdentityAnswer>>;
}

/// The sandbox's failure reason.
pub const BVN_MISMATCH: &str = "bvn_mismatch";

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Verdict {
    Verify,
    Fail,
    StayPending,
}

pub struct SandboxIdentity {
    pub store: Store,
    pub writer: Writer,
}

impl IdentityProvider for SandboxIdentity {
    fn submit<'a>(
        &'a self,
        reference: Uuid,
        request: &'a IdentityRequest,
    ) -> BoxFuture<'a, DomainResult<()>> {
        Box::pin(async move {
            let verdict = if request.bvn.ends_with("0000") {
                Verdict::Fail
            } else if request.bvn.ends_with("1111") {
                Verdict::StayPending
            } else {
                Verdict::Verify
            };
            let mut b = Batch::new();
            b.put(
                Table::SandboxIdentityChecks,
                reference.as_bytes().to_vec(),
                &verdict,
            );
            self.writer.commit(b).await.map_err(DomainError::from)
        })
    }

    fn status(&self, reference: Uuid) -> BoxFuture<'_, DomainResult<IdentityAnswer>> {
        Box::pin(async move {
            let v: Option<Verdict> = self
                .store
                .read()?
                .get_decoded(Table::SandboxIdentityChecks, reference.as_bytes())?;
            Ok(match v {
                Some(Verdict::Verify) => IdentityAnswer::Verified,
                Some(Verdict::Fail) => IdentityAnswer::Failed(BVN_MISMATCH.into()),
                Some(Verdict::StayPending) | None => IdentityAnswer::Pending,
            })
        })
    }
}

/// Live mode without a configured provider.
pub struct UnconfiguredIdentity;

fn not_configured() -> DomainError {
    DomainError::state(
        ErrorCode::ProviderNotConfigured,
        "no live identity provider is configured on this kobo server",
    )
}

impl IdentityProvider for UnconfiguredIdentity {
    fn submit<'a>(&'a self, _: Uuid, _: &'a IdentityRequest) -> BoxFuture<'a, DomainResult<()>> {
        Box::pin(async { Err(not_configured()) })
    }
    fn status(&self, _: Uuid) -> BoxFuture<'_, DomainResult<IdentityAnswer>> {
        Box::pin(async { Err(not_configured()) })
    }
}

pub struct IdentityProviders {
    pub test: Box<dyn IdentityProvider>,
    pub live: Box<dyn IdentityProvider>,
}

impl IdentityProviders {
    pub fn sandbox(store: Store, writer: Writer) -> Self {
        IdentityProviders {
            test: Box::new(SandboxIdentity { store, writer }),
            live: Box::new(UnconfiguredIdentity),
        }
    }

    pub fn for_mode(&self, mode: Mode) -> &dyn IdentityProvider {
        match mode {
            Mode::Test => self.test.as_ref(),
            Mode::Live => self.live.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bvn_is_eleven_digits_and_never_shown() {
        assert!(Bvn::parse("2222222222").is_none());
        assert!(Bvn::parse("2222222222a").is_none());
        let b = Bvn::parse("22222221234").unwrap();
        assert_eq!(b.last4(), "1234");
        assert_eq!(format!("{b:?}"), "Bvn(..)");
        let r = IdentityRequest {
            bvn: b,
            bank_code: "058".into(),
            account_number: "0123456789".into(),
        };
        assert!(!format!("{r:?}").contains("22222221234"));
    }
}
