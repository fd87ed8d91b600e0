//! The operator console's sign-in, sessions and CSRF over HTTP: a wrong
//! admin token opens nothing, sign-in is throttled per IP, every POST
//! needs its session's CSRF token, sessions end when idle (service clock)
//! and on sign-out, and cookies are HttpOnly, SameSite=Strict and Secure
//! over HTTPS.

use crate::helpers::console::ConsoleBrowser;
use crate::helpers::pages::location;
use crate::helpers::spawn_app;

fn set_cookie(p: &crate::helpers::pages::Page, name: &str) -> Option<String> {
    p.headers
        .get_all("set-cookie")
        .iter()
        .map(|c| c.to_str().unwrap().to_string())
        .find(|c| c.starts_with(&format!("{name}=")))
}

#[tokio::test]
async fn signing_in_with_a_wrong_admin_token_is_refused_and_opens_no_session() {
    let app = spawn_app().await;
    let b = ConsoleBrowser::new(&app);
    let r = b.get("/console/health").await;
    assert_eq!(r.status, 303);
    assert_eq!(location(&r), "/console/sign-in");
    for wrong in ["", "nope", &format!("{}x", app.admin_token)] {
        let r = b.sign_in_with(wrong).await;
        assert_eq!(r.status, 401, "{wrong}: {}", r.html);
        assert!(r.html.contains("That is not the admin token."));
        assert!(set_cookie(&r, "kobo_console").is_none());
    }
    let r = b.get("/console/merchants").await;
    assert_eq!(r.status, 303, "still signed out");

    let r = b.sign_in_with(&app.admin_token).await;
    assert_eq!(r.status, 303);
    assert_eq!(location(&r), "/console/health");
    let c = set_cookie(&r, "kobo_console").unwrap();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/console", "Max-Age="] {
        assert!(c.contains(attr), "{attr} in {c}");
    }
    assert!(!c.contains("Secure"), "plain HTTP: {c}");
    assert_eq!(b.cookie("kobo_console").unwrap().len(), 64);
    assert_eq!(b.get("/console/health").await.status, 200);
}

#[tokio::test]
async fn cookies_are_secure_when_the_console_is_reached_over_https() {
    let app = spawn_app().await;
    let mut b = ConsoleBrowser::new(&app);
    b.headers.push(("x-forwarded-proto", "https".into()));
    let page = b.get("/console/sign-in").await;
    assert!(set_cookie(&page, "kobo_console_sign_in")
        .unwrap()
        .contains("Secure"));
    let r = b.sign_in_with(&app.admin_token).await;
    let c = set_cookie(&r, "kobo_console").unwrap();
    assert!(c.contains("Secure") && c.contains("HttpOnly"), "{c}");
}

#[tokio::test]
async fn sign_in_is_throttled_per_ip_even_for_the_right_token() {
    let app = spawn_app().await;
    let b = ConsoleBrowser::new(&app);
    for _ in 0..5 {
        assert_eq!(b.sign_in_with("wrong").await.status, 401);
    }
    let r = b.sign_in_with(&app.admin_token).await;
    assert_eq!(r.status, 429, "{}", r.html);
    assert!(r.html.contains("Too many sign-in attempts"));
    let wait: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait));
    assert!(set_cookie(&r, "kobo_console").is_none());
}

#[tokio::test]
async fn a_post_without_its_sessions_csrf_token_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    let b = ConsoleBrowser::sign_in(&app).await;
    let other = ConsoleBrowser::sign_in(&app).await;
    let others_token = crate::helpers::pages::hidden(&other.get("/console/fx").await.html, "csrf");
    for fields in [
        vec![("rate", "160000")],
        vec![("rate", "160000"), ("csrf", "")],
        vec![("rate", "160000"), ("csrf", "0000")],
        vec![("rate", "160000"), ("csrf", others_token.as_str())],
    ] {
        let r = b.post_raw("/console/fx", &fields).await;
        assert_eq!(r.status, 403, "{fields:?}");
        assert!(r.html.contains("Nothing was changed"));
    }
    let r = b
        .post_raw("/console/merchants", &[("name", "Forged")])
        .await;
    assert_eq!(r.status, 403);
    let r = b.post_raw("/console/clock", &[("seconds", "60")]).await;
    assert_eq!(r.status, 403);
    assert!(b
        .get("/console/fx")
        .await
        .html
        .contains("No rate has been published yet"));
    let merchants = b.get("/console/merchants?q=Forged").await;
    assert!(merchants.html.contains("No merchant matches."));
    // The sign-in form needs its own token (cookie and field) too.
    let fresh = ConsoleBrowser::new(&app);
    let r = fresh
        .post_raw("/console/sign-in", &[("token", &app.admin_token)])
        .await;
    assert_eq!(r.status, 403);
    assert!(set_cookie(&r, "kobo_console").is_none());
    // With the token the same form works.
    let r = b
        .submit("/console/fx", "/console/fx", &[("rate", "160000")])
        .await;
    assert_eq!(r.status, 303, "{}", r.html);
}

