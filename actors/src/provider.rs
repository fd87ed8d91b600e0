//! Payment providers behind a trait. Test mode uses the built-in sandbox of
//! CONTRACT section 5; live mode uses a configured provider (none is
//! configured in this build, so live provider calls answer
//! `provider_not_configured`). Domain code never knows which it talks to.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::error::{DomainError, DomainResult};
use crate::ids::{sha256_hex, Mode};
use crate::payment_intent::{transfer_account_lifetime, BankTransferAccount, PaymentIntent};

pub trait Provider: Send + Sync {
    /// Issues a bank account the customer pays one intent into.
    fn issue_transfer_account(
        &self,
        intent: &PaymentIntent,
        merchant_name: &str,
        now: DateTime<Utc>,
    ) -> DomainResult<BankTransferAccount>;
}

/// The sandbox provider.
pub struct Sandbox;

pub const SANDBOX_BANK_NAME: &str = "Kobo Sandbox Bank";

impl Provider for Sandbox {
    fn issue_transfer_account(
        &self,
        intent: &PaymentIntent,
        merchant_name: &str,
        now: DateTime<Utc>,
    ) -> DomainResult<BankTransferAccount> {
        // Ten digits, stable for the intent and the attempt number.
        let digest = sha256_hex(&format!("{}:{}", intent.id, intent.attempts));
        let n = u64::from_str_radix(&digest[..15], 16).expect("hex") % 1_000_000_000;
        Ok(BankTransferAccount {
            account_number: format!("9{n:09}"),
            bank_name: SANDBOX_BANK_NAME.to_string(),
            account_name: format!("KOBO / {}", merchant_name.to_uppercase()),
            amount: intent.transfer_amount(),
            expires_at: now + transfer_account_lifetime(),
        })
    }
}

/// Live mode without a configured provider.
pub struct Unconfigured;

impl Provider for Unconfigured {
    fn issue_transfer_account(
        &self,
        _: &PaymentIntent,
        _: &str,
        _: DateTime<Utc>,
    ) -> DomainResult<BankTransferAccount> {
        Err(DomainError::state(
            "provider_not_configured",
            "no live payment provider is configured on this kobo server",
        ))
    }
}

#[derive(Clone)]
pub struct Providers {
    pub test: Arc<dyn Provider>,
    pub live: Arc<dyn Provider>,
}

impl Providers {
    pub fn sandbox_only() -> Self {
        Providers {
            test: Arc::new(Sandbox),
            live: Arc::new(Unconfigured),
        }
    }
    pub fn for_mode(&self, mode: Mode) -> &Arc<dyn Provider> {
        match mode {
            Mode::Test => &self.test,
            Mode::Live => &self.live,
        }
    }
}
