//! The dispatcher actors: each makes the HTTPS attempts it is handed, many
//! at once, and reports every outcome to the supervisor. The supervisor
//! decides what to attempt (and bounds how many per endpoint and in all);
//! a dispatcher only signs, sends and classifies.
//!
//! The HTTP client: rustls with the system roots plus `--webhook-ca`; no
//! proxy; no redirects (a 3xx is a failed attempt); a 10 s time-out for the
//! whole attempt; and a resolver that refuses loopback, private, link-local,
//! multicast and other non-public addresses after DNS resolution. Hosts
//! named by `--webhook-resolve` bypass DNS and that filter (the contract's
//! test plumbing). IP-literal URLs are refused before any connection.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use actix::prelude::*;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::clock::Clock;

use super::{signature_header, Msg, ATTEMPT_TIMEOUT};

/// Attempts in flight to one endpoint at most (the supervisor's bound, and
/// the idle connections kept per host).
pub const PER_ENDPOINT_IN_FLIGHT_MAX: usize = 8;

/// How the delivery client is set up (from `kobo serve` flags).
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    /// `--webhook-resolve HOST=IP`: connect to IP for HOST, no DNS, no
    /// address filter.
    pub resolve: Vec<(String, IpAddr)>,
    /// `--webhook-ca FILE`: extra PEM roots.
    pub extra_roots_pem: Option<Vec<u8>>,
    /// Test seam: answer DNS for HOST with IP; unlike `resolve`, the answer
    /// still goes through the public-address filter.
    pub fake_dns: Vec<(String, IpAddr)>,
}

/// Whether deliveries may connect to `ip`: only globally routable unicast
/// addresses.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || o[0] == 0                                   // "this network"
        || (o[0] == 100 && (64..128).contains(&o[1]))   // shared (CGNAT)
        || (o[0] == 192 && o[1] == 0 && o[2] == 0)      // IETF protocol
        || (o[0] == 192 && o[1] == 88 && o[2] == 99)    // 6to4 relay anycast
        || (o[0] == 198 && (18..20).contains(&o[1]))    // benchmarking
        || o[0] >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) embed an IPv4 address.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        return is_public_v4(v4);
    }
    if s[0] == 0x2002 {
        let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        return is_public_v4(v4);
    }
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        // local-use NAT64 (64:ff9b:1::/48) and the rest of 64:ff9b::/32
        // (unallocated); the well-known /96 was checked above
        || (s[0] == 0x64 && s[1] == 0xff9b)
        || s[0..4] == [0x100, 0, 0, 0] // discard-only (100::/64)
        || (s[0] == 0x2001 && s[1] < 0x200) // IETF protocol assignments (2001::/23), Teredo included
        || (s[0] & 0xfe00) == 0xfc00  // unique local
        || (s[0] & 0xffc0) == 0xfe80  // link-local
        || (s[0] & 0xffc0) == 0xfec0  // site-local (deprecated)
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || s[0..5] == [0, 0, 0, 0, 0]) // IPv4-compatible and other ::/80
}

