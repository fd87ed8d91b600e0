//! `kobo load`'s webhook receiver: an HTTPS server (hyper over rustls) with
//! a throw-away certificate, where the server under load delivers real
//! webhooks. It checks each delivery's signature with the endpoint's secret
//! (HMAC-SHA256 over `<t>.<event id>.<raw body>`, docs/webhooks.md, checked
//! here with the `hmac` crate, not with kobo's own code), counts them, and
//! wakes the `webhook` operation waiting for its payment's event.
//!
//! Webhook URLs must be HTTPS on port 443 or 8443 with a public-looking
//! host name, so the server under load is started with
//! `--webhook-resolve HOST=IP --webhook-ca DIR/ca.pem`, where DIR was
//! written by `kobo load --write-webhook-tls DIR`.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result};
use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use serde::Serialize;
use sha2::Sha256;
use tokio::sync::oneshot;

/// The receiver's host name unless `--webhook-host` says otherwise.
pub const DEFAULT_HOST: &str = "hooks.kobo-load.ng";

/// Writes `ca.pem` (for the server's `--webhook-ca`), `cert.pem` and
/// `key.pem` (the receiver's, for `host`) into `dir`.
pub fn write_tls(dir: &Path, host: &str) -> Result<()> {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "kobo load webhook CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(vec![host.to_string()])?;
    leaf.distinguished_name.push(DnType::CommonName, host);
    let cert = leaf.signed_by(&key, &ca)?;
    let ca_cert: &rcgen::Certificate = ca.as_ref();
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join("ca.pem"), ca_cert.pem())?;
    std::fs::write(dir.join("cert.pem"), cert.pem())?;
    std::fs::write(dir.join("key.pem"), key.serialize_pem())?;
    Ok(())
}

/// The deliveries the receiver got (in the report).
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct Deliveries {
    pub received: u64,
    pub verified: u64,
    pub bad_signature: u64,
    /// Distinct event ids among the verified deliveries.
    pub events: u64,
}

#[derive(Default)]
struct State {
    counts: Deliveries,
    seen: HashSet<String>,
    /// Payment intent id -> the operation waiting for its event (which
    /// waits before paying, so the event cannot come first).
    waiting: HashMap<String, oneshot::Sender<()>>,
}

pub struct Receiver {
    host: String,
    port: u16,
    secret: OnceLock<String>,
    state: Mutex<State>,
}

impl Receiver {
    /// Listens on `listen` with the certificate and key in `tls_dir`.
    pub async fn start(listen: SocketAddr, tls_dir: &Path, host: &str) -> Result<Arc<Receiver>> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let cert = CertificateDer::from_pem_file(tls_dir.join("cert.pem"))
            .with_context(|| format!("reading {}/cert.pem", tls_dir.display()))?;
        let key = PrivateKeyDer::from_pem_file(tls_dir.join("key.pem"))
            .with_context(|| format!("reading {}/key.pem", tls_dir.display()))?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("--webhook-listen {listen}"))?;
        let receiver = Arc::new(Receiver {
            host: host.to_string(),
            port: listener.local_addr()?.port(),
            secret: OnceLock::new(),
            state: Mutex::default(),
        });
        let r = receiver.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, r) = (acceptor.clone(), r.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let r = r.clone();
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body.collect().await.map(|b| b.to_bytes());
                            let header = |n: &str| {
                                parts
                                    .headers
                                    .get(n)
                                    .and_then(|v| v.to_str().ok())
                                    .unwrap_or("")
                                    .to_string()
                            };
                            if let Ok(body) = body {
                                r.delivery(
                                    &header("service-signature"),
                                    &header("service-event-id"),
                                    &body,
                                );
                            }
                            Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Ok(receiver)
    }

    /// The endpoint URL to register.
    pub fn url(&self) -> String {
        format!("https://{}:{}/kobo-load", self.host, self.port)
    }

    pub fn set_secret(&self, secret: &str) {
        let _ = self.secret.set(secret.to_string());
    }

    /// Resolves when the `payment_intent.successful` event of `intent`
    /// arrives, verified; called before the intent is paid.
    pub fn expect(&self, intent: &str) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.state.lock().waiting.insert(intent.to_string(), tx);
        rx
    }

    pub fn forget(&self, intent: &str) {
        self.state.lock().waiting.remove(intent);
    }

    pub fn deliveries(&self) -> Deliveries {
        self.state.lock().counts.clone()
    }

    fn delivery(&self, signature: &str, event_id: &str, body: &[u8]) {
        let event: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        let ok = self
            .secret
            .get()
            .is_some_and(|secret| verify(secret, signature, event_id, body));
        let mut s = self.state.lock();
        s.counts.received += 1;
        if !ok {
            s.counts.bad_signature += 1;
            return;
        }
        s.counts.verified += 1;
        if !s.seen.insert(event_id.to_string()) {
            return;
        }
        s.counts.events += 1;
        if event["type"] == "payment_intent.successful" {
            if let Some(intent) = event["data"]["object"]["id"].as_str() {
                if let Some(tx) = s.waiting.remove(intent) {
                    let _ = tx.send(());
                }
            }
        }
    }
}

/// Whether `header` (`t=<unix seconds>,v1=<hex>`) signs `body` of event
/// `event_id` with `secret`.
pub fn verify(secret: &str, header: &str, event_id: &str, body: &[u8]) -> bool {
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", x)) => t = Some(x),
            Some(("v1", x)) => v1 = hex::decode(x).ok(),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(t.as_bytes());
    mac.update(b".");
    mac.update(event_id.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.verify_slice(&v1).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_made_by_kobo_verifies_and_a_changed_body_or_secret_does_not() {
        let id = uuid::Uuid::new_v4();
        let body = br#"{"id":"x","type":"payment_intent.successful"}"#;
        let secret = "whsec_abc";
        let header = kobo_actors::webhook::signature_header(secret, 1_700_000_000, id, body);
        let id = id.to_string();
        assert!(verify(secret, &header, &id, body));
        assert!(!verify("whsec_abd", &header, &id, body));
        assert!(!verify(secret, &header, &id, b"{}"));
        assert!(!verify(secret, "t=1", &id, body));
    }
}
