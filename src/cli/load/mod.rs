//! `kobo load`: the load tester's tool. Drives a mix of payment flows
//! against any kobo server with a merchant's secret key, closed loop (N
//! connections) or open loop (a fixed arrival rate, latency counted from
//! each operation's intended start), reports throughput and latency per
//! operation (text, `--json`, `--html`), then audits the money.
//!
//! - [`scenario`]: the operations, the mix, the acknowledged writes;
//! - [`driver`]: closed and open loop, the progress line;
//! - [`report`]: histograms, timeline, the report;
//! - [`audit`]: the money audit (pure checks over fetched data);
//! - [`html`]: the HTML report;
//! - [`webhook`]: the HTTPS receiver for real webhook deliveries;
//! - [`plain`]: the operations' own connections to a plain-HTTP server.

pub mod audit;
pub mod driver;
pub mod html;
pub mod plain;
pub mod report;
pub mod scenario;
pub mod webhook;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use driver::{Mode, Plan};
use report::{Recorder, RunSetup};
use scenario::{Api, Flows, Mix};

use super::{base_url, DEFAULT_BASE};

#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// The kobo server.
    #[arg(long, env = "KOBO_URL", default_value = DEFAULT_BASE)]
    pub url: String,
    /// The merchant's secret key (`svc_test_...`: the flows use the test
    /// mode's sandbox helpers).
    #[arg(
        long,
        env = "KOBO_SECRET_KEY",
        hide_env_values = true,
        default_value = ""
    )]
    pub key: String,
    /// Operations and their weights: `create=5,transfer=3,card=2,refund=1,
    /// payout=1,webhook=1`; a name alone weighs 1. Operations: healthz,
    /// create, transfer (alias flow), card, refund, payout, webhook.
    #[arg(long, default_value = "create=5,transfer=3,card=2,refund=1,payout=1")]
    pub mix: String,
    /// Closed loop: this many workers, each starting its next operation
    /// when the previous ended (the default, with 16, unless --rate).
    #[arg(long, conflicts_with = "rate")]
    pub connections: Option<usize>,
    /// Open loop: start this many operations per second on a fixed
    /// schedule, whatever the answers.
    #[arg(long, value_name = "PER_SECOND")]
    pub rate: Option<f64>,
    /// Open loop: at most this many operations in flight; a start that
    /// must wait for room counts as late.
    #[arg(long, default_value_t = 1024)]
    pub max_in_flight: usize,
    /// How long to send, in seconds.
    #[arg(long, alias = "seconds", default_value_t = 10.0)]
    pub duration: f64,
    /// Stop after this many operations (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_ops: u64,
    /// Write the report as JSON to FILE (`-`: stdout, one line; the text
    /// report then goes to stderr).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Write a self-contained HTML report (plots over time) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Audit the money after the run (`--audit false` to skip).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub audit: bool,
    /// Exit 1 when more than this share of operations failed (0 to 1).
    #[arg(long, default_value_t = 0.01)]
    pub max_error_rate: f64,
    /// No progress line (and, with `--json -`, no text report on stderr).
    #[arg(long)]
    pub quiet: bool,
    /// The server's admin token (optional): with it, on a server whose
    /// clock is manual, the clock is advanced 2 minutes after the run so
    /// that payouts reach their status query (paid) before the audit.
    #[arg(long, env = "KOBO_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Runtime worker threads of the load generator.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// How the Idempotency-Keys it sends are made: `random` (UUIDv4, as
    /// most clients do) or `time-ordered` (UUIDv7: each key sorts after
    /// the previous one). The store keeps its saved responses by key, so
    /// this decides whether each create's record lands on a random page
    /// or at the end of the index (docs/performance.md, "Creates as the
    /// store grows").
    #[arg(long, value_enum, default_value_t = scenario::KeyStyle::Random)]
    pub idempotency_keys: scenario::KeyStyle,
    /// The webhook receiver's certificate and key (`cert.pem`, `key.pem`
    /// in DIR, as `--write-webhook-tls` writes them); needed by the
    /// `webhook` operation.
    #[arg(long, value_name = "DIR")]
    pub webhook_tls: Option<PathBuf>,
    /// Write a throw-away CA (`ca.pem`, for the server's `--webhook-ca`)
    /// and the receiver's certificate for --webhook-host into DIR, then
    /// exit.
    #[arg(long, value_name = "DIR")]
    pub write_webhook_tls: Option<PathBuf>,
    /// The receiver's host name in the endpoint URL (the server maps it to
    /// the receiver with `--webhook-resolve HOST=IP`).
    #[arg(long, default_value = webhook::DEFAULT_HOST)]
    pub webhook_host: String,
    /// Where the receiver listens (webhook URLs allow ports 443 and 8443).
    #[arg(long, default_value = "127.0.0.1:8443")]
    pub webhook_listen: SocketAddr,
}

