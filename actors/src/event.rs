//! Events: the durable record of every change a merchant hears about. An event
//! is written in the same batch as the change it describes, with
//! `data.object` as the object was at that moment.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::ids::{scope_key, Mode};

pub const PAYMENT_INTENT_SUCCESSFUL: &str = "payment_intent.successful";
pub const PAYMENT_INTENT_FAILED: &str = "payment_intent.failed";
pub const PAYMENT_INTENT_ABANDONED: &str = "payment_intent.abandoned";
pub const PAYMENT_INTENT_CANCELED: &str = "payment_intent.canceled";
pub const PAYOUT_PAID: &str = "payout.paid";
pub const PAYOUT_FAILED: &str = "payout.failed";
pub const PAYOUT_CANCELED: &str = "payout.canceled";
pub const CUSTOMER_IDENTITY_VERIFIED: &str = "customer.identity_verified";
pub const CUSTOMER_IDENTITY_FAILED: &str = "customer.identity_failed";
pub const VIRTUAL_ACCOUNT_ACTIVATED: &str = "virtual_account.activated";
pub const VIRTUAL_ACCOUNT_FAILED: &str = "virtual_account.failed";
pub const INVOICE_PAID: &str = "invoice.paid";
pub const INVOICE_FINALIZED: &str = "invoice.finalized";
pub const INVOICE_PARTIALLY_PAID: &str = "invoice.partially_paid";
pub const INVOICE_OVERDUE: &str = "invoice.overdue";
pub const INVOICE_MARKED_UNCOLLECTIBLE: &str = "invoice.marked_uncollectible";
pub const INVOICE_VOIDED: &str = "invoice.voided";
pub const PLAN_CREATED: &str = "plan.created";
pub const PLAN_UPDATED: &str = "plan.updated";
pub const PLAN_ARCHIVED: &str = "plan.archived";
pub const SUBSCRIPTION_CREATED: &str = "subscription.created";
pub const SUBSCRIPTION_ACTIVATED: &str = "subscription.activated";
pub const SUBSCRIPTION_UPDATED: &str = "subscription.updated";
pub const SUBSCRIPTION_PAST_DUE: &str = "subscription.past_due";
pub const SUBSCRIPTION_CANCELED: &str = "subscription.canceled";
pub const SUBSCRIPTION_COMPLETED: &str = "subscription.completed";
pub const SUBSCRIPTION_TRIAL_WILL_END: &str = "subscription.trial_will_end";

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
    CUSTOMER_IDENTITY_VERIFIED,
    CUSTOMER_IDENTITY_FAILED,
    VIRTUAL_ACCOUNT_ACTIVATED,
    VIRTUAL_ACCOUNT_FAILED,
    "payment_link.created",
    "payment_link.updated",
    "payment_link.deactivated",
    "payment_link.activated",
    INVOICE_FINALIZED,
    INVOICE_PARTIALLY_PAID,
    INVOICE_OVERDUE,
    INVOICE_MARKED_UNCOLLECTIBLE,
    INVOICE_VOIDED,
    PLAN_CREATED,
    PLAN_UPDATED,
    PLAN_ARCHIVED,
    SUBSCRIPTION_CREATED,
    SUBSCRIPTION_ACTIVATED,
    SUBSCRIPTION_UPDATED,
    SUBSCRIPTION_PAST_DUE,
    SUBSCRIPTION_CANCELED,
    SUBSCRIPTION_COMPLETED,
    SUBSCRIPTION_TRIAL_WILL_END,
];

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    #[serde(rename = "type")]
    pub event_type: String,
    #[serde(with = "kobo_storage::codec::timestamp")]
    pub created_at: DateTime<Utc>,
    /// The object as the API showed it, as its JSON text (keys sorted, as
    /// [`crate::idempotency::render`] writes it); in the compact format
    /// compressed against kobo's dictionary ([`crate::stored_json`]). Kept
    /// as text: a change writes it once for its answer and its events, and
    /// the store packs the text as it is.
    #[serde(with = "crate::stored_json::raw")]
    pub object: Box<RawValue>,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        (
            self.id,
            self.merchant,
            self.mode,
            self.seq,
            &self.event_type,
            self.created_at,
            self.object.get(),
        ) == (
            other.id,
            other.merchant,
            other.mode,
            other.seq,
            &other.event_type,
            other.created_at,
            other.object.get(),
        )
    }
}

/// The fields an [`Event`] is stored with before its object: what the
/// webhook fan-out needs to route an event, read without unpacking the
/// object. Its fields are the event's first fields, in their order, so it
/// decodes from either stored format (postcard reads a prefix; JSON skips
/// the rest). Pinned by `tests::an_events_head_reads_from_both_stored_formats`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct EventHead {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    #[serde(rename = "type")]
    pub event_type: String,
}

