//! The merchant dashboard (`/dashboard`): server-rendered pages for a
//! merchant's people (dashboard users, see [`kobo_actors::dashboard_user`]).
//!
//! - Sign-in, set-password, sign-out and the session cookie: [`auth`].
//! - The frame every page shares (the test/live switch, the brand switch,
//!   the nav), forms and their CSRF token: [`layout`], this file.
//! - Pages, one module per group: [`home`], [`payments`], [`payouts`],
//!   [`balance`], [`developers`], [`settings`]; live updates (server-sent events from
//!   the event stream): [`live`].
//! - More pages: [`disputes`], [`webhooks`].
//!
//! Every action goes through the same domain path as the API: a form is
//! turned into the JSON body the API takes and posted through that
//! operation's own [`Endpoint`](crate::api::endpoint::Endpoint) declaration
//! and run ([`Ctx::act`]), with the form's nonce as the Idempotency-Key and
//! the session's merchant and mode as the principal (caller
//! [`Caller::Dashboard`]); the operator-only operations a merchant's owner
//! may also take (key rolls, USDT wallets, settlement settings) send the
//! same actor messages the operator API sends, audited with origin
//! `dashboard`.
//!
//! Pages carry a strict Content-Security-Policy (scripts and styles from
//! this origin only, no inline ones); the one script and one style sheet are
//! built into the binary.

use crate::page_headers;
use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use kobo_actors::auth::Caller;
use kobo_actors::dashboard_user::{self, DashboardSession, DashboardUser};
use kobo_actors::merchant::Merchant;
use kobo_actors::query::Principal;
use kobo_actors::{DomainError, Mode};

use crate::api::endpoint::{Call, Endpoint, IntoReply};
use crate::api::{error_body, read_body, State};
use crate::checkout::esc;

pub mod auth;
pub mod balance;
pub mod billing;
pub mod customers;
pub mod developers;
pub mod disputes;
pub mod home;
pub mod layout;
pub mod live;
pub mod payments;
pub mod payouts;
pub mod settings;
pub mod throttle;
pub mod webhooks;

const JS: &str = include_str!("dashboard.js");
const CSS: &str = include_str!("dashboard.css");
pub const JS_PATH: &str = "/dashboard/assets/dashboard.js";
pub const CSS_PATH: &str = "/dashboard/assets/dashboard.css";

/// The session cookie.
pub const COOKIE: &str = "kobo_dashboard";

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route(JS_PATH, web::get().to(script))
        .route(CSS_PATH, web::get().to(style))
        .route("/dashboard/switch", web::post().to(switch));
    auth::configure(cfg);
    home::configure(cfg);
    balance::configure(cfg);
    payments::configure(cfg);
    payouts::configure(cfg);
    customers::configure(cfg);
    billing::configure(cfg);
    developers::configure(cfg);
    settings::configure(cfg);
    disputes::configure(cfg);
    webhooks::configure(cfg);
    live::configure(cfg);
}

async fn script() -> HttpResponse {
    page_headers::script(JS)
}

async fn style() -> HttpResponse {
    page_headers::stylesheet(CSS)
}

/// A signed-in request: the session, its user, the merchant, the brands of
/// the session's mode.
pub struct Ctx {
    pub req: HttpRequest,
    pub state: State,
    pub token: String,
    pub session: DashboardSession,
    pub user: DashboardUser,
    pub merchant: Merchant,
    /// The brands of the session's mode: id and name.
    pub brands: Vec<(uuid::Uuid, String)>,
}

impl Ctx {
    /// The session's merchant and mode as the API's principal.
    pub fn principal(&self) -> Principal {
        Principal {
            merchant: std::sync::Arc::new(self.merchant.clone()),
            mode: self.session.mode,
            caller: Caller::Dashboard,
        }
    }

    pub fn mode(&self) -> Mode {
        self.session.mode
    }

    pub fn merchant_id(&self) -> uuid::Uuid {
        self.merchant.id
    }

    /// The hidden input every form carries.
    pub fn csrf_input(&self) -> String {
        format!(
            r#"<input type="hidden" name="csrf" value="{}">"#,
            esc(&self.session.csrf)
        )
    }

    /// A form's hidden inputs: the CSRF token and a fresh nonce (the
    /// action's Idempotency-Key).
    pub fn form_inputs(&self) -> String {
        format!(
            r#"{}<input type="hidden" name="nonce" value="{}">"#,
            self.csrf_input(),
            kobo_actors::ids::random_base62(24)
        )
    }

    /// Posts `body` (the API's JSON body) through `endpoint` with `run`,
    /// as the API would: the gate, the Idempotency-Key (the form's nonce),
    /// the body's parse, the run. Answers the status and JSON body the API
    /// would have answered.
    pub async fn act<B, F, Fut, O>(
        &self,
        endpoint: Endpoint,
        nonce: &str,
        body: &Value,
        run: F,
    ) -> (u16, Value)
    where
        B: serde::de::DeserializeOwned,
        F: FnOnce(Call, B) -> Fut,
        Fut: std::future::Future<Output = crate::api::ApiResult<O>>,
        O: IntoReply,
    {
        let bytes = body.to_string().into_bytes();
        let resp = endpoint
            .post_as(
                self.req.clone(),
                self.state.clone(),
                self.principal(),
                format!("dashboard-{nonce}"),
                &bytes,
                run,
            )
            .await;
        match resp {
            Ok(r) => response_json(r).await,
            Err(e) => (crate::api::status_of(e.0.kind).as_u16(), error_body(&e.0)),
        }
    }
}

