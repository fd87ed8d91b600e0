//! The hosted checkout page in a real browser: Debian's Chromium, driven
//! through chromedriver (W3C WebDriver over HTTP, spoken here with the
//! HTTP client the tests already use), headless, in a phone-sized window.
//! The test pays test payments with the success card, the PIN + code card,
//! the redirect card (Approve on the sandbox bank page) and by bank transfer
//! (the test sends the money), checks that the page reaches its paid state
//! and lands on `return_url`, and saves a screenshot of each state under
//! `target/checkout-screenshots/`.
//!
//! Chromium and chromidriver come from Debian (`apt-get install chromium
//! chromium-driver`; `.ci/run` installs them). Without them this test fails
//! and says so: it is never skipped silently.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{spawn_app, TestApp};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const WAIT: Duration = Duration::from_secs(30);
/// A phone: 390 x 844 CSS pixels.
const WINDOW: (u32, u32) = (390, 844);

/// `target/<folder>`, made if missing.
fn screenshots_in(folder: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// chromedriver, stopped on drop.
pub(crate) struct Driver {
    child: Child,
    url: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) struct Session<'a> {
    driver: &'a Driver,
    id: String,
}

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Driver {
    pub(crate) async fn start() -> Driver {
        for (path, what) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(
                Path::new(path).exists(),
                "the browser test needs Debian's {what} ({path} is missing): run `apt-get update && apt-get install -y chromium chromium-driver` (.ci/run does)"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
            _profile: tempfile::tempdir().unwrap(),
        };
        let started = Instant::now();
        loop {
            if let Ok(r) = driver
                .http
                .get(format!("{}/status", driver.url))
                .send()
                .await
            {
                if let Ok(v) = r.json::<Value>().await {
                    if v["value"]["ready"] == true {
                        break;
                    }
                }
            }
            assert!(started.elapsed() < WAIT, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        driver
    }

    pub(crate) async fn session(&self) -> Session<'_> {
        self.session_sized(WINDOW, true).await
    }

    /// A session in a window of `(width, height)` CSS pixels: a phone's
    /// viewport (`mobile`, any width), or a desktop window.
    pub(crate) async fn session_sized(&self, window: (u32, u32), mobile: bool) -> Session<'_> {
        let args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            "--lang=en-NG".into(),
            format!("--window-size={},{}", window.0, window.1),
            format!("--user-data-dir={}", self._profile.path().display()),
        ];
        let mut options = json!({"binary": CHROMIUM, "args": args});
        if mobile {
            // A phone's viewport (desktop Chromium will not make its
            // window narrower than 500 px).
            options["mobileEmulation"] = json!({"deviceMetrics": {
                "width": window.0, "height": window.1, "pixelRatio": 2.0, "touch": true,
            }});
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": options,
        }}});
        let r: Value = self
            .http
            .post(format!("{}/session", self.url))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = r["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {r}"))
            .to_string();
        Session { driver: self, id }
    }
}

