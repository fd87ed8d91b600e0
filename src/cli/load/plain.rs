//! `kobo load`'s sender for a plain `http://` server: its own pool of
//! HTTP/1.1 connections (hyper's client connection, one request at a time
//! on each), used by every operation's POSTs and `GET /healthz`.
//!
//! Why not the general client (reqwest) the audit uses: on the same cores
//! as the server, every microsecond the tool spends per request is taken
//! from the server it measures. Per request, the general client parses the
//! URL, checks a connection out of its host-keyed pool through several
//! layers, and hands the request to a separate connection task; this pool
//! keeps the address and the fixed headers made once and pops a connection
//! from a list: 43% less of the tool's CPU per create (docs/performance.md,
//! "The writer sets the pace, a lighter load tool ..."). An `https://`
//! server goes through the general client, whose TLS this does not have.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::Request;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::net::TcpStream;

/// How long one request may take, connecting included (as the general
/// client's timeout).
const TIMEOUT: Duration = Duration::from_secs(30);

/// Connections to one plain-HTTP server, each carrying one request at a
/// time; idle ones wait in a list for the next request.
pub struct PlainHttp {
    /// `host:port`, as connected to and sent in `Host`.
    authority: String,
    host: HeaderValue,
    authorization: HeaderValue,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

/// Why a request got no response, in the words the report counts errors
/// by: `timeout`, `transport` (connecting, sending or reading failed) or
/// `request` (the request could not be made).
pub type Failure = &'static str;

/// A response: its status and whole body.
pub struct Reply {
    pub status: u16,
    pub body: Bytes,
}

impl PlainHttp {
    /// The pool for `base` when it is `http://HOST[:PORT]` with nothing
    /// after (no path, no credentials); `None` otherwise (the general
    /// client serves it).
    pub fn for_base(base: &str, key: &str) -> Option<PlainHttp> {
        let url = url::Url::parse(base).ok()?;
        if url.scheme() != "http"
            || !url.username().is_empty()
            || url.password().is_some()
            || !matches!(url.path(), "" | "/")
            || url.query().is_some()
        {
            return None;
        }
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        let authority = format!("{host}:{port}");
        Some(PlainHttp {
            host: HeaderValue::from_str(&authority).ok()?,
            authorization: HeaderValue::from_str(&format!("Bearer {key}")).ok()?,
            authority,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// POSTs `body` (JSON) to `path` with `idempotency_key`, on an idle
    /// connection or a new one; the connection goes back to the list once
    /// its response is read whole.
    pub async fn post(
        &self,
        path: &str,
        idempotency_key: &str,
        body: Vec<u8>,
    ) -> Result<Reply, Failure> {
        let request = Request::post(path)
            .header(HOST, self.host.clone())
            .header(AUTHORIZATION, self.authorization.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header("idempotency-key", idempotency_key)
            .body(Full::new(Bytes::from(body)));
        self.timed(request).await
    }

    /// GETs `path` without credentials (`/healthz`), as [`PlainHttp::post`].
    pub async fn get_anonymous(&self, path: &str) -> Result<Reply, Failure> {
        let request = Request::get(path)
            .header(HOST, self.host.clone())
            .body(Full::new(Bytes::new()));
        self.timed(request).await
    }

    async fn timed(
        &self,
        request: Result<Request<Full<Bytes>>, hyper::http::Error>,
    ) -> Result<Reply, Failure> {
        let request = request.map_err(|_| "request")?;
        match tokio::time::timeout(TIMEOUT, self.send(request)).await {
            Ok(reply) => reply,
            Err(_) => Err("timeout"),
        }
    }

    async fn send(&self, request: Request<Full<Bytes>>) -> Result<Reply, Failure> {
        let mut conn = match self.idle_connection().await {
            Some(conn) => conn,
            None => self.connect().await?,
        };
        let response = match conn.try_send_request(request).await {
            Ok(response) => response,
            // The server closed the connection before the request was
            // written: nothing reached it, so once more on a new one.
            Err(mut e) => match e.take_message() {
                Some(request) => {
                    conn = self.connect().await?;
                    conn.send_request(request).await.map_err(transport)?
                }
                None => return Err(transport(e.into_error())),
            },
        };
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(transport)?
            .to_bytes();
        self.idle.lock().push(conn);
        Ok(Reply { status, body })
    }

    /// An idle connection still open. One the server has closed (its
    /// keep-alive ended) fails `ready` and is dropped.
    async fn idle_connection(&self) -> Option<SendRequest<Full<Bytes>>> {
        loop {
            let mut conn = self.idle.lock().pop()?;
            if conn.ready().await.is_ok() {
                return Some(conn);
            }
        }
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, Failure> {
        let stream = TcpStream::connect(&self.authority)
            .await
            .map_err(|_| "transport")?;
        stream.set_nodelay(true).map_err(|_| "transport")?;
        let (conn, driver) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(transport)?;
        // The connection's reads and writes; it ends when `conn` is dropped
        // or the server closes it.
        tokio::spawn(async move {
            let _ = driver.await;
        });
        Ok(conn)
    }
}

fn transport(_: hyper::Error) -> Failure {
    "transport"
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use hyper::body::Incoming;
    use hyper::Response;

    use super::*;

    #[test]
    fn only_a_bare_http_base_gets_the_pool() {
        let p = PlainHttp::for_base("http://127.0.0.1:8080", "k").unwrap();
        assert_eq!(p.authority, "127.0.0.1:8080");
        assert_eq!(p.authorization, "Bearer k");
        let p = PlainHttp::for_base("http://localhost/", "k").unwrap();
        assert_eq!(p.authority, "localhost:80");
        for other in [
            "https://kobo.example",
            "http://kobo.example/api",
            "http://user:pw@kobo.example",
            "http://kobo.example/?a=1",
            "not a url",
        ] {
            assert!(PlainHttp::for_base(other, "k").is_none(), "{other}");
        }
    }

    /// What the test server saw: connections accepted, requests answered.
    #[derive(Default)]
    struct Seen {
        connections: AtomicUsize,
        requests: AtomicUsize,
    }

    /// A server echoing each request's path, key and body as JSON; with
    /// `close`, it closes each connection after one response.
    async fn server(close: bool) -> (String, Arc<Seen>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Seen::default());
        let counts = seen.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                counts.connections.fetch_add(1, Ordering::SeqCst);
                let counts = counts.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        counts.requests.fetch_add(1, Ordering::SeqCst);
                        async move {
                            let path = req.uri().path().to_string();
                            let header = |name: &str| {
                                let value = req.headers().get(name);
                                value.map_or("", |v| v.to_str().unwrap()).to_string()
                            };
                            let key = header("idempotency-key");
                            let auth = header(AUTHORIZATION.as_str());
                            let host = header(HOST.as_str());
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let echo = serde_json::json!({
                                "path": path, "key": key, "auth": auth, "host": host,
                                "body": String::from_utf8(body.to_vec()).unwrap(),
                            });
                            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(
                                echo.to_string(),
                            ))))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(!close)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        (base, seen)
    }

    /// POSTs `body` to `path` with the key `key-N`, expecting 200; the
    /// test server's echo of it.
    async fn echo_of_post(
        pool: &PlainHttp,
        path: &str,
        n: usize,
        body: &[u8],
    ) -> serde_json::Value {
        let reply = pool
            .post(path, &format!("key-{n}"), body.to_vec())
            .await
            .unwrap();
        assert_eq!(reply.status, 200);
        serde_json::from_slice(&reply.body).unwrap()
    }

    #[tokio::test]
    async fn requests_one_after_another_share_one_connection() {
        let (base, seen) = server(false).await;
        let pool = PlainHttp::for_base(&base, "svc_test_k").unwrap();
        for n in 0..5 {
            let echo = echo_of_post(&pool, "/v1/payment_intents", n, br#"{"amount":1}"#).await;
            assert_eq!(echo["path"], "/v1/payment_intents");
            assert_eq!(echo["key"], format!("key-{n}"));
            assert_eq!(echo["auth"], "Bearer svc_test_k");
            assert_eq!(echo["host"], base.trim_start_matches("http://"));
            assert_eq!(echo["body"], r#"{"amount":1}"#);
        }
        let reply = pool.get_anonymous("/healthz").await.unwrap();
        let echo: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        assert_eq!(
            (&echo["path"], &echo["auth"]),
            (&"/healthz".into(), &"".into())
        );
        assert_eq!(seen.requests.load(Ordering::SeqCst), 6);
        assert_eq!(seen.connections.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_is_replaced_and_no_request_is_sent_twice() {
        let (base, seen) = server(true).await;
        let pool = PlainHttp::for_base(&base, "k").unwrap();
        for n in 0..5 {
            echo_of_post(&pool, "/p", n, b"{}").await;
        }
        assert_eq!(seen.requests.load(Ordering::SeqCst), 5);
        assert_eq!(seen.connections.load(Ordering::SeqCst), 5);
    }

    #[tokio::test]
    async fn a_server_that_is_not_there_is_a_transport_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let pool = PlainHttp::for_base(&base, "k").unwrap();
        let err = pool.post("/p", "key", b"{}".to_vec()).await.err().unwrap();
        assert_eq!(err, "transport");
    }
}