/// The status and JSON body of an API response.
pub async fn response_json(r: HttpResponse) -> (u16, Value) {
    let status = r.status().as_u16();
    let bytes = actix_web::body::to_bytes(r.into_body())
        .await
        .unwrap_or_default();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// The message of an API error body.
pub fn error_message(v: &Value) -> String {
    v["error"]["message"]
        .as_str()
        .unwrap_or("something went wrong")
        .to_string()
}

/// The session of the request's cookie, or the response to send instead
/// (to the sign-in page).
pub async fn signed_in(req: &HttpRequest, state: &State) -> Result<Ctx, HttpResponse> {
    let Some(token) = req.cookie(COOKIE).map(|c| c.value().to_owned()) else {
        return Err(to_sign_in());
    };
    let found = dashboard_user::resume_session(&state.kobo, &token).await;
    let (session, user) = match found {
        Ok(Some(s)) => s,
        Ok(None) => return Err(to_sign_in()),
        Err(e) => return Err(layout::server_error(e)),
    };
    let merchant = match kobo_actors::admin::load_merchant(&state.kobo, session.merchant) {
        Ok(Some(m)) => m,
        Ok(None) => return Err(to_sign_in()),
        Err(e) => return Err(layout::server_error(e)),
    };
    let brands = kobo_actors::merchant::query::list_brands(
        &state.kobo,
        merchant.id,
        session.mode,
        100,
        None,
    )
    .map(|p| {
        p.data
            .iter()
            .filter_map(|v| {
                Some((
                    v["id"].as_str()?.parse().ok()?,
                    v["name"].as_str()?.to_string(),
                ))
            })
            .collect()
    })
    .unwrap_or_default();
    Ok(Ctx {
        req: req.clone(),
        state: state.clone(),
        token,
        session,
        user,
        merchant,
        brands,
    })
}

/// A redirect to the sign-in page.
pub fn to_sign_in() -> HttpResponse {
    see_other("/dashboard/sign-in")
}

/// 303 to `to` (after a form's POST).
pub fn see_other(to: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, to.to_string()))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish()
}

/// A form POST's fields (the body capped like the API's).
pub struct Form(Vec<(String, String)>);

impl Form {
    pub async fn read(payload: web::Payload) -> Result<Form, HttpResponse> {
        let bytes = read_body(payload)
            .await
            .map_err(|e| layout::message(e.0.kind_status(), "Request refused", &e.0.message))?;
        Ok(Form(
            url::form_urlencoded::parse(&bytes)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        ))
    }

    /// The first value of `name` (trimmed), empty when absent.
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .unwrap_or("")
    }

    /// The nonce (Idempotency-Key) of the form: 8 to 64 letters and digits.
    pub fn nonce(&self) -> Option<&str> {
        let n = self.get("nonce");
        (n.len() >= 8 && n.len() <= 64 && n.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(n)
    }
}

/// Whether the form carries the session's CSRF token (compared as
/// digests, so the time taken says nothing about the token).
pub fn csrf_ok(ctx: &Ctx, form: &Form) -> bool {
    use sha2::{Digest, Sha256};
    let given = form.get("csrf");
    !given.is_empty()
        && Sha256::digest(given.as_bytes()) == Sha256::digest(ctx.session.csrf.as_bytes())
}

/// A signed-in form POST: the session, then the CSRF token (403 page
/// without it), then the form.
pub async fn signed_in_form(
    req: &HttpRequest,
    state: &State,
    payload: web::Payload,
) -> Result<(Ctx, Form), HttpResponse> {
    let ctx = signed_in(req, state).await?;
    let form = Form::read(payload).await?;
    if !csrf_ok(&ctx, &form) {
        return Err(layout::forbidden(
            &ctx,
            "This form has expired or did not come from this dashboard. Reload the page and try again.",
        ));
    }
    Ok((ctx, form))
}

/// `POST /dashboard/switch`: the test/live switch and the brand switch.
async fn switch(req: HttpRequest, state: State, payload: web::Payload) -> HttpResponse {
    let (mut ctx, form) = match signed_in_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    if let Some(mode) = Mode::parse(form.get("mode")) {
        if mode != ctx.session.mode {
            ctx.session.mode = mode;
            ctx.session.brand = None;
        } else {
            ctx.session.brand = match form.get("brand") {
                "" | "all" => None,
                raw => raw
                    .parse()
                    .ok()
                    .filter(|id| ctx.brands.iter().any(|(b, _)| b == id)),
            };
        }
    }
    if let Err(e) = dashboard_user::session::save(&state.kobo, &ctx.token, &ctx.session).await {
        return layout::server_error(e);
    }
    let back = form.get("back");
    let back = if back.starts_with("/dashboard") && !back.starts_with("//") {
        back
    } else {
        "/dashboard"
    };
    see_other(back)
}

/// The status of an error's kind (for pages).
trait KindStatus {
    fn kind_status(&self) -> u16;
}

impl KindStatus for DomainError {
    fn kind_status(&self) -> u16 {
        crate::api::status_of(self.kind).as_u16()
    }
}
