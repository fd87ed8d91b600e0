//! The operator API under `/admin/v1`, authenticated by the admin token.
//! POSTs here need no Idempotency-Key (see [`Endpoint::operator`]).

use actix_web::{web, HttpRequest};
use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::IntoParams;
use uuid::Uuid;

use kobo_actors::admin::{self, RollKey, UpdateSettings};
use kobo_actors::audit::{self, Audit, AuditAction, AuditFilter};
use kobo_actors::idempotency::render;
use kobo_actors::merchant::Settings;
use kobo_actors::timers::Advance;
use kobo_actors::{DomainError, ErrorCode, Mode};

use super::body;
use super::endpoint::{self, Endpoint};
use super::params;
use super::{parse_id, resource, ApiError, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(resource("/admin/v1/merchants").route(web::post().to(create_merchant)))
        .service(
            resource("/admin/v1/merchants/{id}")
                .route(web::get().to(get_merchant))
                .route(web::post().to(update_merchant)),
        )
        .service(resource("/admin/v1/merchants/{id}/roll_keys").route(web::post().to(roll_keys)))
        .service(resource("/admin/v1/clock").route(web::get().to(get_clock)))
        .service(resource("/admin/v1/clock/advance").route(web::post().to(advance_clock)))
        .service(resource("/admin/v1/actors").route(web::get().to(actors)))
        .service(resource("/admin/v1/cluster").route(web::get().to(cluster)))
        .service(resource("/admin/v1/health/history").route(web::get().to(health_history)))
        .service(resource("/admin/v1/audit").route(web::get().to(audit_log)))
        .service(resource("/admin/v1/backups").route(web::post().to(create_backup)));
}

/// `{name, settings?}`.
#[derive(Deserialize)]
pub(crate) struct CreateMerchant {
    #[serde(deserialize_with = "body::required_text::<_, 200>")]
    name: String,
    settings: Option<Value>,
}

async fn create_merchant(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let audit = endpoint::audit(&req);
    Endpoint::operator(201)
        .operate_with(req, state, payload, |state, b: CreateMerchant| async move {
            create_merchant_with(&state, b, audit).await
        })
        .await
}

/// Creates a merchant (the operator API and the console).
pub(crate) async fn create_merchant_with(
    state: &State,
    b: CreateMerchant,
    audit: Audit,
) -> ApiResult<Value> {
    let settings = match &b.settings {
        Some(s) => Settings::default().patched(s)?,
        None => Settings::default(),
    };
    Ok(render(
        &admin::create_merchant(&state.kobo, b.name, settings, &audit).await?,
    ))
}

async fn get_merchant(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::operator(200)
        .operate(req, state, |state| async move {
            let id = parse_id(&path, "merchant")?;
            let m = admin::load_merchant(&state.kobo, id)?
                .ok_or_else(|| DomainError::not_found("merchant", id))?;
            Ok(m.to_api())
        })
        .await
}

/// The merchant `{id}` names (unknown: 404, and no actor starts).
fn known_merchant(state: &State, raw_id: &str) -> ApiResult<Uuid> {
    let id = parse_id(raw_id, "merchant")?;
    admin::load_merchant(&state.kobo, id)?.ok_or_else(|| DomainError::not_found("merchant", id))?;
    Ok(id)
}

/// `{settings}`: a patch of the merchant's settings.
#[derive(Deserialize)]
pub(crate) struct UpdateMerchant {
    settings: Value,
}

/// `{mode: test | live}`.
#[derive(Deserialize)]
struct RollKeys {
    #[serde(deserialize_with = "body::required_text::<_, 8>")]
    mode: String,
}

async fn update_merchant(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let audit = endpoint::audit(&req);
    Endpoint::operator(200)
        .operate_with(req, state, payload, |state, b: UpdateMerchant| async move {
            update_merchant_with(&state, &path, b, audit).await
        })
        .await
}

/// Patches merchant `raw_id`'s settings (the operator API and the console).
pub(crate) async fn update_merchant_with(
    state: &State,
    raw_id: &str,
    b: UpdateMerchant,
    audit: Audit,
) -> ApiResult<Value> {
    Settings::default().patched(&b.settings)?;
    let id = known_merchant(state, raw_id)?;
    let update = UpdateSettings(b.settings, audit);
    Ok(render(&state.kobo.merchants.send(id, update).await??))
}