#[tokio::test]
async fn a_session_ends_after_thirty_idle_minutes_on_the_service_clock_and_on_sign_out() {
    let app = spawn_app().await;
    let b = ConsoleBrowser::sign_in(&app).await;
    app.advance(29 * 60).await;
    assert_eq!(b.get("/console/clock").await.status, 200, "29 minutes idle");
    app.advance(29 * 60).await;
    assert_eq!(
        b.get("/console/clock").await.status,
        200,
        "seen 29 minutes ago"
    );
    app.advance(31 * 60).await;
    let r = b.get("/console/clock").await;
    assert_eq!(r.status, 303);
    assert_eq!(location(&r), "/console/sign-in");

    let b = ConsoleBrowser::sign_in(&app).await;
    let kept = b.cookie("kobo_console").unwrap();
    let r = b.submit("/console/health", "/console/sign-out", &[]).await;
    assert_eq!(r.status, 303);
    assert_eq!(location(&r), "/console/sign-in");
    assert!(b.cookie("kobo_console").is_none(), "the cookie is cleared");
    b.set_cookie("kobo_console", &kept);
    let r = b.get("/console/health").await;
    assert_eq!(r.status, 303, "the session is gone on the server too");
    let r = b.get("/console/health/live").await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn moving_the_clock_from_the_console_keeps_its_session() {
    let app = spawn_app().await;
    let b = ConsoleBrowser::sign_in(&app).await;
    let before = app.now().await;
    let r = b
        .submit("/console/clock", "/console/clock", &[("seconds", "86400")])
        .await;
    assert_eq!(r.status, 303, "{}", r.html);
    assert_eq!(location(&r), "/console/clock?done=advanced");
    assert_eq!(app.now().await - before, chrono::Duration::days(1));
    let page = b.get("/console/clock?done=advanced").await;
    assert_eq!(page.status, 200);
    assert!(page.html.contains("Clock advanced"));
    // The API's own refusals show on the page, nothing moves.
    let r = b
        .submit("/console/clock", "/console/clock", &[("seconds", "-5")])
        .await;
    assert_eq!(r.status, 400);
    assert!(r.html.contains("seconds is a whole number"));
    assert_eq!(app.now().await - before, chrono::Duration::days(1));
    let audit = app.admin_get("/admin/v1/audit?action=clock.advanced").await;
    assert_eq!(audit.body["data"][0]["origin"], "console");
}

#[tokio::test]
async fn a_console_session_survives_a_restart_but_not_sign_out_idleness_or_a_new_admin_token() {
    let mut app = spawn_app().await;
    let kept = ConsoleBrowser::sign_in(&app)
        .await
        .cookie("kobo_console")
        .unwrap();
    let out = ConsoleBrowser::sign_in(&app).await;
    let signed_out = out.cookie("kobo_console").unwrap();
    let r = out
        .submit("/console/health", "/console/sign-out", &[])
        .await;
    assert_eq!(r.status, 303);

    app.restart();
    let b = ConsoleBrowser::new(&app);
    b.set_cookie("kobo_console", &kept);
    assert_eq!(b.get("/console/clock").await.status, 200, "kept");
    // Its CSRF token came back with it: a form still works.
    let r = b
        .submit("/console/clock", "/console/clock", &[("seconds", "60")])
        .await;
    assert_eq!(r.status, 303, "{}", r.html);
    let o = ConsoleBrowser::new(&app);
    o.set_cookie("kobo_console", &signed_out);
    let r = o.get("/console/clock").await;
    assert_eq!(r.status, 303);
    assert_eq!(location(&r), "/console/sign-in");

    // Idle 31 minutes across a restart: ended.
    app.advance(31 * 60).await;
    app.restart();
    let b = ConsoleBrowser::new(&app);
    b.set_cookie("kobo_console", &kept);
    assert_eq!(b.get("/console/clock").await.status, 303, "idle");

    // A new admin token ends every session.
    let b = ConsoleBrowser::sign_in(&app).await;
    let fresh = b.cookie("kobo_console").unwrap();
    app.admin_token = format!("test-admin-{}", uuid::Uuid::new_v4().simple());
    app.restart();
    let b = ConsoleBrowser::new(&app);
    b.set_cookie("kobo_console", &fresh);
    assert_eq!(b.get("/console/clock").await.status, 303, "new token");
}
