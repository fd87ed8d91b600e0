//! The bank behind virtual accounts: whether it opened an account, and the
//! transfers it received into each (its statement).
//!
//! Sandbox (test mode): an account opens at the first check, unless its
//! customer's email ends `@decline.test` or phone ends `0000`
//! (`bank_rejected`). Simulated transfers (the test helper) are the bank's
//! own durable record: the statement row (account, session id -> the
//! transfer; the first record of a session id stands) and a notification
//! in the inbox, both in one commit. kobo records a credit and removes its
//! notification in one batch; notifications left by a crash are delivered
//! again at start-up, and `refresh` reads the whole statement, so no
//! transfer is lost, and none is recorded twice (see `credit.rs`). Live
//! mode has no bank on this build (409 `provider_not_configured`).

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use kobo_storage::{decode, Batch, KeyBuf, Store, Table, Writer};

use super::BankAnswer;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::ids::Mode;

/// What the bank is asked about an account: its id and customer.
#[derive(Debug, Clone)]
pub struct AccountCheck {
    pub id: Uuid,
    pub customer_email: Option<String>,
    pub customer_phone: Option<String>,
}

/// A transfer the bank received into an account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceivedTransfer {
    /// The interbank session id (NIBSS): one transfer each.
    pub session_id: String,
    /// Kobo.
    pub amount: i64,
    pub sender_name: Option<String>,
    pub sender_account_number: Option<String>,
    pub received_at: DateTime<Utc>,
}

pub trait AccountBank: Send + Sync {
    /// Ok when accounts can be opened in this mode.
    fn available(&self) -> DomainResult<()>;
    /// Whether the bank opened the account.
    fn check(&self, account: AccountCheck) -> BoxFuture<'_, DomainResult<BankAnswer>>;
    /// Every transfer received into `account`, oldest first.
    fn statement(&self, account: Uuid) -> BoxFuture<'_, DomainResult<Vec<ReceivedTransfer>>>;
}

/// The sandbox's reason for refusing an account.
pub const BANK_REJECTED: &str = "bank_rejected";

pub struct SandboxBank {
    pub store: Store,
    pub writer: Writer,
}

/// The key of one transfer in the statement and in the inbox.
pub fn transfer_key(account: Uuid, session_id: &str) -> Vec<u8> {
    KeyBuf::new()
        .bytes(account.as_bytes())
        .str(session_id)
        .build()
}

impl SandboxBank {
    /// A transfer arrives (the test helper): recorded with its
    /// notification unless the session id is already on the statement.
    /// Answers the statement's transfer of that session id.
    pub async fn receive(
        &self,
        account: Uuid,
        transfer: ReceivedTransfer,
    ) -> DomainResult<ReceivedTransfer> {
        let key = transfer_key(account, &transfer.session_id);
        if let Some(t) = self.transfer(&key)? {
            return Ok(t);
        }
        let mut b = Batch::new();
        b.require_absent(Table::SandboxAccountCredits, key.clone())
            .put(Table::SandboxAccountCredits, key.clone(), &transfer)
            .put_raw(Table::SandboxAccountInbox, key.clone(), Vec::new());
        match self.writer.commit(b).await {
            Ok(()) => Ok(transfer),
            Err(kobo_storage::CommitError::Conflict { .. }) => self
                .transfer(&key)?
                .ok_or_else(|| DomainError::internal("a sandbox transfer vanished")),
            Err(e) => Err(DomainError::from(e)),
        }
    }

    fn transfer(&self, key: &[u8]) -> DomainResult<Option<ReceivedTransfer>> {
        Ok(self
            .store
            .read()?
            .get_decoded(Table::SandboxAccountCredits, key)?)
    }

    /// The notifications not yet recorded: (account, session id).
    pub fn inbox(&self) -> DomainResult<Vec<(Uuid, String)>> {
        let mut out = Vec::new();
        self.store
            .read()?
            .scan_prefix(Table::SandboxAccountInbox, &[], None, |k, _| {
                if let (Ok(id), Ok(s)) = (Uuid::from_slice(&k[..16]), std::str::from_utf8(&k[16..]))
                {
                    out.push((id, s.trim_end_matches('\0').to_string()));
                }
                Ok(true)
            })?;
        Ok(out)
    }

    /// One transfer of the statement.
    pub fn find(&self, account: Uuid, session_id: &str) -> DomainResult<Option<ReceivedTransfer>> {
        self.transfer(&transfer_key(account, session_id))
    }
}

impl AccountBank for SandboxBank {
    fn available(&self) -> DomainResult<()> {
        Ok(())
    }

    fn check(&self, account: AccountCheck) -> BoxFuture<'_, DomainResult<BankAnswer>> {
        Box::pin(async move {
            let email = account.customer_email.unwrap_or_default();
            let phone = account.customer_phone.unwrap_or_default();
            if email.to_ascii_lowercase().ends_with("@decline.test") || phone.ends_with("0000") {
                return Ok(BankAnswer::Rejected(BANK_REJECTED.into()));
            }
            Ok(BankAnswer::Opened)
        })
    }

    fn statement(&self, account: Uuid) -> BoxFuture<'_, DomainResult<Vec<ReceivedTransfer>>> {
        Box::pin(async move {
            let mut out = Vec::new();
            self.store.read()?.scan_prefix(
                Table::SandboxAccountCredits,
                account.as_bytes(),
                None,
                |_, v| {
                    out.push(decode(v)?);
                    Ok(true)
                },
            )?;
            out.sort_by_key(|t: &ReceivedTransfer| t.received_at);
            Ok(out)
        })
    }
}

/// Live mode without a configured bank.
pub struct UnconfiguredBank;

fn not_configured() -> DomainError {
    DomainError::state(
        ErrorCode::ProviderNotConfigured,
        "no live virtual-account bank is configured on this kobo server",
    )
}

impl AccountBank for UnconfiguredBank {
    fn available(&self) -> DomainResult<()> {
        Err(not_configured())
    }
    fn check(&self, _: AccountCheck) -> BoxFuture<'_, DomainResult<BankAnswer>> {
        Box::pin(async { Err(not_configured()) })
    }
    fn statement(&self, _: Uuid) -> BoxFuture<'_, DomainResult<Vec<ReceivedTransfer>>> {
        Box::pin(async { Err(not_configured()) })
    }
}

pub struct AccountBanks {
    pub test: SandboxBank,
    pub live: Box<dyn AccountBank>,
}

impl AccountBanks {
    pub fn sandbox(store: Store, writer: Writer) -> Self {
        AccountBanks {
            test: SandboxBank { store, writer },
            live: Box::new(UnconfiguredBank),
        }
    }

    pub fn for_mode(&self, mode: Mode) -> &dyn AccountBank {
        match mode {
            Mode::Test => &self.test,
            Mode::Live => self.live.as_ref(),
        }
    }
}
