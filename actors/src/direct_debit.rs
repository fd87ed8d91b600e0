//! Direct-debit providers behind a trait (a resource below both mandates,
//! which ask about approval, and payment intents, which debit): where the customer approves a
//! mandate, whether they did, and debits on an active mandate. Every debit
//! carries the payment id as its reference, and a provider answers
//! "already sent" for a reference it has seen, so a debit sent before a
//! crash is never sent twice (the payment actor also asks for the
//! reference's status before sending).
//!
//! Test mode uses the sandbox of CONTRACT section 5: the authorization page
//! is served by kobo (`/sandbox/mandates/<reference>`); a mandate is active
//! at the first check after the customer approved it there; a customer
//! email ending `@decline.test` is rejected at the first check
//! (`declined_by_bank`); Decline on the page fails it at the next check
//! (`declined_by_customer`). Debits succeed unless the amount ends in 99
//! or 51 kobo (`insufficient_funds`), answered at the first status query;
//! a debit whose amount ends in 52 kobo stays processing (every status
//! query answers it is not done). The
//! sandbox keeps the customer's answers and the debits it took in the store,
//! as a real provider keeps them across our restarts.

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use kobo_storage::{Batch, CommitError, Store, Table, Writer};

use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::ids::Mode;

/// What a provider is asked about: one mandate and its customer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MandateCheck {
    pub id: Uuid,
    pub customer_email: Option<String>,
    pub customer_name: Option<String>,
}

/// The bank account a customer approved debits from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovedAccount {
    pub bank_name: String,
    pub account_name: String,
    pub account_number_last4: String,
}

/// The provider's answer to "did the customer approve this mandate?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MandateAnswer {
    /// Nothing yet.
    Pending,
    Approved(ApprovedAccount),
    /// Rejected, with the provider's reason.
    Rejected(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DebitOutcome {
    Accepted,
    /// The provider already had this reference.
    AlreadySent,
    Rejected(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DebitStatus {
    Processing,
    Successful,
    Failed(String),
}

/// What a provider needs to debit a customer once.
#[derive(Debug, Clone)]
pub struct Debit {
    /// The payment intent id.
    pub reference: Uuid,
    pub mandate: Uuid,
    pub amount: i64,
}

pub trait MandateProvider: Send + Sync {
    /// Where the customer approves `mandate` (`reference` is the
    /// mandate's unguessable authorization reference).
    fn authorization_url(&self, base_url: &str, reference: &str) -> DomainResult<String>;
    /// Asks whether the customer approved `mandate`.
    fn check(&self, mandate: MandateCheck) -> BoxFuture<'_, DomainResult<MandateAnswer>>;
    fn debit<'a>(
        &'a self,
        debit: &'a Debit,
        now: DateTime<Utc>,
    ) -> BoxFuture<'a, DomainResult<DebitOutcome>>;
    /// `None` when the provider never received the reference.
    fn debit_status(&self, reference: Uuid) -> BoxFuture<'_, DomainResult<Option<DebitStatus>>>;
}

/// The customer's answer on the sandbox authorization page.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxAnswer {
    pub approved: bool,
    pub answered_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SandboxDebit {
    mandate: Uuid,
    amount: i64,
    sent_at: DateTime<Utc>,
}

pub struct SandboxMandates {
    pub store: Store,
    pub writer: Writer,
}

/// The sandbox's reason when the customer declines on its page.
pub const DECLINED_BY_CUSTOMER: &str = "declined_by_customer";
/// The sandbox's reason for customers whose email ends `@decline.test`.
pub const DECLINED_BY_BANK: &str = "declined_by_bank";

impl SandboxMandates {
    /// The customer's answer, if any.
    pub fn answer_of(&self, mandate: Uuid) -> DomainResult<Option<SandboxAnswer>> {
        Ok(self
            .store
            .read()?
            .get_decoded(Table::SandboxMandates, mandate.as_bytes())?)
    }

    /// Records the customer's answer on the sandbox page. The first answer
    /// stands: a second one is 409 `mandate_already_answered`.
    pub async fn record_answer(
        &self,
        mandate: Uuid,
        approved: bool,
        now: DateTime<Utc>,
    ) -> DomainResult<()> {
        let key = mandate.as_bytes().to_vec();
        let mut b = Batch::new();
        b.require_absent(Table::SandboxMandates, key.clone()).put(
            Table::SandboxMandates,
            key,
            &SandboxAnswer {
                approved,
                answered_at: now,
            },
        );
        match self.writer.commit(b).await {
            Ok(()) => Ok(()),
            Err(CommitError::Conflict { .. }) => Err(DomainError::state(
                ErrorCode::MandateAlreadyAnswered,
                "the customer already answered this mandate's authorization",
            )),
            Err(e) => Err(DomainError::from(e)),
        }
    }
}

/// Four digits from the mandate id: the sandbox customer's account.
fn sandbox_last4(id: Uuid) -> String {
    let b = id.as_bytes();
    let n = u16::from_be_bytes([b[14], b[15]]) % 10_000;
    format!("{n:04}")
}

impl MandateProvider for SandboxMandates {
    fn authorization_url(&self, base_url: &str, reference: &str) -> DomainResult<String> {
        Ok(format!("{base_url}/sandbox/mandates/{reference}"))
    }

    fn check(&self, mandate: MandateCheck) -> BoxFuture<'_, DomainResult<MandateAnswer>> {
        Box::pin(async move {
            let email = mandate.customer_email.as_deref().unwrap_or("");
            if email.to_ascii_lowercase().ends_with("@decline.test") {
                return Ok(MandateAnswer::Rejected(DECLINED_BY_BANK.into()));
            }
            Ok(match self.answer_of(mandate.id)? {
                None => MandateAnswer::Pending,
                Some(a) if a.approved => MandateAnswer::Approved(ApprovedAccount {
                    bank_name: "Kobo Sandbox Bank".into(),
                    account_name: mandate
                        .customer_name
                        .map(|n| n.to_uppercase())
                        .unwrap_or_else(|| "SANDBOX CUSTOMER".into()),
                    account_number_last4: sandbox_last4(mandate.id),
                }),
                Some(_) => MandateAnswer::Rejected(DECLINED_BY_CUSTOMER.into()),
            })
        })
    }

    fn debit<'a>(
        &'a self,
        d: &'a Debit,
        now: DateTime<Utc>,
    ) -> BoxFuture<'a, DomainResult<DebitOutcome>> {
        Box::pin(async move {
            let key = d.reference.as_bytes().to_vec();
            if self
                .store
                .read()?
                .get(Table::SandboxDebits, &key)?
                .is_some()
            {
                return Ok(DebitOutcome::AlreadySent);
            }
            let mut b = Batch::new();
            b.require_absent(Table::SandboxDebits, key.clone()).put(
                Table::SandboxDebits,
                key,
                &SandboxDebit {
                    mandate: d.mandate,
                    amount: d.amount,
                    sent_at: now,
                },
            );
            match self.writer.commit(b).await {
                Ok(()) => Ok(DebitOutcome::Accepted),
                Err(CommitError::Conflict { .. }) => Ok(DebitOutcome::AlreadySent),
                Err(e) => Err(DomainError::from(e)),
            }
        })
    }

    fn debit_status(&self, reference: Uuid) -> BoxFuture<'_, DomainResult<Option<DebitStatus>>> {
        Box::pin(async move {
            let d: Option<SandboxDebit> = self
                .store
                .read()?
                .get_decoded(Table::SandboxDebits, reference.as_bytes())?;
            Ok(d.map(|d| match d.amount % 100 {
                99 => DebitStatus::Failed("insufficient_funds".into()),
                51 => DebitStatus::Failed("insufficient_funds".into()),
                52 => DebitStatus::Processing,
                _ => DebitStatus::Successful,
            }))
        })
    }
}

