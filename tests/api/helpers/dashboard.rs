//! The merchant dashboard over plain HTTP, as a browser without
//! JavaScript uses it: the operator's invitation, the set-password page,
//! sign-in (the session cookie kept by hand), pages, and forms posted with
//! the page's own CSRF token and nonce.

use serde_json::json;

use super::pages::{browser, hidden, Page};
use super::{Merchant, TestApp};

/// A password good enough for the dashboard's bounds.
pub const PASSWORD: &str = "correct horse battery staple";

/// A signed-in browser: its session cookie.
#[derive(Clone, Debug)]
pub struct Dash {
    pub cookie: String,
}

/// `₦1,234.00` for 123400 kobo.
pub fn naira(kobo: i64) -> String {
    let units = (kobo / 100).to_string();
    let mut grouped = String::new();
    for (i, c) in units.chars().enumerate() {
        if i > 0 && (units.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("₦{grouped}.{:02}", kobo % 100)
}

/// The operator invites `email` to the dashboard of the merchant `m` (its
/// id) as `role`: the set-password link.
pub async fn invite(app: &TestApp, m: &str, email: &str, role: &str) -> String {
    let r = app
        .admin_post(
            &format!("/admin/v1/merchants/{m}/users"),
            json!({"email": email, "role": role}),
        )
        .await;
    r.assert_status(201);
    r.body["set_password_url"].as_str().unwrap().to_string()
}

/// Sets the password through the invitation's page.
pub async fn set_password(app: &TestApp, link: &str, password: &str) -> Page {
    let path = link.strip_prefix(&app.base).unwrap().to_string();
    post_raw(app, &path, None, &[("password", password)]).await
}

/// Posts the sign-in form (no cookie).
pub async fn sign_in_page(app: &TestApp, email: &str, password: &str) -> Page {
    post_raw(
        app,
        "/dashboard/sign-in",
        None,
        &[("email", email), ("password", password)],
    )
    .await
}

/// A person of `m` with `role`, invited, with a password, signed in.
pub async fn person(app: &TestApp, m: &Merchant, email: &str, role: &str) -> Dash {
    let link = invite(app, &m.id, email, role).await;
    let p = set_password(app, &link, PASSWORD).await;
    assert_eq!(p.status, 303, "{}", p.html);
    sign_in(app, email, PASSWORD).await
}

/// Signs in: the session cookie.
pub async fn sign_in(app: &TestApp, email: &str, password: &str) -> Dash {
    let p = sign_in_page(app, email, password).await;
    assert_eq!(p.status, 303, "sign-in refused: {}", p.html);
    let set = p.headers["set-cookie"].to_str().unwrap().to_string();
    let cookie = set.split(';').next().unwrap().to_string();
    Dash { cookie }
}

async fn post_raw(
    app: &TestApp,
    path: &str,
    cookie: Option<&str>,
    fields: &[(&str, &str)],
) -> Page {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    let mut r = browser()
        .post(format!("{}{path}", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", &app.base)
        .header("accept", "text/html");
    if let Some(c) = cookie {
        r = r.header("cookie", c);
    }
    Page::of(r.body(body).send().await.unwrap()).await
}

impl Dash {
    /// `GET path` with the session.
    pub async fn open(&self, app: &TestApp, path: &str) -> Page {
        let r = browser()
            .get(format!("{}{path}", app.base))
            .header("accept", "text/html")
            .header("cookie", &self.cookie)
            .send()
            .await
            .unwrap();
        Page::of(r).await
    }

    /// Posts `fields` as they are (no token added).
    pub async fn post(&self, app: &TestApp, path: &str, fields: &[(&str, &str)]) -> Page {
        post_raw(app, path, Some(&self.cookie), fields).await
    }

    /// Posts `fields` with the CSRF token and a nonce of the form on `page`.
    pub async fn submit(
        &self,
        app: &TestApp,
        page: &str,
        path: &str,
        fields: &[(&str, &str)],
    ) -> Page {
        let html = self.open(app, page).await.html;
        let csrf = hidden(&html, "csrf");
        let nonce = if html.contains(r#"name="nonce""#) {
            hidden(&html, "nonce")
        } else {
            "nononce0".into()
        };
        let mut all: Vec<(&str, &str)> = vec![("csrf", &csrf), ("nonce", &nonce)];
        all.extend_from_slice(fields);
        self.post(app, path, &all).await
    }
}
