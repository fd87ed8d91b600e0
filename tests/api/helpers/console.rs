//! The operator console over plain HTTP: a browser that keeps the console's
//! cookies (the tests' HTTP client has no cookie jar), signs in, opens
//! pages and posts their forms with the page's CSRF token.

use std::collections::HashMap;
use std::sync::Mutex;

use super::pages::{browser, hidden, Page};
use super::TestApp;

pub(crate) struct ConsoleBrowser {
    base: String,
    client: reqwest::Client,
    cookies: Mutex<HashMap<String, String>>,
    /// Extra headers on every request (e.g. `X-Forwarded-Proto`).
    pub headers: Vec<(&'static str, String)>,
}

impl ConsoleBrowser {
    pub fn new(app: &TestApp) -> Self {
        ConsoleBrowser {
            base: app.base.clone(),
            client: browser(),
            cookies: Mutex::new(HashMap::new()),
            headers: Vec::new(),
        }
    }

    pub fn cookie(&self, name: &str) -> Option<String> {
        self.cookies.lock().unwrap().get(name).cloned()
    }

    pub fn set_cookie(&self, name: &str, value: &str) {
        self.cookies
            .lock()
            .unwrap()
            .insert(name.to_string(), value.to_string());
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Page {
        let mut req = req
            .header("accept", "text/html")
            .header("cookie", self.cookie_header());
        for (k, v) in &self.headers {
            req = req.header(*k, v);
        }
        let r = req.send().await.unwrap();
        for c in r.headers().get_all("set-cookie") {
            let c = c.to_str().unwrap();
            let (pair, attrs) = c.split_once(';').unwrap_or((c, ""));
            let (name, value) = pair.split_once('=').unwrap();
            if attrs.contains("Max-Age=0") || value.is_empty() {
                self.cookies.lock().unwrap().remove(name);
            } else {
                self.cookies
                    .lock()
                    .unwrap()
                    .insert(name.to_string(), value.to_string());
            }
        }
        Page::of(r).await
    }

    pub async fn get(&self, path: &str) -> Page {
        self.send(self.client.get(format!("{}{path}", self.base)))
            .await
    }

    /// Posts `fields` as they are (no token added).
    pub async fn post_raw(&self, path: &str, fields: &[(&str, &str)]) -> Page {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        self.send(
            self.client
                .post(format!("{}{path}", self.base))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body),
        )
        .await
    }

    /// Opens `page` and posts `fields` to `action` with the page's CSRF
    /// token, as its form would.
    pub async fn submit(&self, page: &str, action: &str, fields: &[(&str, &str)]) -> Page {
        let p = self.get(page).await;
        assert_eq!(p.status, 200, "{page}: {}", p.html);
        let csrf = hidden(&p.html, "csrf");
        let mut all = vec![("csrf", csrf.as_str())];
        all.extend_from_slice(fields);
        self.post_raw(action, &all).await
    }

    /// Opens the sign-in page and signs in with `token`.
    pub async fn sign_in_with(&self, token: &str) -> Page {
        self.submit("/console/sign-in", "/console/sign-in", &[("token", token)])
            .await
    }

    /// Signs in with the app's admin token (asserting it worked).
    pub async fn sign_in(app: &TestApp) -> Self {
        let b = ConsoleBrowser::new(app);
        let r = b.sign_in_with(&app.admin_token).await;
        assert_eq!(r.status, 303, "{}", r.html);
        assert_eq!(super::pages::location(&r), "/console/health");
        b
    }
}