/// DNS through the system resolver, keeping only public addresses.
struct PublicOnly {
    fake: Vec<(String, IpAddr)>,
}

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_ascii_lowercase();
        let fake: Vec<IpAddr> = self
            .fake
            .iter()
            .filter(|(h, _)| *h == host)
            .map(|(_, ip)| *ip)
            .collect();
        Box::pin(async move {
            let found: Vec<SocketAddr> = if fake.is_empty() {
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect()
            } else {
                fake.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect()
            };
            let allowed: Vec<SocketAddr> =
                found.into_iter().filter(|a| is_public(a.ip())).collect();
            if allowed.is_empty() {
                return Err(format!("{host} resolves to no public address").into());
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The delivery client.
pub fn build_client(cfg: &ClientConfig) -> Result<reqwest::Client, String> {
    let mut b = reqwest::Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .connect_timeout(ATTEMPT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .https_only(true)
        .user_agent(concat!("kobo-webhooks/", env!("CARGO_PKG_VERSION")))
        .pool_max_idle_per_host(PER_ENDPOINT_IN_FLIGHT_MAX)
        .pool_idle_timeout(std::time::Duration::from_secs(60))
        .dns_resolver(Arc::new(PublicOnly {
            fake: cfg.fake_dns.clone(),
        }));
    for (host, ip) in &cfg.resolve {
        b = b.resolve(host, SocketAddr::new(*ip, 0));
    }
    if let Some(pem) = &cfg.extra_roots_pem {
        let certs =
            reqwest::Certificate::from_pem_bundle(pem).map_err(|e| format!("--webhook-ca: {e}"))?;
        if certs.is_empty() {
            return Err("--webhook-ca holds no PEM certificate".into());
        }
        b = b.tls_certs_merge(certs);
    }
    b.build()
        .map_err(|e| format!("the webhook HTTP client: {e}"))
}

/// One attempt to make.
#[derive(Debug, Clone)]
pub struct Job {
    pub event: Uuid,
    pub endpoint: Uuid,
    pub url: String,
    pub secret: String,
    pub body: Bytes,
}

/// What an attempt came to.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub event: Uuid,
    pub endpoint: Uuid,
    /// When the attempt was signed (the service clock).
    pub at: DateTime<Utc>,
    pub status: Option<u16>,
    pub error: Option<String>,
    /// Wall time the attempt took, in milliseconds.
    pub duration_ms: u64,
}

impl Outcome {
    pub fn succeeded(&self) -> bool {
        self.error.is_none() && self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// Longest reply body read (then the connection is dropped).
const REPLY_READ_MAX: usize = 64 * 1024;

/// Signs and sends one attempt; never panics, never outlives the time-out.
pub async fn attempt(client: &reqwest::Client, clock: &Clock, job: &Job) -> Outcome {
    let at = clock.now();
    let started = std::time::Instant::now();
    let mut outcome = made(client, job, at).await;
    outcome.duration_ms = started.elapsed().as_millis() as u64;
    outcome
}

/// The attempt itself (its duration is measured around it).
async fn made(client: &reqwest::Client, job: &Job, at: DateTime<Utc>) -> Outcome {
    let t = at.timestamp();
    let mut outcome = Outcome {
        event: job.event,
        endpoint: job.endpoint,
        at,
        status: None,
        error: None,
        duration_ms: 0,
    };
    // Defence in depth: the URL rules refuse IP literals at creation.
    match url::Url::parse(&job.url)
        .ok()
        .and_then(|u| u.host().map(|h| h.to_owned()))
    {
        Some(url::Host::Domain(_)) => {}
        _ => {
            outcome.error = Some("the URL does not name a host".into());
            return outcome;
        }
    }
    let request = client
        .post(&job.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("Service-Event-Id", job.event.to_string())
        .header("Service-Timestamp", t.to_string())
        .header(
            "Service-Signature",
            signature_header(&job.secret, t, job.event, &job.body),
        )
        .body(job.body.clone());
    let work = async {
        match request.send().await {
            Ok(mut res) => {
                outcome.status = Some(res.status().as_u16());
                // Read (a bounded part of) the reply so the connection can
                // be reused; what it says does not matter.
                let mut read = 0usize;
                while let Ok(Some(chunk)) = res.chunk().await {
                    read += chunk.len();
                    if read > REPLY_READ_MAX {
                        break;
                    }
                }
            }
            Err(e) => outcome.error = Some(describe(&e)),
        }
    };
    // The client's time-out covers the whole request; this one also covers
    // reading the reply.
    if tokio::time::timeout(ATTEMPT_TIMEOUT, work).await.is_err() && outcome.status.is_none() {
        outcome.error = Some("timed out".into());
    }
    outcome
}

fn describe(e: &reqwest::Error) -> String {
    use std::error::Error;
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_redirect() {
        "redirected"
    } else {
        "request failed"
    };
    let mut detail = String::new();
    let mut source = e.source();
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    if detail.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}: {detail}")
    }
}

/// A dispatcher actor: runs its attempts concurrently (the supervisor bounds
/// how many) and reports each outcome.
pub struct Dispatcher {
    client: reqwest::Client,
    clock: Clock,
    report: mpsc::UnboundedSender<Msg>,
}

impl Dispatcher {
    pub(crate) fn new(
        client: reqwest::Client,
        clock: Clock,
        report: mpsc::UnboundedSender<Msg>,
    ) -> Self {
        Dispatcher {
            client,
            clock,
            report,
        }
    }
}

impl Actor for Dispatcher {
    type Context = Context<Self>;
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Attempt(pub Job);

impl Handler<Attempt> for Dispatcher {
    type Result = ();
    fn handle(&mut self, msg: Attempt, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        let clock = self.clock.clone();
        let report = self.report.clone();
        ctx.spawn(
            async move {
                let outcome = attempt(&client, &clock, &msg.0).await;
                let _ = report.send(Msg::Outcome(outcome));
            }
            .into_actor(self),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_allowed() {
        for bad in [
            "127.0.0.1",
            "127.1.2.3",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "198.18.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
            "2001:db8::1",
            // local-use NAT64: any embedded address, public or not
            "64:ff9b:1::a00:1",
            "64:ff9b:1::808:808",
            "64:ff9b:1:ffff::1",
            "64:ff9b::7f00:1",
            "64:ff9b::c0a8:101",
            "100::1",
            "100::ffff:ffff:ffff:ffff",
            "2001::1",
            "2001:1::1",
            "2001:2::1",
            "2001:1ff::1",
            "2001:10::1",
            "2002:c0a8:101::1",
            "2002:a00:1::",
            "::ffff:169.254.169.254",
            "::ffff:100.64.0.1",
            "::a00:1",
            "192.88.99.1",
            "192.0.0.8",
            "192.0.2.1",
            "198.51.100.1",
            "203.0.113.1",
            "198.19.255.255",
            "240.0.0.1",
            "0.1.2.3",
            "100.127.255.255",
            "172.31.255.255",
            "fc00::1",
            "febf::1",
            "fec0::1",
            "ff00::1",
        ] {
            assert!(!is_public(bad.parse().unwrap()), "{bad}");
        }
        for ok in [
            "8.8.8.8",
            "102.89.1.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:200::1",
            "2001:4860:4860::8888",
            "100.128.0.1",
            "172.32.0.1",
            "192.88.98.1",
            "198.20.0.1",
            "101::1",
        ] {
            assert!(is_public(ok.parse().unwrap()), "{ok}");
        }
    }

    #[test]
    fn success_is_a_2xx_without_error() {
        let o = |status: Option<u16>, error: Option<&str>| Outcome {
            event: Uuid::nil(),
            endpoint: Uuid::nil(),
            at: Utc::now(),
            status,
            error: error.map(str::to_string),
            duration_ms: 0,
        };
        assert!(o(Some(200), None).succeeded());
        assert!(o(Some(204), None).succeeded());
        assert!(!o(Some(302), None).succeeded());
        assert!(!o(Some(500), None).succeeded());
        assert!(!o(None, Some("timed out")).succeeded());
    }
}
