//! The cluster's membership and leases in PostgreSQL: the [`Leases`]
//! implementation a cluster node's store hands out
//! ([`crate::Store::leases`]).
//!
//! Tables (schema version 2, [`super::schema`]): `kobo_nodes` (one row per
//! node: address, last heartbeat), `kobo_leases` (one row per shard:
//! holder, fencing token, expiry) and the sequence `kobo_seq` (the highest
//! sequence number reserved). Every time is the database's `now()`, so the
//! nodes' own clocks never matter. Every call is one short autocommit
//! statement (or one short transaction) on this object's own connection,
//! never the writer's, so lease upkeep never waits behind a group commit.
//!
//! Tokens: a shard's token rises by one whenever the lease is taken by a
//! node that does not hold it live (another node, nobody, or the same node
//! after its lease expired or was released), and never otherwise. The
//! group commit ([`super::commit`]) refuses a fenced batch whose token is
//! not the row's current one, reading the row `FOR SHARE`, so a takeover's
//! `UPDATE` waits for the commits in flight under the old token.
//!
//! Row locks are always taken in shard order (a renewal locks its rows
//! `ORDER BY shard FOR UPDATE` first; the commit reads them `ORDER BY shard
//! FOR SHARE`), so lease upkeep and group commits never deadlock.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::Client;

use super::tls::Target;
use super::{call, connect, pg_err};
use crate::fence::{Fence, LeaseRow, Leases, NodeRow};
use crate::tables::Table;
use crate::writer::{u64_from, META_SEQ_HIGH_WATER};
use crate::StoreError;

/// The transaction lock under which sequence blocks are reserved.
const SEQUENCE_LOCK: i64 = 0x6b6f_626f_0003;

/// A duration as whole microseconds for SQL (`$n * interval '1 microsecond'`).
fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

fn duration(micros: i64) -> Duration {
    Duration::from_micros(micros.max(0) as u64)
}

/// The PostgreSQL [`Leases`] of one cluster node.
pub struct PgLeases {
    target: Target,
    /// Connected on first use, reconnected when it closed.
    conn: Arc<tokio::sync::Mutex<Option<Client>>>,
}

impl PgLeases {
    pub(crate) fn new(target: Target) -> PgLeases {
        PgLeases {
            target,
            conn: Arc::default(),
        }
    }

    /// Runs `f` with this object's connection on the PostgreSQL runtime.
    fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(
                &'c Client,
            ) -> std::pin::Pin<
                Box<dyn std::future::Future<Output = Result<T, StoreError>> + Send + 'c>,
            > + Send
            + 'static,
    {
        let conn = self.conn.clone();
        let target = self.target.clone();
        call(async move {
            let mut guard = conn.lock().await;
            if guard.as_ref().is_none_or(|c| c.is_closed()) {
                *guard = Some(connect(target).await?);
            }
            f(guard.as_ref().expect("connected")).await
        })
    }
}

/// The highest number cluster nodes reserved (`kobo_seq`) and the Meta
/// high-water mark a single-process kobo's batches noted (0 when none).
pub(crate) async fn reserved_and_noted(client: &Client) -> Result<(u64, u64), StoreError> {
    let meta = Table::Meta.physical(META_SEQ_HIGH_WATER);
    let reserved: i64 = client
        .query_one("SELECT last_value FROM kobo_seq", &[])
        .await
        .map_err(pg_err)?
        .get(0);
    let noted = client
        .query_opt("SELECT v FROM kobo_kv WHERE k = $1", &[&meta])
        .await
        .map_err(pg_err)?
        .map_or(0, |r| u64_from(r.get::<_, &[u8]>(0)));
    Ok((reserved.max(0) as u64, noted))
}

/// Reserves `n` numbers (none for `n == 0`: only raises the sequence to the
/// noted high-water mark) above both `kobo_seq` and the high-water mark the
/// batches of a single-process kobo noted in Meta. Reservations serialise on
/// a transaction lock, so two nodes' blocks never overlap.
pub(crate) async fn reserve(client: &Client, n: u64) -> Result<Range<u64>, StoreError> {
    client.batch_execute("BEGIN").await.map_err(pg_err)?;
    let result = async {
        client
            .execute("SELECT pg_advisory_xact_lock($1)", &[&SEQUENCE_LOCK])
            .await
            .map_err(pg_err)?;
        let (reserved, noted) = reserved_and_noted(client).await?;
        let start = reserved.max(noted) + 1;
        let end = start + n;
        let last = i64::try_from(end - 1)
            .map_err(|_| StoreError::Postgres("the sequence is exhausted".into()))?;
        client
            .execute("SELECT setval('kobo_seq', $1, true)", &[&last])
            .await
            .map_err(pg_err)?;
        Ok(start..end)
    }
    .await;
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    client.batch_execute(end).await.map_err(pg_err)?;
    result
}

impl Leases for PgLeases {
    fn heartbeat(&self, node_id: &str, address: &str) -> Result<(), StoreError> {
        let (node_id, address) = (node_id.to_string(), address.to_string());
        self.run(move |c| {
            Box::pin(async move {
                c.execute(
                    "INSERT INTO kobo_nodes (node_id, address, heartbeat_at) VALUES ($1, $2, now())
                     ON CONFLICT (node_id) DO UPDATE
                     SET address = EXCLUDED.address, heartbeat_at = EXCLUDED.heartbeat_at",
                    &[&node_id, &address],
                )
                .await
                .map_err(pg_err)?;
                Ok(())
            })
        })
    }

