//! The PostgreSQL schema and its versioned migrations.
//!
//! `kobo_schema` holds one row, the schema's version; [`MIGRATIONS`] are the
//! steps from each version to the next, applied in order at start (and by
//! `kobo migrate`) in one transaction under a transaction-level advisory
//! lock, so nodes starting together migrate once. A database of a later
//! version than this kobo knows is refused: an older kobo never writes a
//! layout it does not understand.

use tokio_postgres::Client;

use super::pg_err;
use crate::StoreError;

/// The lock a migration holds for its transaction.
const MIGRATION_LOCK: i64 = 0x6b6f_626f_0002;

/// The steps: `MIGRATIONS[n]` takes version `n` to `n + 1`.
pub const MIGRATIONS: &[&str] = &[
    // 1: the store's one table, as redb's physical table: table id byte,
    // then the key; the encoded value.
    "CREATE TABLE kobo_kv (k bytea PRIMARY KEY, v bytea NOT NULL)",
    // 2: the cluster (issue 21; `storage::pg::lease`). Nodes and their
    // heartbeats; one lease row per shard (`fence::SHARDS` of them: shards
    // 0..=255), its holder, fencing token and expiry, every time by the
    // database's clock; and the highest sequence number any node reserved
    // (`Leases::reserve_sequence`).
    "CREATE TABLE kobo_nodes (
         node_id text PRIMARY KEY,
         address text NOT NULL,
         heartbeat_at timestamptz NOT NULL
     );
     CREATE TABLE kobo_leases (
         shard integer PRIMARY KEY,
         node_id text NULL,
         token bigint NOT NULL DEFAULT 0,
         expires_at timestamptz NULL
     );
     INSERT INTO kobo_leases (shard) SELECT generate_series(0, 255);
     CREATE SEQUENCE kobo_seq AS bigint MINVALUE 0 START 0",
    // 3: saved responses in their expiry rows, found through
    // `idempotency_keys` (`crate::SCHEMA_VERSION` 4). No table changes:
    // the version alone makes an older kobo, which would not find those
    // responses (and so would not replay them), refuse the database.
    "SELECT 1",
    // 4: saved responses in their own layout and texts packed with zstd
    // (`crate::SCHEMA_VERSION` 5), which an older kobo cannot decode. No
    // table changes.
    "SELECT 1",
    // 5: compact values in codec version 3, timestamps as numbers
    // (`crate::SCHEMA_VERSION` 6), which an older kobo cannot decode. No
    // table changes.
    "SELECT 1",
];

/// The version this kobo writes.
pub fn latest() -> i32 {
    MIGRATIONS.len() as i32
}

/// Brings the schema to [`latest`]; returns the versions before and after.
pub(crate) async fn migrate(client: &Client) -> Result<(i32, i32), StoreError> {
    client.batch_execute("BEGIN").await.map_err(pg_err)?;
    let result = migrate_in_transaction(client).await;
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    client.batch_execute(end).await.map_err(pg_err)?;
    result
}

async fn migrate_in_transaction(client: &Client) -> Result<(i32, i32), StoreError> {
    client
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(pg_err)?;
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS kobo_schema (
                 one boolean PRIMARY KEY DEFAULT true CHECK (one),
                 version integer NOT NULL
             )",
        )
        .await
        .map_err(pg_err)?;
    let from: i32 = client
        .query_opt("SELECT version FROM kobo_schema", &[])
        .await
        .map_err(pg_err)?
        .map_or(0, |r| r.get(0));
    if from > latest() {
        return Err(StoreError::Postgres(format!(
            "the database's schema is version {from}, written by a later kobo; this kobo knows versions up to {}",
            latest()
        )));
    }
    for step in &MIGRATIONS[from as usize..] {
        client.batch_execute(step).await.map_err(pg_err)?;
    }
    client
        .execute(
            "INSERT INTO kobo_schema (one, version) VALUES (true, $1)
             ON CONFLICT (one) DO UPDATE SET version = EXCLUDED.version",
            &[&latest()],
        )
        .await
        .map_err(pg_err)?;
    Ok((from, latest()))
}