/// Runs `kobo load`; the process's exit code: 0, or 1 when the audit failed,
/// the error rate passed --max-error-rate, or the run could not be made.
pub fn main(args: LoadArgs) -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kobo: starting the runtime: {e}");
            return 1;
        }
    };
    match rt.block_on(run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kobo: {e:#}");
            1
        }
    }
}

async fn run(args: LoadArgs) -> Result<i32> {
    if let Some(dir) = &args.write_webhook_tls {
        webhook::write_tls(dir, &args.webhook_host)?;
        println!(
            "wrote {0}/ca.pem, {0}/cert.pem, {0}/key.pem; start the server with --webhook-ca {0}/ca.pem --webhook-resolve {1}={2}",
            dir.display(),
            args.webhook_host,
            args.webhook_listen.ip()
        );
        return Ok(0);
    }
    let base = base_url(&args.url)?;
    let mix = Mix::parse(&args.mix)?;
    let needs_key = mix.0.iter().any(|(op, _)| *op != scenario::Op::Healthz);
    if needs_key && args.key.is_empty() {
        bail!("--key (or KOBO_SECRET_KEY) is needed for every operation but healthz");
    }
    if needs_key && !args.key.starts_with("svc_test_") {
        bail!("--key: kobo load pays through the sandbox's test helpers; use a test key (svc_test_...)");
    }
    if mix.has(scenario::Op::Webhook) && args.webhook_tls.is_none() {
        bail!("the webhook operation needs --webhook-tls DIR (see --write-webhook-tls)");
    }
    if !args.duration.is_finite() || args.duration <= 0.0 {
        bail!("--duration must be above 0");
    }
    if !(0.0..=1.0).contains(&args.max_error_rate) {
        bail!("--max-error-rate is a share, 0 to 1");
    }
    let mode = match (args.rate, args.connections) {
        (Some(r), _) if !(r > 0.0 && r.is_finite()) => bail!("--rate must be above 0"),
        (Some(rate), _) => {
            if args.max_in_flight == 0 {
                bail!("--max-in-flight must be above 0");
            }
            Mode::Open {
                rate,
                max_in_flight: args.max_in_flight,
            }
        }
        (None, Some(0)) => bail!("--connections must be above 0"),
        (None, c) => Mode::Closed {
            connections: c.unwrap_or(16),
        },
    };
    let pool = match mode {
        Mode::Closed { connections } => connections,
        Mode::Open { max_in_flight, .. } => max_in_flight,
    };
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(pool)
        .timeout(Duration::from_secs(30))
        .build()?;
    let api = Api {
        client,
        plain: plain::PlainHttp::for_base(&base, &args.key).map(Arc::new),
        base,
        key: args.key.clone(),
        key_style: args.idempotency_keys,
    };
    let receiver = match (&args.webhook_tls, mix.has(scenario::Op::Webhook)) {
        (Some(dir), true) => {
            Some(webhook::Receiver::start(args.webhook_listen, dir, &args.webhook_host).await?)
        }
        _ => None,
    };
    let flows = Arc::new(Flows::new(api.clone(), receiver.clone(), args.audit));
    flows.set_up(&mix).await?;

    let setup = RunSetup {
        mode: match mode {
            Mode::Closed { .. } => "closed",
            Mode::Open { .. } => "open",
        },
        rate: args.rate,
        connections: match mode {
            Mode::Closed { connections } => Some(connections),
            Mode::Open { .. } => None,
        },
        max_in_flight: args.rate.map(|_| args.max_in_flight),
        mix: mix
            .0
            .iter()
            .map(|(o, w)| (o.name().to_string(), *w))
            .collect(),
        scenario: match mix.0.as_slice() {
            [(op, _)] if *op == scenario::Op::Transfer => "flow".to_string(),
            [(op, _)] => op.name().to_string(),
            _ => "mix".to_string(),
        },
    };
    let started = Instant::now();
    let rec = Arc::new(Recorder::new(started));
    let plan = Plan {
        mode,
        duration: Duration::from_secs_f64(args.duration),
        max_ops: args.max_ops,
        progress: !args.quiet,
    };
    driver::drive(plan, flows.clone(), Arc::new(mix.cycle()), rec.clone()).await;
    let mut report = rec.report(setup, started.elapsed());
    report.webhooks = receiver.as_ref().map(|r| r.deliveries());
    if let Some(token) = &args.admin_token {
        settle_manual_clock(&api, token).await?;
    }
    if args.audit {
        let mut a = audit::run(&api, &flows.acked, pool.min(64)).await?;
        if let Some(w) = &report.webhooks {
            if w.bad_signature > 0 {
                a.passed = false;
                a.findings.push(format!(
                    "{} webhook deliveries with a bad signature",
                    w.bad_signature
                ));
            }
        }
        report.audit = Some(a);
    }

    let text = report.text();
    match args.json.as_deref() {
        Some("-") => {
            if !args.quiet {
                eprint!("{text}");
            }
            println!("{}", serde_json::to_string(&report)?);
        }
        Some(file) => {
            std::fs::write(file, serde_json::to_vec_pretty(&report)?)
                .with_context(|| format!("writing {file}"))?;
            print!("{text}");
        }
        None => print!("{text}"),
    }
    if let Some(file) = &args.html {
        std::fs::write(file, html::render(&report))
            .with_context(|| format!("writing {}", file.display()))?;
    }
    let mut code = 0;
    if report.error_rate > args.max_error_rate {
        eprintln!(
            "kobo load: {:.2}% of operations failed (--max-error-rate {})",
            report.error_rate * 100.0,
            args.max_error_rate
        );
        code = 1;
    }
    if report.audit.as_ref().is_some_and(|a| !a.passed) {
        eprintln!("kobo load: the audit failed");
        code = 1;
    }
    Ok(code)
}

/// On a manual-clock server, advances the clock by [`SETTLE`] (payouts are
/// sent and then paid at the status query each minute of clock time); a
/// system clock is left alone.
async fn settle_manual_clock(api: &Api, token: &str) -> Result<()> {
    let clock: serde_json::Value = api
        .client
        .get(format!("{}/admin/v1/clock", api.base))
        .bearer_auth(token)
        .send()
        .await?
        .error_for_status()
        .context("GET /admin/v1/clock with --admin-token")?
        .json()
        .await?;
    if clock["manual"] == true {
        api.client
            .post(format!("{}/admin/v1/clock/advance", api.base))
            .bearer_auth(token)
            .json(&serde_json::json!({"seconds": SETTLE.as_secs()}))
            .send()
            .await?
            .error_for_status()
            .context("POST /admin/v1/clock/advance")?;
    }
    Ok(())
}

/// How far a manual clock is moved after the run.
const SETTLE: Duration = Duration::from_secs(120);