async fn roll_keys(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let audit = endpoint::audit(&req);
    Endpoint::operator(200)
        .operate_with(req, state, payload, |state, b: RollKeys| async move {
            let mode = Mode::parse(&b.mode)
                .ok_or_else(|| DomainError::invalid("mode", "mode must be test or live"))?;
            let id = known_merchant(&state, &path)?;
            let roll = RollKey(mode, audit);
            Ok(render(&state.kobo.merchants.send(id, roll).await??))
        })
        .await
}

fn clock_view(now: DateTime<Utc>) -> serde_json::Value {
    json!({"object": "clock", "now": now, "manual": true})
}

async fn get_clock(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::operator(200)
        .operate(req, state, |state| async move {
            let mut v = clock_view(state.kobo.clock.now());
            v["manual"] = state.kobo.clock.is_manual().into();
            Ok(v)
        })
        .await
}

/// `{seconds}` or `{to}`.
#[derive(Deserialize)]
pub(crate) struct AdvanceClock {
    seconds: Option<Value>,
    #[serde(deserialize_with = "body::text::<_, 64>")]
    to: Option<String>,
}

async fn advance_clock(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    let audit = endpoint::audit(&req);
    Endpoint::operator(200)
        .operate_with(req, state, payload, |state, b: AdvanceClock| async move {
            Ok(clock_view(advance_clock_with(&state, b, audit).await?))
        })
        .await
}

/// Moves the manual clock, running what falls due (the operator API and
/// the console); answers the new time.
pub(crate) async fn advance_clock_with(
    state: &State,
    b: AdvanceClock,
    audit: Audit,
) -> ApiResult<DateTime<Utc>> {
    let to = clock_target(state.kobo.clock.now(), b)?;
    Ok(state
        .timers
        .send(Advance { to, audit })
        .await
        .map_err(|e| DomainError::internal(e.to_string()))??)
}

/// Where `POST /admin/v1/clock/advance` moves the clock.
fn clock_target(now: DateTime<Utc>, b: AdvanceClock) -> ApiResult<DateTime<Utc>> {
    let to = match (b.seconds, b.to) {
        (Some(_), Some(_)) => {
            return Err(ApiError(DomainError::invalid(
                "to",
                "send `seconds` or `to`, not both",
            )))
        }
        (Some(s), None) => {
            let secs = s
                .as_i64()
                .filter(|n| (0..=10 * 366 * 86_400).contains(n))
                .ok_or_else(|| {
                    DomainError::invalid("seconds", "seconds is a whole number from 0 to ten years")
                })?;
            now + Duration::seconds(secs)
        }
        (None, Some(t)) => DateTime::parse_from_rfc3339(&t)
            .map_err(|_| DomainError::invalid("to", "`to` must be an RFC 3339 date-time"))?
            .with_timezone(&Utc),
        (None, None) => return Err(ApiError(DomainError::missing("seconds"))),
    };
    Ok(to)
}

async fn actors(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::operator(200)
        .operate(req, state, |state| async move {
            Ok(crate::health::report(&state.kobo, &state.health)?)
        })
        .await
}

/// `GET /admin/v1/cluster`: the nodes, the shards' leases and this node,
/// as this node last read them (docs/api.md, "Cluster"). Without
/// `--cluster`: one process owning every shard, and no nodes or leases.
async fn cluster(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::operator(200)
        .operate(req, state, |state| async move {
            let shards = kobo_storage::fence::SHARDS;
            Ok(match state.kobo.env.cluster.get() {
                Some(view) => {
                    let s = view.snapshot();
                    serde_json::json!({
                        "object": "cluster",
                        "clustered": true,
                        "node_id": s.node_id,
                        "address": s.address,
                        "ready": s.ready,
                        "shards": shards,
                        "shards_owned": s.shards_owned,
                        "nodes": s.nodes,
                        "leases": s.leases,
                    })
                }
                None => serde_json::json!({
                    "object": "cluster",
                    "clustered": false,
                    "node_id": null,
                    "address": null,
                    "ready": true,
                    "shards": shards,
                    "shards_owned": shards,
                    "nodes": [],
                    "leases": [],
                }),
            })
        })
        .await
}

