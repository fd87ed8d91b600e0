//! Folding into the supervisor's batch: attempt outcomes (delivered,
//! retried or given up) and the fan-out of new outbox events into one
//! delivery per subscribed endpoint.

use super::*;

impl Supervisor {
    pub(super) fn record_outcomes(
        &mut self,
        read: &ReadTxn,
        batches: &mut Batches,
        outcomes: Vec<Outcome>,
        after: &mut After,
    ) -> DomainResult<()> {
        for o in outcomes {
            let Some(claim) = self.claims.remove(&(o.endpoint, o.event)) else {
                continue;
            };
            // Endpoints are never removed (deletion marks them), so every
            // outcome finds its merchant.
            let endpoint = Self::endpoint(read, o.endpoint)?;
            let merchant = endpoint.as_ref().map_or(Uuid::nil(), |e| e.merchant);
            let batch = batches.of(merchant);
            after.released.push(o.endpoint);
            let key = delivery_key(o.event, o.endpoint);
            let Some(mut d) = read.get_decoded::<Delivery>(Table::Deliveries, &key)? else {
                batch.delete(Table::DeliveryQueue, claim.queue_key);
                continue;
            };
            let success = o.succeeded();
            d.attempts += 1;
            d.last_response_status = o.status;
            d.last_error = o.error.clone();
            d.last_attempt_at = Some(o.at);
            record_attempt(batch, &d, &o);
            if success {
                after.delivered += 1;
            } else {
                after.failed_attempts += 1;
                tracing::info!(event = %o.event, endpoint = %o.endpoint, status = ?o.status,
                    error = ?o.error, attempt = d.attempts, "webhook attempt failed");
            }
            if d.version == claim.version {
                batch.delete(Table::DeliveryQueue, claim.queue_key);
                let live = endpoint.as_ref().is_some_and(|e| e.accepts(d.generation));
                d.next_attempt_at = None;
                if success {
                    d.status = DeliveryStatus::Delivered;
                } else if live && (d.retry_step as usize) < RETRY_DELAYS_SECS.len() {
                    let due =
                        o.at + chrono::Duration::seconds(RETRY_DELAYS_SECS[d.retry_step as usize]);
                    d.retry_step += 1;
                    d.status = DeliveryStatus::Retrying;
                    d.next_attempt_at = Some(due);
                    batch.put_raw(
                        Table::DeliveryQueue,
                        queue_key(o.endpoint, due, o.event),
                        Vec::new(),
                    );
                    after.notes.push((o.endpoint, micros(due)));
                } else {
                    d.status = DeliveryStatus::Failed;
                }
            }
            batch.put(Table::Deliveries, key, &d);
        }
        Ok(())
    }

    /// Turns the next slice of the outbox into deliveries and stream rows.
    /// Returns whether rows are left.
    // Long: one slice of the outbox turned into a delivery per subscribed endpoint, in
    // one batch.
    pub(super) fn fan_out(
        &mut self,
        read: &ReadTxn,
        batches: &mut Batches,
        after: &mut After,
    ) -> DomainResult<bool> {
        // Rows of other nodes' merchants (cluster mode) stay for their
        // owners; up to this many are looked past.
        const SCAN_MAX: usize = 4 * OUTBOX_SLICE;
        let mut rows: Vec<(Vec<u8>, Uuid)> = Vec::new();
        read.scan_prefix(Table::EventOutbox, &[], None, |k, v| {
            if rows.len() >= SCAN_MAX {
                return Ok(false);
            }
            if let Ok(id) = Uuid::from_slice(v) {
                rows.push((k.to_vec(), id));
            } else {
                rows.push((k.to_vec(), Uuid::nil()));
            }
            Ok(true)
        })?;
        let now = self.hub.env.clock.now();
        let mut taken = 0;
        for (key, id) in rows {
            if taken >= OUTBOX_SLICE {
                break;
            }
            let Some(stored) = read.get(Table::Events, id.as_bytes())? else {
                tracing::warn!(event = %id, "outbox row without its event; skipped");
                // Whose row it was is unknown: kobo's own (the nil id,
                // shard 0's owner in a cluster).
                if self.hub.env.owns(&Uuid::nil()) {
                    batches.of(Uuid::nil()).delete(Table::EventOutbox, key);
                }
                continue;
            };
            // The head routes it: the object stays packed.
            let event: EventHead = kobo_storage::decode(&stored)?;
            if !self.hub.env.owns(&event.merchant) {
                continue;
            }
            taken += 1;
            let batch = batches.of(event.merchant);
            batch.delete(Table::EventOutbox, key);
            let endpoints = self.scope(read, event.merchant, event.mode)?;
            for ep in endpoints.iter() {
                // Only events from the moment the endpoint was (re-)enabled:
                // enabling does not resend what it missed.
                if ep.status != EndpointStatus::Enabled
                    || !ep.wants(&event.event_type)
                    || event.seq < ep.enabled_seq
                {
                    continue;
                }
                let dkey = delivery_key(event.id, ep.id);
                if read.get(Table::Deliveries, &dkey)?.is_some() {
                    // A redelivery got there first.
                    continue;
                }
                let d = Delivery::first(event.id, ep.id, ep.generation, now);
                queue_now(batch, after, &d, now);
            }
            let pos = self.hub.env.seq.next();
            batch
                .put_raw(
                    Table::EventStream,
                    stream_key(event.merchant, event.mode, pos),
                    event.id.as_bytes().to_vec(),
                )
                .note_seq(pos);
            // Unpacked now only for a stream that listens already (the
            // usual case is none): a later one reads it from the store.
            let full = if self.hub.listening() {
                // One that does not unpack is not announced (logged
                // again then); its deliveries go ahead.
                kobo_storage::decode::<Event>(&stored)
                    .inspect_err(|e| {
                        tracing::warn!(event = %id, error = %e, "event does not unpack");
                    })
                    .ok()
            } else {
                None
            };
            after.announce.push((pos, event.id, full));
        }
        Ok(taken >= OUTBOX_SLICE)
    }
}

/// Writes the attempt `o` (the delivery's `d.attempts`-th) to the history,
/// and deletes the one it pushes out of the kept window.
fn record_attempt(batch: &mut Batch, d: &Delivery, o: &Outcome) {
    let attempt = DeliveryAttempt {
        id: new_id(o.at),
        event: o.event,
        endpoint: o.endpoint,
        number: d.attempts,
        at: o.at,
        response_status: o.status,
        error: o.error.clone(),
        duration_ms: o.duration_ms,
    };
    batch.put(
        Table::DeliveryAttempts,
        attempt_key(o.event, o.endpoint, d.attempts),
        &attempt,
    );
    if let Some(old) = attempt_pruned(d.attempts) {
        batch.delete(
            Table::DeliveryAttempts,
            attempt_key(o.event, o.endpoint, old),
        );
    }
}
