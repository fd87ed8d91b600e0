//! `kobo serve`: its arguments ([`ServeArgs`]), start-up and shutdown.
//!
//! Order: open the store (a clear error if another process holds it), load or
//! create the admin token, set up the clock, start the writer, the actor
//! runtime and the timer supervisor, create the demo merchant on an empty
//! store, bind, print `kobo listening on http://ADDR:PORT`, serve. SIGTERM or
//! SIGINT stops accepting, lets in-flight requests finish (each was answered
//! only after its commit), and exits 0.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use actix::Actor;
use actix_web::{middleware, web, App, HttpServer};
use anyhow::{Context, Result};
use chrono::Utc;
use clap::ValueEnum;

use kobo_actors::audit::{Audit, AuditAction};
use kobo_actors::calendar::Calendar;
use kobo_actors::clock::{from_micros, micros, Clock};
use kobo_actors::ids::random_base62;
use kobo_actors::merchant::Settings;
use kobo_actors::timers::{TimerSupervisor, META_MANUAL_CLOCK};
use kobo_actors::{Config, Kobo};
use kobo_storage::writer::u64_from;
use kobo_storage::{Batch, Store, StoreError, StoreSpec, Table, Writer, WriterMetrics};

use crate::api::{self, AppState};
use crate::telemetry::{self, Metrics};

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
    /// Data directory (holds the embedded store, and kobo's key files with
    /// either store); created if missing.
    #[arg(long, env = "KOBO_DATA", default_value = "./data")]
    pub data: PathBuf,
    /// Where the store lives: a PostgreSQL database
    /// (`postgres://user:password@host:port/database`, its schema created
    /// or migrated at start), or `redb` for the embedded store in --data
    /// (the default).
    #[arg(long, env = "KOBO_STORE", value_name = "URL")]
    pub store: Option<String>,
    /// Prefix of checkout and other links; default http://<bound address>.
    #[arg(long, env = "KOBO_BASE_URL")]
    pub base_url: Option<String>,
    /// Operator token; generated and kept in <data>/admin-token when absent.
    #[arg(long, env = "KOBO_ADMIN_TOKEN")]
    pub admin_token: Option<String>,
    /// `manual` moves only through POST /admin/v1/clock/advance.
    #[arg(long, env = "KOBO_CLOCK", value_enum, default_value = "system")]
    pub clock: ClockKind,
    /// Manual clock only: a new clock starts at this RFC 3339 time; a
    /// stored one moves forward to it, never back. For tests and rehearsals
    /// of "the server was down at settlement time".
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
    /// store is large. The default keeps resident memory under 300 MB with
    /// a million payment intents, live actors included
    /// (docs/performance.md).
    #[arg(long, env = "KOBO_STORE_CACHE_MB", default_value_t = 160)]
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
    /// Run as one node of a cluster sharing a PostgreSQL --store: merchants
    /// are spread over the live nodes by leases, and a request for another
    /// node's merchant is forwarded to it (docs/ARCHITECTURE.md, "Cluster").
    /// (`KOBO_CLUSTER=1`, `true` or `yes` turns it on.)
    #[arg(long, env = "KOBO_CLUSTER", value_parser = clap::builder::BoolishValueParser::new())]
    pub cluster: bool,
    /// This node's id in the cluster (unique among the nodes).
    #[arg(long, env = "KOBO_NODE_ID", value_name = "ID", requires = "cluster")]
    pub node_id: Option<String>,
    /// The URL other nodes reach this one at (default http://<bound address>).
    #[arg(long, env = "KOBO_ADVERTISE", value_name = "URL", requires = "cluster")]
    pub advertise: Option<String>,
}

const META_DEMO_MERCHANT: &[u8] = b"demo_merchant";

/// The shortest admin token kobo accepts.
pub const ADMIN_TOKEN_MIN_LEN: usize = 32;