/// `value`'s JSON text, as an event's object.
pub fn object_text(value: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("a JSON value serializes")
}

/// Stored in the compact format (kobo_storage::codec); events written as
/// JSON before it still read. Pinned by
/// `tests::the_stored_layout_of_an_event_is_pinned`.
impl kobo_storage::Compact for Event {}

/// The schema of an event's `type`: one of [`EVENT_TYPES`].
pub fn event_type_schema() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(EVENT_TYPES.iter().copied()))
        .into()
}

/// The `object` value of an event.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum EventObject {
    #[serde(rename = "event")]
    Event,
}

/// An event's `data`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EventData {
    /// The payment, payout, refund, customer or virtual account as it was
    /// when the event happened.
    #[schema(value_type = Object)]
    pub object: Box<RawValue>,
}

/// The public Event object (without `deliveries`), also the body of a
/// webhook delivery.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Event)]
pub struct EventView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: EventObject,
    #[serde(rename = "type")]
    #[schema(schema_with = event_type_schema)]
    pub event_type: String,
    pub livemode: bool,
    pub created_at: DateTime<Utc>,
    pub data: EventData,
}

impl Event {
    pub fn view(&self) -> EventView {
        EventView {
            id: self.id,
            object: EventObject::Event,
            event_type: self.event_type.clone(),
            livemode: self.mode.livemode(),
            created_at: self.created_at,
            data: EventData {
                object: self.object.clone(),
            },
        }
    }

    /// The public Event object (without `deliveries`), as JSON.
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("an event view serializes")
    }

    /// Records the event in the change's batch: the event, its list
    /// indexes, and its outbox row, from which the webhook supervisor
    /// creates its deliveries (so an event committed is never lost to its
    /// endpoints, whatever crashes after).
    /// Records an event of `event_type` about `object` (as it is at `now`,
    /// the time of the change) in `batch`, the batch of that change.
    pub fn record(
        kobo: &crate::env::Env,
        scope: (Uuid, Mode),
        event_type: &str,
        object: Value,
        now: DateTime<Utc>,
        batch: &mut Batch,
    ) {
        Event::record_text(kobo, scope, event_type, object_text(&object), now, batch)
    }

    /// [`Event::record`] of an object already written as JSON text (sorted
    /// keys: [`crate::sorted_json`]).
    pub fn record_text(
        kobo: &crate::env::Env,
        (merchant, mode): (Uuid, Mode),
        event_type: &str,
        object: Box<RawValue>,
        now: DateTime<Utc>,
        batch: &mut Batch,
    ) {
        Event {
            id: crate::ids::new_id(now),
            merchant,
            mode,
            seq: kobo.seq.next(),
            event_type: event_type.to_string(),
            created_at: now,
            object,
        }
        .add_to(batch);
    }

    pub fn add_to(&self, batch: &mut Batch) {
        batch
            .put_compact(Table::Events, self.id.as_bytes().to_vec(), self)
            .put_raw(
                Table::EventIndex,
                scope_key(self.merchant, self.mode).u64(self.seq).build(),
                self.id.as_bytes().to_vec(),
            )
            .put_raw(
                Table::EventTypeIndex,
                scope_key(self.merchant, self.mode)
                    .u8(type_byte(&self.event_type))
                    .u64(self.seq)
                    .build(),
                self.id.as_bytes().to_vec(),
            )
            .put_raw(
                Table::EventOutbox,
                kobo_storage::KeyBuf::new().u64(self.seq).build(),
                self.id.as_bytes().to_vec(),
            )
            .note_seq(self.seq);
    }
}

