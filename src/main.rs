//! `kobo`: the payments service binary (HTTP API, operator API, CLI).
//!
//! Layout:
//! - [`allocator`]: the global allocator (jemalloc, the store's cached
//!   pages in glibc's malloc).
//! - [`server`]: `kobo serve` (its arguments too): opens the store, starts
//!   the writer, actors and timers, binds the HTTP server, shuts down
//!   gracefully.
//! - [`api`]: routes, errors, authentication and idempotency.
//! - [`telemetry`]: logs with request ids, Prometheus metrics.
//! - [`keyfile`]: server keys kept as files in the data directory.
//! - [`cli`]: the client subcommands (`kobo listen`, `kobo admin`, `kobo
//!   load`) and the offline store commands (`kobo backup`, `kobo restore`,
//!   `kobo check`, `kobo migrate`).
//! - [`backup`]: backup file names, answers and audit entries.
//! - [`cluster`]: cluster mode: the node's membership loop and request
//!   forwarding to the node owning a merchant.

mod allocator;
mod api;
mod backup;
mod checkout;
mod cli;
mod cluster;
mod console;
mod dashboard;
mod health;
mod keyfile;
mod metrics;
mod page_headers;
mod routes;
mod server;
mod telemetry;

use clap::{Parser, Subcommand};

#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

#[derive(Parser)]
#[command(
    name = "kobo",
    version,
    about = "kobo: payments, balances and payouts for Nigerian businesses"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the service.
    Serve(server::ServeArgs),
    /// Forward a merchant's events, signed like webhooks, to a local URL.
    Listen(cli::listen::ListenArgs),
    /// Operator calls (create merchants, roll keys, FX rates, the clock).
    Admin(cli::admin::AdminArgs),
    /// Load-test a server with a mix of payment flows, then audit the money.
    Load(cli::load::LoadArgs),
    /// Back up a stopped server's store to a file (a running server: `kobo
    /// admin backup`).
    Backup(cli::store::BackupArgs),
    /// Restore a backup file into an empty data directory.
    Restore(cli::store::RestoreArgs),
    /// Verify a store's invariants (a data directory or a backup file);
    /// exit 1 on any breach.
    Check(cli::store::CheckArgs),
    /// Create or upgrade a PostgreSQL store's schema (`--store
    /// postgres://...`); `kobo serve` does it too at start.
    Migrate(cli::store::MigrateArgs),
}

/// An environment variable set to the empty string counts as unset, for
/// every `KOBO_*` setting: `KOBO_ADMIN_TOKEN=` must mean "generate a token",
/// never "the empty token".
fn unset_empty_kobo_variables() {
    let empty: Vec<_> = std::env::vars_os()
        .filter(|(k, v)| k.to_string_lossy().starts_with("KOBO_") && v.is_empty())
        .map(|(k, _)| k)
        .collect();
    for k in empty {
        // Single-threaded here: nothing else reads the environment yet.
        std::env::remove_var(k);
    }
}

fn main() {
    unset_empty_kobo_variables();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            telemetry::init_logging(args.log_format == server::LogFormat::Json);
            let code = match actix_web::rt::System::new().block_on(server::serve(args)) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("kobo: {e:#}");
                    1
                }
            };
            std::process::exit(code);
        }
        Command::Listen(args) => std::process::exit(cli::run(cli::listen::run(args))),
        Command::Admin(args) => std::process::exit(cli::run(cli::admin::run(args))),
        Command::Load(args) => std::process::exit(cli::load::main(args)),
        Command::Backup(args) => std::process::exit(cli::sync(cli::store::backup(args))),
        Command::Restore(args) => std::process::exit(cli::sync(cli::store::restore(args))),
        Command::Check(args) => std::process::exit(cli::store::check(args)),
        Command::Migrate(args) => std::process::exit(cli::sync(cli::store::migrate(args))),
    }
}