/// The operator token: `--admin-token` / `KOBO_ADMIN_TOKEN` when given (an
/// empty variable counts as unset: see `main`), else the one kept in
/// `<data>/admin-token`, generated on first start. A token shorter than
/// [`ADMIN_TOKEN_MIN_LEN`] characters is refused, so an operator API is
/// never guarded by an empty or guessable secret.
fn admin_token(args: &ServeArgs) -> Result<String> {
    if let Some(t) = &args.admin_token {
        anyhow::ensure!(
            t.trim() == t && t.chars().count() >= ADMIN_TOKEN_MIN_LEN,
            "--admin-token (KOBO_ADMIN_TOKEN) must be at least {ADMIN_TOKEN_MIN_LEN} characters without surrounding spaces; leave it unset to have kobo generate one in <data>/admin-token"
        );
        return Ok(t.clone());
    }
    let path = args.data.join(ADMIN_TOKEN_FILE);
    if let Ok(t) = std::fs::read_to_string(&path) {
        let t = t.trim().to_string();
        if !t.is_empty() {
            anyhow::ensure!(
                t.chars().count() >= ADMIN_TOKEN_MIN_LEN,
                "{} holds an admin token shorter than {ADMIN_TOKEN_MIN_LEN} characters; delete the file to have a new one generated, or pass --admin-token",
                path.display()
            );
            return Ok(t);
        }
    }
    let token = format!("kobo_admin_{}", random_base62(40));
    write_private(&path, &token).with_context(|| format!("writing {}", path.display()))?;
    Ok(token)
}

/// A node id: 1 to 64 letters, digits, `-`, `_` or `.`.
fn valid_node_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Where a generated admin token is kept, in the data directory.
pub const ADMIN_TOKEN_FILE: &str = "admin-token";

/// Warns (once, at start-up) about a data directory or files in it that
/// other users can read: the store holds webhook signing secrets, client
/// secrets, bank account numbers and emails.
fn warn_loose_permissions(data: &Path) {
    match kobo_storage::loose_permissions(data) {
        Ok(loose) => {
            for (path, mode) in loose {
                tracing::warn!(
                    path = %path.display(),
                    mode = format!("{mode:o}"),
                    "other users can access this part of the data directory; run `chmod 700` on the directory and `chmod 600` on its files"
                );
            }
        }
        Err(e) => {
            tracing::warn!(data = %data.display(), error = %e, "could not check the data directory's permissions")
        }
    }
}

fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(contents.as_bytes())?;
    f.write_all(b"\n")?;
    f.sync_all()
}

/// `--webhook-resolve`, `--webhook-ca` (and the hidden DNS test seam).
fn webhook_config(args: &ServeArgs) -> Result<kobo_actors::webhook::supervisor::WebhookConfig> {
    use kobo_actors::webhook::dispatcher::ClientConfig;
    let pairs = |flag: &str, values: &[String]| -> Result<Vec<(String, std::net::IpAddr)>> {
        values
            .iter()
            .map(|v| {
                let (host, ip) = v
                    .split_once('=')
                    .with_context(|| format!("{flag} {v}: expected HOST=IP"))?;
                let ip = ip
                    .trim_matches(|c| c == '[' || c == ']')
                    .parse()
                    .with_context(|| format!("{flag} {v}: {ip} is not an IP address"))?;
                Ok((host.trim().to_ascii_lowercase(), ip))
            })
            .collect()
    };
    let extra_roots_pem = match &args.webhook_ca {
        Some(path) => {
            Some(std::fs::read(path).with_context(|| format!("--webhook-ca {}", path.display()))?)
        }
        None => None,
    };
    Ok(kobo_actors::webhook::supervisor::WebhookConfig {
        client: ClientConfig {
            resolve: pairs("--webhook-resolve", &args.webhook_resolve)?,
            extra_roots_pem,
            fake_dns: pairs("--webhook-dns-fake", &args.webhook_dns_fake)?,
        },
        dispatchers: 2,
    })
}

/// On SIGTERM or SIGINT (which also start the server's graceful stop), end
/// the event streams, which would otherwise hold their connections open
/// until the shutdown time-out.
fn close_streams_on_signal(kobo: std::sync::Arc<Kobo>) {
    actix_web::rt::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        kobo.webhooks.close_streams();
    });
}

