//! Webhooks end to end: a real HTTPS receiver inside this test binary (a
//! certificate for `hooks.kobo-test.ng` issued by a throw-away CA), reached
//! through `--webhook-resolve` and `--webhook-ca`. Signatures are checked
//! here with the `hmac` crate, independently of kobo's code.
//!
//! Each receiver listens on port 8443 (the URL rules allow 443 and 8443) of
//! its own loopback address (127.x.y.z), so tests run in parallel.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rand::Rng;
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::sync::mpsc;

use crate::helpers::{spawn_app_with, Merchant, TestApp};

pub const HOST: &str = "hooks.kobo-test.ng";

/// How the receiver answers a path.
#[derive(Clone, Debug)]
pub enum Answer {
    Status(u16),
    /// 302 to another path of the receiver.
    Redirect,
    /// Never answers (kobo gives up after 10 s).
    Hang,
}

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub at: Instant,
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no {name} header"))
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
    pub fn event_id(&self) -> String {
        self.header("service-event-id").to_string()
    }
}

/// A throw-away CA and a certificate it issued for `*.kobo-test.ng`.
struct Pki {
    ca_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "kobo webhook test CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let mut leaf =
        CertificateParams::new(vec![HOST.to_string(), "*.kobo-test.ng".to_string()]).unwrap();
    leaf.distinguished_name.push(DnType::CommonName, HOST);
    let cert = leaf.signed_by(&leaf_key, &ca).unwrap();
    let ca_cert: &rcgen::Certificate = ca.as_ref();
    Pki {
        ca_pem: ca_cert.pem(),
        cert_der: cert.der().to_vec(),
        key_der: leaf_key.serialize_der(),
    }
}

/// An HTTPS receiver on `<ip>:8443`, run on its own thread.
pub struct Receiver {
    pub ip: Ipv4Addr,
    pub ca_path: PathBuf,
    _dir: tempfile::TempDir,
    rx: mpsc::UnboundedReceiver<Received>,
    answers: Arc<Mutex<HashMap<String, Answer>>>,
    /// TCP connections accepted.
    pub connections: Arc<AtomicUsize>,
    /// Every request ever received (the channel drains; this keeps all).
    pub log: Arc<Mutex<Vec<Received>>>,
    /// Per path: (requests open now, most ever open at once).
    pub open: Arc<Mutex<HashMap<String, (usize, usize)>>>,
}

impl Receiver {
    pub fn start() -> Receiver {
        let pki = pki();
        let dir = tempfile::tempdir().unwrap();
        let ca_path = dir.path().join("ca.pem");
        std::fs::write(&ca_path, &pki.ca_pem).unwrap();
        let (listener, ip) = bind_loopback();
        let (tx, rx) = mpsc::unbounded_channel();
        let answers: Arc<Mutex<HashMap<String, Answer>>> = Arc::default();
        let connections = Arc::new(AtomicUsize::new(0));
        let log: Arc<Mutex<Vec<Received>>> = Arc::default();
        let open: Arc<Mutex<HashMap<String, (usize, usize)>>> = Arc::default();
        let (a, c, l, o) = (
            answers.clone(),
            connections.clone(),
            log.clone(),
            open.clone(),
        );
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(serve(listener, pki, tx, a, c, l, o));
        });
        Receiver {
            ip,
            ca_path,
            _dir: dir,
            rx,
            answers,
            connections,
            log,
            open,
        }
    }

    /// How to answer requests for `path` (default: 200).
    pub fn answer(&self, path: &str, answer: Answer) {
        self.answers
            .lock()
            .unwrap()
            .insert(path.to_string(), answer);
    }

    /// The next request, waiting at most `within`.
    pub async fn next(&mut self, within: Duration) -> Received {
        tokio::time::timeout(within, self.rx.recv())
            .await
            .expect("the receiver got no request in time")
            .expect("the receiver stopped")
    }

    /// A request already received, if any (no waiting).
    pub fn try_next(&mut self) -> Option<Received> {
        self.rx.try_recv().ok()
    }

    /// kobo flags that deliver `HOST` here and trust the test CA.
    pub fn flags(&self) -> Vec<String> {
        vec![
            "--webhook-resolve".into(),
            format!("{HOST}={}", self.ip),
            "--webhook-ca".into(),
            self.ca_path.to_string_lossy().into_owned(),
        ]
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{HOST}:8443{path}")
    }
}

/// A listener on port 8443 of a loopback address nobody else uses.
fn bind_loopback() -> (std::net::TcpListener, Ipv4Addr) {
    let mut rng = rand::thread_rng();
    for _ in 0..200 {
        let ip = Ipv4Addr::new(
            127,
            rng.gen_range(1..255),
            rng.gen_range(0..256) as u8,
            rng.gen_range(2..255),
        );
        if let Ok(l) = std::net::TcpListener::bind(SocketAddr::from((ip, 8443))) {
            l.set_nonblocking(true).unwrap();
            return (l, ip);
        }
    }
    panic!("no free loopback address for port 8443");
}

