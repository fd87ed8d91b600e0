//! Signing in and out: the sign-in page (throttled per email and per IP,
//! see [`super::throttle`]), the one-time set-password page of an
//! invitation, sign-out, and the session cookie (HttpOnly, SameSite=Strict,
//! Path=/dashboard, Secure when the request came over HTTPS).

use actix_web::cookie::{Cookie, SameSite};
use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};

use kobo_actors::dashboard_user::{self, MIN_PASSWORD_CHARS};

use super::layout::{self, bare};
use super::throttle::SignInThrottle;
use super::{see_other, signed_in_form, Form, COOKIE};
use crate::api::State;
use crate::checkout::esc;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/dashboard/sign-in", web::get().to(sign_in_page))
        .route("/dashboard/sign-in", web::post().to(sign_in))
        .route("/dashboard/sign-out", web::post().to(sign_out))
        .route(
            "/dashboard/set-password/{token}",
            web::get().to(set_password_page),
        )
        .route(
            "/dashboard/set-password/{token}",
            web::post().to(set_password),
        );
}

/// Whether the request came over HTTPS (directly, or through a proxy that
/// says so with `X-Forwarded-Proto: https`).
fn secure(req: &HttpRequest) -> bool {
    req.connection_info().scheme() == "https"
        || req
            .headers()
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("https"))
}

fn session_cookie(req: &HttpRequest, token: &str) -> Cookie<'static> {
    Cookie::build(COOKIE, token.to_string())
        .path("/dashboard")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(secure(req))
        .finish()
}

fn sign_in_form(email: &str, error: Option<&str>) -> String {
    format!(
        r#"{alert}<form method="post" action="/dashboard/sign-in" class="card stack">
  <label for="email">Email</label>
  <input id="email" name="email" type="email" autocomplete="username" required value="{email}">
  <label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required>
  <button type="submit">Sign in</button>
</form>
<p class="hint">No account? Your business's owner invites you from the dashboard; the first owner is invited by kobo.</p>"#,
        alert = layout::alert(error),
        email = esc(email),
    )
}

async fn sign_in_page() -> HttpResponse {
    bare(200, "Sign in", &sign_in_form("", None))
}

async fn sign_in(
    req: HttpRequest,
    state: State,
    throttle: web::Data<SignInThrottle>,
    payload: web::Payload,
) -> HttpResponse {
    let form = match Form::read(payload).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    let email = form.get("email").to_string();
    let ip = req.peer_addr().map(|a| a.ip());
    if let Err(wait) = throttle.check(ip, &email) {
        let mut r = bare(
            429,
            "Sign in",
            &sign_in_form(
                &email,
                Some("Too many sign-in attempts. Wait a minute and try again."),
            ),
        );
        r.headers_mut().insert(
            header::RETRY_AFTER,
            header::HeaderValue::from(wait.as_secs().max(1)),
        );
        return r;
    }
    // The password field is read as sent (not trimmed).
    let password = form
        .0
        .iter()
        .find(|(k, _)| k == "password")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    let user = match dashboard_user::check_password(&state.kobo, &email, password).await {
        Ok(Some(u)) => u,
        Ok(None) => {
            return bare(
                401,
                "Sign in",
                &sign_in_form(&email, Some("That email and password do not match.")),
            )
        }
        Err(e) => return layout::server_error(e),
    };
    match dashboard_user::open_session(&state.kobo, &user).await {
        Ok((token, _)) => {
            let mut r = see_other("/dashboard");
            let _ = r.add_cookie(&session_cookie(&req, &token));
            r
        }
        Err(e) => layout::server_error(e),
    }
}

async fn sign_out(req: HttpRequest, state: State, payload: web::Payload) -> HttpResponse {
    let (ctx, _) = match signed_in_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    if let Err(e) = dashboard_user::close_session(&state.kobo, &ctx.token, ctx.user.id).await {
        return layout::server_error(e);
    }
    let mut r = see_other("/dashboard/sign-in");
    let mut gone = session_cookie(&req, "");
    gone.make_removal();
    let _ = r.add_cookie(&gone);
    r
}

fn set_password_form(token: &str, email: &str, error: Option<&str>) -> String {
    format!(
        r#"{alert}<p>Choose the password of <strong>{email}</strong> ({MIN_PASSWORD_CHARS} characters or more). This link works once.</p>
<form method="post" action="/dashboard/set-password/{token}" class="card stack">
  <label for="password">New password</label>
  <input id="password" name="password" type="password" autocomplete="new-password" minlength="{MIN_PASSWORD_CHARS}" required>
  <button type="submit">Set password</button>
</form>"#,
        alert = layout::alert(error),
        email = esc(email),
        token = esc(token),
    )
}

fn link_gone() -> HttpResponse {
    layout::message(
        404,
        "Link not valid",
        "This set-password link is unknown, used or expired. Ask your business's owner (or kobo) for a new invitation.",
    )
}

async fn set_password_page(state: State, path: web::Path<String>) -> HttpResponse {
    match dashboard_user::invitation(&state.kobo, &path) {
        Ok(Some((_, user))) => bare(
            200,
            "Set your password",
            &set_password_form(&path, &user.email, None),
        ),
        Ok(None) => link_gone(),
        Err(e) => layout::server_error(e),
    }
}

async fn set_password(
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    let form = match Form::read(payload).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    let user = match dashboard_user::invitation(&state.kobo, &path) {
        Ok(Some((_, u))) => u,
        Ok(None) => return link_gone(),
        Err(e) => return layout::server_error(e),
    };
    let password = form
        .0
        .iter()
        .find(|(k, _)| k == "password")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    match dashboard_user::set_password(&state.kobo, &path, password).await {
        Ok(_) => see_other("/dashboard/sign-in"),
        Err(e) if e.kind == kobo_actors::ErrorKind::InvalidRequest => bare(
            400,
            "Set your password",
            &set_password_form(&path, &user.email, Some(&e.message)),
        ),
        Err(e) if e.kind == kobo_actors::ErrorKind::NotFound => link_gone(),
        Err(e) => layout::server_error(e),
    }
}