/// A move of the stored manual clock by `--clock-start`: (from, to).
type ClockMove = Option<(chrono::DateTime<Utc>, chrono::DateTime<Utc>)>;

/// The clock `--clock` asks for. A manual one continues from its stored
/// time (or `--clock-start`, whichever is later: it never moves back); a
/// new one starts at `--clock-start`, else now. Also the move
/// `--clock-start` made of a stored time, for the audit log.
fn start_clock(args: &ServeArgs, store: &Store) -> Result<(Clock, ClockMove)> {
    Ok(match args.clock {
        ClockKind::System => (Clock::System, None),
        ClockKind::Manual => {
            let stored = store
                .read()?
                .get(Table::Meta, META_MANUAL_CLOCK)?
                .map(|v| from_micros(u64_from(&v) as i64));
            let at = args
                .clock_start
                .as_deref()
                .map(|at| {
                    chrono::DateTime::parse_from_rfc3339(at)
                        .with_context(|| format!("--clock-start {at} is not an RFC 3339 date-time"))
                })
                .transpose()?
                .map(|at| at.with_timezone(&Utc));
            // `None` orders below any time: the later of the two given.
            let start = stored
                .max(at)
                .unwrap_or_else(|| from_micros(Utc::now().timestamp_micros()));
            let moved = stored.filter(|s| *s < start).map(|s| (s, start));
            (Clock::manual(start), moved)
        }
    })
}

/// Creates the demo merchant on a fresh data directory; its view (with the
/// test secret key, shown once) when it did.
async fn demo_merchant(
    kobo: &Arc<Kobo>,
    store: &Store,
    writer: &Writer,
) -> Result<Option<serde_json::Value>> {
    Ok(
        if store
            .read()?
            .get(Table::Meta, META_DEMO_MERCHANT)?
            .is_none()
        {
            let view = kobo_actors::admin::create_merchant(
                kobo,
                "Demo Merchant".into(),
                Settings::default(),
                &Audit::command("kobo serve"),
            )
            .await?;
            let view = kobo_actors::idempotency::render(&view);
            let mut b = Batch::new();
            b.put_raw(
                Table::Meta,
                META_DEMO_MERCHANT.to_vec(),
                view["id"].to_string().into_bytes(),
            );
            writer.commit(b).await?;
            Some(view)
        } else {
            None
        },
    )
}

