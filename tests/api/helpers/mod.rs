//! `spawn_app()` and a `TestApp` method per endpoint; the payment intent
//! fixtures the test modules share are in `intents.rs`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use tempfile::TempDir;

pub mod console;
pub mod dashboard;
mod intents;
pub mod pages;
pub use intents::*;

pub struct TestApp {
    pub base: String,
    pub admin_token: String,
    pub client: reqwest::Client,
    pub dir: Arc<TempDir>,
    pub child: Option<Child>,
    /// The first start's stdout lines after the listening line (demo key).
    pub stdout_rest: Arc<std::sync::Mutex<Vec<String>>>,
    keys: AtomicU64,
    /// Flags every start of this app adds (see [`spawn_app_with`]).
    pub extra_args: Vec<String>,
    /// The PostgreSQL database this app's server stores into (`--store`),
    /// or `None` for the embedded store in its data directory. See
    /// [`test_store`].
    pub store: Option<String>,
    /// Environment variables every start of this app's server gets.
    pub envs: Vec<(String, String)>,
}

/// The store every spawned server uses: `KOBO_TEST_STORE=postgres` gives
/// each app a fresh database of the test process's throw-away PostgreSQL
/// cluster (kept across the app's restarts); unset (or `redb`), the
/// embedded store.
pub fn test_store() -> Option<String> {
    match std::env::var("KOBO_TEST_STORE").as_deref() {
        Ok("postgres") => Some(postgres_database()),
        Ok("redb") | Ok("") | Err(_) => None,
        Ok(other) => panic!("KOBO_TEST_STORE={other}: expected postgres or redb"),
    }
}

/// A fresh database of the throw-away PostgreSQL cluster.
pub fn postgres_database() -> String {
    kobo_storage::pg::cluster::shared().fresh_database()
}

/// A merchant made through the operator API.
#[derive(Clone, Debug)]
pub struct Merchant {
    pub id: String,
    pub test_key: String,
    pub live_key: String,
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Resp {
    /// Sends `req` and reads the answer, checking it against CONTRACT 3a
    /// ([`crate::contract::check`]).
    pub async fn read(req: reqwest::RequestBuilder) -> Resp {
        let (client, built) = req.build_split();
        let built = built.expect("request builds");
        let method = built.method().to_string();
        let path = built.url().path().to_string();
        let started = std::time::Instant::now();
        let res = client.execute(built).await.unwrap_or_else(|e| {
            panic!(
                "{method} {path}: no response after {:.1?}: {e:?}",
                started.elapsed()
            )
        });
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let text = res.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        crate::contract::check(&method, &path, status, &body, &text);
        Resp {
            status,
            headers,
            body,
            text,
        }
    }

    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
    pub fn param(&self) -> Option<&str> {
        self.body["error"]["param"].as_str()
    }
    pub fn error_type(&self) -> &str {
        self.body["error"]["type"].as_str().unwrap_or("")
    }
    pub fn replayed(&self) -> bool {
        self.headers
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true")
    }
    #[track_caller]
    pub fn assert_status(&self, status: u16) -> &Self {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.text
        );
        self
    }
    /// Asserts the spec's error body and its code (and param when given).
    #[track_caller]
    pub fn assert_error(&self, status: u16, code: &str, param: Option<&str>) {
        self.assert_status(status);
        assert_eq!(self.code(), code, "body: {}", self.text);
        assert!(self.body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
        assert!(self.body["error"]["type"].is_string());
        assert!(
            self.body["error"].get("param").is_some(),
            "param is on every error"
        );
        if let Some(p) = param {
            assert_eq!(self.param(), Some(p), "body: {}", self.text);
        }
    }
}

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_kobo")
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(&[]).await
}

/// How long the test client keeps an idle connection for reuse: below the
/// server's keep-alive (actix-web's 5 s). A connection idle for about 5 s
/// may be closed by the server just as the client sends on it, and the
/// request fails mid-way (`IncompleteMessage`); past 2 s a new connection
/// is opened instead.
pub const IDLE_CONNECTION_REUSE: Duration = Duration::from_secs(2);

