//! Black-box tests: each test starts the real `kobo` binary on port 0 with a
//! fresh data directory and the manual clock, and talks HTTP to it.

mod contract;
mod helpers;
mod receiver;

mod auth;
mod balance;
mod browser;
mod cards;
mod conventions;
mod crash;
mod crash_accounts;
mod crash_subscriptions;
mod credentials;
mod customer_identity;
mod customers;
mod docs;
mod fx;
mod idempotency;
mod invoice_browser;
mod invoice_page;
mod invoices;
mod listen;
mod mandates;
mod operations;
mod payment_intents;
mod payment_link_browser;
mod payment_link_page;
mod payment_link_states;
mod payment_links;
mod payouts;
mod rate_limits;
mod refunds;
mod server;
mod settings;
mod settlement;
mod simulation;
mod simulation_fx;
mod simulation_invoices;
mod subscription_page;
mod subscriptions;
mod trust;
mod usdt;
mod virtual_account_transfers;
mod virtual_accounts;
mod webhooks;
