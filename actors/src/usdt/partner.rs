//! The USDT partner behind a trait: it takes a transfer (idempotent by
//! reference: the crypto payout's id), sends it on the chain, and confirms
//! later, asynchronously, through the confirmation channel (a real partner's
//! webhook). It also answers status questions, which is how kobo re-asks
//! about a payout whose confirmation it never received (after a restart, or
//! at the periodic check).
//!
//! Test mode uses the sandbox partner (CONTRACT section 5): addresses ending
//! `dead` fail, others are paid; the confirmation arrives after a short real
//! delay (well within 2 real seconds), whatever the clock mode. The sandbox
//! keeps the references it accepted in the store, as a real partner would
//! keep them across our restarts, so a transfer is never sent twice.

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use uuid::Uuid;

use kobo_storage::{Batch, Store, Table, Writer};

use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::ids::Mode;
use crate::usdt::Network;

/// The sandbox's real delay before it confirms.
pub const SANDBOX_CONFIRMATION_DELAY: Duration = Duration::from_millis(300);

/// What the partner needs to send one payout.
#[derive(Debug, Clone)]
pub struct CryptoTransfer {
    pub reference: Uuid,
    pub network: Network,
    pub address: String,
    /// Cents of USDT.
    pub usdt_amount: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitOutcome {
    Accepted,
    /// The partner already had this reference.
    AlreadySubmitted,
    Rejected(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartnerStatus {
    Pending,
    Paid { transaction_hash: String },
    Failed(String),
}

/// A confirmation pushed by the partner.
#[derive(Debug, Clone)]
pub struct Confirmation {
    pub reference: Uuid,
    pub status: PartnerStatus,
}

pub trait UsdtPartner: Send + Sync {
    /// Whether this partner can send at all (live mode needs one configured).
    fn configured(&self) -> bool;
    fn submit<'a>(
        &'a self,
        transfer: &'a CryptoTransfer,
        now: DateTime<Utc>,
    ) -> BoxFuture<'a, DomainResult<SubmitOutcome>>;
    /// `None` when the partner never received the reference.
    fn status(&self, reference: Uuid) -> BoxFuture<'_, DomainResult<Option<PartnerStatus>>>;
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SandboxCryptoTransfer {
    network: Network,
    address: String,
    usdt_amount: i64,
    submitted_at: DateTime<Utc>,
}

pub struct SandboxPartner {
    pub store: Store,
    pub writer: Writer,
    pub confirmations: mpsc::UnboundedSender<Confirmation>,
    pub delay: Duration,
}

/// What the sandbox does with a transfer to `address`.
pub fn sandbox_outcome(reference: Uuid, network: Network, address: &str) -> PartnerStatus {
    if address.to_ascii_lowercase().ends_with("dead") {
        return PartnerStatus::Failed("transfer_failed".into());
    }
    let hash = hex::encode(Sha256::digest(reference.as_bytes()));
    PartnerStatus::Paid {
        transaction_hash: match network {
            Network::Erc20 => format!("0x{hash}"),
            Network::Trc20 => hash,
        },
    }
}

impl UsdtPartner for SandboxPartner {
    fn configured(&self) -> bool {
        true
    }

    fn submit<'a>(
        &'a self,
        t: &'a CryptoTransfer,
        now: DateTime<Utc>,
    ) -> BoxFuture<'a, DomainResult<SubmitOutcome>> {
        Box::pin(async move {
            let key = t.reference.as_bytes().to_vec();
            if self
                .store
                .read()?
                .get(Table::SandboxCryptoTransfers, &key)?
                .is_some()
            {
                return Ok(SubmitOutcome::AlreadySubmitted);
            }
            let mut b = Batch::new();
            b.put(
                Table::SandboxCryptoTransfers,
                key,
                &SandboxCryptoTransfer {
                    network: t.network,
                    address: t.address.clone(),
                    usdt_amount: t.usdt_amount,
                    submitted_at: now,
                },
            );
            self.writer.commit(b).await.map_err(DomainError::from)?;
            // The chain settles in real time, whatever kobo's clock says.
            let confirmation = Confirmation {
                reference: t.reference,
                status: sandbox_outcome(t.reference, t.network, &t.address),
            };
            let (tx, delay) = (self.confirmations.clone(), self.delay);
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                // A closed channel means the server is stopping; the payout
                // is re-asked on the next start.
                let _ = tx.send(confirmation);
            });
            Ok(SubmitOutcome::Accepted)
        })
    }

    fn status(&self, reference: Uuid) -> BoxFuture<'_, DomainResult<Option<PartnerStatus>>> {
        Box::pin(async move {
            let t: Option<SandboxCryptoTransfer> = self
                .store
                .read()?
                .get_decoded(Table::SandboxCryptoTransfers, reference.as_bytes())?;
            Ok(t.map(|t| sandbox_outcome(reference, t.network, &t.address)))
        })
    }
}