    fn live_nodes(&self, ttl: Duration) -> Result<Vec<NodeRow>, StoreError> {
        let ttl = micros(ttl);
        self.run(move |c| {
            Box::pin(async move {
                let rows = c
                    .query(
                        "SELECT node_id, address,
                                (EXTRACT(EPOCH FROM (now() - heartbeat_at)) * 1000000)::bigint
                         FROM kobo_nodes
                         WHERE heartbeat_at > now() - $1::bigint * interval '1 microsecond'
                         ORDER BY node_id",
                        &[&ttl],
                    )
                    .await
                    .map_err(pg_err)?;
                Ok(rows
                    .iter()
                    .map(|r| NodeRow {
                        node_id: r.get(0),
                        address: r.get(1),
                        heartbeat_age: duration(r.get(2)),
                    })
                    .collect())
            })
        })
    }

    fn acquire(&self, shard: u16, node_id: &str, ttl: Duration) -> Result<Option<i64>, StoreError> {
        let (shard, node_id, ttl) = (i32::from(shard), node_id.to_string(), micros(ttl));
        self.run(move |c| {
            Box::pin(async move {
                let row = c
                    .query_opt(
                        "UPDATE kobo_leases SET
                             token = CASE WHEN node_id = $2 AND expires_at > now()
                                          THEN token ELSE token + 1 END,
                             node_id = $2,
                             expires_at = now() + $3::bigint * interval '1 microsecond'
                         WHERE shard = $1
                           AND (node_id IS NULL OR node_id = $2
                                OR expires_at IS NULL OR expires_at <= now())
                         RETURNING token",
                        &[&shard, &node_id, &ttl],
                    )
                    .await
                    .map_err(pg_err)?;
                Ok(row.map(|r| r.get(0)))
            })
        })
    }

    fn renew(
        &self,
        node_id: &str,
        held: &[Fence],
        ttl: Duration,
    ) -> Result<Vec<Fence>, StoreError> {
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let node_id = node_id.to_string();
        let shards: Vec<i32> = held.iter().map(|f| i32::from(f.shard)).collect();
        let tokens: Vec<i64> = held.iter().map(|f| f.token).collect();
        let ttl = micros(ttl);
        self.run(move |c| {
            Box::pin(async move {
                c.batch_execute("BEGIN").await.map_err(pg_err)?;
                let result = async {
                    c.execute(
                        "SELECT shard FROM kobo_leases WHERE shard = ANY($1::int[])
                         ORDER BY shard FOR UPDATE",
                        &[&shards],
                    )
                    .await
                    .map_err(pg_err)?;
                    c.query(
                        "UPDATE kobo_leases l
                         SET expires_at = now() + $4::bigint * interval '1 microsecond'
                         FROM unnest($2::int[], $3::bigint[]) AS h(shard, token)
                         WHERE l.shard = h.shard AND l.token = h.token
                           AND l.node_id = $1 AND l.expires_at > now()
                         RETURNING l.shard, l.token",
                        &[&node_id, &shards, &tokens, &ttl],
                    )
                    .await
                    .map_err(pg_err)
                }
                .await;
                let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
                c.batch_execute(end).await.map_err(pg_err)?;
                let mut renewed: Vec<Fence> = result?
                    .iter()
                    .map(|r| Fence {
                        shard: r.get::<_, i32>(0) as u16,
                        token: r.get(1),
                    })
                    .collect();
                renewed.sort_by_key(|f| f.shard);
                Ok(renewed)
            })
        })
    }

    fn release(&self, node_id: &str, fence: Fence) -> Result<(), StoreError> {
        let (node_id, shard, token) = (node_id.to_string(), i32::from(fence.shard), fence.token);
        self.run(move |c| {
            Box::pin(async move {
                c.execute(
                    "UPDATE kobo_leases SET node_id = NULL, expires_at = NULL
                     WHERE shard = $1 AND node_id = $2 AND token = $3",
                    &[&shard, &node_id, &token],
                )
                .await
                .map_err(pg_err)?;
                Ok(())
            })
        })
    }

    fn leases(&self) -> Result<Vec<LeaseRow>, StoreError> {
        self.run(|c| {
            Box::pin(async move {
                let rows = c
                    .query(
                        "SELECT shard, node_id, token,
                                COALESCE(GREATEST(0, (EXTRACT(EPOCH FROM (expires_at - now()))
                                                      * 1000000)::bigint), 0)
                         FROM kobo_leases ORDER BY shard",
                        &[],
                    )
                    .await
                    .map_err(pg_err)?;
                Ok(rows
                    .iter()
                    .map(|r| LeaseRow {
                        shard: r.get::<_, i32>(0) as u16,
                        node_id: r.get(1),
                        token: r.get(2),
                        remaining: duration(r.get(3)),
                    })
                    .collect())
            })
        })
    }

    fn reserve_sequence(&self, n: u64) -> Result<Range<u64>, StoreError> {
        self.run(move |c| Box::pin(reserve(c, n)))
    }
}
