//! `kobo`: the payments service binary (HTTP API, operator API, CLI).
//!
//! Layout:
//! - [`server`]: `kobo serve`: opens the store, starts the writer, actors
//!   and timers, binds the HTTP server, shuts down gracefully.
//! - [`api`]: routes, errors, authentication and idempotency.
//! - [`telemetry`]: logs with request ids, Prometheus metrics.
//! - [`keyfile`]: server keys kept as files in the data directory.
//! - [`cli`]: the client subcommands (`kobo listen`, `kobo admin`) and the
//!   offline store commands (`kobo backup`, `kobo restore`, `kobo check`).
//! - [`backup`]: backup file names, answers and audit entries.

mod api;
mod backup;
mod checkout;
mod cli;
mod keyfile;
mod metrics;
mod routes;
mod server;
mod telemetry;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

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
    Serve(ServeArgs),
    /// Forward a merchant's events, signed like webhooks, to a local URL.
    Listen(cli::listen::ListenArgs),
    /// Operator calls (create merchants, roll keys, FX rates, the clock).
    Admin(cli::admin::AdminArgs),
    /// Back up a stopped server's store to a file (a running server: `kobo
    /// admin backup`).
    Backup(cli::store::BackupArgs),
    /// Restore a backup file into an empty data directory.
    Restore(cli::store::RestoreArgs),
    /// Verify a store's invariants (a data directory or a backup file);
    /// exit 1 on any breach.
    Check(cli::store::CheckArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum ClockKind {
    System,
    Manual,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, env = "KOBO_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Data directory (holds the embedded store); created if missing.
    #[arg(long, env = "KOBO_DATA", default_value = "./data")]
    pub data: PathBuf,
    /// Prefix of checkout and other links; default http://<bound address>.
    #[arg(long, env = "KOBO_BASE_URL")]
    pub base_url: Option<String>,
    /// Operator token; generated and kept in <data>/admin-token when absent.
    #[arg(long, env = "KOBO_ADMIN_TOKEN")]
    pub admin_token: Option<String>,
    /// `manual` moves only through POST /admin/v1/clock/advance.
    #[arg(long, env = "KOBO_CLOCK", value_enum, default_value = "system")]
    pub clock: ClockKind,
    /// Manual clock only: start no earlier than this RFC 3339 time (moves a
    /// stored manual time forward, never back). For tests and rehearsals of
    /// "the server was down at settlement time".
    #[arg(long, env = "KOBO_CLOCK_START", value_name = "DATE-TIME")]
    pub clock_start: Option<String>,
    /// Deliver webhooks for HOST to IP instead of DNS (repeatable).
    #[arg(long = "webhook-resolve", value_name = "HOST=IP")]
    pub webhook_resolve: Vec<String>,
    /// Extra PEM root certificate trusted for webhook deliveries.
    #[arg(long = "webhook-ca", value_name = "FILE")]
    pub webhook_ca: Option<PathBuf>,
    /// Test seam: answer DNS for HOST with IP; unlike --webhook-resolve the
    /// answer still passes the public-address filter (repeatable).
    #[arg(long = "webhook-dns-fake", value_name = "HOST=IP", hide = true)]
    pub webhook_dns_fake: Vec<String>,
    /// Nigerian public holidays, one YYYY-MM-DD a line (overrides the built-in list).
    #[arg(long, value_name = "FILE")]
    pub holidays: Option<PathBuf>,
    /// Log format on stderr.
    #[arg(long, env = "KOBO_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// HTTP worker threads (default: one per core).
    #[arg(long, env = "KOBO_WORKERS")]
    pub workers: Option<usize>,
    /// Test seam: milliseconds every sandbox card call takes (rehearses a
    /// real processor's latency; tests of concurrent requests use it).
    #[arg(
        long,
        env = "KOBO_SANDBOX_LATENCY_MS",
        default_value_t = 0,
        hide = true
    )]
    pub sandbox_latency_ms: u64,
    /// The store's page cache in MiB: the bulk of resident memory once the
    /// store is large.
    #[arg(long, env = "KOBO_STORE_CACHE_MB", default_value_t = 1024)]
    pub store_cache_mb: usize,
    /// Milliseconds a client may take to send a request body (408
    /// `request_timeout` after that).
    #[arg(long, env = "KOBO_BODY_TIMEOUT_MS", default_value_t = 10_000)]
    pub body_timeout_ms: u64,
    /// Requests per second one client IP (the TCP peer; X-Forwarded-For is
    /// not trusted) may send to any route but /healthz, /readyz and
    /// /metrics; the bucket holds one second's worth. 0 turns it off (for
    /// load tests from one address).
    #[arg(long, env = "KOBO_IP_RATE_LIMIT", default_value_t = api::limits::DEFAULT_IP_PER_SECOND)]
    pub ip_rate_limit: u32,
    /// Seconds an idle actor stays in memory.
    #[arg(long, env = "KOBO_ACTOR_IDLE_SECS", default_value_t = 30)]
    pub actor_idle_secs: u64,
    /// Where POST /admin/v1/backups writes its files (default
    /// <data>/backups); the API never chooses a path.
    #[arg(long, env = "KOBO_BACKUP_DIR", value_name = "DIR")]
    pub backup_dir: Option<PathBuf>,
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
            telemetry::init_logging(args.log_format == LogFormat::Json);
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
        Command::Backup(args) => std::process::exit(cli::sync(cli::store::backup(args))),
        Command::Restore(args) => std::process::exit(cli::sync(cli::store::restore(args))),
        Command::Check(args) => std::process::exit(cli::store::check(args)),
    }
}