/// Live mode without a configured partner.
pub struct UnconfiguredPartner;

pub fn unconfigured() -> DomainError {
    DomainError::state(
        ErrorCode::ProviderNotConfigured,
        "no live USDT partner is configured on this kobo server",
    )
}

impl UsdtPartner for UnconfiguredPartner {
    fn configured(&self) -> bool {
        false
    }
    fn submit<'a>(
        &'a self,
        _: &'a CryptoTransfer,
        _: DateTime<Utc>,
    ) -> BoxFuture<'a, DomainResult<SubmitOutcome>> {
        Box::pin(async { Err(unconfigured()) })
    }
    fn status(&self, _: Uuid) -> BoxFuture<'_, DomainResult<Option<PartnerStatus>>> {
        Box::pin(async { Err(unconfigured()) })
    }
}

/// The partners per mode and the confirmation channel they push into.
pub struct UsdtHub {
    pub test: Box<dyn UsdtPartner>,
    pub live: Box<dyn UsdtPartner>,
    confirmations: Mutex<Option<mpsc::UnboundedReceiver<Confirmation>>>,
}

impl UsdtHub {
    /// The sandbox in test mode, no live partner.
    pub fn sandbox(store: Store, writer: Writer) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        UsdtHub {
            test: Box::new(SandboxPartner {
                store,
                writer,
                confirmations: tx,
                delay: SANDBOX_CONFIRMATION_DELAY,
            }),
            live: Box::new(UnconfiguredPartner),
            confirmations: Mutex::new(Some(rx)),
        }
    }

    pub fn for_mode(&self, mode: Mode) -> &dyn UsdtPartner {
        match mode {
            Mode::Test => self.test.as_ref(),
            Mode::Live => self.live.as_ref(),
        }
    }

    /// The confirmations, once (for [`super::service::start`]).
    pub fn take_confirmations(&self) -> Option<mpsc::UnboundedReceiver<Confirmation>> {
        self.confirmations.lock().take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_ending_dead_fail_and_others_are_paid_with_a_hash() {
        let r = Uuid::new_v4();
        assert_eq!(
            sandbox_outcome(r, Network::Trc20, "TQn9Y2khEsLJW1ChVWFMSMeRDow5Kcdead"),
            PartnerStatus::Failed("transfer_failed".into())
        );
        assert_eq!(
            sandbox_outcome(
                r,
                Network::Erc20,
                "0xabcdef0123456789abcdef0123456789abcdDEAD"
            ),
            PartnerStatus::Failed("transfer_failed".into())
        );
        match sandbox_outcome(
            r,
            Network::Erc20,
            "0xabcdef0123456789abcdef0123456789abcdbeef",
        ) {
            PartnerStatus::Paid { transaction_hash } => {
                assert!(transaction_hash.starts_with("0x"));
                assert_eq!(transaction_hash.len(), 66);
            }
            other => panic!("{other:?}"),
        }
    }
}