/// The query of `GET /admin/v1/health/history`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HealthHistoryQuery {
    /// The last this many seconds of samples, 1 to 600 (default 600).
    #[param(value_type = Option<u16>, minimum = 1, maximum = 600, default = 600)]
    #[serde(deserialize_with = "params::history_seconds")]
    seconds: usize,
}

/// `GET /admin/v1/health/history`: the ring of health samples, oldest
/// first (docs/operations.md, "Actor health").
async fn health_history(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::operator(200)
        .operate_query(req, state, |state, q: HealthHistoryQuery| async move {
            Ok(crate::health::history_view(&state.health, q.seconds))
        })
        .await
}

/// The query of `GET /admin/v1/audit`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListAuditQuery {
    /// Only entries of this merchant (its id).
    #[serde(deserialize_with = "params::uuid")]
    merchant: Option<Uuid>,
    /// Only this action, e.g. `merchant.key_rolled`.
    #[param(inline)]
    #[serde(deserialize_with = "params::one_of")]
    action: Option<AuditAction>,
    /// Only entries at or after this RFC 3339 date-time.
    #[serde(deserialize_with = "params::date_time")]
    from: Option<DateTime<Utc>>,
    /// Only entries at or before this RFC 3339 date-time.
    #[serde(deserialize_with = "params::date_time")]
    to: Option<DateTime<Utc>>,
    /// Entries per page, 1 to 100.
    #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
    #[serde(deserialize_with = "params::limit")]
    limit: usize,
    /// The page after this entry's id.
    #[serde(deserialize_with = "params::uuid")]
    starting_after: Option<Uuid>,
}

/// `GET /admin/v1/audit`: the operator audit log, newest first, filtered
/// by merchant, action and time (`from`, `to`: RFC 3339, inclusive).
async fn audit_log(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::operator(200)
        .operate_query(req, state, |state, q: ListAuditQuery| async move {
            let filter = AuditFilter {
                merchant: q.merchant,
                action: q.action,
                from: q.from,
                to: q.to,
            };
            if let (Some(f), Some(t)) = (filter.from, filter.to) {
                if f > t {
                    return Err(ApiError(DomainError::invalid(
                        "from",
                        "`from` is after `to`",
                    )));
                }
            }
            let page = audit::list(&state.kobo, &filter, q.limit, q.starting_after)?;
            Ok(page.to_api())
        })
        .await
}

/// `POST /admin/v1/backups`: a backup of the running store into the
/// server's backup directory (`--backup-dir`, default `<data>/backups`),
/// under a name kobo chooses (the API never names a path). 201 with the
/// file, its size, checksum and manifest, once the file is synced and its
/// audit entry committed.
async fn create_backup(req: HttpRequest, state: State) -> ApiResult {
    let audit = endpoint::audit(&req);
    Endpoint::operator(201)
        .operate(req, state, |state| async move {
            if !state.kobo.store.is_embedded() {
                return Err(DomainError::state(
                    ErrorCode::BackupNotAvailable,
                    "this server's store is a PostgreSQL database: back it up with PostgreSQL's own tools (pg_dump, or pg_basebackup with WAL archiving)",
                )
                .into());
            }
            let _one_at_a_time = state.backup_lock.lock().await;
            let (store, dir, now) = (
                state.kobo.store.clone(),
                state.backup_dir.clone(),
                state.kobo.clock.now(),
            );
            let summary = crate::backup::write_in_background(store, dir, now)
                .await
                .map_err(|e| DomainError::internal(format!("the backup failed: {e:#}")))?;
            let mut batch = kobo_storage::Batch::new();
            audit.add_to(
                &state.kobo,
                &mut batch,
                crate::backup::audit_record(&summary),
            );
            state
                .kobo
                .writer
                .commit(batch)
                .await
                .map_err(DomainError::from)?;
            Ok(crate::backup::view(&summary))
        })
        .await
}
