//! A local plain-HTTP webhook receiver (hyper) that keeps every request it
//! is sent and answers 200, and a runner for `kobo` client subcommands
//! (`kobo listen`) whose stdout lines the test reads.

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }
}

pub struct Receiver {
    pub url: String,
    pub got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    /// Starts one on 127.0.0.1, answering every request 200.
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let log = got.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let log = log.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let log = log.clone();
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            log.lock().unwrap().push(Received {
                                path: parts.uri.path().to_string(),
                                headers: parts
                                    .headers
                                    .iter()
                                    .map(|(k, v)| {
                                        (
                                            k.as_str().to_string(),
                                            v.to_str().unwrap_or("").to_string(),
                                        )
                                    })
                                    .collect(),
                                body: body.to_vec(),
                            });
                            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        Receiver {
            url: format!("http://{addr}/hooks"),
            got,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// Waits (up to 30 s) until at least `n` requests came.
    pub async fn wait_for(&self, n: usize) -> Vec<Received> {
        let started = Instant::now();
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the receiver got {} requests, expected {n}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A `kobo` subcommand running in the background; its stdout lines are
/// collected as they come. Killed on drop.
pub struct Running {
    child: Child,
    pub lines: Arc<Mutex<Vec<String>>>,
}

impl Running {
    pub fn start(args: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kobo"))
            .args(args)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start kobo");
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let out = child.stdout.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                sink.lock().unwrap().push(line);
            }
        });
        Running { child, lines }
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits (up to 30 s) until `ok` holds for the lines printed so far.
    pub async fn wait_until(&mut self, what: &str, ok: impl Fn(&[String]) -> bool) -> Vec<String> {
        let started = Instant::now();
        loop {
            let lines = self.lines();
            if ok(&lines) {
                return lines;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                // Let the reader thread take the last lines.
                tokio::time::sleep(Duration::from_millis(100)).await;
                panic!(
                    "kobo exited ({status}) before {what}; it printed: {:?}",
                    self.lines()
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no {what} after 30 s; printed: {lines:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}
