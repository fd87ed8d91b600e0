//! The merchant dashboard's security, black-box over HTTP: the operator's
//! invitation, one-time set-password links, the session cookie's flags,
//! CSRF tokens, sign-in throttles, expired, signed-out and revoked
//! sessions, roles (a viewer refused key rolls and payouts with a 403
//! page), and a session of one merchant never seeing or touching another
//! merchant's objects.

use serde_json::json;

use crate::helpers::dashboard::{
    invite, person, set_password, sign_in, sign_in_page, Dash, PASSWORD,
};
use crate::helpers::pages::location;
use crate::helpers::{spawn_app, Merchant, TestApp};
use crate::usdt::{trc20, wallet};

/// Puts naira in `available` and adds a bank account (for payouts).
async fn funded_account(app: &TestApp, key: &str) -> String {
    app.paid_intent(key, 5_000_000).await;
    app.post(key, "/v1/test_helpers/balance/release_pending", json!({}))
        .await
        .assert_status(200);
    let r = app
        .post(
            key,
            "/v1/bank_accounts",
            json!({"bank_code": "058", "account_number": "0123456789"}),
        )
        .await;
    r.body["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn the_operator_invites_the_first_owner_who_sets_a_password_once_and_signs_in() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let link = invite(&app, &m.id, "Ada@Example.com", "owner").await;
    assert!(link.starts_with(&format!("{}/dashboard/set-password/", app.base)));
    // Bad input changes nothing.
    let users = format!("/admin/v1/merchants/{}/users", m.id);
    app.admin_post(&users, json!({"email": "ada@example.com"}))
        .await
        .assert_error(409, "email_taken", None);
    app.admin_post(&users, json!({"email": "not an email"}))
        .await
        .assert_error(400, "parameter_invalid", Some("email"));
    app.admin_post(&users, json!({"email": "b@example.com", "role": "admin"}))
        .await
        .assert_error(400, "parameter_invalid", Some("role"));
    app.admin_post(&users, json!({}))
        .await
        .assert_error(400, "parameter_missing", Some("email"));
    app.admin_post(
        "/admin/v1/merchants/00000000-0000-4000-8000-000000000000/users",
        json!({"email": "c@example.com"}),
    )
    .await
    .assert_error(404, "resource_missing", None);
    // No password yet: signing in fails the same way as a wrong password.
    assert_eq!(
        sign_in_page(&app, "ada@example.com", PASSWORD).await.status,
        401
    );
    // A short password is refused and the link still works.
    assert_eq!(set_password(&app, &link, "short").await.status, 400);
    let set = set_password(&app, &link, PASSWORD).await;
    assert_eq!(set.status, 303);
    assert_eq!(location(&set), "/dashboard/sign-in");
    // The link works once.
    assert_eq!(
        set_password(&app, &link, "another long password")
            .await
            .status,
        404
    );
    // The email is matched without case.
    let p = sign_in_page(&app, "ADA@example.com", PASSWORD).await;
    assert_eq!(p.status, 303);
    let cookie = p.headers["set-cookie"].to_str().unwrap();
    assert!(cookie.starts_with("kobo_dashboard="), "{cookie}");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(cookie.contains("Path=/dashboard"), "{cookie}");
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    let dash = sign_in(&app, "ada@example.com", PASSWORD).await;
    let home = dash.open(&app, "/dashboard").await;
    assert_eq!(home.status, 200);
    assert!(home.html.contains("ada@example.com (owner)"));
    let csp = home.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    // The invitation is in the operator's audit log.
    let audit = app
        .admin_get("/admin/v1/audit?action=dashboard_user.invited")
        .await;
    assert_eq!(audit.body["data"].as_array().unwrap().len(), 1);
    // A wrong password.
    assert_eq!(
        sign_in_page(&app, "ada@example.com", "wrong password!!")
            .await
            .status,
        401
    );
}

#[tokio::test]
async fn the_session_cookie_is_secure_when_the_request_came_over_https() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let link = invite(&app, &m.id, "ada@example.com", "owner").await;
    set_password(&app, &link, PASSWORD).await;
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([("email", "ada@example.com"), ("password", PASSWORD)])
        .finish();
    let r = crate::helpers::pages::browser()
        .post(format!("{}/dashboard/sign-in", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-forwarded-proto", "https")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let cookie = r.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.contains("Secure"), "{cookie}");
}

#[tokio::test]
async fn a_form_without_the_sessions_csrf_token_is_refused_with_a_403_page_and_changes_nothing() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let owner = person(&app, &m, "ada@example.com", "owner").await;
    let other = person(&app, &m, "bola@example.com", "owner").await;
    let pi = app.paid_intent(&m.test_key, 100_000).await;
    let id = pi["id"].as_str().unwrap();
    let refund = format!("/dashboard/payments/{id}/refund");
    let page = format!("/dashboard/payments/{id}");
    // No token, a wrong one, and another session's.
    let html = other.open(&app, &page).await.html;
    let others = crate::helpers::pages::hidden(&html, "csrf");
    for fields in [
        vec![("nonce", "abcdefgh12")],
        vec![("csrf", "0000"), ("nonce", "abcdefgh12")],
        vec![("csrf", others.as_str()), ("nonce", "abcdefgh12")],
    ] {
        let r = owner.post(&app, &refund, &fields).await;
        assert_eq!(r.status, 403, "{}", r.html);
        assert!(r.html.contains("did not come from this dashboard"));
    }
    for path in [
        "/dashboard/developers/roll-key",
        "/dashboard/settings/wallets",
        "/dashboard/sign-out",
    ] {
        assert_eq!(
            owner.post(&app, path, &[("confirm", "yes")]).await.status,
            403,
            "{path}"
        );
    }
    let refunds = app.get(&m.test_key, "/v1/refunds").await;
    assert_eq!(refunds.body["data"].as_array().unwrap().len(), 0);
    // The key still works (no roll happened) and the session is still open.
    app.get(&m.test_key, "/v1/balance").await.assert_status(200);
    assert_eq!(owner.open(&app, "/dashboard").await.status, 200);
    // With its token, the same refund goes through the API's path, once
    // per form (the nonce is the Idempotency-Key).
    let html = owner.open(&app, &page).await.html;
    let fields = [
        ("csrf", crate::helpers::pages::hidden(&html, "csrf")),
        ("nonce", crate::helpers::pages::hidden(&html, "nonce")),
        ("amount", "300".to_string()),
    ];
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for _ in 0..2 {
        let r = owner.post(&app, &refund, &fields).await;
        assert_eq!(r.status, 303, "{}", r.html);
    }
    let refunds = app.get(&m.test_key, "/v1/refunds").await;
    let data = refunds.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "one refund for one form");
    assert_eq!(data[0]["amount"], 30_000);
    assert_eq!(data[0]["payment_intent"], id);
}

