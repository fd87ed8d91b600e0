//! The supervisor's commands: endpoint changes (create, update, enable,
//! disable, delete, with the waiting deliveries they drop) and
//! redelivery of past events.

use super::*;
use crate::idempotency::{self, Answer};
use crate::webhook::WebhookView;

type Done = idempotency::Outcome<WebhookView>;

impl Supervisor {
    pub(super) async fn command(&mut self, cmd: Command) -> DomainResult<Answer<WebhookView>> {
        match cmd {
            Command::Create {
                merchant,
                mode,
                url,
                events,
                idem,
            } => self.create(merchant, mode, url, events, idem).await,
            Command::Change {
                merchant,
                mode,
                id,
                change,
                idem,
            } => self.change(merchant, mode, id, change, idem).await,
            Command::Redeliver {
                merchant,
                mode,
                event,
                idem,
            } => self.redeliver(merchant, mode, event, idem).await,
            Command::Test {
                merchant,
                mode,
                id,
                idem,
            } => self.test(merchant, mode, id, idem).await,
        }
    }

    /// A `webhook_endpoint.test` event (its `data.object` the endpoint,
    /// without secret) queued to this endpoint only, now. The event is
    /// stored for its body and its deliveries' history, but in no event
    /// list, the outbox or the stream: it goes nowhere else.
    pub(super) async fn test(
        &mut self,
        merchant: Uuid,
        mode: Mode,
        id: Uuid,
        idem: Option<IdempotencySave>,
    ) -> DomainResult<Answer<WebhookView>> {
        let read = self.hub.env.store.read()?;
        let ep = match Self::endpoint(&read, id)? {
            Some(e) if e.merchant == merchant && e.mode == mode && e.deleted_at.is_none() => e,
            _ => return Err(DomainError::not_found("webhook_endpoint", id)),
        };
        drop(read);
        if ep.status != EndpointStatus::Enabled {
            return Err(DomainError::state(
                ErrorCode::WebhookEndpointDisabled,
                "the endpoint is disabled; enable it before sending a test event",
            ));
        }
        let now = self.hub.env.clock.now();
        let seq = self.hub.env.seq.next();
        let event = Event {
            id: new_id(now),
            merchant,
            mode,
            seq,
            event_type: TEST_EVENT_TYPE.to_string(),
            created_at: now,
            object: crate::event::object_text(&ep.to_api(false)),
        };
        let mut batch = Batch::new();
        batch.owned_by(merchant.as_bytes());
        let mut after = After::default();
        batch
            .put(Table::Events, event.id.as_bytes().to_vec(), &event)
            .put_raw(
                Table::WebhookTestEvents,
                KeyBuf::new().bytes(ep.id.as_bytes()).u64(seq).build(),
                event.id.as_bytes().to_vec(),
            )
            .note_seq(seq);
        let d = Delivery::first(event.id, ep.id, ep.generation, now);
        queue_now(&mut batch, &mut after, &d, now);
        let view = WebhookView::Test(WebhookTestView {
            object: WebhookTestObject::WebhookEndpointTest,
            endpoint_id: ep.id,
            event_id: event.id,
            event_type: TEST_EVENT_TYPE,
            livemode: mode.livemode(),
            created_at: now,
        });
        let answer = Answer::save(Done::Created(view), idem.as_ref(), &mut batch, now);
        self.commit(batch, after).await?;
        Ok(answer)
    }

    pub(super) async fn create(
        &mut self,
        merchant: Uuid,
        mode: Mode,
        url: String,
        events: Vec<String>,
        idem: Option<IdempotencySave>,
    ) -> DomainResult<Answer<WebhookView>> {
        let read = self.hub.env.store.read()?;
        let existing = self.scope(&read, merchant, mode)?;
        drop(read);
        if existing.len() >= MAX_ENDPOINTS_PER_MODE {
            return Err(DomainError::request(
                ErrorCode::TooManyEndpoints,
                None,
                format!(
                    "a mode holds at most {MAX_ENDPOINTS_PER_MODE} webhook endpoints; delete one first"
                ),
            ));
        }
        let now = self.hub.env.clock.now();
        let seq = self.hub.env.seq.next();
        let endpoint = WebhookEndpoint {
            id: new_id(now),
            merchant,
            mode,
            seq,
            url,
            events,
            status: EndpointStatus::Enabled,
            secret: new_secret(),
            created_at: now,
            generation: 1,
            enabled_seq: seq,
            deleted_at: None,
        };
        let mut batch = Batch::new();
        batch.owned_by(merchant.as_bytes());
        batch
            .put(
                Table::WebhookEndpoints,
                endpoint.id.as_bytes().to_vec(),
                &endpoint,
            )
            .put_raw(
                Table::WebhookEndpointIndex,
                endpoint_index_key(merchant, mode, seq),
                endpoint.id.as_bytes().to_vec(),
            )
            .note_seq(seq);
        let view = WebhookView::Endpoint(endpoint.view(true));
        let answer = Answer::save(Done::Created(view), idem.as_ref(), &mut batch, now);
        self.commit(
            batch,
            After {
                touched_scopes: vec![(merchant, mode)],
                ..After::default()
            },
        )
        .await?;
        Ok(answer)
    }

