//! Payout rails behind a trait: name enquiry, sending a transfer, and the
//! bank's status query. Every transfer carries the payout id as its
//! reference, and a rail answers "already sent" for a reference it has seen,
//! so a payout sent before a crash is never sent twice.
//!
//! Test mode uses the sandbox rail (CONTRACT section 5): account numbers
//! ending `0000` fail name enquiry; destinations ending `7777` are rejected,
//! `9999` fail after sending, `8888` stay processing, others are paid at the
//! first status query. The sandbox keeps the references it accepted in the
//! store, as a real bank would keep them across our restarts.

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use kobo_storage::{Batch, Store, Table, Writer};

use crate::error::{DomainError, DomainResult, ErrorCode};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    Accepted,
    /// The rail already had this reference.
    AlreadySent,
    Rejected(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RailStatus {
    Processing,
    Paid,
    Failed(String),
}

/// What a rail needs to send one payout.
#[derive(Debug, Clone)]
pub struct Transfer {
    pub reference: Uuid,
    pub bank_code: String,
    pub account_number: String,
    pub amount: i64,
}

pub trait PayoutRail: Send + Sync {
    /// The account holder's name as the bank has it.
    fn name_enquiry<'a>(
        &'a self,
        bank_code: &'a str,
        account_number: &'a str,
    ) -> BoxFuture<'a, DomainResult<String>>;
    fn send<'a>(
        &'a self,
        transfer: &'a Transfer,
        now: DateTime<Utc>,
    ) -> BoxFuture<'a, DomainResult<SendOutcome>>;
    /// `None` when the rail never received the reference.
    fn status(&self, reference: Uuid) -> BoxFuture<'_, DomainResult<Option<RailStatus>>>;
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SandboxTransfer {
    account_number: String,
    amount: i64,
    sent_at: DateTime<Utc>,
}

pub struct SandboxRail {
    pub store: Store,
    pub writer: Writer,
}

impl PayoutRail for SandboxRail {
    fn name_enquiry<'a>(
        &'a self,
        _bank_code: &'a str,
        account_number: &'a str,
    ) -> BoxFuture<'a, DomainResult<String>> {
        Box::pin(async move {
            if account_number.ends_with("0000") {
                return Err(DomainError::request(
                    ErrorCode::AccountVerificationFailed,
                    Some("account_number"),
                    "the bank could not verify this account number",
                ));
            }
            Ok(format!(
                "SANDBOX ACCOUNT {}",
                &account_number[account_number.len() - 4..]
            ))
        })
    }

    fn send<'a>(
        &'a self,
        t: &'a Transfer,
        now: DateTime<Utc>,
    ) -> BoxFuture<'a, DomainResult<SendOutcome>> {
        Box::pin(async move {
            let key = t.reference.as_bytes().to_vec();
            if self
                .store
                .read()?
                .get(Table::SandboxTransfers, &key)?
                .is_some()
            {
                return Ok(SendOutcome::AlreadySent);
            }
            if t.account_number.ends_with("7777") {
                return Ok(SendOutcome::Rejected("provider_rejected".into()));
            }
            let mut b = Batch::new();
            b.put(
                Table::SandboxTransfers,
                key,
                &SandboxTransfer {
                    account_number: t.account_number.clone(),
                    amount: t.amount,
                    sent_at: now,
                },
            );
            self.writer.commit(b).await.map_err(DomainError::from)?;
            Ok(SendOutcome::Accepted)
        })
    }

    fn status(&self, reference: Uuid) -> BoxFuture<'_, DomainResult<Option<RailStatus>>> {
        Box::pin(async move {
            let t: Option<SandboxTransfer> = self
                .store
                .read()?
                .get_decoded(Table::SandboxTransfers, reference.as_bytes())?;
            Ok(t.map(|t| {
                if t.account_number.ends_with("9999") {
                    RailStatus::Failed("transfer_failed".into())
                } else if t.account_number.ends_with("8888") {
                    RailStatus::Processing
                } else {
                    RailStatus::Paid
                }
            }))
        })
    }
}

/// Live mode without a configured rail.
pub struct UnconfiguredRail;

fn unconfigured() -> DomainError {
    DomainError::state(
        ErrorCode::ProviderNotConfigured,
        "no live payout rail is configured on this kobo server",
    )
}

impl PayoutRail for UnconfiguredRail {
    fn name_enquiry<'a>(&'a self, _: &'a str, _: &'a str) -> BoxFuture<'a, DomainResult<String>> {
        Box::pin(async { Err(unconfigured()) })
    }
    fn send<'a>(
        &'a self,
        _: &'a Transfer,
        _: DateTime<Utc>,
    ) -> BoxFuture<'a, DomainResult<SendOutcome>> {
        Box::pin(async { Err(unconfigured()) })
    }
    fn status(&self, _: Uuid) -> BoxFuture<'_, DomainResult<Option<RailStatus>>> {
        Box::pin(async { Err(unconfigured()) })
    }
}

pub struct Rails {
    pub test: Box<dyn PayoutRail>,
    pub live: Box<dyn PayoutRail>,
}

impl Rails {
    pub fn for_mode(&self, mode: crate::ids::Mode) -> &dyn PayoutRail {
        match mode {
            crate::ids::Mode::Test => self.test.as_ref(),
            crate::ids::Mode::Live => self.live.as_ref(),
        }
    }
}
