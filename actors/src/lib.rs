//! kobo's domain: pure state machines and the actors that run them.
//!
//! Layout:
//! - [`money`]: currencies, channels, pricing, fee arithmetic.
//! - [`merchant`]: merchants, settings, secret keys, brands.
//! - [`payment_intent`]: the object, its pure state machine, its actor and
//!   the create/commit service.
//! - [`payment_link`]: reusable payment pages, their slots and counters.
//! - [`ledger`]: buckets, entries, the pure posting function and the ledger
//!   actor (the only writer of balances).
//! - [`registry`]: virtual actors (activation, passivation, bounded mailboxes).
//! - [`timers`]: durable timers and the timer supervisor.
//! - [`event`], [`idempotency`]: records written in the same batch as the
//!   change they describe or guard.
//! - [`query`]: read-only views straight from store snapshots.
//! - [`webhook`]: endpoints, durable deliveries, the dispatcher pool and
//!   the live event stream.
//! - [`admin`]: merchant creation, settings and key rolls.
//! - [`customer`], [`virtual_account`]: customers (one per email) and
//!   their dedicated virtual accounts.
//! - [`dashboard_user`]: the merchant dashboard's users, invitations and
//!   sessions.
//! - [`audit`]: the operator audit log (written in each action's batch).
//! - [`check`]: `kobo check`, the store's invariants verified offline.
//! - [`stored_json`]: JSON inside compact stored values, compressed
//!   against kobo's preset dictionary.
//! - [`credential`]: the hosted checkout's credential (HMAC, server key).
//! - [`cluster`]: membership, shard leases and ownership (cluster mode).
//! - [`resume`], [`resumption`]: work left pending by a previous run (or
//!   a dead node), resumed at start or when a node takes shards over.
//! - [`clock`], [`provider`], [`runtime`], [`error`], [`ids`]: plumbing.

pub mod admin;
pub mod audit;
pub mod auth;
pub mod banks;
pub mod calendar;
pub mod check;
pub mod clock;
pub mod cluster;
#[cfg(test)]
mod compact_layout;
pub mod credential;
pub mod customer;
pub mod dashboard_user;
pub mod decoded;
pub mod direct_debit;
pub mod env;
pub mod error;
pub mod event;
pub mod fx;
pub mod idempotency;
pub mod ids;
pub mod invoice;
pub mod ledger;
pub mod mandate;
pub mod merchant;
pub mod money;
pub mod paging;
pub mod payment_intent;
pub mod payment_link;
pub mod payout;
pub mod plan;
pub use payment_intent::provider;
pub mod principal;
pub mod query;
pub mod refund;
pub mod registry;
pub mod resume;
pub mod resumption;
pub mod runtime;
pub mod settlement;
pub mod sorted_json;
pub mod stored_json;
pub mod subscription;
pub mod timer;
pub mod timers;
pub mod usdt;
pub mod virtual_account;
pub mod webhook;

pub use env::{Config, Env};
pub use error::{DomainError, DomainResult, ErrorCode, ErrorKind};
pub use ids::Mode;
pub use runtime::Kobo;