/// Live mode without a configured provider.
pub struct UnconfiguredMandates;

pub fn provider_not_configured() -> DomainError {
    DomainError::state(
        ErrorCode::ProviderNotConfigured,
        "no live direct-debit provider is configured on this kobo server",
    )
}

impl MandateProvider for UnconfiguredMandates {
    fn authorization_url(&self, _: &str, _: &str) -> DomainResult<String> {
        Err(provider_not_configured())
    }
    fn check(&self, _: MandateCheck) -> BoxFuture<'_, DomainResult<MandateAnswer>> {
        Box::pin(async { Err(provider_not_configured()) })
    }
    fn debit<'a>(
        &'a self,
        _: &'a Debit,
        _: DateTime<Utc>,
    ) -> BoxFuture<'a, DomainResult<DebitOutcome>> {
        Box::pin(async { Err(provider_not_configured()) })
    }
    fn debit_status(&self, _: Uuid) -> BoxFuture<'_, DomainResult<Option<DebitStatus>>> {
        Box::pin(async { Err(provider_not_configured()) })
    }
}

pub struct MandateProviders {
    pub test: SandboxMandates,
    pub live: Box<dyn MandateProvider>,
}

impl MandateProviders {
    pub fn sandbox(store: Store, writer: Writer) -> Self {
        MandateProviders {
            test: SandboxMandates { store, writer },
            live: Box::new(UnconfiguredMandates),
        }
    }

    pub fn for_mode(&self, mode: Mode) -> &dyn MandateProvider {
        match mode {
            Mode::Test => &self.test,
            Mode::Live => self.live.as_ref(),
        }
    }
}
