//! The state every handler shares (a leaf: it imports no handler).

use std::collections::HashSet;
use std::sync::Arc;

use actix::Addr;
use actix_web::web;
use parking_lot::Mutex;
use uuid::Uuid;

use kobo_actors::credential::CheckoutKey;
use kobo_actors::query::Caller;
use kobo_actors::timers::TimerSupervisor;
use kobo_actors::{Kobo, Mode};

use crate::health::Health;
use crate::metrics::Metrics;

/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1 << 20;

pub struct AppState {
    pub kobo: Arc<Kobo>,
    pub admin_token: String,
    pub timers: Addr<TimerSupervisor>,
    pub metrics: Metrics,
    /// Idempotency keys whose first request is still running, in the
    /// scope their records are saved in (merchant, mode, caller).
    pub(super) in_flight: Mutex<HashSet<FlightKey>>,
    /// Keys the idempotency fingerprints of card requests (see
    /// [`super::cards::fingerprint_key`]).
    pub card_key: [u8; 32],
    /// Makes and checks the hosted checkout's credentials (see
    /// [`kobo_actors::credential`]); loaded from the data directory at start.
    pub checkout_key: CheckoutKey,
    /// Where `POST /admin/v1/backups` writes (`--backup-dir`).
    pub backup_dir: std::path::PathBuf,
    /// One backup at a time.
    pub backup_lock: tokio::sync::Mutex<()>,
    /// The ring of health samples (`/admin/v1/health/history`).
    pub health: Arc<Health>,
    /// The last day's secret-key calls, for the dashboard's developers page.
    pub request_log: super::request_log::RequestLog,
}

pub(super) type FlightKey = (Uuid, Mode, Caller, String);

impl AppState {
    pub fn new(
        kobo: Arc<Kobo>,
        admin_token: String,
        timers: Addr<TimerSupervisor>,
        metrics: Metrics,
        health: Arc<Health>,
    ) -> Self {
        AppState {
            kobo,
            admin_token,
            timers,
            metrics,
            in_flight: Mutex::new(HashSet::new()),
            card_key: rand::random(),
            checkout_key: CheckoutKey::random(),
            backup_dir: std::path::PathBuf::from("backups"),
            backup_lock: tokio::sync::Mutex::new(()),
            health,
            request_log: Default::default(),
        }
    }
}

pub type State = web::Data<AppState>;
