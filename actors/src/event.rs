//! Events: the durable record of every change a merchant hears about. An event
//! is written in the same batch as the change it describes, with
//! `data.object` as the object was at that moment.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::ids::{scope_key, Mode};

pub const PAYMENT_INTENT_SUCCESSFUL: &str = "payment_intent.successful";
pub const PAYMENT_INTENT_FAILED: &str = "payment_intent.failed";
pub const PAYMENT_INTENT_ABANDONED: &str = "payment_intent.abandoned";
pub const PAYMENT_INTENT_CANCELED: &str = "payment_intent.canceled";

/// Every event type of the spec.
pub const EVENT_TYPES: &[&str] = &[
    PAYMENT_INTENT_SUCCESSFUL,
    PAYMENT_INTENT_FAILED,
    PAYMENT_INTENT_ABANDONED,
    PAYMENT_INTENT_CANCELED,
    "refund.succeeded",
    "refund.failed",
    "payout.paid",
    "payout.failed",
    "payout.canceled",
    "dispute.created",
    "dispute.won",
    "dispute.lost",
    "invoice.paid",
    "crypto_payout.paid",
    "crypto_payout.failed",
];

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    #[serde(rename = "type")]
    pub event_type: String,
    pub created_at: DateTime<Utc>,
    pub object: Value,
}

impl Event {
    /// The public Event object (without `deliveries`).
    pub fn to_api(&self) -> Value {
        json!({
            "id": self.id,
            "object": "event",
            "type": self.event_type,
            "livemode": self.mode.livemode(),
            "created_at": self.created_at,
            "data": { "object": self.object },
        })
    }

    pub fn add_to(&self, batch: &mut Batch) {
        batch
            .put(Table::Events, self.id.as_bytes().to_vec(), self)
            .put_raw(
                Table::EventIndex,
                scope_key(self.merchant, self.mode).u64(self.seq).build(),
                self.id.as_bytes().to_vec(),
            )
            .note_seq(self.seq);
    }
}
