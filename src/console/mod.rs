//! The operator console (`/console`): web pages for the operator, signed in
//! with the admin token ([`session`]). Pages: actor health ([`health`]),
//! merchants ([`merchants`]), payouts waiting for approval ([`payouts`]),
//! FX rates ([`fx`]) and the manual clock ([`clock`]). Every action runs
//! the operator API's own function (src/api/admin.rs, fx.rs, payouts.rs)
//! with its body type, so validation, audit and effects are the API's.
//!
//! Pages are server-rendered HTML; the style sheet and the one script
//! (the health page's live refresh) are built into the binary and served
//! from `/console/assets/` under a Content-Security-Policy that allows only
//! this origin and no inline script or style. Every form carries the
//! session's CSRF token, checked on every POST (403 page otherwise).

use crate::api::route_table::Routes;
use crate::page_headers;
use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{Map, Value};

use kobo_actors::audit::Audit;
use kobo_actors::DomainError;

use crate::api::{status_of, ApiError, State};
use crate::checkout::esc;

pub mod clock;
pub mod fx;
pub mod health;
pub mod merchants;
pub mod payouts;
pub mod session;
pub mod sign_in;
pub mod svg;

use session::{Session, Sessions};

const CONSOLE_JS: &str = include_str!("console.js");
const CONSOLE_CSS: &str = include_str!("console.css");
pub const JS_PATH: &str = "/console/assets/console.js";
pub const CSS_PATH: &str = "/console/assets/console.css";

/// The console's Content-Security-Policy: this origin only, no inline
/// script or style, no framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The console's shared state (sessions and the sign-in limit).
#[derive(Default)]
pub struct Console {
    pub sessions: Sessions,
}

pub type ConsoleData = web::Data<Console>;

pub fn configure(cfg: &mut Routes) {
    cfg.route(JS_PATH, web::get().to(script))
        .route(CSS_PATH, web::get().to(style))
        .route("/console", web::get().to(home));
    sign_in::configure(cfg);
    health::configure(cfg);
    merchants::configure(cfg);
    payouts::configure(cfg);
    fx::configure(cfg);
    clock::configure(cfg);
}

async fn script() -> HttpResponse {
    page_headers::script(CONSOLE_JS)
}

async fn style() -> HttpResponse {
    page_headers::stylesheet(CONSOLE_CSS)
}

async fn home(req: HttpRequest, state: State, console: ConsoleData) -> HttpResponse {
    match operator(&req, &state, &console).await {
        Ok(_) => see_other("/console/health"),
        Err(r) => r,
    }
}

/// A signed-in operator: the session's cookie token and its CSRF token.
pub struct Operator {
    pub token: String,
    pub session: Session,
}

impl Operator {
    /// The hidden input every form carries.
    pub fn csrf_input(&self) -> String {
        format!(
            r#"<input type="hidden" name="csrf" value="{}">"#,
            esc(&self.session.csrf)
        )
    }
}

/// The signed-in operator, or a redirect to the sign-in page.
// The error is the response a handler sends at once, never carried further.
#[allow(clippy::result_large_err)]
pub async fn operator(
    req: &HttpRequest,
    state: &State,
    console: &Console,
) -> Result<Operator, HttpResponse> {
    let token = session::cookie_value(req, session::COOKIE).unwrap_or_default();
    match console.sessions.get(&token, state.kobo.clock.now()).await {
        Some(session) => Ok(Operator { token, session }),
        None => Err(see_other("/console/sign-in")),
    }
}

/// A POSTed form's fields (the last value of each name).
pub struct Form(pub Map<String, Value>);

impl Form {
    pub fn text(&self, name: &str) -> &str {
        self.0.get(name).and_then(Value::as_str).unwrap_or("")
    }
}

/// Reads a form POST: the body (as every body is read: size cap and
/// deadline), urlencoded fields.
pub async fn read_form(payload: web::Payload) -> Result<Form, HttpResponse> {
    let body = crate::api::read_body(payload).await.map_err(|e| {
        message(
            status_of(e.0.kind).as_u16(),
            "Please try again",
            &e.0.message,
        )
    })?;
    let mut map = Map::new();
    for (k, v) in url::form_urlencoded::parse(&body) {
        map.insert(k.into_owned(), Value::String(v.into_owned()));
    }
    Ok(Form(map))
}

/// A signed-in operator's form POST with the session's CSRF token; a 403
/// page otherwise (nothing done), or the sign-in page without a session.
pub async fn post(
    req: &HttpRequest,
    state: &State,
    console: &Console,
    payload: web::Payload,
) -> Result<(Operator, Form), HttpResponse> {
    let op = operator(req, state, console).await?;
    let form = read_form(payload).await?;
    if !session::same_secret(form.text("csrf"), &op.session.csrf) {
        return Err(forbidden());
    }
    Ok((op, form))
}

