//! `kobo listen`: webhooks on a laptop. Follows the merchant's event stream
//! (`GET /v1/stream`), signs each event exactly as a webhook delivery is
//! signed (same body, same `Service-*` headers, same HMAC) with a local
//! signing secret, and POSTs it to a local URL (plain HTTP allowed), printing
//! one line per event with the answer's status and latency.
//!
//! The last stream position handled is kept in a small state file and sent
//! as `Last-Event-ID` on every (re)connection, so a restart resumes where
//! the previous run stopped: no event is lost, none is forwarded twice (the
//! position is saved right after the POST, before the event's line is
//! printed). Without a state file it starts with the events from now on.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use kobo_actors::webhook::{new_secret, signature_header, validate_event_types};

use super::{base_url, DEFAULT_BASE};

#[derive(clap::Args, Debug, Clone)]
pub struct ListenArgs {
    /// Local URL each event is POSTed to (http allowed: it is local).
    #[arg(long, value_name = "URL")]
    pub forward_to: String,
    /// Forward only these event types (comma-separated or repeated); the
    /// others are skipped (default: all).
    #[arg(long, value_delimiter = ',', value_name = "TYPE")]
    pub events: Vec<String>,
    /// The kobo server.
    #[arg(long, env = "KOBO_BASE", default_value = DEFAULT_BASE)]
    pub base: String,
    /// The merchant's secret key (`svc_test_...` or `svc_live_...`).
    #[arg(long, env = "KOBO_SECRET_KEY", hide_env_values = true)]
    pub key: String,
    /// Signing secret of the forwarded deliveries (default: a new
    /// `whsec_...` each run, printed at start).
    #[arg(long, env = "KOBO_LISTEN_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
    /// File that keeps the last stream position handled (default:
    /// `$XDG_STATE_HOME/kobo/listen-<hash of server and key>`, else
    /// `~/.local/state/kobo/...`).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
}

/// Waited before reconnecting after the stream ended or failed.
const RECONNECT: Duration = Duration::from_secs(2);
/// Longest a forwarded POST may take.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);

pub async fn run(args: ListenArgs) -> Result<()> {
    let base = base_url(&args.base)?;
    let forward = url::Url::parse(&args.forward_to)
        .with_context(|| format!("--forward-to {}", args.forward_to))?;
    if !matches!(forward.scheme(), "http" | "https") {
        bail!("--forward-to must be an http or https URL");
    }
    let filter =
        validate_event_types(&args.events).map_err(|e| anyhow::anyhow!("--events: {e}"))?;
    let secret = args.secret.clone().unwrap_or_else(new_secret);
    let state = match &args.state {
        Some(p) => p.clone(),
        None => default_state_path(&base, &args.key)?,
    };
    let mut last = read_state(&state)?;
    let stream_client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()?;
    let forward_client = reqwest::Client::builder()
        .timeout(FORWARD_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    say(format_args!(
        "kobo listen: forwarding the events of {base} to {forward}"
    ));
    say(format_args!("signing secret: {secret}"));
    match last {
        Some(p) => say(format_args!(
            "state: {} (resuming after stream position {p})",
            state.display()
        )),
        None => say(format_args!(
            "state: {} (none yet: starting with new events)",
            state.display()
        )),
    }
    let fwd = Forwarder {
        client: forward_client,
        url: forward.to_string(),
        secret,
        filter,
        state,
    };
    loop {
        match follow(&stream_client, &base, &args.key, &fwd, &mut last).await {
            Ok(()) => say(format_args!("the stream ended; reconnecting")),
            Err(Stop::Fatal(e)) => return Err(e),
            Err(Stop::Retry(e)) => say(format_args!("stream: {e:#}; reconnecting")),
        }
        tokio::time::sleep(RECONNECT).await;
    }
}

/// Prints a line on stdout at once (a pipe is block-buffered otherwise).
fn say(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

enum Stop {
    /// Retrying cannot help (the key was refused, the state is unwritable).
    Fatal(anyhow::Error),
    Retry(anyhow::Error),
}

struct Forwarder {
    client: reqwest::Client,
    url: String,
    secret: String,
    filter: Vec<String>,
    state: PathBuf,
}

/// One connection to the stream, until it ends.
async fn follow(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    fwd: &Forwarder,
    last: &mut Option<u64>,
) -> Result<(), Stop> {
    let mut req = client
        .get(format!("{base}/v1/stream"))
        .bearer_auth(key)
        .header(reqwest::header::ACCEPT, "text/event-stream");
    if let Some(p) = *last {
        req = req.header("Last-Event-ID", p.to_string());
    }
    let mut res = req
        .send()
        .await
        .map_err(|e| Stop::Retry(anyhow::anyhow!("connecting to {base}: {e}")))?;
    let status = res.status().as_u16();
    if status != 200 {
        let text = res.text().await.unwrap_or_default();
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or(text);
        let e = anyhow::anyhow!("GET /v1/stream answered {status}: {message}");
        return Err(match status {
            400 | 401 | 403 | 404 => Stop::Fatal(e),
            _ => Stop::Retry(e),
        });
    }
    say(format_args!("ready: connected to the event stream"));
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let chunk = match res.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(()),
            Err(e) => return Err(Stop::Retry(anyhow::anyhow!("reading: {e}"))),
        };
        buf.extend(chunk.iter().filter(|b| **b != b'\r'));
        while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = buf.drain(..end + 2).collect();
            let block = String::from_utf8_lossy(&block[..end]).into_owned();
            if let Some(frame) = Frame::parse(&block) {
                fwd.handle(frame, last).await?;
            }
        }
    }
}