    /// Disables, enables or deletes an endpoint; a disable or delete drops
    /// its waiting deliveries (the first slice in the same batch, the rest
    /// in further ones).
    pub(super) async fn change(
        &mut self,
        merchant: Uuid,
        mode: Mode,
        id: Uuid,
        change: EndpointChange,
        idem: Option<IdempotencySave>,
    ) -> DomainResult<Answer<WebhookView>> {
        let read = self.hub.env.store.read()?;
        let mut ep = match Self::endpoint(&read, id)? {
            Some(e) if e.merchant == merchant && e.mode == mode && e.deleted_at.is_none() => e,
            _ => return Err(DomainError::not_found("webhook_endpoint", id)),
        };
        drop(read);
        let now = self.hub.env.clock.now();
        let drop_waiting = self.apply(&mut ep, change, now)?;
        let view = match change {
            EndpointChange::Delete => WebhookView::Deleted(DeletedEndpointView {
                id,
                object: WebhookEndpointObject::WebhookEndpoint,
                deleted: true,
                livemode: ep.mode.livemode(),
            }),
            _ => WebhookView::Endpoint(ep.view(false)),
        };
        let mut batch = Batch::new();
        batch.owned_by(merchant.as_bytes());
        batch
            .put(Table::WebhookEndpoints, id.as_bytes().to_vec(), &ep)
            .note_seq(ep.enabled_seq);
        if change == EndpointChange::Delete {
            batch.delete(
                Table::WebhookEndpointIndex,
                endpoint_index_key(merchant, mode, ep.seq),
            );
        }
        let answer = Answer::save(Done::Updated(view), idem.as_ref(), &mut batch, now);
        let mut after = After {
            touched_scopes: vec![(merchant, mode)],
            ..After::default()
        };
        if drop_waiting {
            self.drop_waiting(id, &mut batch, &mut after)?;
        }
        self.commit(batch, after).await?;
        if drop_waiting {
            self.drop_rest(merchant, id).await?;
        }
        Ok(answer)
    }

    /// Applies `change` to `ep`; answers whether its waiting deliveries go.
    fn apply(
        &self,
        ep: &mut WebhookEndpoint,
        change: EndpointChange,
        now: DateTime<Utc>,
    ) -> DomainResult<bool> {
        Ok(match change {
            EndpointChange::Disable => {
                let enabled = ep.status == EndpointStatus::Enabled;
                if enabled {
                    ep.status = EndpointStatus::Disabled;
                    ep.generation += 1;
                }
                enabled
            }
            EndpointChange::Enable => {
                // The rules may have tightened since the endpoint was made.
                validate_url(&ep.url)?;
                if ep.status == EndpointStatus::Disabled {
                    ep.status = EndpointStatus::Enabled;
                    ep.enabled_seq = self.hub.env.seq.next();
                }
                false
            }
            EndpointChange::Delete => {
                ep.status = EndpointStatus::Disabled;
                ep.generation += 1;
                ep.deleted_at = Some(now);
                ep.secret = String::new();
                true
            }
        })
    }

    /// The waiting deliveries of a larger backlog, in further batches.
    async fn drop_rest(&mut self, merchant: Uuid, id: Uuid) -> DomainResult<()> {
        loop {
            let mut batch = Batch::new();
            batch.owned_by(merchant.as_bytes());
            let mut after = After::default();
            if self.drop_waiting(id, &mut batch, &mut after)? == 0 {
                return Ok(());
            }
            self.commit(batch, after).await?;
        }
    }

