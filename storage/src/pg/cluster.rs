//! A throw-away PostgreSQL cluster for tests: `initdb` in a temporary
//! directory, started with fsync on, listening on a Unix socket in that
//! directory only (no port to collide on). One per test process
//! ([`shared`]); each caller takes a fresh database
//! ([`Cluster::fresh_database`]).
//!
//! PostgreSQL refuses to run as root, so under root the cluster runs as the
//! `postgres` user (Debian's package creates it), else `nobody`. A watchdog
//! process stops the cluster (immediate shutdown) and removes its directory
//! once the test process has exited, however it exited.
//!
//! [`Cluster::start_tls`] starts another kind for the TLS tests: listening
//! on 127.0.0.1 with `ssl = on`, a given server certificate, and a
//! `pg_hba.conf` that admits TCP clients only over TLS (`hostssl`).
//!
//! The binaries are found in `KOBO_PG_BIN` when set, else on `PATH`, else
//! in Debian's `/usr/lib/postgresql/<version>/bin` (the newest);
//! `scripts/test.sh` installs them when none is found.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A running throw-away cluster.
pub struct Cluster {
    /// The cluster's directory: data in `data/`, the socket beside it.
    root: PathBuf,
    next: AtomicU64,
    /// A TLS cluster's TCP port on 127.0.0.1.
    tls_port: Option<u16>,
}