async fn serve(
    listener: std::net::TcpListener,
    pki: Pki,
    tx: mpsc::UnboundedSender<Received>,
    answers: Arc<Mutex<HashMap<String, Answer>>>,
    connections: Arc<AtomicUsize>,
    log: Arc<Mutex<Vec<Received>>>,
    open: Arc<Mutex<HashMap<String, (usize, usize)>>>,
) {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(pki.cert_der)],
            rustls::pki_types::PrivateKeyDer::Pkcs8(pki.key_der.into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        connections.fetch_add(1, Ordering::SeqCst);
        let (acceptor, tx, answers, log) =
            (acceptor.clone(), tx.clone(), answers.clone(), log.clone());
        let open = open.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (tx, answers, log) = (tx.clone(), answers.clone(), log.clone());
                let open = open.clone();
                async move {
                    let (parts, body) = req.into_parts();
                    let body = body
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let path = parts.uri.path().to_string();
                    let received = Received {
                        at: Instant::now(),
                        path: path.clone(),
                        headers: parts
                            .headers
                            .iter()
                            .map(|(k, v)| {
                                (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())
                            })
                            .collect(),
                        body: body.to_vec(),
                    };
                    log.lock().unwrap().push(received.clone());
                    let _open = OpenGuard::enter(open, &path);
                    let _ = tx.send(received);
                    let answer = answers
                        .lock()
                        .unwrap()
                        .get(&path)
                        .cloned()
                        .unwrap_or(Answer::Status(200));
                    let res = match answer {
                        Answer::Status(s) => Response::builder()
                            .status(s)
                            .body(Full::new(Bytes::from_static(b"{\"ok\":true}"))),
                        Answer::Redirect => Response::builder()
                            .status(302)
                            .header("location", format!("https://{HOST}:8443/redirected"))
                            .body(Full::new(Bytes::new())),
                        Answer::Hang => {
                            std::future::pending::<()>().await;
                            unreachable!()
                        }
                    };
                    Ok::<_, Infallible>(res.unwrap())
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

/// Counts a request as open until its answer is sent (or kobo gives up
/// and the connection drops the handler).
struct OpenGuard {
    open: Arc<Mutex<HashMap<String, (usize, usize)>>>,
    path: String,
}

impl OpenGuard {
    fn enter(open: Arc<Mutex<HashMap<String, (usize, usize)>>>, path: &str) -> OpenGuard {
        {
            let mut o = open.lock().unwrap();
            let e = o.entry(path.to_string()).or_default();
            e.0 += 1;
            e.1 = e.1.max(e.0);
        }
        OpenGuard {
            open,
            path: path.to_string(),
        }
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        if let Some(e) = self.open.lock().unwrap().get_mut(&self.path) {
            e.0 -= 1;
        }
    }
}

// ---- verification, written independently of kobo ----

/// Checks the delivery's headers and signature with `secret`; returns `t`.
#[track_caller]
pub fn verify(r: &Received, secret: &str) -> i64 {
    assert_eq!(r.header("content-type"), "application/json");
    let t: i64 = r.header("service-timestamp").parse().expect("unix seconds");
    let sig = r.header("service-signature");
    let (t_part, v1_part) = sig.split_once(',').expect("t=...,v1=...");
    assert_eq!(t_part, format!("t={t}"), "{sig}");
    let v1 = v1_part.strip_prefix("v1=").expect("v1=");
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.{}.", r.event_id()).as_bytes());
    mac.update(&r.body);
    mac.verify_slice(&hex::decode(v1).expect("hex"))
        .expect("the signature verifies over the raw body");
    t
}

// ---- helpers over the API ----

async fn app_with(receiver: &Receiver, more: &[&str]) -> TestApp {
    let mut flags = receiver.flags();
    flags.extend(more.iter().map(|s| s.to_string()));
    spawn_app_with(&flags).await
}

/// Creates an endpoint; returns (id, secret).
async fn endpoint(app: &TestApp, key: &str, url: &str, events: Value) -> (String, String) {
    let r = app
        .post(
            key,
            "/v1/webhook_endpoints",
            json!({"url": url, "events": events}),
        )
        .await;
    r.assert_status(201);
    (
        r.body["id"].as_str().unwrap().to_string(),
        r.body["secret"].as_str().unwrap().to_string(),
    )
}

async fn events(app: &TestApp, key: &str) -> Vec<Value> {
    let r = app.get(key, "/v1/events?limit=100").await;
    r.assert_status(200);
    r.body["data"].as_array().unwrap().clone()
}

async fn event(app: &TestApp, key: &str, id: &str) -> Value {
    events(app, key)
        .await
        .into_iter()
        .find(|e| e["id"] == id)
        .unwrap_or_else(|| panic!("no event {id}"))
}

fn delivery<'a>(event: &'a Value, endpoint: &str) -> Option<&'a Value> {
    event["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["endpoint_id"] == endpoint)
}

/// Polls the event until its delivery to `endpoint` satisfies `ok`.
async fn wait_delivery(
    app: &TestApp,
    key: &str,
    event_id: &str,
    endpoint: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let e = event(app, key, event_id).await;
        if let Some(d) = delivery(&e, endpoint) {
            if ok(d) {
                return d.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "delivery never got there: {}",
            e["deliveries"]
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The webhook attempts kobo has in flight (operator view).
async fn in_flight(app: &TestApp) -> u64 {
    let r = app.admin_get("/admin/v1/actors").await;
    r.assert_status(200);
    r.body["webhooks"]["in_flight"].as_u64().unwrap()
}

/// A paid payment intent and its `payment_intent.successful` event id.
async fn paid_event(app: &TestApp, key: &str) -> String {
    let pi = app.paid_intent(key, 50_000).await;
    let all = events(app, key).await;
    all.iter()
        .find(|e| e["data"]["object"]["id"] == pi["id"] && e["type"] == "payment_intent.successful")
        .expect("the payment's event")["id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn canceled_event(app: &TestApp, key: &str) -> String {
    let pi = app
        .create_intent(key, json!({"amount": 20_000, "currency": "NGN"}))
        .await;
    let id = pi["id"].as_str().unwrap();
    app.post(key, &format!("/v1/payment_intents/{id}/cancel"), json!({}))
        .await
        .assert_status(200);
    let all = events(app, key).await;
    all.iter()
        .find(|e| e["data"]["object"]["id"] == id)
        .expect("the cancel event")["id"]
        .as_str()
        .unwrap()
        .to_string()
}

const WAIT: Duration = Duration::from_secs(15);

// ---- tests ----

#[tokio::test]
async fn a_delivery_is_signed_over_the_raw_body_and_carries_the_event_without_deliveries() {
    let mut rx = Receiver::start();
    let app = app_with(&rx, &[]).await;
    let m = app.merchant().await;

    let r = app
        .post(
            &m.test_key,
            "/v1/webhook_endpoints",
            json!({"url": rx.url("/hooks")}),
        )
        .await;
    r.assert_status(201);
    assert_eq!(r.body["object"], "webhook_endpoint");
    assert_eq!(r.body["livemode"], false);
    assert_eq!(r.body["status"], "enabled");
    assert_eq!(r.body["events"], json!([]));
    assert_eq!(r.body["url"], rx.url("/hooks"));
    assert!(r.body["created_at"].is_string());
    let secret = r.body["secret"].as_str().unwrap().to_string();
    assert!(
        secret.starts_with("whsec_") && secret.len() >= 32,
        "{secret}"
    );
    let endpoint_id = r.body["id"].as_str().unwrap().to_string();
    // Shown once: the list does not carry it.
    let list = app.get(&m.test_key, "/v1/webhook_endpoints").await;
    list.assert_status(200);
    assert_eq!(list.body["object"], "list");
    assert_eq!(list.body["data"][0]["id"], endpoint_id.as_str());
    assert!(list.body["data"][0].get("secret").is_none());

    let event_id = paid_event(&app, &m.test_key).await;
    let got = rx.next(WAIT).await;
    assert_eq!(got.path, "/hooks");
    assert_eq!(got.event_id(), event_id);
    let t = verify(&got, &secret);
    // Signed with the service clock's time, and fresh (5-minute tolerance).
    let now = app.now().await.timestamp();
    assert!((now - t).abs() <= 300, "t={t}, clock={now}");
    // A wrong secret does not verify.
    let mut wrong = Hmac::<Sha256>::new_from_slice(b"whsec_wrong").unwrap();
    wrong.update(format!("{t}.{event_id}.").as_bytes());
    wrong.update(&got.body);
    let v1 = got.header("service-signature").split("v1=").nth(1).unwrap();
    assert!(wrong.verify_slice(&hex::decode(v1).unwrap()).is_err());

    let delivered = wait_delivery(&app, &m.test_key, &event_id, &endpoint_id, |d| {
        d["status"] == "delivered"
    })
    .await;
    assert_eq!(delivered["attempts"], 1);
    assert_eq!(delivered["last_response_status"], 200);

    // The body is the listed event without `deliveries`.
    let mut listed = event(&app, &m.test_key, &event_id).await;
    listed.as_object_mut().unwrap().remove("deliveries");
    assert_eq!(got.json(), listed);
    assert_eq!(got.json()["object"], "event");
    assert_eq!(got.json()["type"], "payment_intent.successful");
    assert_eq!(got.json()["data"]["object"]["status"], "successful");
    assert!(got.json()["data"]["object"]["updated_at"].is_string());
}

#[tokio::test]
async fn failed_attempts_are_retried_after_1m_5m_30m_2h_6h_12h_on_the_clock_then_fail() {
    let mut rx = Receiver::start();
    rx.answer("/down", Answer::Status(500));
    let app = app_with(&rx, &[]).await;
    let m = app.merchant().await;
    let (endpoint_id, secret) = endpoint(&app, &m.test_key, &rx.url("/down"), json!([])).await;
    let event_id = paid_event(&app, &m.test_key).await;

    let first = rx.next(WAIT).await;
    let mut last_t = verify(&first, &secret);
    let d = wait_delivery(&app, &m.test_key, &event_id, &endpoint_id, |d| {
        d["attempts"] == 1
    })
    .await;
    assert_eq!(d["status"], "retrying");
    assert_eq!(d["last_response_status"], 500);

    for (n, delay) in [60, 300, 1800, 7200, 21_600, 43_200]
        .into_iter()
        .enumerate()
    {
        // Nothing before the delay is up: the advance dispatches everything
        // due, so no attempt in flight and none recorded means none made.
        app.advance(delay - 1).await;
        assert_eq!(in_flight(&app).await, 0);
        let e = event(&app, &m.test_key, &event_id).await;
        assert_eq!(
            delivery(&e, &endpoint_id).unwrap()["attempts"],
            n as u64 + 1
        );
        assert!(rx.try_next().is_none(), "an attempt came early (retry {n})");
        // Right after it is.
        app.advance(1).await;
        let got = rx.next(WAIT).await;
        assert_eq!(got.event_id(), event_id);
        let t = verify(&got, &secret);
        assert_eq!(
            t - last_t,
            delay,
            "retry {n} counts from the previous attempt"
        );
        last_t = t;
        wait_delivery(&app, &m.test_key, &event_id, &endpoint_id, |d| {
            d["attempts"] == n as u64 + 2
        })
        .await;
    }
    let d = wait_delivery(&app, &m.test_key, &event_id, &endpoint_id, |d| {
        d["status"] == "failed"
    })
    .await;
    assert_eq!(d["attempts"], 7);
    assert_eq!(d["last_response_status"], 500);
    app.advance(2 * 86_400).await;
    assert_eq!(in_flight(&app).await, 0);
    assert!(rx.try_next().is_none());
}

#[tokio::test]
async fn a_retry_that_succeeds_delivers_and_a_redirect_is_a_failure_not_followed() {
    let mut rx = Receiver::start();
    rx.answer("/flaky", Answer::Status(503));
    rx.answer("/moved", Answer::Redirect);
    let app = app_with(&rx, &[]).await;
    let m = app.merchant().await;
    let (flaky, _) = endpoint(&app, &m.test_key, &rx.url("/flaky"), json!([])).await;
    let (moved, _) = endpoint(&app, &m.test_key, &rx.url("/moved"), json!([])).await;
    let event_id = paid_event(&app, &m.test_key).await;
    let mut paths: Vec<String> = vec![rx.next(WAIT).await.path, rx.next(WAIT).await.path];
    paths.sort();
    assert_eq!(paths, vec!["/flaky", "/moved"]);
    let d = wait_delivery(&app, &m.test_key, &event_id, &moved, |d| d["attempts"] == 1).await;
    assert_eq!(d["status"], "retrying");
    assert_eq!(d["last_response_status"], 302);
    wait_delivery(&app, &m.test_key, &event_id, &flaky, |d| d["attempts"] == 1).await;

    rx.answer("/flaky", Answer::Status(204));
    app.advance(60).await;
    let mut paths: Vec<String> = vec![rx.next(WAIT).await.path, rx.next(WAIT).await.path];
    paths.sort();
    assert_eq!(paths, vec!["/flaky", "/moved"]);
    let d = wait_delivery(&app, &m.test_key, &event_id, &flaky, |d| {
        d["status"] == "delivered"
    })
    .await;
    assert_eq!(d["attempts"], 2);
    assert_eq!(d["last_response_status"], 204);
    wait_delivery(&app, &m.test_key, &event_id, &moved, |d| d["attempts"] == 2).await;
    // The redirect was never followed.
    assert!(rx
        .log
        .lock()
        .unwrap()
        .iter()
        .all(|r| r.path != "/redirected"));
}

#[tokio::test]
async fn disabling_drops_waiting_deliveries_and_enabling_does_not_resend() {
    let mut rx = Receiver::start();
    rx.answer("/down", Answer::Status(500));
    let app = app_with(&rx, &[]).await;
    let m = app.merchant().await;
    let (ep, _) = endpoint(&app, &m.test_key, &rx.url("/down"), json!([])).await;
    let first = paid_event(&app, &m.test_key).await;
    rx.next(WAIT).await;
    wait_delivery(&app, &m.test_key, &first, &ep, |d| {
        d["status"] == "retrying"
    })
    .await;

    let r = app
        .post(
            &m.test_key,
            &format!("/v1/webhook_endpoints/{ep}/disable"),
            json!({}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "disabled");
    assert!(r.body.get("secret").is_none());
    let d = delivery(&event(&app, &m.test_key, &first).await, &ep)
        .unwrap()
        .clone();
    assert_eq!(d["status"], "failed");
    assert_eq!(d["attempts"], 1);

    // Nothing is sent while disabled, neither retries nor new events.
    let while_disabled = canceled_event(&app, &m.test_key).await;
    app.advance(3600).await;
    assert_eq!(in_flight(&app).await, 0);
    assert!(rx.try_next().is_none());
    assert!(delivery(&event(&app, &m.test_key, &while_disabled).await, &ep).is_none());

    rx.answer("/down", Answer::Status(200));
    let r = app
        .post(
            &m.test_key,
            &format!("/v1/webhook_endpoints/{ep}/enable"),
            json!({}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["status"], "enabled");
    app.advance(3600).await;
    assert_eq!(in_flight(&app).await, 0);
    assert!(rx.try_next().is_none(), "enabling resent a missed event");

    // New events flow again.
    let after = paid_event(&app, &m.test_key).await;
    assert_eq!(rx.next(WAIT).await.event_id(), after);
    wait_delivery(&app, &m.test_key, &after, &ep, |d| {
        d["status"] == "delivered"
    })
    .await;
    // Missed events can still be resent by hand.
    let r = app
        .post(
            &m.test_key,
            &format!("/v1/events/{while_disabled}/redeliver"),
            json!({}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["queued"], 1);
    assert_eq!(rx.next(WAIT).await.event_id(), while_disabled);
}

#[tokio::test]
async fn deleting_drops_waiting_deliveries_keeps_history_and_leaves_the_list() {
    let mut rx = Receiver::start();
    rx.answer("/down", Answer::Status(500));
    let app = app_with(&rx, &[]).await;
    let m = app.merchant().await;
    let (ep, _) = endpoint(&app, &m.test_key, &rx.url("/down"), json!([])).await;
    let (other, _) = endpoint(&app, &m.test_key, &rx.url("/up"), json!([])).await;
    let e = paid_event(&app, &m.test_key).await;
    rx.next(WAIT).await;
    rx.next(WAIT).await;
    wait_delivery(&app, &m.test_key, &e, &ep, |d| d["status"] == "retrying").await;
    wait_delivery(&app, &m.test_key, &e, &other, |d| {
        d["status"] == "delivered"
    })
    .await;

    let r = app
        .post(
            &m.test_key,
            &format!("/v1/webhook_endpoints/{ep}/delete"),
            json!({}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(
        r.body,
        json!({"id": ep, "object": "webhook_endpoint", "deleted": true, "livemode": false})
    );
    let list = app.get(&m.test_key, "/v1/webhook_endpoints").await;
    let ids: Vec<&str> = list.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![other.as_str()]);
    // History stays: the dropped delivery and the other endpoint's.
    let listed = event(&app, &m.test_key, &e).await;
    assert_eq!(delivery(&listed, &ep).unwrap()["status"], "failed");
    assert_eq!(delivery(&listed, &other).unwrap()["status"], "delivered");
    app.advance(3600).await;
    assert_eq!(in_flight(&app).await, 0);
    assert!(rx.try_next().is_none());
    // Gone for good.
    for action in ["disable", "enable", "delete"] {
        app.post(
            &m.test_key,
            &format!("/v1/webhook_endpoints/{ep}/{action}"),
            json!({}),
        )
        .await
        .assert_error(404, "resource_missing", None);
    }
    // Redelivery skips it.
    let r = app
        .post(&m.test_key, &format!("/v1/events/{e}/redeliver"), json!({}))
        .await;
    assert_eq!(r.body["queued"], 1);
}

#[tokio::test]
async fn redelivery_queues_to_every_matching_enabled_endpoint() {
    let mut rx = Receiver::start();
    let app = app_with(&rx, &[]).await;
    let m = app.merchant().await;
    let (all, _) = endpoint(&app, &m.test_key, &rx.url("/all"), json!([])).await;
    let (paid, _) = endpoint(
        &app,
        &m.test_key,
        &rx.url("/paid"),
        json!(["payment_intent.successful"]),
    )
    .await;
    let (_canceled, _) = endpoint(
        &app,
        &m.test_key,
        &rx.url("/canceled"),
        json!(["payment_intent.canceled"]),
    )
    .await;
    let (off, _) = endpoint(&app, &m.test_key, &rx.url("/off"), json!([])).await;
    app.post(
        &m.test_key,
        &format!("/v1/webhook_endpoints/{off}/disable"),
        json!({}),
    )
    .await
    .assert_status(200);
    let e = paid_event(&app, &m.test_key).await;
    for _ in 0..2 {
        rx.next(WAIT).await;
    }
    wait_delivery(&app, &m.test_key, &e, &all, |d| d["status"] == "delivered").await;
    wait_delivery(&app, &m.test_key, &e, &paid, |d| d["status"] == "delivered").await;

    let r = app
        .post(&m.test_key, &format!("/v1/events/{e}/redeliver"), json!({}))
        .await;
    r.assert_status(200);
    assert_eq!(
        r.body,
        json!({"object": "event_redelivery", "event_id": e, "queued": 2, "livemode": false})
    );
    let mut paths = vec![rx.next(WAIT).await.path, rx.next(WAIT).await.path];
    paths.sort();
    assert_eq!(paths, vec!["/all", "/paid"]);
    let d = wait_delivery(&app, &m.test_key, &e, &all, |d| d["attempts"] == 2).await;
    assert_eq!(d["status"], "delivered");
    let listed = event(&app, &m.test_key, &e).await;
    assert_eq!(listed["deliveries"].as_array().unwrap().len(), 2);
    assert!(delivery(&listed, &off).is_none());
    // Idempotent: the same key replays, nothing is queued again.
    let key = app.next_key();
    let path = format!("/v1/events/{e}/redeliver");
    let first = app.post_with_key(&m.test_key, &path, &key, json!({})).await;
    let again = app.post_with_key(&m.test_key, &path, &key, json!({})).await;
    assert!(again.replayed());
    assert_eq!(first.text, again.text);
    rx.next(WAIT).await;
    rx.next(WAIT).await;
    wait_delivery(&app, &m.test_key, &e, &all, |d| d["attempts"] == 3).await;
    assert!(rx.try_next().is_none());
    // Unknown or malformed ids.
    let missing = uuid::Uuid::new_v4();
    app.post(
        &m.test_key,
        &format!("/v1/events/{missing}/redeliver"),
        json!({}),
    )
    .await
    .assert_error(404, "resource_missing", None);
    app.post(&m.test_key, "/v1/events/nope/redeliver", json!({}))
        .await
        .assert_error(404, "resource_missing", None);
}

#[tokio::test]
async fn endpoint_urls_follow_the_rules_and_a_mode_holds_at_most_ten() {
    let rx = Receiver::start();
    let app = app_with(&rx, &[]).await;
    let m = app.live_merchant().await;
    for url in [
        "http://hooks.kobo-test.ng/x",
        "https://hooks.kobo-test.ng:8080/x",
        "https://127.0.0.1/x",
        "https://[::1]:8443/x",
        "https://10.0.0.8/x",
        "https://localhost/x",
        "https://localhost:8443/x",
        "https://intranet/x",
        "https://printer.local/x",
        "https://user:pw@hooks.kobo-test.ng/x",
        "not a url",
    ] {
        app.post(&m.test_key, "/v1/webhook_endpoints", json!({"url": url}))
            .await
            .assert_error(400, "parameter_invalid", Some("url"));
    }
    app.post(&m.test_key, "/v1/webhook_endpoints", json!({}))
        .await
        .assert_error(400, "parameter_missing", Some("url"));
    app.post(
        &m.test_key,
        "/v1/webhook_endpoints",
        json!({"url": rx.url("/x"), "events": ["payment_intent.paid"]}),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("events"));
    app.post(
        &m.test_key,
        "/v1/webhook_endpoints",
        json!({"url": rx.url("/x"), "colour": "red"}),
    )
    .await
    .assert_error(400, "parameter_unknown", Some("colour"));
    // Port 443 is allowed too.
    endpoint(&app, &m.test_key, "https://hooks.kobo-test.ng/x", json!([])).await;

    let mut ids = Vec::new();
    for n in 1..10 {
        ids.push(
            endpoint(&app, &m.test_key, &rx.url(&format!("/{n}")), json!([]))
                .await
                .0,
        );
    }
    let r = app
        .post(
            &m.test_key,
            "/v1/webhook_endpoints",
            json!({"url": rx.url("/11")}),
        )
        .await;
    r.assert_error(400, "too_many_endpoints", None);
    // Disabled ones count; the live mode has its own ten.
    app.post(
        &m.test_key,
        &format!("/v1/webhook_endpoints/{}/disable", ids[0]),
        json!({}),
    )
    .await
    .assert_status(200);
    app.post(
        &m.test_key,
        "/v1/webhook_endpoints",
        json!({"url": rx.url("/11")}),
    )
    .await
    .assert_error(400, "too_many_endpoints", None);
    let (live, _) = endpoint(&app, &m.live_key, &rx.url("/live"), json!([])).await;
    let r = app.get(&m.live_key, "/v1/webhook_endpoints").await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["data"][0]["livemode"], true);
    let r = app.get(&m.test_key, "/v1/webhook_endpoints").await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 10);
    // A deleted one frees its place.
    app.post(
        &m.test_key,
        &format!("/v1/webhook_endpoints/{}/delete", ids[0]),
        json!({}),
    )
    .await
    .assert_status(200);
    endpoint(&app, &m.test_key, &rx.url("/11"), json!([])).await;
    // Modes and merchants do not see each other's endpoints.
    app.post(
        &m.test_key,
        &format!("/v1/webhook_endpoints/{live}/disable"),
        json!({}),
    )
    .await
    .assert_error(404, "resource_missing", None);
    let other: Merchant = app.merchant().await;
    app.post(
        &other.test_key,
        &format!("/v1/webhook_endpoints/{}/disable", ids[1]),
        json!({}),
    )
    .await
    .assert_error(404, "resource_missing", None);
    assert_eq!(
        app.get(&other.test_key, "/v1/webhook_endpoints").await.body["data"],
        json!([])
    );
    app.get(&m.test_key, "/v1/webhook_endpoints?limit=5")
        .await
        .assert_error(400, "parameter_unknown", Some("limit"));
}

#[tokio::test]
async fn the_events_filter_limits_what_an_endpoint_receives_and_what_is_listed() {
    let mut rx = Receiver::start();
    let app = app_with(&rx, &[]).await;
    let m = app.merchant().await;
    let (only_canceled, _) = endpoint(
        &app,
        &m.test_key,
        &rx.url("/canceled"),
        json!(["payment_intent.canceled"]),
    )
    .await;
    let (everything, _) = endpoint(&app, &m.test_key, &rx.url("/all"), json!([])).await;
    let paid = paid_event(&app, &m.test_key).await;
    let canceled = canceled_event(&app, &m.test_key).await;
    let mut got: Vec<(String, String)> = Vec::new();
    for _ in 0..3 {
        let r = rx.next(WAIT).await;
        got.push((r.path.clone(), r.event_id()));
    }
    got.sort();
    let mut want = vec![
        ("/all".to_string(), paid.clone()),
        ("/all".to_string(), canceled.clone()),
        ("/canceled".to_string(), canceled.clone()),
    ];
    want.sort();
    assert_eq!(got, want);
    wait_delivery(&app, &m.test_key, &canceled, &only_canceled, |d| {
        d["status"] == "delivered"
    })
    .await;
    wait_delivery(&app, &m.test_key, &canceled, &everything, |d| {
        d["status"] == "delivered"
    })
    .await;
    assert!(delivery(&event(&app, &m.test_key, &paid).await, &only_canceled).is_none());
    assert!(rx.try_next().is_none());

    // GET /v1/events: newest first, by type, paged.
    let all = events(&app, &m.test_key).await;
    assert_eq!(all[0]["id"], canceled.as_str());
    assert_eq!(all[1]["id"], paid.as_str());
    let r = app
        .get(&m.test_key, "/v1/events?type=payment_intent.canceled")
        .await;
    r.assert_status(200);
    let ids: Vec<&str> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![canceled.as_str()]);
    let r = app.get(&m.test_key, "/v1/events?limit=1").await;
    assert_eq!(r.body["has_more"], true);
    assert_eq!(r.body["data"][0]["id"], canceled.as_str());
    let r = app
        .get(
            &m.test_key,
            &format!("/v1/events?limit=1&starting_after={canceled}"),
        )
        .await;
    assert_eq!(r.body["data"][0]["id"], paid.as_str());
    assert_eq!(r.body["has_more"], false);
    app.get(&m.test_key, "/v1/events?type=payment.done")
        .await
        .assert_error(400, "parameter_invalid", Some("type"));
    app.get(
        &m.test_key,
        &format!("/v1/events?starting_after={}", uuid::Uuid::new_v4()),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("starting_after"));
    // Other merchants and the live mode see none of it.
    let other = app.merchant().await;
    assert_eq!(
        app.get(&other.test_key, "/v1/events").await.body["data"],
        json!([])
    );
    assert_eq!(
        app.get(&m.live_key, "/v1/events").await.body["data"],
        json!([])
    );
    app.post(
        &m.live_key,
        &format!("/v1/events/{paid}/redeliver"),
        json!({}),
    )
    .await
    .assert_error(404, "resource_missing", None);
    app.post(
        &other.test_key,
        &format!("/v1/events/{paid}/redeliver"),
        json!({}),
    )
    .await
    .assert_error(404, "resource_missing", None);
}

#[tokio::test]
async fn deliveries_never_connect_to_a_private_address_without_an_override() {
    let mut rx = Receiver::start();
    // `sneaky.kobo-test.ng` "resolves" to the receiver's loopback address
    // through DNS (the test seam), not through --webhook-resolve: the
    // public-address filter must refuse it before connecting.
    let fake = format!("sneaky.kobo-test.ng={}", rx.ip);
    let app = app_with(&rx, &["--webhook-dns-fake", &fake]).await;
    let m = app.merchant().await;
    let (sneaky, _) = endpoint(
        &app,
        &m.test_key,
        "https://sneaky.kobo-test.ng:8443/x",
        json!([]),
    )
    .await;
    let (control, _) = endpoint(&app, &m.test_key, &rx.url("/control"), json!([])).await;
    let e = paid_event(&app, &m.test_key).await;
    // The control endpoint, on the same receiver through the override, works.
    let got = rx.next(WAIT).await;
    assert_eq!(got.path, "/control");
    wait_delivery(&app, &m.test_key, &e, &control, |d| {
        d["status"] == "delivered"
    })
    .await;
    let d = wait_delivery(&app, &m.test_key, &e, &sneaky, |d| d["attempts"] == 1).await;
    assert_eq!(d["status"], "retrying");
    assert_eq!(d["last_response_status"], Value::Null);
    // One connection in all: the control's. The refused one never connected.
    assert_eq!(rx.connections.load(Ordering::SeqCst), 1);
    app.advance(60).await;
    wait_delivery(&app, &m.test_key, &e, &sneaky, |d| d["attempts"] == 2).await;
    assert_eq!(rx.connections.load(Ordering::SeqCst), 1);
    assert!(rx.try_next().is_none());
}

#[tokio::test]
async fn a_hanging_endpoint_does_not_hold_back_another_and_times_out_after_10_seconds() {
    let rx = Receiver::start();
    rx.answer("/slow", Answer::Hang);
    let app = app_with(&rx, &[]).await;
    let m = app.merchant().await;
    let (slow, _) = endpoint(&app, &m.test_key, &rx.url("/slow"), json!([])).await;
    let (fast, _) = endpoint(&app, &m.test_key, &rx.url("/fast"), json!([])).await;
    let started = Instant::now();
    let mut ids = Vec::new();
    for _ in 0..12 {
        ids.push(paid_event(&app, &m.test_key).await);
    }
    // Every fast delivery arrives while the slow ones hang.
    for id in &ids {
        wait_delivery(&app, &m.test_key, id, &fast, |d| d["status"] == "delivered").await;
    }
    // The slow endpoint holds 8 attempts open at once, never more.
    let deadline = Instant::now() + WAIT;
    while rx.open.lock().unwrap().get("/slow").map_or(0, |o| o.1) < 8 {
        assert!(
            Instant::now() < deadline,
            "the slow endpoint never got 8 attempts"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Each fails after 10 s with no status, and is retried later.
    let d = loop {
        let all = events(&app, &m.test_key).await;
        if let Some(d) = all
            .iter()
            .filter_map(|e| delivery(e, &slow))
            .find(|d| d["attempts"] == 1)
        {
            break d.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no attempt timed out"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(started.elapsed() >= Duration::from_secs(10));
    assert_eq!(d["status"], "retrying");
    assert_eq!(d["last_response_status"], Value::Null);
    // The first 8 were all it got until they timed out.
    let slow_at: Vec<Instant> = rx
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.path == "/slow")
        .map(|r| r.at)
        .collect();
    let first = slow_at[0];
    let early = slow_at
        .iter()
        .filter(|t| **t < first + Duration::from_secs(9))
        .count();
    assert_eq!(early, 8, "per-endpoint concurrency bound");
}

#[tokio::test]
async fn the_stream_announces_new_events_and_resumes_after_last_event_id() {
    let rx = Receiver::start();
    let app = app_with(&rx, &[]).await;
    let m = app.merchant().await;
    let other = app.merchant().await;
    let open = |last: Option<String>| {
        let mut req = app
            .client
            .get(format!("{}/v1/stream", app.base))
            .bearer_auth(&m.test_key)
            .timeout(Duration::from_secs(60));
        if let Some(l) = last {
            req = req.header("Last-Event-ID", l);
        }
        req.send()
    };
    let res = app
        .client
        .get(format!("{}/v1/stream", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 401);

    let mut res = open(None).await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let mut buf = String::new();
    read_until(&mut res, &mut buf, ": connected").await;
    // Another merchant's event is not announced here; ours is.
    app.paid_intent(&other.test_key, 10_000).await;
    let first = paid_event(&app, &m.test_key).await;
    let frame = read_frame(&mut res, &mut buf).await;
    assert_eq!(frame["event"], "payment_intent.successful");
    let data: Value = serde_json::from_str(&frame["data"]).unwrap();
    assert_eq!(data["id"], first.as_str());
    assert_eq!(data["object"], "event");
    let first_pos = frame["id"].clone();
    drop(res);

    // Missed while away: replayed after Last-Event-ID, in order.
    let second = canceled_event(&app, &m.test_key).await;
    let third = paid_event(&app, &m.test_key).await;
    let mut res = open(Some(first_pos.clone())).await.unwrap();
    let mut buf = String::new();
    let a = read_frame(&mut res, &mut buf).await;
    let b = read_frame(&mut res, &mut buf).await;
    let ids: Vec<Value> = [a, b]
        .iter()
        .map(|f| serde_json::from_str::<Value>(&f["data"]).unwrap()["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!(second), json!(third)]);
    let res = app
        .client
        .get(format!("{}/v1/stream", app.base))
        .bearer_auth(&m.test_key)
        .header("Last-Event-ID", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
    // A position from the future does not hide what comes next.
    let mut res = open(Some("99999999999".into())).await.unwrap();
    let mut buf = String::new();
    read_until(&mut res, &mut buf, ": connected").await;
    let fourth = canceled_event(&app, &m.test_key).await;
    let frame = read_frame(&mut res, &mut buf).await;
    let data: Value = serde_json::from_str(&frame["data"]).unwrap();
    assert_eq!(data["id"], fourth.as_str());
}

/// A stream whose client went away gives its slot back at once, not at the
/// next heartbeat write 15 s later: a client that reconnects a few times
/// (EventSource retries every 3 s) was otherwise answered 503 `overloaded`
/// by its own dead connections (found by the schemathesis run).
#[tokio::test]
async fn a_stream_closed_by_its_client_frees_its_slot_at_once() {
    let app = spawn_app_with(&[]).await;
    let m = app.merchant().await;
    let open = || {
        app.client
            .get(format!("{}/v1/stream", app.base))
            .bearer_auth(&m.test_key)
            .timeout(Duration::from_secs(60))
            .send()
    };
    let streams_open = || async {
        app.admin_get("/admin/v1/actors").await.body["webhooks"]["streams_open"]
            .as_u64()
            .unwrap()
    };
    // Twice the per-merchant bound, one after the other, each dropped
    // after its opening frame.
    for n in 0..32 {
        let mut res = open().await.unwrap();
        assert_eq!(res.status().as_u16(), 200, "stream {n}");
        let mut buf = String::new();
        read_until(&mut res, &mut buf, ": connected").await;
        drop(res);
        let deadline = Instant::now() + Duration::from_secs(5);
        while streams_open().await > 0 {
            assert!(
                Instant::now() < deadline,
                "stream {n}: its slot is still held after its client left"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn read_until(res: &mut reqwest::Response, buf: &mut String, needle: &str) {
    let deadline = Instant::now() + WAIT;
    while !buf.contains(needle) {
        let left = deadline.saturating_duration_since(Instant::now());
        let chunk = tokio::time::timeout(left, res.chunk())
            .await
            .expect("the stream sent nothing in time")
            .unwrap()
            .expect("the stream ended");
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

/// The next `id:`/`event:`/`data:` frame (comments skipped).
async fn read_frame(res: &mut reqwest::Response, buf: &mut String) -> HashMap<String, String> {
    loop {
        if let Some(end) = buf.find("\n\n") {
            let block: String = buf[..end].to_string();
            buf.drain(..end + 2);
            let mut frame = HashMap::new();
            for line in block.lines() {
                if let Some((k, v)) = line.split_once(": ") {
                    if !k.is_empty() {
                        frame.insert(k.to_string(), v.to_string());
                    }
                }
            }
            if frame.contains_key("data") {
                return frame;
            }
            continue;
        }
        let before = buf.len();
        read_until(res, buf, "\n\n").await;
        assert!(buf.len() > before);
    }
}

#[tokio::test]
async fn events_queued_or_in_flight_at_a_crash_are_delivered_after_restart() {
    let rx = Receiver::start();
    let mut app = app_with(&rx, &[]).await;
    let m = app.merchant().await;
    let (ok, _) = endpoint(&app, &m.test_key, &rx.url("/ok"), json!([])).await;
    let (down, _) = endpoint(&app, &m.test_key, &rx.url("/down"), json!([])).await;
    rx.answer("/down", Answer::Status(500));
    // Deliveries to /ok hang until the crash, so some are in flight then.
    rx.answer("/ok", Answer::Hang);
    let mut paid = Vec::new();
    for _ in 0..20 {
        paid.push(
            app.paid_intent(&m.test_key, 30_000).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    // Wait until attempts are out (in flight to /ok, failed to /down).
    let deadline = Instant::now() + WAIT;
    while rx.log.lock().unwrap().len() < 10 {
        assert!(Instant::now() < deadline, "no attempts");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before: Vec<Value> = events(&app, &m.test_key).await;
    assert_eq!(before.len(), 20);
    app.kill();

    rx.answer("/ok", Answer::Status(200));
    rx.answer("/down", Answer::Status(200));
    app.start(&[]);
    // Deliveries due before the crash go at once; the failed ones at their
    // retry time.
    app.advance(61).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        let all = events(&app, &m.test_key).await;
        let done = all.iter().all(|e| {
            [&ok, &down]
                .iter()
                .all(|ep| delivery(e, ep).is_some_and(|d| d["status"] == "delivered"))
        });
        if done {
            break all;
        }
        assert!(Instant::now() < deadline, "not all delivered after restart");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // History intact: the same events, same bodies.
    assert_eq!(after.len(), before.len());
    for (a, b) in after.iter().zip(&before) {
        assert_eq!(a["id"], b["id"]);
        assert_eq!(a["data"], b["data"]);
    }
    // Every event reached both endpoints at least once.
    let got: HashSet<(String, String)> = rx
        .log
        .lock()
        .unwrap()
        .iter()
        .map(|r| (r.path.clone(), r.event_id()))
        .collect();
    for e in &after {
        let id = e["id"].as_str().unwrap().to_string();
        assert!(
            got.contains(&("/ok".to_string(), id.clone())),
            "{id} never reached /ok"
        );
        assert!(
            got.contains(&("/down".to_string(), id.clone())),
            "{id} never reached /down"
        );
    }
    let mut intents: Vec<String> = after
        .iter()
        .map(|e| e["data"]["object"]["id"].as_str().unwrap().to_string())
        .collect();
    intents.sort();
    paid.sort();
    assert_eq!(intents, paid);
}

// ---- benchmark (run by scripts/webhook_bench.sh; ignored by `cargo test`) ----

/// Deliveries per second to a fast local HTTPS receiver with 10 endpoints,
/// then with one of the 10 never answering (each of its attempts waits the
/// full 10 s). Every delivery is first made to fail once (503), then the
/// clock is advanced past the first retry so all of them come due at once:
/// the time from that advance to the last reply is pure delivery work.
#[tokio::test]
#[ignore]
async fn webhook_bench() {
    let events_n: usize = std::env::var("WEBHOOK_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    for hanging in [false, true] {
        let rx = Receiver::start();
        let mut flags = rx.flags();
        for n in 0..10 {
            flags.push("--webhook-resolve".into());
            flags.push(format!("h{n}.kobo-test.ng={}", rx.ip));
        }
        let app = spawn_app_with(&flags).await;
        let m = app.merchant().await;
        for n in 0..10 {
            let path = format!("/e{n}");
            if hanging && n == 9 {
                rx.answer(&path, Answer::Hang);
            } else {
                rx.answer(&path, Answer::Status(503));
            }
            endpoint(
                &app,
                &m.test_key,
                &format!("https://h{n}.kobo-test.ng:8443{path}"),
                json!([]),
            )
            .await;
        }
        let fast = if hanging { 9 } else { 10 };
        use futures_util::StreamExt;
        futures_util::stream::iter(0..events_n)
            .map(|_| app.paid_intent(&m.test_key, 30_000))
            .buffer_unordered(16)
            .collect::<Vec<_>>()
            .await;
        // Every fast endpoint's first attempt has failed.
        let want = (events_n * fast) as u64;
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let r = app.admin_get("/admin/v1/actors").await;
            if r.body["webhooks"]["failed_attempts"].as_u64().unwrap() >= want {
                break;
            }
            assert!(Instant::now() < deadline, "first attempts did not finish");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for n in 0..fast {
            rx.answer(&format!("/e{n}"), Answer::Status(200));
        }
        let seen = rx.log.lock().unwrap().len();
        let delivered_before = app.admin_get("/admin/v1/actors").await.body["webhooks"]
            ["delivered"]
            .as_u64()
            .unwrap();
        let started = Instant::now();
        app.advance(61).await;
        // Received: replies sent by the receiver to the fast endpoints.
        let received_at = loop {
            let n = rx.log.lock().unwrap()[seen..]
                .iter()
                .filter(|r| r.path != "/e9" || !hanging)
                .count();
            if n as u64 >= want {
                break started.elapsed();
            }
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "deliveries stalled"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        // Recorded: the outcomes committed by kobo.
        let recorded_at = loop {
            let d = app.admin_get("/admin/v1/actors").await.body["webhooks"]["delivered"]
                .as_u64()
                .unwrap();
            if d - delivered_before >= want {
                break started.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        println!(
            "webhook_bench scenario={} endpoints=10 fast_endpoints={fast} deliveries={want} received_s={:.3} received_per_s={:.0} recorded_s={:.3} recorded_per_s={:.0}",
            if hanging { "one_hanging" } else { "all_fast" },
            received_at.as_secs_f64(),
            want as f64 / received_at.as_secs_f64(),
            recorded_at.as_secs_f64(),
            want as f64 / recorded_at.as_secs_f64(),
        );
    }
}

/// The health report's queue of one endpoint, once `done` holds for it.
async fn endpoint_queue(app: &TestApp, endpoint: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = app.admin_get("/admin/v1/actors").await;
        r.assert_status(200);
        let found = r.body["webhook_endpoints"]["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["endpoint"] == endpoint)
            .cloned();
        if let Some(q) = found.filter(|q| done(q)) {
            return q;
        }
        assert!(Instant::now() < deadline, "{endpoint}: {}", r.body);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_health_report_shows_each_endpoints_deliveries_waiting_in_flight_and_failing() {
    let rx = Receiver::start();
    rx.answer("/down", Answer::Status(500));
    rx.answer("/slow", Answer::Hang);
    let app = app_with(&rx, &[]).await;
    let m = app.merchant().await;
    let only = json!(["payment_intent.successful"]);
    let (down, _) = endpoint(&app, &m.test_key, &rx.url("/down"), only.clone()).await;
    let (slow, _) = endpoint(&app, &m.test_key, &rx.url("/slow"), only).await;
    let event_id = paid_event(&app, &m.test_key).await;
    wait_delivery(&app, &m.test_key, &event_id, &down, |d| d["attempts"] == 1).await;
    // The failed delivery waits for its retry; the hanging one is in flight
    // (its attempt times out after 10 s, long after this look).
    let q = endpoint_queue(&app, &down, |q| q["failing"] == 1).await;
    assert_eq!(
        (q["waiting"].as_u64(), q["in_flight"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(q["url"], rx.url("/down"));
    assert_eq!(q["merchant"], m.id);
    assert_eq!(q["livemode"], false);
    let q = endpoint_queue(&app, &slow, |q| q["in_flight"] == 1).await;
    assert_eq!(
        (q["waiting"].as_u64(), q["failing"].as_u64()),
        (Some(0), Some(0))
    );
    // The sums are in the metrics.
    let metrics = app.get("x", "/metrics").await;
    assert!(metrics
        .text
        .contains("kobo_webhook_queue{state=\"failing\"}"));
}