/// How long the suite's client waits for a response.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the suite waits for `POST /admin/v1/clock/advance` (every
/// other request: [`REQUEST_TIMEOUT`]). An advance answers once every timer
/// due on the way has run, so its time grows with the work it finds (a
/// thousand renewals and their debits, actors activated cold after a
/// restart, each a round trip on the PostgreSQL store) and with how loaded
/// the machine is: a CI run of the PostgreSQL suite once took over 30 s
/// for one. This bounds only a server that stopped answering, not the
/// speed of one at work.
pub const CLOCK_ADVANCE_TIMEOUT: Duration = Duration::from_secs(900);

/// Where every test server's manual clock starts on a fresh store
/// (`--clock-start`; a restart continues from the stored time): Thursday
/// 26 November 2026, 10:00 Lagos. The suite's dated steps (a Friday's
/// collection settled on Monday 30 November, December holidays, the March
/// 2027 Easter) come after it whatever day the suite runs.
pub const SUITE_CLOCK_START: &str = "2026-11-26T10:00:00+01:00";

/// Per-merchant rate (requests per second, both modes) that
/// [`TestApp::create_merchant`] gives merchants: the suite fires bursts
/// (concurrent payouts, loops of hundreds of calls) that the defaults (25/s
/// in test mode) would refuse. The rate-limit tests use
/// [`TestApp::merchant_with_default_limits`].
pub const TEST_MERCHANT_RATE: u32 = 100_000;

/// Like [`spawn_app`], with flags added to this and every later start
/// (restarts included). Unless `extra` sets `--ip-rate-limit`, the per-IP
/// limit is off: every test talks from 127.0.0.1.
pub async fn spawn_app_with(extra: &[String]) -> TestApp {
    let mut app = unstarted_app(extra);
    app.start(&[]);
    app
}

/// A [`TestApp`] with its data directory chosen but no server started yet
/// (a test fills the directory first, e.g. by `kobo restore`, then calls
/// [`TestApp::start`]).
pub fn unstarted_app(extra: &[String]) -> TestApp {
    unstarted_app_on(extra, test_store())
}

/// [`unstarted_app`] on the store `store` names (`None`: the embedded one).
pub fn unstarted_app_on(extra: &[String], store: Option<String>) -> TestApp {
    let mut extra = extra.to_vec();
    if !extra.iter().any(|a| a.starts_with("--ip-rate-limit")) {
        extra.extend(["--ip-rate-limit".to_string(), "0".to_string()]);
    }
    if !extra.iter().any(|a| a.starts_with("--clock-start")) {
        extra.extend(["--clock-start".to_string(), SUITE_CLOCK_START.to_string()]);
    }
    let dir = Arc::new(tempfile::tempdir().expect("temp dir"));
    TestApp {
        base: String::new(),
        admin_token: format!("test-admin-{}", uuid::Uuid::new_v4().simple()),
        client: reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .pool_idle_timeout(IDLE_CONNECTION_REUSE)
            .build()
            .unwrap(),
        dir,
        child: None,
        stdout_rest: Arc::new(std::sync::Mutex::new(Vec::new())),
        keys: AtomicU64::new(0),
        extra_args: extra,
        store,
        envs: Vec::new(),
    }
}

/// Runs the `kobo` binary with `args` (an offline command: `backup`,
/// `restore`, `check`) and waits for it.
pub fn kobo<I, S>(args: I) -> std::process::Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(binary())
        .args(args)
        .output()
        .expect("run kobo")
}

