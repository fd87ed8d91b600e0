//! The supervisor's commands: endpoint changes (create, update, enable,
//! disable, delete, with the waiting deliveries they drop) and
//! redelivery of past events.

use super::*;

impl Supervisor {
    pub(super) async fn command(&mut self, cmd: Command) -> DomainResult<Value> {
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
        }
    }

    pub(super) async fn create(
        &mut self,
        merchant: Uuid,
        mode: Mode,
        url: String,
        events: Vec<String>,
        idem: Option<IdempotencySave>,
    ) -> DomainResult<Value> {
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
        let view = endpoint.to_api(true);
        let mut batch = Batch::new();
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
        if let Some(idem) = &idem {
            idem.add_to(&mut batch, 201, &view.to_string(), now);
        }
        self.commit(
            batch,
            After {
                touched_scopes: vec![(merchant, mode)],
                ..After::default()
            },
        )
        .await?;
        Ok(view)
    }

    // Long: one endpoint change in order (load, apply, view, batch, commit), then the
    // waiting deliveries it drops, in slices.
    pub(super) async fn change(
        &mut self,
        merchant: Uuid,
        mode: Mode,
        id: Uuid,
        change: EndpointChange,
        idem: Option<IdempotencySave>,
    ) -> DomainResult<Value> {
        let read = self.hub.env.store.read()?;
        let mut ep = match Self::endpoint(&read, id)? {
            Some(e) if e.merchant == merchant && e.mode == mode && e.deleted_at.is_none() => e,
            _ => return Err(DomainError::not_found("webhook_endpoint", id)),
        };
        drop(read);
        let now = self.hub.env.clock.now();
        let mut drop_waiting = false;
        match change {
            EndpointChange::Disable => {
                if ep.status == EndpointStatus::Enabled {
                    ep.status = EndpointStatus::Disabled;
                    ep.generation += 1;
                    drop_waiting = true;
                }
            }
            EndpointChange::Enable => {
                // The rules may have tightened since the endpoint was made.
                validate_url(&ep.url)?;
                if ep.status == EndpointStatus::Disabled {
                    ep.status = EndpointStatus::Enabled;
                    ep.enabled_seq = self.hub.env.seq.next();
                }
            }
            EndpointChange::Delete => {
                ep.status = EndpointStatus::Disabled;
                ep.generation += 1;
                ep.deleted_at = Some(now);
                ep.secret = String::new();
                drop_waiting = true;
            }
        }
        let view = match change {
            EndpointChange::Delete => serde_json::to_value(DeletedEndpointView {
                id,
                object: WebhookEndpointObject::WebhookEndpoint,
                deleted: true,
                livemode: ep.mode.livemode(),
            })
            .expect("a deleted view serializes"),
            _ => ep.to_api(false),
        };
        let mut batch = Batch::new();
        batch
            .put(Table::WebhookEndpoints, id.as_bytes().to_vec(), &ep)
            .note_seq(ep.enabled_seq);
        if change == EndpointChange::Delete {
            batch.delete(
                Table::WebhookEndpointIndex,
                endpoint_index_key(merchant, mode, ep.seq),
            );
        }
        if let Some(idem) = &idem {
            let status = 200;
            idem.add_to(&mut batch, status, &view.to_string(), now);
        }
        let mut after = After {
            touched_scopes: vec![(merchant, mode)],
            ..After::default()
        };
        if drop_waiting {
            self.drop_waiting(id, &mut batch, &mut after)?;
        }
        self.commit(batch, after).await?;
        // A larger backlog: the rest in further batches.
        if drop_waiting {
            loop {
                let mut batch = Batch::new();
                let mut after = After::default();
                if self.drop_waiting(id, &mut batch, &mut after)? == 0 {
                    break;
                }
                self.commit(batch, after).await?;
            }
        }
        Ok(view)
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

    // Long: one redelivery: a delivery per subscribed endpoint into one batch, the view,
    // one commit.
    pub(super) async fn redeliver(
        &mut self,
        merchant: Uuid,
        mode: Mode,
        event_id: Uuid,
        idem: Option<IdempotencySave>,
    ) -> DomainResult<Value> {
        let read = self.hub.env.store.read()?;
        let event = match read.get_decoded::<Event>(Table::Events, event_id.as_bytes())? {
            Some(e) if e.merchant == merchant && e.mode == mode => e,
            _ => return Err(DomainError::not_found("event", event_id)),
        };
        // An event still in the outbox gets its deliveries from the fan-out.
        let endpoints = self.scope(&read, merchant, mode)?;
        let now = self.hub.env.clock.now();
        let mut batch = Batch::new();
        let mut after = After::default();
        let mut queued = 0u32;
        for ep in endpoints.iter() {
            if ep.status != EndpointStatus::Enabled || !ep.wants(&event.event_type) {
                continue;
            }
            let key = delivery_key(event.id, ep.id);
            let d = match read.get_decoded::<Delivery>(Table::Deliveries, &key)? {
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
            };
            queue_now(&mut batch, &mut after, &d, now);
            queued += 1;
        }
        drop(read);
        let view = serde_json::to_value(RedeliveryView {
            object: EventRedeliveryObject::EventRedelivery,
            event_id,
            queued,
            livemode: mode.livemode(),
        })
        .expect("a redelivery view serializes");
        if let Some(idem) = &idem {
            idem.add_to(&mut batch, 200, &view.to_string(), now);
        }
        self.commit(batch, after).await?;
        Ok(view)
    }
}