/// A TLS cluster's server certificate chain and key (PEM).
pub struct ServerTls {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The test process's cluster, started on first use. Panics (failing the
/// test, never skipping it) when PostgreSQL cannot be found or started.
pub fn shared() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        Cluster::start(None).unwrap_or_else(|e| {
            panic!("cannot start a throw-away PostgreSQL cluster: {e} (scripts/test.sh installs PostgreSQL; KOBO_PG_BIN names its bin directory)")
        })
    })
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`.
fn bin_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("KOBO_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
                return Ok(dir);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| "no initdb on PATH and no /usr/lib/postgresql".to_string())?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| "no initdb found".to_string())
}

/// The user and group the cluster runs as: ours, or under root `postgres`
/// (else `nobody`).
fn run_as() -> Option<(u32, u32)> {
    // SAFETY: plain libc calls; getpwnam's result is read before any other
    // call that could reuse its buffer.
    unsafe {
        if libc::geteuid() != 0 {
            return None;
        }
        for name in [c"postgres", c"nobody"] {
            let pw = libc::getpwnam(name.as_ptr());
            if !pw.is_null() {
                return Some(((*pw).pw_uid, (*pw).pw_gid));
            }
        }
    }
    None
}

fn command(bin: &Path, name: &str, user: Option<(u32, u32)>) -> Command {
    let mut c = Command::new(bin.join(name));
    if let Some((uid, gid)) = user {
        c.uid(uid).gid(gid);
    }
    c.stdin(Stdio::null());
    c
}

fn run(mut c: Command, what: &str) -> Result<(), String> {
    let out = c.output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl Cluster {
    /// A cluster of its own for the TLS tests (see the module's comment).
    pub fn start_tls(tls: &ServerTls) -> Result<Cluster, String> {
        Cluster::start(Some(tls))
    }

    fn start(tls: Option<&ServerTls>) -> Result<Cluster, String> {
        let bin = bin_dir()?;
        let user = run_as();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let root = std::env::temp_dir().join(format!("kobo-pg-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
        let own = |path: &Path| -> Result<(), String> {
            if let Some((uid, gid)) = user {
                std::os::unix::fs::chown(path, Some(uid), Some(gid))
                    .map_err(|e| format!("chown {}: {e}", path.display()))?;
            }
            Ok(())
        };
        own(&root)?;
        let data = root.join("data");
        let mut initdb = command(&bin, "initdb", user);
        initdb.arg("-D").arg(&data).args([
            "-U",
            "kobo",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
        ]);
        run(initdb, "initdb")?;
        let mut options = format!(
            "-c unix_socket_directories='{}' -c fsync=on \
             -c synchronous_commit=on -c max_connections=400 -c shared_buffers=64MB",
            root.display()
        );
        let mut tls_port = None;
        match tls {
            None => options.push_str(" -c listen_addresses=''"),
            Some(tls) => {
                use std::os::unix::fs::PermissionsExt;
                let write = |name: &str, text: &str| -> Result<(), String> {
                    let path = data.join(name);
                    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    own(&path)
                };
                write("server.crt", &tls.cert_pem)?;
                write("server.key", &tls.key_pem)?;
                // Over TCP only with TLS; the Unix socket (for creating
                // databases) as before.
                write(
                    "pg_hba.conf",
                    "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
                )?;
                let port = std::net::TcpListener::bind("127.0.0.1:0")
                    .and_then(|l| l.local_addr())
                    .map_err(|e| format!("finding a free port: {e}"))?
                    .port();
                options.push_str(&format!(
                    " -c listen_addresses='127.0.0.1' -c port={port} -c ssl=on \
                     -c ssl_cert_file=server.crt -c ssl_key_file=server.key"
                ));
                tls_port = Some(port);
            }
        }
        let mut start = command(&bin, "pg_ctl", user);
        start
            .arg("-D")
            .arg(&data)
            .args(["-o", &options, "-l"])
            .arg(root.join("postgres.log"))
            .args(["-w", "start"]);
        run(start, "pg_ctl start")?;
        spawn_watchdog(&root, &data)?;
        Ok(Cluster {
            root,
            next: AtomicU64::new(0),
            tls_port,
        })
    }

    /// A TLS cluster's URL of database `name` over TCP: host name
    /// `host`, reached at 127.0.0.1, with the URL parameters `params`.
    pub fn tcp_url(&self, host: &str, name: &str, params: &str) -> String {
        let port = self.tls_port.expect("a TLS cluster listens on TCP");
        format!("postgresql://kobo@{host}:{port}/{name}?hostaddr=127.0.0.1&{params}")
    }

    /// The URL of database `name` in this cluster.
    pub fn url(&self, name: &str) -> String {
        let port = self
            .tls_port
            .map_or(String::new(), |p| format!("&port={p}"));
        format!(
            "postgresql:///{name}?host={}&user=kobo{port}",
            self.root.display()
        )
    }

    /// Creates a new, empty database; its URL.
    pub fn fresh_database(&self) -> String {
        let name = self.fresh_database_name();
        self.url(&name)
    }

    /// Creates a new, empty database; its name.
    pub fn fresh_database_name(&self) -> String {
        let name = format!(
            "kobo_{}_{}",
            self.next.fetch_add(1, Ordering::Relaxed),
            std::process::id()
        );
        let admin = self.url("postgres");
        let sql = format!("CREATE DATABASE {name}");
        let created = super::call(async move {
            let target = super::tls::Target::parse(&admin).map_err(|e| e.to_string())?;
            let client = super::connect(target).await.map_err(|e| e.to_string())?;
            client
                .batch_execute(&sql)
                .await
                .map_err(|e| super::describe(&e))
        });
        if let Err(e) = created {
            panic!("creating a test database: {e}");
        }
        name
    }
}

/// Starts a detached shell that waits for this process to exit, then stops
/// the cluster (SIGQUIT to the postmaster: immediate shutdown), waits for
/// it, and removes the directory.
fn spawn_watchdog(root: &Path, data: &Path) -> Result<(), String> {
    let script = r#"
while kill -0 "$1" 2>/dev/null; do sleep 1; done
pm=$(head -n 1 "$2/postmaster.pid" 2>/dev/null)
if [ -n "$pm" ]; then
  kill -QUIT "$pm" 2>/dev/null
  while kill -0 "$pm" 2>/dev/null; do sleep 0.2; done
fi
rm -rf "$3"
"#;
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(script)
        .arg("kobo-pg-watchdog")
        .arg(std::process::id().to_string())
        .arg(data)
        .arg(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe; the watchdog leaves our process
    // group so a Ctrl-C to the tests does not stop it before its cleanup.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    c.spawn()
        .map(|_| ())
        .map_err(|e| format!("starting the cluster's watchdog: {e}"))
}
