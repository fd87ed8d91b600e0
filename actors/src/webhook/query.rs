//! Reads for the webhook API, straight from store snapshots: endpoint
//! lists, events with their deliveries, and the stream's replay.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::{decode, ReadTxn, StoreError, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::event::{event_type_schema, type_byte, Event, EventData, EventObject};
use crate::ids::{scope_key, Mode};
use crate::paging::Page;

use super::{stream_key, Delivery, DeliveryAttempt, DeliveryView, StreamItem, WebhookEndpoint};

fn bad_index() -> StoreError {
    StoreError::Redb("an index row does not hold an id".into())
}

/// A scope's non-deleted endpoints, newest first (at most
/// [`super::MAX_ENDPOINTS_PER_MODE`] exist).
pub fn scope_endpoints(
    read: &ReadTxn,
    merchant: Uuid,
    mode: Mode,
) -> DomainResult<Vec<WebhookEndpoint>> {
    let mut out = Vec::new();
    read.scan_prefix_rev(
        Table::WebhookEndpointIndex,
        &scope_key(merchant, mode).build(),
        None,
        |_, v| {
            let id = Uuid::from_slice(v).map_err(|_| bad_index())?;
            if let Some(e) =
                read.get_decoded::<WebhookEndpoint>(Table::WebhookEndpoints, id.as_bytes())?
            {
                if e.deleted_at.is_none() {
                    out.push(e);
                }
            }
            Ok(true)
        },
    )?;
    Ok(out)
}

/// `GET /v1/webhook_endpoints`: every endpoint of the mode, newest first.
pub fn list_endpoints(kobo: &Env, merchant: Uuid, mode: Mode) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    let data = scope_endpoints(&read, merchant, mode)?
        .iter()
        .map(|e| e.to_api(false))
        .collect();
    Ok(Page {
        data,
        has_more: false,
    })
}

/// An event as listed by `GET /v1/events`: the Event with its deliveries.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = EventWithDeliveries)]
pub struct EventListView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: EventObject,
    #[serde(rename = "type")]
    #[schema(schema_with = event_type_schema)]
    pub event_type: String,
    pub livemode: bool,
    pub created_at: DateTime<Utc>,
    pub data: EventData,
    /// One per endpoint the event was sent (or queued) to, deleted
    /// endpoints included.
    pub deliveries: Vec<DeliveryView>,
}

/// The deliveries of one event.
pub fn deliveries(read: &ReadTxn, event: Uuid) -> DomainResult<Vec<Delivery>> {
    let mut out = Vec::new();
    read.scan_prefix(Table::Deliveries, event.as_bytes(), None, |_, v| {
        out.push(decode::<Delivery>(v)?);
        Ok(true)
    })?;
    Ok(out)
}

fn list_item(read: &ReadTxn, e: &Event) -> DomainResult<serde_json::Value> {
    let mut deliveries: Vec<Delivery> = deliveries(read, e.id)?;
    deliveries.sort_by_key(|d| d.created_at);
    let view = EventListView {
        id: e.id,
        object: EventObject::Event,
        event_type: e.event_type.clone(),
        livemode: e.mode.livemode(),
        created_at: e.created_at,
        data: EventData {
            object: e.object.clone(),
        },
        deliveries: deliveries.iter().map(Delivery::view).collect(),
    };
    Ok(serde_json::to_value(view).expect("an event view serializes"))
}

/// Every kept attempt of the event's deliveries (to `endpoint` only when
/// given), oldest first.
pub fn attempts(
    read: &ReadTxn,
    event: Uuid,
    endpoint: Option<Uuid>,
) -> DomainResult<Vec<DeliveryAttempt>> {
    let mut prefix = event.as_bytes().to_vec();
    if let Some(ep) = endpoint {
        prefix.extend_from_slice(ep.as_bytes());
    }
    let mut out = Vec::new();
    read.scan_prefix(Table::DeliveryAttempts, &prefix, None, |_, v| {
        out.push(decode::<DeliveryAttempt>(v)?);
        Ok(true)
    })?;
    out.sort_by_key(|a| (a.at, a.number, a.endpoint));
    Ok(out)
}

