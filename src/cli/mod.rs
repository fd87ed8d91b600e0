//! The client subcommands of the `kobo` binary: they talk HTTP to a running
//! `kobo serve` (never to its store).
//!
//! - [`listen`]: `kobo listen` follows a merchant's event stream and
//!   forwards each event, signed like a webhook delivery, to a local URL.
//! - [`admin`]: `kobo admin` makes the common operator calls.
//! - [`load`]: `kobo load` drives a mix of payment flows at a server, reports
//!   latency and throughput, and audits the money afterwards.
//! - [`store`]: `kobo backup`, `kobo restore`, `kobo check`: offline, on
//!   the host, against a stopped server's data directory or a backup file.

pub mod admin;
pub mod listen;
pub mod load;
pub mod store;

/// Where a client subcommand finds the server by default.
pub const DEFAULT_BASE: &str = "http://127.0.0.1:8080";

/// Runs `fut` on a fresh single-threaded runtime; the process's exit code.
pub fn run<F>(fut: F) -> i32
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kobo: starting the runtime: {e}");
            return 1;
        }
    };
    match rt.block_on(fut) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kobo: {e:#}");
            1
        }
    }
}

/// The exit code of a synchronous command.
pub fn sync(result: anyhow::Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kobo: {e:#}");
            1
        }
    }
}

/// `base` without a trailing slash, checked to be an http(s) URL.
pub fn base_url(base: &str) -> anyhow::Result<String> {
    let u = url::Url::parse(base).map_err(|e| anyhow::anyhow!("--base {base}: {e}"))?;
    if !matches!(u.scheme(), "http" | "https") {
        anyhow::bail!("--base {base}: must be an http or https URL");
    }
    Ok(base.trim_end_matches('/').to_string())
}
