//! The HTTP layer. Route modules are thin: parse the request into a typed
//! command, send it to the owning actor (or read a snapshot), render the
//! reply. The shared pieces are leaves: `state` (the app state), `error`
//! (the one mapping from errors to HTTP), `request` (bodies, credentials,
//! ids), `idempotent` (Idempotency-Key), and `endpoint` (the wrapper every
//! operation goes through).

pub mod admin;
pub mod balance;
pub mod body;
pub mod brands;
pub mod cards;
pub mod components;
pub mod customers;
pub mod dashboard_users;
pub mod docs;
pub mod endpoint;
pub mod error;
pub mod events;
pub mod examples;
pub mod fx;
pub mod idempotent;
pub mod invoices;
pub mod limits;
pub mod mandates;
pub mod openapi;
pub mod openapi_admin;
pub mod ops;
pub mod params;
pub mod payment_intents;
pub mod payment_link_bodies;
pub mod payment_links;
pub mod payouts;
pub mod plans;
pub mod refunds;
pub mod request;
pub mod request_log;
pub mod route_table;
pub mod settlement;
pub mod state;
pub mod stream;
pub mod subscriptions;
pub mod test_helpers;
pub mod usdt;
pub mod virtual_accounts;
pub mod webhooks;

pub use error::{error_body, json_response, not_found, status_of, ApiError, ApiResult, ErrorBody};
pub use idempotent::Reply;
pub use request::{authenticate_for, parse_id, read_body, resource, set_body_timeout};
pub use state::{AppState, State};