impl TestApp {
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("kobo.log")
    }

    /// The flags given at creation, less those this start gives its own
    /// value for (`--clock-start`).
    fn standing_args(&self, extra: &[&str]) -> Vec<String> {
        let own_clock_start = extra.contains(&"--clock-start");
        let mut out = Vec::new();
        let mut args = self.extra_args.iter();
        while let Some(a) = args.next() {
            if own_clock_start && a == "--clock-start" {
                args.next();
                continue;
            }
            out.push(a.clone());
        }
        out
    }

    /// Starts the binary on the data dir and waits for its listening line.
    pub fn start(&mut self, extra: &[&str]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        let mut child = Command::new(binary())
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--clock",
                "manual",
                "--admin-token",
            ])
            .arg(&self.admin_token)
            .arg("--data")
            .arg(self.data_dir())
            .args(self.store.iter().flat_map(|url| ["--store", url]))
            .args(self.standing_args(extra))
            .args(extra)
            .env("RUST_LOG", "info")
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start kobo");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let first = lines
            .next()
            .expect("kobo printed nothing")
            .expect("read stdout");
        let addr = first
            .strip_prefix("kobo listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {first}"))
            .to_string();
        let rest = self.stdout_rest.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                rest.lock().unwrap().push(line);
            }
        });
        self.base = addr;
        self.child = Some(child);
    }

    /// SIGKILL, no goodbye.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait; returns the exit code.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        unsafe {
            libc::kill(c.id() as i32, libc::SIGTERM);
        }
        c.wait().ok().and_then(|s| s.code())
    }

    /// Opens this app's store (the server must be stopped: it holds the
    /// store's lock).
    pub fn open_store(&self) -> Result<kobo_storage::Store, kobo_storage::StoreError> {
        match &self.store {
            Some(url) => kobo_storage::Store::connect(url),
            None => kobo_storage::Store::open(&self.data_dir()),
        }
    }

    /// Every key and value of this app's store, as stored: the redb file's
    /// bytes, or the PostgreSQL database's rows one after the other (for
    /// tests that search the store for what must never be kept).
    pub fn store_bytes(&self) -> Vec<u8> {
        let Some(url) = &self.store else {
            // The store file and its journals (which hold the latest
            // commits until they are written into the file).
            let mut bytes = std::fs::read(self.data_dir().join("kobo.redb")).unwrap();
            for journal in ["kobo.redb.journal-a", "kobo.redb.journal-b"] {
                if let Ok(more) = std::fs::read(self.data_dir().join(journal)) {
                    bytes.extend(more);
                }
            }
            return bytes;
        };
        let store = kobo_storage::Store::connect_read_only(url).unwrap();
        let read = store.read().unwrap();
        let mut bytes = Vec::new();
        for table in kobo_storage::Table::ALL {
            read.scan_prefix(*table, &[], None, |k, v| {
                bytes.extend_from_slice(k);
                bytes.extend_from_slice(v);
                Ok(true)
            })
            .unwrap();
        }
        bytes
    }

    /// Whether this app's store is PostgreSQL: a test of the embedded
    /// store's own file (its backups, restores, permissions) returns early
    /// there, saying why.
    pub fn skip_on_postgres(&self, why: &str) -> bool {
        if self.store.is_some() {
            eprintln!("skipped on PostgreSQL: {why}");
        }
        self.store.is_some()
    }

    pub fn restart(&mut self) {
        self.kill();
        self.start(&[]);
    }

    pub fn next_key(&self) -> String {
        format!(
            "key-{}-{}",
            self.keys.fetch_add(1, Ordering::Relaxed),
            uuid::Uuid::new_v4().simple()
        )
    }

    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        bearer: Option<&str>,
        idem: Option<&str>,
        body: Option<&Value>,
    ) -> Resp {
        self.send_on(&self.client, method, path, bearer, idem, body)
            .await
    }

    /// [`TestApp::send`] through `client` (another client: its own
    /// connections).
    pub async fn send_on(
        &self,
        client: &reqwest::Client,
        method: reqwest::Method,
        path: &str,
        bearer: Option<&str>,
        idem: Option<&str>,
        body: Option<&Value>,
    ) -> Resp {
        let advance = method == reqwest::Method::POST && path == "/admin/v1/clock/advance";
        let mut req = client.request(method, format!("{}{}", self.base, path));
        if advance {
            req = req.timeout(CLOCK_ADVANCE_TIMEOUT);
        }
        if let Some(b) = bearer {
            req = req.bearer_auth(b);
        }
        if let Some(k) = idem {
            req = req.header("Idempotency-Key", k);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        Resp::read(req).await
    }

    /// POST with a fresh Idempotency-Key.
    pub async fn post(&self, key: &str, path: &str, body: Value) -> Resp {
        let idem = self.next_key();
        self.send(
            reqwest::Method::POST,
            path,
            Some(key),
            Some(&idem),
            Some(&body),
        )
        .await
    }

    pub async fn post_with_key(&self, key: &str, path: &str, idem: &str, body: Value) -> Resp {
        self.send(
            reqwest::Method::POST,
            path,
            Some(key),
            Some(idem),
            Some(&body),
        )
        .await
    }

    pub async fn get(&self, key: &str, path: &str) -> Resp {
        self.send(reqwest::Method::GET, path, Some(key), None, None)
            .await
    }

    pub async fn admin_post(&self, path: &str, body: Value) -> Resp {
        self.send(
            reqwest::Method::POST,
            path,
            Some(&self.admin_token.clone()),
            None,
            Some(&body),
        )
        .await
    }

    pub async fn admin_get(&self, path: &str) -> Resp {
        self.send(
            reqwest::Method::GET,
            path,
            Some(&self.admin_token.clone()),
            None,
            None,
        )
        .await
    }

    /// A merchant with `settings`; unless they set `rate_limits`, with
    /// [`TEST_MERCHANT_RATE`] in both modes.
    pub async fn create_merchant(&self, settings: Value) -> Merchant {
        let mut settings = settings;
        if let Some(s) = settings.as_object_mut() {
            s.entry("rate_limits").or_insert(json!({
                "live_per_second": TEST_MERCHANT_RATE,
                "test_per_second": TEST_MERCHANT_RATE,
            }));
        }
        let r = self
            .admin_post(
                "/admin/v1/merchants",
                json!({"name": "Ada Stores", "settings": settings}),
            )
            .await;
        r.assert_status(201);
        Merchant {
            id: r.body["id"].as_str().unwrap().to_string(),
            test_key: r.body["test_secret_key"].as_str().unwrap().to_string(),
            live_key: r.body["live_secret_key"].as_str().unwrap().to_string(),
        }
    }

    pub async fn merchant(&self) -> Merchant {
        self.create_merchant(json!({})).await
    }

    /// A merchant with the default rate limits (100/s live, 25/s test).
    pub async fn merchant_with_default_limits(&self) -> Merchant {
        self.create_merchant(json!({"rate_limits": null})).await
    }

    pub async fn advance(&self, seconds: i64) -> Value {
        self.advance_on(&self.client, seconds).await
    }

    /// [`TestApp::advance`] through `client`.
    pub async fn advance_on(&self, client: &reqwest::Client, seconds: i64) -> Value {
        let r = self
            .send_on(
                client,
                reqwest::Method::POST,
                "/admin/v1/clock/advance",
                Some(&self.admin_token),
                None,
                Some(&json!({"seconds": seconds})),
            )
            .await;
        r.assert_status(200);
        r.body
    }

    pub async fn now(&self) -> chrono::DateTime<chrono::Utc> {
        let r = self.admin_get("/admin/v1/clock").await;
        r.body["now"].as_str().unwrap().parse().unwrap()
    }

    pub async fn balance(&self, key: &str, bucket: &str, currency: &str) -> i64 {
        let r = self.get(key, "/v1/balance").await;
        r.assert_status(200);
        r.body[bucket]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["currency"] == currency)
            .unwrap()["amount"]
            .as_i64()
            .unwrap()
    }

    /// Every balance transaction of the key's merchant and mode, newest first.
    pub async fn all_lines(&self, key: &str) -> Vec<Value> {
        self.all_pages(key, "/v1/balance_transactions").await
    }

    /// Every item of the list at `path` (which may carry filters) the key
    /// sees, newest first (walks its pages of 100).
    pub async fn all_pages(&self, key: &str, path: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        // A path may carry its own filters.
        let sep = if path.contains('?') { '&' } else { '?' };
        loop {
            let page = match &after {
                Some(a) => format!("{path}{sep}limit=100&starting_after={a}"),
                None => format!("{path}{sep}limit=100"),
            };
            let mut r = self.get(key, &page).await;
            // A merchant on the default rate limits may have spent its
            // bucket (tests/api/load.rs): wait as the answer says, as a
            // client must.
            for _ in 0..10 {
                if r.status != 429 {
                    break;
                }
                let wait = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
                tokio::time::sleep(Duration::from_secs(wait)).await;
                r = self.get(key, &page).await;
            }
            r.assert_status(200);
            let data = r.body["data"].as_array().unwrap().clone();
            after = data.last().map(|l| l["id"].as_str().unwrap().to_string());
            out.extend(data);
            if !r.body["has_more"].as_bool().unwrap() {
                return out;
            }
        }
    }
}