/// The endpoint's newest test events (`POST /v1/webhook_endpoints/{id}/test`),
/// at most `max`, newest first.
pub fn test_events(read: &ReadTxn, endpoint: Uuid, max: usize) -> DomainResult<Vec<Event>> {
    let mut out = Vec::new();
    read.scan_prefix_rev(
        Table::WebhookTestEvents,
        endpoint.as_bytes(),
        None,
        |_, v| {
            let id = Uuid::from_slice(v).map_err(|_| bad_index())?;
            if let Some(e) = read.get_decoded::<Event>(Table::Events, id.as_bytes())? {
                out.push(e);
            }
            Ok(out.len() < max)
        },
    )?;
    Ok(out)
}

/// The query of `GET /v1/events/{id}/delivery_attempts`.
pub struct AttemptFilter {
    pub limit: usize,
    pub starting_after: Option<Uuid>,
    pub endpoint: Option<Uuid>,
}

/// `GET /v1/events/{id}/delivery_attempts`: the kept attempts of the
/// event's deliveries, oldest first (404 for another merchant's or mode's
/// event; 400 for a `starting_after` that is not one of them).
pub fn list_attempts(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    event: Uuid,
    f: &AttemptFilter,
) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    match read.get_decoded::<Event>(Table::Events, event.as_bytes())? {
        Some(e) if e.merchant == merchant && e.mode == mode => {}
        _ => return Err(DomainError::not_found("event", event)),
    }
    let all = attempts(&read, event, f.endpoint)?;
    let from = match f.starting_after {
        None => 0,
        Some(id) => match all.iter().position(|a| a.id == id) {
            Some(i) => i + 1,
            None => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("no such delivery attempt of this event: {id}"),
                ))
            }
        },
    };
    let rest = &all[from..];
    let data = rest
        .iter()
        .take(f.limit)
        .map(|a| serde_json::to_value(a.view(mode)).expect("an attempt view serializes"))
        .collect();
    Ok(Page {
        data,
        has_more: rest.len() > f.limit,
    })
}

pub struct EventFilter {
    pub limit: usize,
    pub starting_after: Option<Uuid>,
    pub event_type: Option<String>,
}

/// `GET /v1/events`: newest first, optionally of one type (through its own
/// index, so a rare type never walks the others).
pub fn list_events(kobo: &Env, merchant: Uuid, mode: Mode, f: &EventFilter) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    let (table, prefix) = match &f.event_type {
        Some(t) => (
            Table::EventTypeIndex,
            scope_key(merchant, mode).u8(type_byte(t)).build(),
        ),
        None => (Table::EventIndex, scope_key(merchant, mode).build()),
    };
    let before = match f.starting_after {
        Some(id) => match read.get_decoded::<Event>(Table::Events, id.as_bytes())? {
            Some(c) if c.merchant == merchant && c.mode == mode => {
                let mut k = prefix.clone();
                k.extend_from_slice(&c.seq.to_be_bytes());
                Some(k)
            }
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("no such event: {id}"),
                ))
            }
        },
        None => None,
    };
    let mut data = Vec::new();
    let mut has_more = false;
    read.scan_prefix_rev(table, &prefix, before.as_deref(), |_, v| {
        let id = Uuid::from_slice(v).map_err(|_| bad_index())?;
        let Some(event) = read.get_decoded::<Event>(Table::Events, id.as_bytes())? else {
            return Ok(true);
        };
        if data.len() == f.limit {
            has_more = true;
            return Ok(false);
        }
        data.push(list_item(&read, &event).map_err(|e| StoreError::Redb(e.message))?);
        Ok(true)
    })?;
    Ok(Page { data, has_more })
}

