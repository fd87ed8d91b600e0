//! The scheduling pass: due deliveries handed to the dispatchers, endpoint
//! by endpoint in wake order, within the concurrency bounds.

use super::*;

/// What one pass collects: the jobs to hand out, the rows it drops, and
/// the bodies of the events it read (one per event, shared by its jobs).
#[derive(Default)]
struct Pass {
    jobs: Vec<Job>,
    drops: Batches,
    dropped: u64,
    bodies: HashMap<Uuid, Bytes>,
}

impl Supervisor {
    /// Hands due deliveries to the dispatchers, endpoint by endpoint in
    /// wake order, within the concurrency bounds. Deliveries whose endpoint
    /// was disabled or deleted since they were queued are dropped here.
    pub(super) async fn pass(&mut self) -> DomainResult<()> {
        let now_us = micros(self.hub.env.clock.now());
        let read = self.hub.env.store.read()?;
        let mut pass = Pass::default();
        while self.sched.total < IN_FLIGHT_MAX {
            let Some(&(due, ep)) = self.sched.wake.first() else {
                break;
            };
            if due > now_us {
                break;
            }
            self.sched.wake.pop_first();
            self.sched.next.remove(&ep);
            if self.sched.free(ep) == 0 {
                self.sched.blocked.insert(ep);
                continue;
            }
            self.claim_due(&read, ep, now_us, &mut pass)?;
        }
        drop(read);
        self.hand_out(pass).await
    }

    /// Claims `ep`'s due deliveries (up to its free slots and the global
    /// bound), and notes when to look at it again.
    fn claim_due(
        &mut self,
        read: &ReadTxn,
        ep: Uuid,
        now_us: u64,
        pass: &mut Pass,
    ) -> DomainResult<()> {
        let endpoint = Self::endpoint(read, ep)?;
        if endpoint
            .as_ref()
            .is_some_and(|e| !self.hub.env.owns(&e.merchant))
        {
            // Another node owns its merchant now (its deliveries stay
            // queued for that node; a reset brings them back if ours again).
            return Ok(());
        }
        // Endpoints are never removed (deletion marks them).
        let merchant = endpoint.as_ref().map_or(Uuid::nil(), |e| e.merchant);
        let rows = queued(read, ep)?;
        let scanned_all = rows.len() < SCAN_MAX;
        let mut next_due = None;
        for (key, due, ev) in rows {
            if self.claims.contains_key(&(ep, ev)) {
                continue;
            }
            if due > now_us {
                next_due = Some(due);
                break;
            }
            let dkey = delivery_key(ev, ep);
            let Some(mut d) = read.get_decoded::<Delivery>(Table::Deliveries, &dkey)? else {
                pass.drops.of(merchant).delete(Table::DeliveryQueue, key);
                continue;
            };
            if !endpoint.as_ref().is_some_and(|e| e.accepts(d.generation)) {
                // Its endpoint was disabled or deleted since it was queued.
                d.status = DeliveryStatus::Failed;
                d.next_attempt_at = None;
                pass.drops
                    .of(merchant)
                    .delete(Table::DeliveryQueue, key)
                    .put(Table::Deliveries, dkey, &d);
                pass.dropped += 1;
                continue;
            }
            if self.sched.free(ep) == 0 {
                self.sched.blocked.insert(ep);
                next_due = None;
                break;
            }
            if self.sched.total >= IN_FLIGHT_MAX {
                next_due = Some(due);
                break;
            }
            let endpoint = endpoint.as_ref().expect("accepts() checked it");
            let Some(body) = event_body(read, &mut pass.bodies, ev)? else {
                pass.drops.of(merchant).delete(Table::DeliveryQueue, key);
                continue;
            };
            let claim = Claim {
                version: d.version,
                queue_key: key,
            };
            self.claims.insert((ep, ev), claim);
            self.sched.claimed(ep);
            pass.jobs.push(Job {
                event: ev,
                endpoint: ep,
                url: endpoint.url.clone(),
                secret: endpoint.secret.clone(),
                body,
            });
        }
        if let Some(d) = next_due {
            self.sched.note(ep, d);
        } else if !scanned_all && !self.sched.blocked.contains(&ep) {
            // More rows than one scan looks at: come back at once.
            self.sched.note(ep, now_us);
        }
        Ok(())
    }

    /// Sends the pass's jobs to the dispatchers (round robin), counts them,
    /// and commits what it dropped.
    async fn hand_out(&mut self, pass: Pass) -> DomainResult<()> {
        let attempts = pass.jobs.len() as u64;
        for job in pass.jobs {
            let d = &self.dispatchers[self.next_dispatcher % self.dispatchers.len()];
            self.next_dispatcher = self.next_dispatcher.wrapping_add(1);
            d.do_send(Attempt(job));
        }
        let stats = &self.hub.stats;
        stats.attempts.fetch_add(attempts, Ordering::Relaxed);
        self.publish_in_flight();
        if !pass.drops.0.is_empty() {
            let after = After {
                dropped: pass.dropped,
                ..After::default()
            };
            self.commit_all(pass.drops.0.into_values(), after).await?;
        }
        Ok(())
    }
}

/// The first [`SCAN_MAX`] queue rows of `ep`, in due order: (key, due,
/// event).
fn queued(read: &ReadTxn, ep: Uuid) -> DomainResult<Vec<(Vec<u8>, u64, Uuid)>> {
    let mut rows = Vec::new();
    read.scan_prefix(Table::DeliveryQueue, ep.as_bytes(), None, |k, _| {
        if rows.len() >= SCAN_MAX {
            return Ok(false);
        }
        if let Some((_, due, ev)) = parse_queue_key(k) {
            rows.push((k.to_vec(), due, ev));
        }
        Ok(true)
    })?;
    Ok(rows)
}

/// The public event `ev` as a delivery body, read once per pass (`None`:
/// the event is gone).
fn event_body(
    read: &ReadTxn,
    bodies: &mut HashMap<Uuid, Bytes>,
    ev: Uuid,
) -> DomainResult<Option<Bytes>> {
    if let Some(b) = bodies.get(&ev) {
        return Ok(Some(b.clone()));
    }
    let Some(event) = read.get_decoded::<Event>(Table::Events, ev.as_bytes())? else {
        return Ok(None);
    };
    let b = Bytes::from(serde_json::to_vec(&event.view()).expect("an event view serializes"));
    bodies.insert(ev, b.clone());
    Ok(Some(b))
}