/// One server-sent event.
#[derive(Debug, PartialEq)]
struct Frame {
    id: u64,
    event: String,
    data: String,
}

impl Frame {
    /// A block of lines; None for blocks that are no event (comments, the
    /// `retry:` opener).
    fn parse(block: &str) -> Option<Frame> {
        let (mut id, mut event, mut data) = (None, String::from("message"), None::<String>);
        for line in block.lines() {
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "id" => id = value.parse::<u64>().ok(),
                "event" => event = value.to_string(),
                "data" => match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_string()),
                },
                _ => {}
            }
        }
        Some(Frame {
            id: id?,
            event,
            data: data?,
        })
    }
}

impl Forwarder {
    async fn handle(&self, frame: Frame, last: &mut Option<u64>) -> Result<(), Stop> {
        if frame.event == "resync" {
            self.save(frame.id, last)?;
            say(format_args!(
                "resync: more than 1,000 events were missed; continuing from the newest (fetch current state through the API)"
            ));
            return Ok(());
        }
        if !self.filter.is_empty() && !self.filter.contains(&frame.event) {
            self.save(frame.id, last)?;
            return Ok(());
        }
        let (event_id, body) = match delivery_body(&frame.data) {
            Ok(b) => b,
            Err(e) => {
                self.save(frame.id, last)?;
                say(format_args!("{}: not forwarded: {e:#}", frame.event));
                return Ok(());
            }
        };
        let t = chrono::Utc::now().timestamp();
        let started = Instant::now();
        let sent = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("Service-Event-Id", event_id.to_string())
            .header("Service-Timestamp", t.to_string())
            .header(
                "Service-Signature",
                signature_header(&self.secret, t, event_id, &body),
            )
            .body(body)
            .send()
            .await;
        let outcome = match sent {
            Ok(res) => {
                let status = res.status();
                // Read the answer so the connection can be reused.
                let _ = res.bytes().await;
                format!(
                    "{} {}",
                    status.as_u16(),
                    status.canonical_reason().unwrap_or("")
                )
                .trim_end()
                .to_string()
            }
            Err(e) => format!("error: {}", describe(&e)),
        };
        let ms = started.elapsed().as_millis();
        self.save(frame.id, last)?;
        say(format_args!(
            "{} {} -> {} ({ms} ms)",
            frame.event, event_id, outcome
        ));
        Ok(())
    }