/// Events announced on the scope's stream after position `after`, oldest
/// first, at most `max`; and whether more were left out.
pub fn stream_after(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    after: u64,
    max: usize,
) -> DomainResult<(Vec<StreamItem>, bool)> {
    let read = kobo.store.read()?;
    let prefix = scope_key(merchant, mode).build();
    let from = stream_key(merchant, mode, after.saturating_add(1));
    let mut out = Vec::new();
    let mut more = false;
    read.scan_prefix(Table::EventStream, &prefix, Some(&from), |k, v| {
        if out.len() == max {
            more = true;
            return Ok(false);
        }
        let pos = u64::from_be_bytes(k[k.len() - 8..].try_into().map_err(|_| bad_index())?);
        let id = Uuid::from_slice(v).map_err(|_| bad_index())?;
        if let Some(e) = read.get_decoded::<Event>(Table::Events, id.as_bytes())? {
            out.push(StreamItem {
                merchant,
                mode,
                pos,
                event_type: e.event_type.clone(),
                data: Arc::from(e.to_api().to_string()),
            });
        }
        Ok(true)
    })?;
    Ok((out, more))
}

/// The newest stream position of a scope (0 when nothing was announced).
pub fn stream_head(kobo: &Env, merchant: Uuid, mode: Mode) -> DomainResult<u64> {
    let read = kobo.store.read()?;
    let mut head = 0;
    read.scan_prefix_rev(
        Table::EventStream,
        &scope_key(merchant, mode).build(),
        None,
        |k, _| {
            head = u64::from_be_bytes(k[k.len() - 8..].try_into().map_err(|_| bad_index())?);
            Ok(false)
        },
    )?;
    Ok(head)
}

/// One endpoint's delivery queue, for operators (`/admin/v1/actors`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct EndpointQueue {
    pub endpoint: Uuid,
    pub merchant: Uuid,
    pub livemode: bool,
    /// The endpoint's URL (merchant-controlled text).
    pub url: String,
    /// Deliveries queued and not being attempted right now.
    pub waiting: u64,
    /// Attempts handed to a dispatcher and not yet answered.
    pub in_flight: u64,
    /// Waiting deliveries whose last attempt failed (waiting for a retry).
    pub failing: u64,
}

/// The delivery queues by endpoint, busiest first, from at most `max_rows`
/// queue rows (`truncated` when there were more). `in_flight` is the
/// supervisor's published per-endpoint count; a claimed row stays in the
/// queue until its outcome, so it counts as in flight, not waiting.
pub fn endpoint_queues(
    kobo: &Env,
    in_flight: &std::collections::HashMap<Uuid, usize>,
    max_rows: usize,
) -> DomainResult<(Vec<EndpointQueue>, bool)> {
    let read = kobo.store.read()?;
    let mut rows: std::collections::BTreeMap<Uuid, (u64, u64)> = Default::default();
    let mut seen = 0usize;
    let mut truncated = false;
    read.scan_prefix(Table::DeliveryQueue, &[], None, |k, _| {
        if seen >= max_rows {
            truncated = true;
            return Ok(false);
        }
        seen += 1;
        let Some((endpoint, _, event)) = super::parse_queue_key(k) else {
            return Ok(true);
        };
        let failing = read
            .get_decoded::<Delivery>(Table::Deliveries, &super::delivery_key(event, endpoint))?
            .is_some_and(|d| d.retry_step > 0);
        let entry = rows.entry(endpoint).or_default();
        entry.0 += 1;
        entry.1 += u64::from(failing);
        Ok(true)
    })?;
    for ep in in_flight.keys() {
        rows.entry(*ep).or_default();
    }
    let mut out = Vec::with_capacity(rows.len());
    for (endpoint, (queued, failing)) in rows {
        let flying = in_flight.get(&endpoint).copied().unwrap_or(0) as u64;
        let (merchant, livemode, url) = match read
            .get_decoded::<WebhookEndpoint>(Table::WebhookEndpoints, endpoint.as_bytes())?
        {
            Some(e) => (e.merchant, e.mode == Mode::Live, e.url),
            None => (Uuid::nil(), false, String::new()),
        };
        out.push(EndpointQueue {
            endpoint,
            merchant,
            livemode,
            url,
            waiting: queued.saturating_sub(flying),
            in_flight: flying,
            failing,
        });
    }
    out.sort_by(|a, b| {
        (b.waiting + b.in_flight)
            .cmp(&(a.waiting + a.in_flight))
            .then(a.endpoint.cmp(&b.endpoint))
    });
    Ok((out, truncated))
}