    /// Drops up to [`DROP_SLICE`] waiting (unclaimed) deliveries of an
    /// endpoint: `failed`, out of the queue. Claimed ones are settled when
    /// their attempt ends (no retry: the generation moved on). Returns how
    /// many it dropped.
    pub(super) fn drop_waiting(
        &mut self,
        ep: Uuid,
        batch: &mut Batch,
        after: &mut After,
    ) -> DomainResult<usize> {
        let read = self.hub.env.store.read()?;
        let mut rows = Vec::new();
        let claims = &self.claims;
        read.scan_prefix(Table::DeliveryQueue, ep.as_bytes(), None, |k, _| {
            if rows.len() >= DROP_SLICE {
                return Ok(false);
            }
            if let Some((_, _, ev)) = parse_queue_key(k) {
                if !claims.contains_key(&(ep, ev)) {
                    rows.push((k.to_vec(), ev));
                }
            }
            Ok(true)
        })?;
        let n = rows.len();
        for (key, ev) in rows {
            batch.delete(Table::DeliveryQueue, key);
            let dkey = delivery_key(ev, ep);
            if let Some(mut d) = read.get_decoded::<Delivery>(Table::Deliveries, &dkey)? {
                d.status = DeliveryStatus::Failed;
                d.next_attempt_at = None;
                batch.put(Table::Deliveries, dkey, &d);
            }
        }
        after.dropped += n as u64;
        Ok(n)
    }

    /// Queues the event again for each enabled endpoint that wants it, now.
    pub(super) async fn redeliver(
        &mut self,
        merchant: Uuid,
        mode: Mode,
        event_id: Uuid,
        idem: Option<IdempotencySave>,
    ) -> DomainResult<Answer<WebhookView>> {
        let read = self.hub.env.store.read()?;
        let event = match read.get_decoded::<Event>(Table::Events, event_id.as_bytes())? {
            Some(e) if e.merchant == merchant && e.mode == mode => e,
            _ => return Err(DomainError::not_found("event", event_id)),
        };
        // An event still in the outbox gets its deliveries from the fan-out.
        let endpoints = self.scope(&read, merchant, mode)?;
        let now = self.hub.env.clock.now();
        let mut batch = Batch::new();
        batch.owned_by(merchant.as_bytes());
        let mut after = After::default();
        let mut queued = 0u32;
        for ep in endpoints.iter() {
            // A test event goes again to its own endpoint only, whatever
            // its filter.
            let wanted = if event.event_type == TEST_EVENT_TYPE {
                read.get(Table::Deliveries, &delivery_key(event.id, ep.id))?
                    .is_some()
            } else {
                ep.wants(&event.event_type)
            };
            if ep.status != EndpointStatus::Enabled || !wanted {
                continue;
            }
            let d = Self::redelivery(&read, &event, ep, &mut batch, now)?;
            queue_now(&mut batch, &mut after, &d, now);
            queued += 1;
        }
        drop(read);
        let view = WebhookView::Redelivery(RedeliveryView {
            object: EventRedeliveryObject::EventRedelivery,
            event_id,
            queued,
            livemode: mode.livemode(),
        });
        let answer = Answer::save(Done::Updated(view), idem.as_ref(), &mut batch, now);
        self.commit(batch, after).await?;
        Ok(answer)
    }

    /// The event's delivery to `ep`, due now: its existing delivery started
    /// over (a new version, out of the queue at its old time), or a first.
    fn redelivery(
        read: &ReadTxn,
        event: &Event,
        ep: &WebhookEndpoint,
        batch: &mut Batch,
        now: DateTime<Utc>,
    ) -> DomainResult<Delivery> {
        let key = delivery_key(event.id, ep.id);
        Ok(
            match read.get_decoded::<Delivery>(Table::Deliveries, &key)? {
                Some(mut d) => {
                    if let Some(old) = d.next_attempt_at {
                        batch.delete(Table::DeliveryQueue, queue_key(ep.id, old, event.id));
                    }
                    d.version += 1;
                    d.status = DeliveryStatus::Pending;
                    d.retry_step = 0;
                    d.generation = ep.generation;
                    d.next_attempt_at = Some(now);
                    d
                }
                None => Delivery::first(event.id, ep.id, ep.generation, now),
            },
        )
    }
}