/// 403: a form without its CSRF token.
pub fn forbidden() -> HttpResponse {
    message(
        403,
        "Refused",
        "This form was not sent from a current console page (its security token is missing or stale). Nothing was changed. Go back, reload the page and try again.",
    )
}

/// The audit of a console action (origin `console`, the request's id).
pub fn audit(req: &HttpRequest) -> Audit {
    let api = crate::api::endpoint::audit(req);
    Audit::console(api.request_id.unwrap_or_default())
}

/// A field map to the API body type `T`, parsed as the API parses it.
pub fn body<T: serde::de::DeserializeOwned>(fields: Map<String, Value>) -> Result<T, ApiError> {
    crate::api::body::from_map::<T>(fields).map_err(ApiError)
}

pub fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location.to_string()))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish()
}

/// Headers every console page carries.
pub fn html(status: u16, body: String) -> HttpResponse {
    page_headers::html_page(status, body, CSP, "no-referrer")
}

/// The navigation's pages: (path, label).
const NAV: &[(&str, &str)] = &[
    ("/console/health", "Actor health"),
    ("/console/merchants", "Merchants"),
    ("/console/payouts", "Payout approvals"),
    ("/console/fx", "FX rates"),
    ("/console/clock", "Clock"),
];

/// A signed-in page: the bar with the navigation and sign-out, `main`.
pub fn page(op: &Operator, active: &str, title: &str, main: &str, with_script: bool) -> String {
    let mut nav = String::new();
    for (path, label) in NAV {
        let current = if *path == active {
            r#" aria-current="page""#
        } else {
            ""
        };
        nav.push_str(&format!(
            r#"<li><a href="{path}"{current}>{label}</a></li>"#
        ));
    }
    let script = if with_script {
        format!(r#"<script src="{JS_PATH}" defer></script>"#)
    } else {
        String::new()
    };
    format!(
        r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · kobo console</title>
<link rel="stylesheet" href="{CSS_PATH}">
{script}
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="bar">
  <span class="brand">kobo <span>console</span></span>
  <nav aria-label="Console"><ul>{nav}</ul></nav>
  <form method="post" action="/console/sign-out" class="signout">{csrf}<button type="submit">Sign out</button></form>
</header>
<main id="main" tabindex="-1">
<h1>{title}</h1>
{main}
</main>
</body>
</html>
"##,
        title = esc(title),
        csrf = op.csrf_input(),
    )
}

/// A page outside the session (sign-in, refusals): one message.
pub fn bare(title: &str, main: &str) -> String {
    format!(
        r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · kobo console</title>
<link rel="stylesheet" href="{CSS_PATH}">
</head>
<body>
<header class="bar"><span class="brand">kobo <span>console</span></span></header>
<main id="main" tabindex="-1" class="narrow">
<h1>{title}</h1>
{main}
</main>
</body>
</html>
"##,
        title = esc(title),
    )
}

/// A page that says one thing.
pub fn message(status: u16, title: &str, text: &str) -> HttpResponse {
    html(
        status,
        bare(
            title,
            &format!(
                r#"<p class="notice" role="alert">{}</p><p><a href="/console">Back to the console</a></p>"#,
                esc(text)
            ),
        ),
    )
}

/// The error banner of a failed action (the API's message, and the field
/// it names).
pub fn error_banner(e: &DomainError) -> String {
    let field = e
        .param
        .as_deref()
        .map(|p| format!(" <span class=\"param\">({})</span>", esc(p)))
        .unwrap_or_default();
    format!(
        r#"<p class="error" role="alert">{}{field}</p>"#,
        esc(&e.message)
    )
}

/// The status of a failed action's page.
pub fn error_status(e: &DomainError) -> u16 {
    status_of(e.kind).as_u16()
}

/// The notice after a successful action (`?done=...`, from a closed set).
pub fn notice(req: &HttpRequest, known: &[(&str, &str)]) -> String {
    let q = web::Query::<std::collections::HashMap<String, String>>::from_query(req.query_string())
        .map(|q| q.into_inner())
        .unwrap_or_default();
    q.get("done")
        .and_then(|d| known.iter().find(|(k, _)| k == d))
        .map(|(_, text)| format!(r#"<p class="notice" role="status">{text}</p>"#))
        .unwrap_or_default()
}

/// `₦1,234.56` from kobo.
pub fn naira(kobo: i64) -> String {
    let sign = if kobo < 0 { "-" } else { "" };
    format!(
        "{sign}{}",
        crate::checkout::money(kobo.abs(), kobo_actors::money::Currency::NGN)
    )
}