#[tokio::test]
async fn a_session_of_one_merchant_never_sees_or_touches_another_merchants_objects() {
    let app = spawn_app().await;
    let a = app.merchant().await;
    let b = app
        .create_merchant(json!({"usdt": {"enabled": true}}))
        .await;
    let dash_a = person(&app, &a, "ada@example.com", "owner").await;
    let bola = person(&app, &b, "bola@example.com", "owner").await;
    let pi = app.paid_intent(&b.test_key, 100_000).await;
    let pid = pi["id"].as_str().unwrap().to_string();
    let account = funded_account(&app, &b.test_key).await;
    let payout = app
        .post(
            &b.test_key,
            "/v1/payouts",
            json!({"amount": 10_000, "currency": "NGN", "bank_account_id": account}),
        )
        .await;
    payout.assert_status(201);
    let payout_id = payout.body["id"].as_str().unwrap().to_string();
    let wallet_id = wallet(&app, &b, &trc20("b1")).await;
    let link = invite(&app, &b.id, "chidi@example.com", "viewer").await;
    set_password(&app, &link, PASSWORD).await;
    let chidi = sign_in(&app, "chidi@example.com", PASSWORD).await;
    let team = app
        .admin_get(&format!(
            "/admin/v1/audit?merchant={}&action=dashboard_user.invited",
            b.id
        ))
        .await;
    let chidi_id = team.body["data"][0]["target"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // Reads: B's payment is unknown to A, on its page and in A's lists.
    let r = dash_a
        .open(&app, &format!("/dashboard/payments/{pid}"))
        .await;
    assert_eq!(r.status, 404);
    for path in [
        "/dashboard/payments",
        "/dashboard",
        "/dashboard/payouts",
        "/dashboard/settings",
        "/dashboard/payments/rows",
        "/dashboard/balance",
        "/dashboard/balance/export.csv",
    ] {
        let r = dash_a.open(&app, path).await;
        assert_eq!(r.status, 200, "{path}");
        for secret in [
            pid.as_str(),
            payout_id.as_str(),
            wallet_id.as_str(),
            "bola@example.com",
            "chidi@example.com",
        ] {
            assert!(!r.html.contains(secret), "{path} shows {secret}");
        }
    }
    let search = dash_a
        .open(
            &app,
            &format!(
                "/dashboard/payments?reference={}",
                pi["reference"].as_str().unwrap_or("x")
            ),
        )
        .await;
    assert!(!search.html.contains(&pid));
    // Actions on B's objects: 404, and nothing changes.
    let actions = [
        (
            format!("/dashboard/payments/{pid}/refund"),
            "/dashboard/payments",
        ),
        (
            format!("/dashboard/payouts/{payout_id}/cancel"),
            "/dashboard/payouts",
        ),
        (
            format!("/dashboard/settings/wallets/{wallet_id}/clear"),
            "/dashboard/settings",
        ),
        (
            format!("/dashboard/settings/team/{chidi_id}/sign-out"),
            "/dashboard/settings",
        ),
    ];
    for (action, page) in &actions {
        let r = dash_a.submit(&app, page, action, &[]).await;
        assert_eq!(r.status, 404, "{action}: {}", r.html);
    }
    let settle = dash_a
        .submit(
            &app,
            "/dashboard/settings",
            "/dashboard/settings/settle-wallet",
            &[("wallet", &wallet_id)],
        )
        .await;
    assert_eq!(settle.status, 404);
    let payout_to_b = dash_a
        .submit(
            &app,
            "/dashboard/payouts",
            "/dashboard/payouts/create",
            &[("amount", "10000"), ("bank_account_id", &account)],
        )
        .await;
    assert_eq!(payout_to_b.status, 400, "{}", payout_to_b.html);
    assert!(
        payout_to_b.html.contains("bank_account"),
        "{}",
        payout_to_b.html
    );
    assert_eq!(
        app.get(&b.test_key, "/v1/refunds").await.body["data"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let po = app
        .get(&b.test_key, &format!("/v1/payouts/{payout_id}"))
        .await;
    assert_ne!(po.body["status"], "canceled");
    assert_eq!(
        app.get(&a.test_key, "/v1/payouts").await.body["data"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let usdt = app.get(&b.test_key, "/v1/usdt").await;
    assert!(
        usdt.text.contains(&wallet_id),
        "B's wallet is still there: {}",
        usdt.text
    );
    assert_eq!(
        chidi.open(&app, "/dashboard").await.status,
        200,
        "B's viewer still signed in"
    );
    // B's owner sees B's own payment.
    assert_eq!(
        bola.open(&app, &format!("/dashboard/payments/{pid}"))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn sign_in_is_throttled_per_email_and_per_ip() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let link = invite(&app, &m.id, "ada@example.com", "owner").await;
    set_password(&app, &link, PASSWORD).await;
    for _ in 0..5 {
        assert_eq!(
            sign_in_page(&app, "ada@example.com", "wrong password!!")
                .await
                .status,
            401
        );
    }
    // The sixth attempt is refused before the password is checked: the
    // right password too.
    let r = sign_in_page(&app, "ada@example.com", PASSWORD).await;
    assert_eq!(r.status, 429);
    assert!(r.headers.contains_key("retry-after"));
    assert!(r.html.contains("Too many sign-in attempts"));
    assert_eq!(
        sign_in_page(&app, "Ada@Example.com", PASSWORD).await.status,
        429
    );
    // Other emails from the same IP, until the IP's own limit (20).
    let mut refused_at = None;
    for i in 0..20 {
        let r = sign_in_page(&app, &format!("guess{i}@example.com"), "wrong password!!").await;
        if r.status == 429 {
            refused_at = Some(i);
            break;
        }
        assert_eq!(r.status, 401);
    }
    // 7 attempts were already counted against the IP.
    assert_eq!(refused_at, Some(13));
}

#[tokio::test]
async fn a_signed_out_an_idle_an_old_and_a_revoked_session_is_refused() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let owner = person(&app, &m, "ada@example.com", "owner").await;
    // Signed out.
    let second = sign_in(&app, "ada@example.com", PASSWORD).await;
    let out = second
        .submit(&app, "/dashboard", "/dashboard/sign-out", &[])
        .await;
    assert_eq!(out.status, 303);
    assert!(out.headers["set-cookie"]
        .to_str()
        .unwrap()
        .contains("kobo_dashboard=;"));
    assert!(to_sign_in(&app, &second).await);
    assert!(
        !to_sign_in(&app, &owner).await,
        "another session of the same person stays"
    );
    // Idle for more than 30 minutes.
    app.advance(29 * 60).await;
    assert!(!to_sign_in(&app, &owner).await);
    app.advance(31 * 60).await;
    assert!(to_sign_in(&app, &owner).await);
    // Used every 20 minutes, it still ends 12 hours after sign-in.
    let busy = sign_in(&app, "ada@example.com", PASSWORD).await;
    for _ in 0..35 {
        app.advance(20 * 60).await;
        assert!(!to_sign_in(&app, &busy).await);
    }
    app.advance(20 * 60).await;
    assert!(to_sign_in(&app, &busy).await);
    // Revoked: an owner signs a developer out everywhere.
    let owner = sign_in(&app, "ada@example.com", PASSWORD).await;
    let dev = person(&app, &m, "dev@example.com", "developer").await;
    let dev2 = sign_in(&app, "dev@example.com", PASSWORD).await;
    let settings = owner.open(&app, "/dashboard/settings").await.html;
    let at =
        settings.find("/dashboard/settings/team/").unwrap() + "/dashboard/settings/team/".len();
    let dev_id = settings[at..].split('/').next().unwrap().to_string();
    // A developer cannot revoke anyone.
    let r = dev
        .submit(
            &app,
            "/dashboard",
            &format!("/dashboard/settings/team/{dev_id}/sign-out"),
            &[],
        )
        .await;
    assert_eq!(r.status, 403);
    let r = owner
        .submit(
            &app,
            "/dashboard/settings",
            &format!("/dashboard/settings/team/{dev_id}/sign-out"),
            &[],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.html);
    assert!(to_sign_in(&app, &dev).await);
    assert!(to_sign_in(&app, &dev2).await);
    assert!(!to_sign_in(&app, &owner).await);
    // A made-up cookie.
    let fake = Dash {
        cookie: "kobo_dashboard=abc".into(),
    };
    assert!(to_sign_in(&app, &fake).await);
}

#[tokio::test]
async fn a_viewer_is_refused_key_rolls_and_payouts_with_a_403_page_and_nothing_changes() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let account = funded_account(&app, &m.test_key).await;
    let viewer = person(&app, &m, "vee@example.com", "viewer").await;
    let dev = person(&app, &m, "dev@example.com", "developer").await;
    let pi = app.paid_intent(&m.test_key, 100_000).await;
    let pid = pi["id"].as_str().unwrap();
    for who in [&viewer, &dev] {
        let r = who
            .submit(
                &app,
                "/dashboard/developers",
                "/dashboard/developers/roll-key",
                &[("confirm", "yes")],
            )
            .await;
        assert_eq!(r.status, 403, "{}", r.html);
        assert!(r.html.contains("Only an owner can roll keys."));
        let r = who
            .submit(
                &app,
                "/dashboard/payouts",
                "/dashboard/payouts/enquire",
                &[
                    ("bank_code", "058"),
                    ("account_number", "0123456789"),
                    ("amount", "100"),
                ],
            )
            .await;
        assert_eq!(r.status, 403);
        let r = who
            .submit(
                &app,
                "/dashboard/payouts",
                "/dashboard/payouts/create",
                &[("amount", "10000"), ("bank_account_id", &account)],
            )
            .await;
        assert_eq!(r.status, 403);
        assert!(r.html.contains("Only an owner can send or cancel payouts."));
        let page = who.open(&app, "/dashboard/developers").await.html;
        assert!(!page.contains("roll-key"), "no roll form for a non-owner");
    }
    // A viewer cannot refund either; a developer can.
    let r = viewer
        .submit(
            &app,
            &format!("/dashboard/payments/{pid}"),
            &format!("/dashboard/payments/{pid}/refund"),
            &[],
        )
        .await;
    assert_eq!(r.status, 403);
    let r = dev
        .submit(
            &app,
            &format!("/dashboard/payments/{pid}"),
            &format!("/dashboard/payments/{pid}/refund"),
            &[],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.html);
    // The key still works; no payout was made.
    app.get(&m.test_key, "/v1/balance").await.assert_status(200);
    assert_eq!(
        app.get(&m.test_key, "/v1/payouts").await.body["data"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

/// Whether the session is sent to the sign-in page.
async fn to_sign_in(app: &TestApp, d: &Dash) -> bool {
    let r = d.open(app, "/dashboard/payments").await;
    r.status == 303 && location(&r) == "/dashboard/sign-in"
}

/// `m`'s owner, signed in.
async fn owner(app: &TestApp, m: &Merchant) -> Dash {
    person(app, m, "ada@example.com", "owner").await
}

#[tokio::test]
async fn an_owner_rolls_a_key_sends_a_payout_after_name_enquiry_and_manages_usdt_wallets() {
    let app = spawn_app().await;
    let m = app
        .create_merchant(json!({"usdt": {"enabled": true}}))
        .await;
    funded_account(&app, &m.test_key).await;
    let dash = owner(&app, &m).await;
    // Key roll: shown once, the old key refused.
    let no_confirm = dash
        .submit(
            &app,
            "/dashboard/developers",
            "/dashboard/developers/roll-key",
            &[],
        )
        .await;
    assert_eq!(no_confirm.status, 400);
    app.get(&m.test_key, "/v1/balance").await.assert_status(200);
    let r = dash
        .submit(
            &app,
            "/dashboard/developers",
            "/dashboard/developers/roll-key",
            &[("confirm", "yes")],
        )
        .await;
    assert_eq!(r.status, 200);
    let at = r.html.find(r#"<code id="new-key" class="wrap">"#).unwrap()
        + r#"<code id="new-key" class="wrap">"#.len();
    let key = r.html[at..].split('<').next().unwrap().to_string();
    assert!(key.starts_with("svc_test_"), "{key}");
    assert_eq!(app.get(&m.test_key, "/v1/balance").await.status, 401);
    app.get(&key, "/v1/balance").await.assert_status(200);
    assert!(!dash
        .open(&app, "/dashboard/developers")
        .await
        .html
        .contains(&key));
    let audit = app
        .admin_get("/admin/v1/audit?action=merchant.key_rolled")
        .await;
    assert_eq!(audit.body["data"][0]["origin"], "dashboard");
    // The request log shows the API calls made with the keys.
    app.get(&key, "/v1/payouts/po_unknown")
        .await
        .assert_status(404);
    let log = dash.open(&app, "/dashboard/developers").await.html;
    assert!(log.contains("/v1/balance"), "{log}");
    assert!(log.contains(r#"<td class="code-4">404</td>"#), "{log}");
    assert!(log.contains(r#"<td class="code-2">200</td>"#), "{log}");
    // Payout: the name enquiry is shown before anything is sent.
    let before = app.balance(&key, "available", "NGN").await;
    let r = dash
        .submit(
            &app,
            "/dashboard/payouts",
            "/dashboard/payouts/enquire",
            &[
                ("bank_code", "058"),
                ("account_number", "0123456789"),
                ("amount", "1000"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.html);
    assert!(r.html.contains(r#"<dd id="account-name">"#));
    assert_eq!(app.balance(&key, "available", "NGN").await, before);
    assert_eq!(
        app.get(&key, "/v1/payouts").await.body["data"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let csrf = crate::helpers::pages::hidden(&r.html, "csrf");
    let confirm: Vec<(String, String)> = ["nonce", "bank_account_id", "amount", "brand"]
        .iter()
        .map(|n| (n.to_string(), crate::helpers::pages::hidden(&r.html, n)))
        .collect();
    let mut fields: Vec<(&str, &str)> = vec![("csrf", &csrf)];
    fields.extend(confirm.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let sent = dash.post(&app, "/dashboard/payouts/create", &fields).await;
    assert_eq!(sent.status, 303, "{}", sent.html);
    // The same form again is the same payout (its nonce is the key).
    assert_eq!(
        dash.post(&app, "/dashboard/payouts/create", &fields)
            .await
            .status,
        303
    );
    let payouts = app.get(&key, "/v1/payouts").await;
    assert_eq!(payouts.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(payouts.body["data"][0]["amount"], 100_000);
    // A payout over the balance: the API's error, on the page.
    let r = dash
        .submit(
            &app,
            "/dashboard/payouts",
            "/dashboard/payouts/enquire",
            &[
                ("bank_code", "058"),
                ("account_number", "1234560000"),
                ("amount", "1000"),
            ],
        )
        .await;
    assert_eq!(r.status, 400);
    // USDT wallets: add, settle, clear.
    let addr = trc20("d1");
    let r = dash
        .submit(
            &app,
            "/dashboard/settings",
            "/dashboard/settings/wallets",
            &[
                ("network", "TRC20"),
                ("address", &addr),
                ("label", "<b>cold</b>"),
            ],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.html);
    let page = dash.open(&app, "/dashboard/settings").await.html;
    assert!(page.contains(&addr));
    assert!(page.contains("&lt;b&gt;cold&lt;/b&gt;") && !page.contains("<b>cold</b>"));
    let bad = dash
        .submit(
            &app,
            "/dashboard/settings",
            "/dashboard/settings/wallets",
            &[("network", "TRC20"), ("address", "nope")],
        )
        .await;
    assert_eq!(bad.status, 400);
    let usdt = app.get(&key, "/v1/usdt").await;
    let wallet_id = usdt.body["wallets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["address"] == addr.as_str())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = dash
        .submit(
            &app,
            "/dashboard/settings",
            "/dashboard/settings/settle-wallet",
            &[("wallet", &wallet_id)],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.html);
    let merchant = app
        .admin_get(&format!("/admin/v1/merchants/{}", m.id))
        .await;
    assert_eq!(
        merchant.body["settings"]["usdt"]["settle_wallet"],
        wallet_id.as_str()
    );
    assert_eq!(
        merchant.body["settings"]["usdt"]["enabled"], true,
        "the rest of usdt kept"
    );
    let r = dash
        .submit(
            &app,
            "/dashboard/settings",
            &format!("/dashboard/settings/wallets/{wallet_id}/clear"),
            &[],
        )
        .await;
    assert_eq!(r.status, 303);
    assert!(!app.get(&key, "/v1/usdt").await.text.contains(&addr));
}

#[tokio::test]
async fn balance_transactions_download_as_the_apis_csv_and_only_the_sessions_merchant_and_mode() {
    let app = spawn_app().await;
    let a = app.merchant().await;
    let b = app.create_merchant(json!({})).await;
    let dash = owner(&app, &a).await;
    let pa = app.paid_intent(&a.test_key, 100_000).await;
    let pb = app.paid_intent(&b.test_key, 200_000).await;
    let page = dash.open(&app, "/dashboard/balance").await;
    assert_eq!(page.status, 200);
    assert!(page.html.contains(r#"<tbody id="balance-rows"><tr><td>"#));
    let csv = dash.open(&app, "/dashboard/balance/export.csv").await;
    assert_eq!(csv.status, 200);
    assert!(csv.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    assert!(csv.headers["content-disposition"]
        .to_str()
        .unwrap()
        .starts_with("attachment; filename=\"kobo-statement-test-"));
    // The same rows the API's export writes for the same lines.
    let api = app
        .get(&a.test_key, "/v1/balance_transactions/export")
        .await;
    assert_eq!(csv.html, api.body["data"].as_str().unwrap());
    let mut reader = csv::Reader::from_reader(csv.html.as_bytes());
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| &r[9] == pa["id"].as_str().unwrap()));
    assert!(!csv.html.contains(pb["id"].as_str().unwrap()));
    // Signed out: no download.
    let gone = Dash {
        cookie: "kobo_dashboard=nope".into(),
    };
    assert_eq!(
        gone.open(&app, "/dashboard/balance/export.csv")
            .await
            .status,
        303
    );
}