pub async fn serve(args: ServeArgs) -> Result<()> {
    let restoring = args.data.join(kobo_storage::backup::RESTORING_FILE);
    anyhow::ensure!(
        !restoring.exists(),
        "{} is left from an interrupted restore: finish the restore (remove that file, then `kobo restore` again) before serving this directory",
        restoring.display()
    );
    let spec = StoreSpec::from_option(args.store.as_deref())?;
    anyhow::ensure!(
        !args.cluster || spec != StoreSpec::Redb,
        "--cluster needs a shared PostgreSQL store (--store postgres://...); the embedded redb store belongs to one process"
    );
    let node_id = match (&args.cluster, &args.node_id) {
        (false, _) => None,
        (true, Some(id)) if valid_node_id(id) => Some(id.clone()),
        (true, _) => anyhow::bail!(
            "--cluster needs --node-id (KOBO_NODE_ID): 1 to 64 letters, digits, '-', '_' or '.', unique among the nodes"
        ),
    };
    let opened = match (&spec, node_id.is_some()) {
        // Cluster nodes share the database (its writer lock taken shared).
        (StoreSpec::Postgres(url), true) => Store::connect_cluster(url),
        _ => Store::open_spec(&spec, &args.data, args.store_cache_mb.max(16) << 20),
    };
    let store = match opened {
        Ok(s) => s,
        Err(StoreError::Locked(path)) => anyhow::bail!(
            "the data directory {} is already in use by another kobo process ({} is locked); stop that process or choose another --data",
            args.data.display(),
            path.display()
        ),
        Err(e @ StoreError::DatabaseLocked(_)) => {
            anyhow::bail!("{e}; stop that process or choose another --store database")
        }
        Err(e) => return Err(e).context("opening the store"),
    };
    if store.repaired_on_open() {
        // Tests read this line (tests/api/server.rs): keep its words.
        tracing::warn!(
            "the store was not closed cleanly (a crash or kill -9): its allocator state was rebuilt by reading every page; a stop by SIGTERM records it"
        );
    }
    if spec != StoreSpec::Redb {
        // The key files still live in the data directory.
        crate::keyfile::private_dir(&args.data)?;
    }
    warn_loose_permissions(&args.data);
    api::set_body_timeout(Duration::from_millis(args.body_timeout_ms.max(1)));
    let admin_token = admin_token(&args)?;

    let (clock, clock_moved) = start_clock(&args, &store)?;

    let calendar = match &args.holidays {
        Some(path) => Calendar::from_file(path)
            .map_err(|e| anyhow::anyhow!("--holidays {}: {e}", path.display()))?,
        None => Calendar::nigeria(),
    };

    let writer_metrics = WriterMetrics::new();
    let writer = store.start_writer(writer_metrics.clone());
    // Debug builds only: own every shard, so that the writer checks every
    // merchant's batch names its merchant (the tagging proof, issue 21).
    if cfg!(debug_assertions) && std::env::var_os("KOBO_TEST_OWN_ALL_SHARDS").is_some() {
        writer.set_ownership(Arc::new(kobo_storage::fence::OwnsEveryShard));
    }

    let listener =
        TcpListener::bind(&args.listen).with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    let base_url = args
        .base_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"))
        .trim_end_matches('/')
        .to_string();

    let kobo = Kobo::new(
        store.clone(),
        writer.clone(),
        clock.clone(),
        Config {
            base_url,
            actor_idle: Duration::from_secs(args.actor_idle_secs.max(1)),
            mailbox_capacity: 1024,
            calendar,
            sandbox_card_latency: Duration::from_millis(args.sandbox_latency_ms),
        },
    )?;

    if clock.is_manual() {
        // Persist the starting time so a restart continues from it (and,
        // when --clock-start moved a stored time, its audit entry).
        let mut b = Batch::new();
        b.put_raw(
            Table::Meta,
            META_MANUAL_CLOCK.to_vec(),
            micros(clock.now()).to_be_bytes().to_vec(),
        );
        if let Some((from, to)) = clock_moved {
            Audit::command("kobo serve").add_to(
                &kobo,
                &mut b,
                kobo_actors::timers::clock_record(AuditAction::ClockSet, from, to),
            );
        }
        writer.commit(b).await?;
    }

    if spec != StoreSpec::Redb {
        crate::keyfile::agree_with_database(
            &args.data,
            &[
                api::cards::FINGERPRINT_KEY_FILE,
                crate::checkout::CHECKOUT_KEY_FILE,
                crate::checkout::forms::FORM_KEY_FILE,
            ],
            &store,
            &writer,
        )
        .await?;
    }
    let cluster = match &node_id {
        Some(id) => {
            let leases = crate::cluster::store_leases(&store).context(
                "this store offers no cluster leases (PostgreSQL with cluster support is needed for --cluster)",
            )?;
            let advertise = args
                .advertise
                .clone()
                .unwrap_or_else(|| format!("http://{addr}"));
            Some(crate::cluster::start(
                &kobo, &writer, leases, id, &advertise,
            )?)
        }
        None => None,
    };

    // A cluster's merchants are created through the operator API.
    let demo = match cluster {
        Some(_) => None,
        None => demo_merchant(&kobo, &store, &writer).await?,
    };

    kobo_actors::settlement::ensure_daily_run(&kobo).await?;
    kobo_actors::customer::service::backfill_indexes(&kobo).await?;
    kobo_actors::usdt::service::start(&kobo.crypto_payouts).map_err(|e| anyhow::anyhow!(e))?;
    kobo_actors::webhook::supervisor::start(&kobo.webhooks, webhook_config(&args)?)
        .map_err(|e| anyhow::anyhow!(e))?;
    kobo_actors::payment_link::actor::start(&kobo.payment_links);
    // Work left pending (notifications, confirmations, link checks): a
    // single process resumes every merchant's now; a cluster node those of
    // each shard it takes over, the first tick's included.
    match cluster {
        Some(_) => kobo_actors::resume::start_takeovers(&kobo),
        None => kobo_actors::resume::at_start(&kobo)?,
    }
    let timers = TimerSupervisor::new(kobo.clone()).start();
    let metrics = Metrics::new(&writer_metrics);
    let health = crate::health::Health::new(writer_metrics.clone());
    health.start(kobo.clone());
    let admin_token_kept = admin_token.clone();
    let mut app_state = AppState::new(kobo.clone(), admin_token, timers, metrics, health);
    app_state.card_key = api::cards::fingerprint_key(&args.data)?;
    app_state.checkout_key = kobo_actors::credential::CheckoutKey::new(
        crate::keyfile::load_or_create(&args.data, crate::checkout::CHECKOUT_KEY_FILE)?,
    );
    app_state.backup_dir = args
        .backup_dir
        .clone()
        .unwrap_or_else(|| args.data.join("backups"));
    let state = web::Data::new(app_state);
    let limits = web::Data::new(api::limits::RateLimits::new(args.ip_rate_limit));
    api::limits::RateLimits::start_cleanup(limits.clone());
    let form_key = web::Data::new(crate::checkout::forms::FormKey::load(&args.data)?);
    let console = web::Data::new(crate::console::Console {
        sessions: crate::console::session::Sessions::durable(kobo.clone(), &admin_token_kept)
            .await
            .map_err(|e| anyhow::anyhow!("loading console sessions: {e}"))?,
    });
    // One sign-in throttle for every worker.
    let sign_in = web::Data::new(crate::dashboard::throttle::SignInThrottle::new());

    let mut server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .app_data(limits.clone())
            .wrap(middleware::from_fn(crate::cluster::forward::route))
            .wrap(middleware::from_fn(api::limits::per_ip))
            .app_data(form_key.clone())
            .app_data(console.clone())
            .app_data(sign_in.clone())
            .wrap(middleware::from_fn(telemetry::around_request))
            .configure(crate::routes::configure)
            .default_service(web::to(api::not_found))
    })
    .shutdown_timeout(30)
    // A client's EOF ends its connection at once (dropping its handler, as
    // hyper-based servers do; handlers commit their effects and idempotency
    // records together, so a dropped one leaves nothing half done). With
    // half-closes allowed, a GET /v1/stream whose client had gone kept one of
    // the merchant's 16 stream slots until the next heartbeat write, up to
    // 15 s later, and reconnecting clients were answered 503. HTTP/1 clients
    // that half-close after sending a request (none of the usual ones) lose
    // the answer.
    .h1_allow_half_closed(false)
    .listen(listener)?;
    if let Some(w) = args.workers {
        server = server.workers(w.max(1));
    }
    let running = server.run();
    close_streams_on_signal(kobo.clone());

    let mut out = std::io::stdout().lock();
    writeln!(out, "kobo listening on http://{addr}")?;
    if let Some(view) = demo {
        writeln!(
            out,
            "demo merchant {} created; its test secret key (shown once): {}",
            view["id"].as_str().unwrap_or_default(),
            view["test_secret_key"].as_str().unwrap_or_default()
        )?;
    }
    out.flush()?;
    drop(out);
    tracing::info!(%addr, data = %args.data.display(), clock = ?args.clock, "kobo started");
    if args.admin_token.is_none() {
        // Where the operator token is kept (never the token itself).
        let path = args.data.join(ADMIN_TOKEN_FILE);
        tracing::info!(path = %path.display(), "admin token file (kobo admin reads it)");
    }

    running.await?;
    // The store stays open to the end of the process (the writer thread and
    // the actors hold it): record redb's allocator state, so the next start
    // loads it instead of walking the whole store.
    if let Err(e) = store.record_allocator_state() {
        tracing::warn!(error = %e, "recording the store's allocator state at shutdown");
    }
    tracing::info!("kobo stopped");
    Ok(())
}