    fn save(&self, pos: u64, last: &mut Option<u64>) -> Result<(), Stop> {
        write_state(&self.state, pos).map_err(Stop::Fatal)?;
        *last = Some(pos);
        Ok(())
    }
}

fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "could not connect".into()
    } else {
        e.to_string()
    }
}

/// The public Event in the field order of a webhook delivery's body (the
/// stream's `data` has its keys sorted).
#[derive(Serialize, Deserialize)]
struct DeliveryBody {
    id: Uuid,
    object: Value,
    #[serde(rename = "type")]
    event_type: Value,
    livemode: Value,
    created_at: Value,
    data: Value,
}

/// The body of the webhook delivery of the event in a stream frame's
/// `data`, byte for byte, and the event's id.
fn delivery_body(data: &str) -> Result<(Uuid, Vec<u8>)> {
    let body: DeliveryBody = serde_json::from_str(data).context("the event's data")?;
    Ok((body.id, serde_json::to_vec(&body)?))
}

/// `$XDG_STATE_HOME/kobo/listen-<hash>` (else `~/.local/state/kobo/...`):
/// one file per server and key; the hash keeps the key out of the name.
fn default_state_path(base: &str, key: &str) -> Result<PathBuf> {
    let dir = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".local").join("state"),
            None => bail!("no HOME to keep the state in; pass --state FILE"),
        },
    };
    let hash = hex::encode(Sha256::digest(format!("{base}\n{key}").as_bytes()));
    Ok(dir.join("kobo").join(format!("listen-{}", &hash[..16])))
}

fn read_state(path: &Path) -> Result<Option<u64>> {
    match std::fs::read_to_string(path) {
        Ok(s) => s
            .trim()
            .parse::<u64>()
            .map(Some)
            .with_context(|| format!("{} does not hold a stream position", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Replaces the state file whole (a new file renamed over the old one).
fn write_state(path: &Path, pos: u64) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, format!("{pos}\n"))
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;

    use kobo_actors::event::Event;
    use kobo_actors::Mode;

    use super::*;

    /// The stream's data (`to_api().to_string()`, keys sorted) becomes the
    /// exact bytes a webhook delivery sends (`to_vec(&view())`).
    #[test]
    fn the_forwarded_body_is_the_webhook_body() {
        let event = Event {
            id: Uuid::now_v7(),
            merchant: Uuid::now_v7(),
            mode: Mode::Live,
            seq: 7,
            event_type: "payment_intent.succeeded".into(),
            created_at: Utc::now(),
            object: kobo_actors::event::object_text(
                &json!({"object": "payment_intent", "amount": 500000, "zeta": null, "alpha": [1, {"b": 2, "a": 1.5}]}),
            ),
        };
        let stream_data = event.to_api().to_string();
        let webhook = serde_json::to_vec(&event.view()).unwrap();
        let (id, body) = delivery_body(&stream_data).unwrap();
        assert_eq!(id, event.id);
        assert_eq!(
            String::from_utf8(body).unwrap(),
            String::from_utf8(webhook).unwrap()
        );
    }

    #[test]
    fn frames_parse_like_an_sse_client() {
        assert_eq!(Frame::parse("retry: 3000\n: connected"), None);
        assert_eq!(Frame::parse(": heartbeat"), None);
        assert_eq!(
            Frame::parse("id: 42\nevent: payout.paid\ndata: {\"a\":1}"),
            Some(Frame {
                id: 42,
                event: "payout.paid".into(),
                data: "{\"a\":1}".into()
            })
        );
    }

    #[test]
    fn the_state_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("state");
        assert_eq!(read_state(&path).unwrap(), None);
        write_state(&path, 12).unwrap();
        write_state(&path, 13).unwrap();
        assert_eq!(read_state(&path).unwrap(), Some(13));
        std::fs::write(&path, "nope").unwrap();
        assert!(read_state(&path).is_err());
    }
}