impl Session<'_> {
    pub(crate) async fn cmd(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        let url = format!("{}/session/{}{}", self.driver.url, self.id, path);
        let mut req = self.driver.http.request(method, url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r: Value = req.send().await.unwrap().json().await.unwrap();
        if let Some(e) = r["value"]["error"].as_str() {
            panic!("WebDriver {path}: {e}: {}", r["value"]["message"]);
        }
        r["value"].clone()
    }

    pub(crate) async fn goto(&self, url: &str) {
        self.cmd(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    pub(crate) async fn url(&self) -> String {
        self.cmd(reqwest::Method::GET, "/url", None)
            .await
            .as_str()
            .unwrap()
            .to_string()
    }

    pub(crate) async fn script(&self, script: &str, args: Value) -> Value {
        self.cmd(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    pub(crate) async fn find(&self, css: &str) -> String {
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v[ELEMENT].as_str().unwrap().to_string()
    }

    /// Waits until `css` matches an element that is shown.
    pub(crate) async fn wait_shown(&self, css: &str) -> String {
        let started = Instant::now();
        loop {
            let shown = self
                .script(
                    "var e = document.querySelector(arguments[0]); return !!(e && e.getClientRects().length && !e.closest('[hidden]'));",
                    json!([css]),
                )
                .await;
            if shown == true {
                return self.find(css).await;
            }
            if started.elapsed() > WAIT {
                let body = self
                    .script(
                        "return document.body ? document.body.innerText : ''",
                        json!([]),
                    )
                    .await;
                panic!("{css} not shown after {WAIT:?}; the page says: {body}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the text of `css` satisfies `ok`.
    pub(crate) async fn wait_text(&self, css: &str, ok: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let t = self
                .script(
                    "var e = document.querySelector(arguments[0]); return e ? e.textContent : '';",
                    json!([css]),
                )
                .await;
            let t = t.as_str().unwrap_or("").to_string();
            if ok(&t) {
                return t;
            }
            assert!(
                started.elapsed() < WAIT,
                "{css} never had the text expected; last: {t:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) async fn click(&self, css: &str) {
        let e = self.wait_shown(css).await;
        self.cmd(
            reqwest::Method::POST,
            &format!("/element/{e}/click"),
            Some(json!({})),
        )
        .await;
    }

    pub(crate) async fn type_into(&self, css: &str, text: &str) {
        let e = self.wait_shown(css).await;
        self.cmd(
            reqwest::Method::POST,
            &format!("/element/{e}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        self.screenshot_in("checkout-screenshots", name).await
    }

    /// A screenshot saved as `target/<folder>/<name>.png`.
    pub(crate) async fn screenshot_in(&self, folder: &str, name: &str) -> PathBuf {
        let b64 = self.cmd(reqwest::Method::GET, "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"));
        let path = screenshots_in(folder).join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }

    pub(crate) async fn wait_url(&self, prefix: &str) -> String {
        let started = Instant::now();
        loop {
            let u = self.url().await;
            if u.starts_with(prefix) {
                return u;
            }
            assert!(started.elapsed() < WAIT, "never reached {prefix}; at {u}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) async fn close(self) {
        self.cmd(reqwest::Method::DELETE, "", None).await;
    }
}

/// The merchant's own site: answers every GET with a small thank-you page.
async fn return_site() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut read = 0;
                while read < buf.len() {
                    match socket.read(&mut buf[read..]).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => read += n,
                    }
                    if buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                let body = "<!doctype html><meta name=viewport content='width=device-width'><title>Ada Stores</title><h1 style='font-family:sans-serif'>Thank you for your order</h1>";
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/order/42/done")
}

struct Shop<'a> {
    app: &'a TestApp,
    key: String,
    return_url: String,
}

impl Shop<'_> {
    async fn intent(&self, body: Value) -> (String, String) {
        let mut body = body;
        body["return_url"] = json!(self.return_url);
        let pi = self.app.create_intent(&self.key, body).await;
        (
            pi["id"].as_str().unwrap().to_string(),
            pi["checkout_url"].as_str().unwrap().to_string(),
        )
    }

    async fn status(&self, id: &str) -> String {
        self.app
            .get(&self.key, &format!("/v1/payment_intents/{id}"))
            .await
            .body["status"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

async fn fill_card(s: &Session<'_>, number: &str) {
    s.type_into("#card-number", number).await;
    s.type_into("#card-exp", "1240").await;
    s.type_into("#card-cvc", "739").await;
    s.type_into("#card-name", "Ada Obi").await;
}

/// The page shows its paid state, then sends the customer to `return_url`
/// with the payment's id and status.
async fn paid_and_returned(s: &Session<'_>, shop: &Shop<'_>, id: &str, shot: &str) {
    s.wait_shown("#done").await;
    s.wait_text("#done-title", |t| t.contains("Payment successful"))
        .await;
    s.screenshot(shot).await;
    assert_eq!(shop.status(id).await, "successful");
    let landed = s.wait_url(&shop.return_url).await;
    let url = url::Url::parse(&landed).unwrap();
    let q: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
    assert_eq!(
        q.get("payment_intent").map(String::as_str),
        Some(id),
        "{landed}"
    );
    assert_eq!(
        q.get("status").map(String::as_str),
        Some("successful"),
        "{landed}"
    );
    s.screenshot(&format!("{shot}-returned")).await;
}

#[tokio::test]
async fn the_checkout_page_takes_every_way_to_pay_in_a_real_browser() {
    let driver = Driver::start().await;
    let app = spawn_app().await;
    let m = app.merchant().await;
    let shop = Shop {
        app: &app,
        key: m.test_key.clone(),
        return_url: return_site().await,
    };
    let s = driver.session().await;

    // 1. The success card; the customer bears the fee.
    let (id, url) = shop
        .intent(
            json!({"amount": 1500000, "currency": "NGN", "fee_bearer": "customer",
                       "description": "Two bags of rice"}),
        )
        .await;
    s.goto(&url).await;
    s.wait_shown("#card-form").await;
    // ₦15,000 + card fee ₦325 + VAT ₦24.38.
    let amount = s.wait_text("#amount", |t| !t.is_empty()).await;
    assert!(amount.contains("15,349.38"), "{amount}");
    s.screenshot("01-card-form").await;
    fill_card(&s, "4084080000000409").await;
    s.click("#card-submit").await;
    paid_and_returned(&s, &shop, &id, "02-paid-success-card").await;

    // 2. The Verve card: PIN, then the code.
    let (id, url) = shop
        .intent(json!({"amount": 250000, "currency": "NGN"}))
        .await;
    s.goto(&url).await;
    fill_card(&s, "5060990580000217499").await;
    s.click("#card-submit").await;
    s.wait_shown("#otp-step").await;
    s.wait_text("#otp-label", |t| t == "Card PIN").await;
    s.screenshot("03-pin").await;
    s.type_into("#otp-input", "1234").await;
    s.click("#otp-submit").await;
    s.wait_text("#otp-label", |t| t == "Code").await;
    s.screenshot("04-otp").await;
    s.type_into("#otp-input", "123456").await;
    s.click("#otp-submit").await;
    paid_and_returned(&s, &shop, &id, "05-paid-pin-otp-card").await;

    // 3. The redirect card: Approve on the sandbox bank page.
    let (id, url) = shop
        .intent(json!({"amount": 990000, "currency": "NGN"}))
        .await;
    s.goto(&url).await;
    fill_card(&s, "4000000000003220").await;
    s.click("#card-submit").await;
    s.wait_url(&format!("{}/sandbox/bank/", app.base)).await;
    s.wait_shown("#approve").await;
    s.screenshot("06-sandbox-bank-page").await;
    s.click("#approve").await;
    paid_and_returned(&s, &shop, &id, "07-paid-redirect-card").await;

    // 4. Bank transfer: the page shows the account, the test sends the money.
    let (id, url) = shop
        .intent(json!({"amount": 500000, "currency": "NGN", "fee_bearer": "customer"}))
        .await;
    s.goto(&url).await;
    s.click("label[for=method-transfer]").await;
    let account = s
        .wait_text("#transfer-account", |t| {
            t.len() == 10 && t.bytes().all(|b| b.is_ascii_digit())
        })
        .await;
    // ₦5,000 + transfer fee ₦50 + VAT ₦3.75.
    let amount = s.wait_text("#transfer-amount", |t| !t.is_empty()).await;
    assert!(amount.contains("5,053.75"), "{amount}");
    s.wait_text("#transfer-countdown", |t| {
        t.contains("29:") || t.contains("30:00")
    })
    .await;
    s.screenshot("08-bank-transfer").await;
    let got = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    assert_eq!(
        got.body["bank_transfer"]["account_number"],
        account.as_str()
    );
    app.post(
        &m.test_key,
        &format!("/v1/test_helpers/payment_intents/{id}/simulate_transfer"),
        json!({}),
    )
    .await
    .assert_status(200);
    paid_and_returned(&s, &shop, &id, "09-paid-bank-transfer").await;

    // A declined card: a clear message, and the form again.
    let (_, url) = shop
        .intent(json!({"amount": 120000, "currency": "NGN"}))
        .await;
    s.goto(&url).await;
    fill_card(&s, "4000000000000002").await;
    s.click("#card-submit").await;
    s.wait_text("#status", |t| t.contains("declined")).await;
    s.wait_shown("#card-form").await;
    s.screenshot("10-declined").await;

    // A dollar payment asks for the billing address.
    let (_, url) = shop
        .intent(json!({"amount": 4999, "currency": "USD"}))
        .await;
    s.goto(&url).await;
    s.wait_shown("#billing").await;
    s.screenshot("11-usd-card-form").await;

    // Already paid, canceled, and unknown links: clear pages.
    let (id, url) = shop
        .intent(json!({"amount": 120000, "currency": "NGN"}))
        .await;
    app.post(
        &m.test_key,
        &format!("/v1/payment_intents/{id}/cancel"),
        json!({}),
    )
    .await
    .assert_status(200);
    s.goto(&url).await;
    s.wait_text("h1", |t| t.contains("Payment canceled")).await;
    s.screenshot("12-canceled").await;
    s.goto(&format!("{}/c/nosuchcode0", app.base)).await;
    s.wait_text("h1", |t| t.contains("not found")).await;
    s.screenshot("13-unknown-link").await;
    let (id, url) = shop
        .intent(json!({"amount": 120000, "currency": "NGN"}))
        .await;
    app.post(
        &m.test_key,
        &format!("/v1/payment_intents/{id}/card"),
        json!({"number": "4084080000000409", "exp_month": 12, "exp_year": 2040, "cvc": "739"}),
    )
    .await
    .assert_status(200);
    s.goto(&url).await;
    paid_and_returned(&s, &shop, &id, "14-already-paid").await;

    s.close().await;
}