/// The byte of an event type in `event_type_index` keys: its place in
/// [`EVENT_TYPES`] plus one (the list only ever grows at its end; 0 for an
/// unknown type).
pub fn type_byte(event_type: &str) -> u8 {
    EVENT_TYPES
        .iter()
        .position(|t| *t == event_type)
        .map(|i| i as u8 + 1)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored_example() -> Event {
        Event {
            id: Uuid::from_u128(0x0196_0000_0000_7000_8000_0000_0000_0001),
            merchant: Uuid::from_u128(2),
            mode: Mode::Live,
            seq: 300,
            event_type: PAYMENT_INTENT_SUCCESSFUL.into(),
            created_at: "2025-03-03T09:00:00Z".parse().unwrap(),
            object: object_text(&json!({"amount": 250000, "currency": "NGN",
                "metadata": {"n": [1, 2.5, null]}, "object": "payment_intent",
                "status": "successful"})),
        }
    }

    #[test]
    fn an_event_is_stored_compact_and_reads_back_equal_and_smaller() {
        let e = stored_example();
        let bytes = kobo_storage::encode_compact(&e);
        assert_eq!(bytes[0], kobo_storage::codec::FORMAT_V3);
        let back: Event = kobo_storage::decode(&bytes).unwrap();
        assert_eq!(back, e);
        assert!(
            bytes.len() * 2 < kobo_storage::encode(&e).len(),
            "{}",
            bytes.len()
        );
    }

    #[test]
    fn an_events_head_reads_from_both_stored_formats() {
        let e = stored_example();
        let head = EventHead {
            id: e.id,
            merchant: e.merchant,
            mode: e.mode,
            seq: e.seq,
            event_type: e.event_type.clone(),
        };
        for bytes in [kobo_storage::encode_compact(&e), kobo_storage::encode(&e)] {
            assert_eq!(kobo_storage::decode::<EventHead>(&bytes).unwrap(), head);
        }
        let old = hex::decode(PACKED_WITH_DICTIONARY_1.concat()).unwrap();
        assert_eq!(kobo_storage::decode::<EventHead>(&old).unwrap(), head);
    }

    #[test]
    fn an_event_stored_as_json_before_the_compact_format_still_reads() {
        let e = stored_example();
        let json = kobo_storage::encode(&e);
        let text = std::str::from_utf8(&json[1..]).unwrap();
        assert!(text.contains("\"object\":{\"amount\":250000,"), "{text}");
        let back: Event = kobo_storage::decode(&json).unwrap();
        assert_eq!(back, e);
    }

    /// postcard stores fields by position and the object's bytes are
    /// dictionary 1's: if this fails, the change needs a new format version
    /// (or dictionary number), not a new pinned value. Written by format 2
    /// (the time as text) before dictionary 2, so these bytes must keep
    /// reading as the same event.
    const PACKED_WITH_DICTIONARY_1: [&str; 4] = [
        "021001960000000070008000000000000001100000000000000000000000000000000201ac02197061",
        "796d656e745f696e74656e742e7375636365737366756c14323032352d30332d30335430393a30303a",
        "30305a2f0e700000000e3f060dec04070701b0226e223a5b312c322e352ca2002f5d7d04010905b000",
        "02af03607366756c227d",
    ];

    /// The fields before the object, as format 3 writes them.
    const FIELDS: &str = concat!(
        "031001960000000070008000000000000001100000000000000000000000000000000201ac021970",
        "61796d656e745f696e74656e742e7375636365737366756ca0beabfc0c00",
    );

    #[test]
    fn the_stored_layout_of_an_event_is_pinned() {
        let old = hex::decode(PACKED_WITH_DICTIONARY_1.concat()).unwrap();
        assert_eq!(
            kobo_storage::decode::<Event>(&old).unwrap(),
            stored_example()
        );
        // Today's bytes (format 3): the fields up to the object pinned, the
        // time as seconds and nanoseconds; then the object, packed against
        // dictionary 2 (zstd's bytes may differ between library versions;
        // any of them unpacks).
        let bytes = kobo_storage::encode_compact(&stored_example());
        let fields = FIELDS.len() / 2;
        assert_eq!(
            hex::encode(&bytes[..fields]),
            FIELDS,
            "the compact layout of Event changed"
        );
        assert_eq!(bytes[fields + 1], crate::stored_json::DICTIONARY.tag());
        assert_eq!(
            kobo_storage::decode::<Event>(&bytes).unwrap(),
            stored_example()
        );
    }

    /// The view renders exactly what the `json!` rendering it replaced did.
    #[test]
    fn event_json_is_unchanged() {
        for (n, t) in EVENT_TYPES.iter().enumerate() {
            for mode in [Mode::Test, Mode::Live] {
                let e = Event {
                    id: Uuid::new_v4(),
                    merchant: Uuid::new_v4(),
                    mode,
                    seq: n as u64,
                    event_type: t.to_string(),
                    created_at: Utc::now(),
                    object: object_text(
                        &json!({"id": "x", "object": "payment_intent", "amount": n}),
                    ),
                };
                let old = json!({
                    "id": e.id,
                    "object": "event",
                    "type": e.event_type,
                    "livemode": e.mode.livemode(),
                    "created_at": e.created_at,
                    "data": { "object": e.object },
                });
                assert_eq!(e.to_api(), old);
            }
        }
    }

    #[test]
    fn every_event_type_has_its_own_index_byte() {
        let mut bytes: Vec<u8> = EVENT_TYPES.iter().map(|t| type_byte(t)).collect();
        assert!(bytes.iter().all(|b| *b > 0));
        bytes.dedup();
        assert_eq!(bytes.len(), EVENT_TYPES.len());
        assert_eq!(type_byte("no.such"), 0);
    }
}