/// Merges `patch` into `into`, object members recursively.
fn merge(into: &mut Value, patch: &Value) {
    match (into, patch) {
        (Value::Object(into), Value::Object(patch)) => {
            for (k, v) in patch {
                merge(into.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (into, patch) => *into = patch.clone(),
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.kill();
        // Under KOBO_TEST_OWN_ALL_SHARDS the writer logs every batch that
        // writes a merchant's rows without naming it (background work
        // included): a test that caused one fails here.
        if std::env::var_os("KOBO_TEST_OWN_ALL_SHARDS").is_some() && !std::thread::panicking() {
            let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
            if let Some(line) = log.lines().find(|l| l.contains("untagged batch")) {
                panic!("a batch was not tagged with its merchant: {line}");
            }
        }
    }
}

// ---- added for auth.rs, conventions.rs, idempotency.rs ----

impl TestApp {
    /// A request with exactly these headers and this raw body (no bearer or
    /// Idempotency-Key added): for malformed headers and bodies.
    pub async fn send_raw(
        &self,
        method: reqwest::Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Resp {
        let mut req = self
            .client
            .request(method, format!("{}{}", self.base, path));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        Resp::read(req).await
    }

    /// Rewrites merchant `id`'s stored settings with `patch` (merged into
    /// them, objects recursively) while the server is stopped, then starts it again: a store
    /// written before a bound existed, holding a value the operator API
    /// now refuses.
    pub async fn plant_merchant_settings(&mut self, id: &str, patch: Value) {
        use kobo_storage::{Batch, Table, WriterMetrics};
        self.kill();
        let key = uuid::Uuid::parse_str(id).unwrap().as_bytes().to_vec();
        {
            let store = self.open_store().unwrap();
            let mut merchant: Value = store
                .read()
                .unwrap()
                .get_decoded(Table::Merchants, &key)
                .unwrap()
                .expect("the merchant is stored");
            merge(&mut merchant["settings"], &patch);
            let mut batch = Batch::new();
            batch.put(Table::Merchants, key, &merchant);
            let writer = store.start_writer(WriterMetrics::new());
            writer.commit(batch).await.unwrap();
        }
        // The writer thread lets go of the store (and its file lock) once
        // it sees its channel closed: wait for the lock to be free before
        // the server starts on the directory.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match self.open_store() {
                Ok(_) => break,
                Err(
                    kobo_storage::StoreError::Locked(_)
                    | kobo_storage::StoreError::DatabaseLocked(_),
                ) if std::time::Instant::now() < deadline => {
                    tokio::task::yield_now().await;
                }
                Err(e) => panic!("the planted store does not open: {e}"),
            }
        }
        self.start(&[]);
    }

    /// A merchant whose live key may take payments (`live_approved`).
    pub async fn live_merchant(&self) -> Merchant {
        self.create_merchant(json!({"live_approved": true})).await
    }

    /// The `form_token` a sandbox page (`url`: bank or mandate page) puts
    /// in its Approve and Decline forms.
    pub async fn form_token(&self, url: &str) -> String {
        let html = self
            .client
            .get(url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let marker = r#"name="form_token" value=""#;
        let at = html
            .find(marker)
            .unwrap_or_else(|| panic!("no form_token in {html}"))
            + marker.len();
        html[at..].split('"').next().unwrap().to_string()
    }
}
