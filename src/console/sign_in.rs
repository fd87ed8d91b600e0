//! Signing in and out of the console. The sign-in form is protected like
//! every other form: a random token in a short-lived SameSite=Strict
//! cookie and in the form, both required to match (there is no session
//! yet to hold it). Attempts are rate limited per IP
//! ([`session::SIGN_INS_PER_MINUTE`]); a wrong token answers 401 and
//! changes nothing.

use crate::api::route_table::Routes;
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::Duration;

use crate::api::endpoint::admin_token_matches;
use crate::api::State;
use crate::checkout::esc;

use super::session::{self, cookie, cookie_value, random_token};
use super::{bare, forbidden, html, operator, read_form, see_other, ConsoleData};

pub fn configure(cfg: &mut Routes) {
    cfg.route("/console/sign-in", web::get().to(form))
        .route("/console/sign-in", web::post().to(sign_in))
        .route("/console/sign-out", web::post().to(sign_out));
}

/// The sign-in page, with a fresh form token (cookie and field).
fn sign_in_page(req: &HttpRequest, status: u16, problem: Option<&str>) -> HttpResponse {
    let token = random_token();
    let problem = problem
        .map(|p| {
            format!(
                r#"<p class="error" role="alert" id="problem">{}</p>"#,
                esc(p)
            )
        })
        .unwrap_or_default();
    let main = format!(
        r#"{problem}<form method="post" action="/console/sign-in" class="card">
<input type="hidden" name="csrf" value="{token}">
<label for="token">Admin token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Sign in</button>
</form>
<p class="hint">The operator console signs in with the server's admin token (<code>KOBO_ADMIN_TOKEN</code>). Sessions end after {idle} minutes idle or {max} hours.</p>"#,
        idle = session::IDLE_MINUTES,
        max = session::MAX_AGE_HOURS,
    );
    let mut r = html(status, bare("Sign in", &main));
    let _ = r.add_cookie(&cookie(
        req,
        session::SIGN_IN_COOKIE,
        &token,
        Some(Duration::minutes(30)),
    ));
    r
}

async fn form(req: HttpRequest, state: State, console: ConsoleData) -> HttpResponse {
    if operator(&req, &state, &console).await.is_ok() {
        return see_other("/console/health");
    }
    sign_in_page(&req, 200, None)
}

async fn sign_in(
    req: HttpRequest,
    state: State,
    console: ConsoleData,
    payload: web::Payload,
) -> HttpResponse {
    if let Some(peer) = req.peer_addr() {
        if let Err(wait) = console.sessions.allow_sign_in(peer.ip()) {
            let mut r = sign_in_page(
                &req,
                429,
                Some(&format!(
                    "Too many sign-in attempts from your address. Try again in {wait} seconds."
                )),
            );
            r.headers_mut().insert(
                actix_web::http::header::RETRY_AFTER,
                actix_web::http::header::HeaderValue::from(wait),
            );
            return r;
        }
    }
    let form = match read_form(payload).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    let expected = cookie_value(&req, session::SIGN_IN_COOKIE).unwrap_or_default();
    if !session::same_secret(form.text("csrf"), &expected) {
        return forbidden();
    }
    if !admin_token_matches(form.text("token").trim(), &state.admin_token) {
        return sign_in_page(&req, 401, Some("That is not the admin token."));
    }
    let token = console.sessions.create(state.kobo.clock.now()).await;
    let mut r = see_other("/console/health");
    let max_age = Duration::hours(session::MAX_AGE_HOURS);
    let _ = r.add_cookie(&cookie(&req, session::COOKIE, &token, Some(max_age)));
    let _ = r.add_cookie(&cookie(&req, session::SIGN_IN_COOKIE, "", None));
    r
}

async fn sign_out(
    req: HttpRequest,
    state: State,
    console: ConsoleData,
    payload: web::Payload,
) -> HttpResponse {
    let (op, _) = match super::post(&req, &state, &console, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    console.sessions.remove(&op.token).await;
    let mut r = see_other("/console/sign-in");
    let _ = r.add_cookie(&cookie(&req, session::COOKIE, "", None));
    r
}
