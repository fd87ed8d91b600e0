//! The customer-facing pages (payment links, hosted invoices) over plain
//! HTTP, as a browser without JavaScript uses them: a client that does not
//! follow redirects, a page's status, headers and HTML, its hidden inputs,
//! and its form posted with its own nonce and token.

use super::TestApp;

/// A browser that does not follow redirects.
pub(crate) fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The value of the hidden input `name` in `html`.
pub(crate) fn hidden(html: &str, name: &str) -> String {
    let marker = format!(r#"name="{name}" value=""#);
    let at = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} in {html}"))
        + marker.len();
    html[at..].split('"').next().unwrap().to_string()
}

pub(crate) struct Page {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub html: String,
}

impl Page {
    pub(crate) async fn of(r: reqwest::Response) -> Page {
        Page {
            status: r.status().as_u16(),
            headers: r.headers().clone(),
            html: r.text().await.unwrap(),
        }
    }
}

/// Where a redirect sends the browser.
pub(crate) fn location(p: &Page) -> String {
    p.headers["location"].to_str().unwrap().to_string()
}

/// `GET path` as a browser asks for a page.
pub(crate) async fn open(app: &TestApp, path: &str) -> Page {
    let r = browser()
        .get(format!("{}{path}", app.base))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    Page::of(r).await
}

/// Posts `fields` to `path` as a browser submits a form of this origin.
pub(crate) async fn post(app: &TestApp, path: &str, fields: &[(String, String)]) -> Page {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    let r = browser()
        .post(format!("{}{path}", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", &app.base)
        .header("accept", "text/html")
        .body(body)
        .send()
        .await
        .unwrap();
    Page::of(r).await
}

/// Posts `fields` with the form's own nonce and token (from `form`).
pub(crate) async fn submit(app: &TestApp, path: &str, form: &str, fields: &[(&str, &str)]) -> Page {
    let mut all: Vec<(String, String)> = vec![
        ("nonce".into(), hidden(form, "nonce")),
        ("form_token".into(), hidden(form, "form_token")),
    ];
    all.extend(fields.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    post(app, path, &all).await
}
