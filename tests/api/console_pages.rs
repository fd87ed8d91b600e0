//! The operator console's pages over HTTP: each is under a strict
//! Content-Security-Policy and 200 KB, escapes merchant-controlled text,
//! and acts through the operator API's own path (same validation, audit
//! entries with origin `console`, same effects).

use serde_json::{json, Value};

use crate::helpers::console::ConsoleBrowser;
use crate::helpers::pages::location;
use crate::helpers::{spawn_app, Merchant, TestApp};

const PAGES: &[&str] = &[
    "/console/health",
    "/console/merchants",
    "/console/payouts",
    "/console/fx",
    "/console/clock",
    "/console/sign-in",
];

#[tokio::test]
async fn every_page_is_under_a_strict_policy_and_two_hundred_kilobytes_with_its_assets() {
    let app = spawn_app().await;
    let b = ConsoleBrowser::sign_in(&app).await;
    let m = app.merchant().await;
    app.paid_intent(&m.test_key, 10000).await;
    let assets: usize = ["/console/assets/console.js", "/console/assets/console.css"]
        .iter()
        .map(|p| {
            let b = &b;
            async move {
                let r = b.get(p).await;
                assert_eq!(r.status, 200, "{p}");
                assert_eq!(r.headers["x-content-type-options"], "nosniff");
                r.html.len()
            }
        })
        .collect::<futures_util::future::JoinAll<_>>()
        .await
        .into_iter()
        .sum();
    let merchant_page = format!("/console/merchants/{}", m.id);
    for path in PAGES.iter().copied().chain([merchant_page.as_str()]) {
        let p = if path == "/console/sign-in" {
            ConsoleBrowser::new(&app).get(path).await
        } else {
            b.get(path).await
        };
        assert_eq!(p.status, 200, "{path}");
        let csp = p.headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"));
        assert!(!csp.contains("unsafe-inline"));
        assert_eq!(p.headers["x-frame-options"], "DENY");
        assert_eq!(p.headers["cache-control"], "no-store");
        assert!(
            !p.html.contains("<script>") && !p.html.contains("style="),
            "{path}: inline"
        );
        assert!(p.html.contains(r#"name="viewport""#));
        assert!(
            p.html.len() + assets < 200 * 1024,
            "{path}: {} bytes",
            p.html.len()
        );
        // Every input has its label.
        for id in p
            .html
            .split(r#"<input id=""#)
            .skip(1)
            .map(|s| s.split('"').next().unwrap())
        {
            assert!(
                p.html.contains(&format!(r#"<label for="{id}">"#)),
                "{path}: #{id} unlabelled"
            );
        }
    }
}

#[tokio::test]
async fn merchant_controlled_text_is_escaped_on_every_page() {
    let app = spawn_app().await;
    let evil = r#"<img src=x onerror=alert(1)>"#;
    let m = app
        .create_merchant(json!({"payout_approval_threshold": 50_000}))
        .await;
    app.admin_post(
        &format!("/admin/v1/merchants/{}", m.id),
        json!({"settings": {}}),
    )
    .await
    .assert_status(200);
    let made = app
        .admin_post("/admin/v1/merchants", json!({"name": evil}))
        .await;
    made.assert_status(201);
    let id = made.body["id"].as_str().unwrap();
    let b = ConsoleBrowser::sign_in(&app).await;
    for path in [
        "/console/merchants?q=onerror".to_string(),
        format!("/console/merchants/{id}"),
    ] {
        let p = b.get(&path).await;
        assert!(!p.html.contains(evil), "{path}");
        assert!(
            p.html.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{path}"
        );
    }
    // A search term is echoed escaped.
    let p = b.get("/console/merchants?q=%22%3E%3Cb%3E").await;
    assert!(p.html.contains("&quot;&gt;&lt;b&gt;") && !p.html.contains("\"><b>"));
}

/// A merchant with `payout_approval_threshold`, funded, with `n` payouts of
/// 60,000 waiting for approval.
pub(crate) async fn waiting_payouts(app: &TestApp, n: usize) -> (Merchant, Vec<String>) {
    let m = app
        .create_merchant(json!({"payout_approval_threshold": 50_000}))
        .await;
    app.paid_intent(&m.test_key, 1_000_000).await;
    app.post(
        &m.test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await
    .assert_status(200);
    let acct = app
        .post(
            &m.test_key,
            "/v1/bank_accounts",
            json!({"bank_code": "058", "account_number": "0123456789"}),
        )
        .await;
    let acct = acct.body["id"].as_str().unwrap().to_string();
    let mut ids = Vec::new();
    for _ in 0..n {
        let p = app
            .post(
                &m.test_key,
                "/v1/payouts",
                json!({"amount": 60_000, "currency": "NGN", "bank_account_id": acct}),
            )
            .await;
        assert_eq!(p.body["status"], "awaiting_approval");
        ids.push(p.body["id"].as_str().unwrap().to_string());
    }
    (m, ids)
}

async fn payout_status(app: &TestApp, m: &Merchant, id: &str) -> Value {
    app.get(&m.test_key, &format!("/v1/payouts/{id}"))
        .await
        .body["status"]
        .clone()
}

#[tokio::test]
async fn payouts_waiting_for_approval_are_approved_and_rejected_through_the_operator_path() {
    let app = spawn_app().await;
    let (m, ids) = waiting_payouts(&app, 2).await;
    let b = ConsoleBrowser::sign_in(&app).await;
    let list = b.get("/console/payouts").await;
    for id in &ids {
        assert!(list.html.contains(id.as_str()));
    }
    assert!(list.html.contains("₦600.00"));
    let r = b
        .submit(
            "/console/payouts",
            &format!("/console/payouts/{}/approve", ids[0]),
            &[],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.html);
    assert_eq!(location(&r), "/console/payouts?done=approved");
    assert_eq!(payout_status(&app, &m, &ids[0]).await, "queued");
    let r = b
        .submit(
            "/console/payouts",
            &format!("/console/payouts/{}/reject", ids[1]),
            &[],
        )
        .await;
    assert_eq!(location(&r), "/console/payouts?done=rejected");
    assert_eq!(payout_status(&app, &m, &ids[1]).await, "canceled");
    let list = b.get("/console/payouts?done=rejected").await;
    assert!(list.html.contains("No payout is waiting for approval."));
    // Approving again is the API's 409, shown on the page; nothing changes.
    let r = b
        .submit(
            "/console/payouts",
            &format!("/console/payouts/{}/approve", ids[1]),
            &[],
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.html);
    assert_eq!(payout_status(&app, &m, &ids[1]).await, "canceled");
    let audit = app
        .admin_get("/admin/v1/audit?action=payout.approved")
        .await;
    assert_eq!(audit.body["data"][0]["origin"], "console");
}

#[tokio::test]
async fn merchants_are_created_searched_approved_for_live_and_their_settings_changed() {
    let app = spawn_app().await;
    let b = ConsoleBrowser::sign_in(&app).await;
    let r = b
        .submit(
            "/console/merchants",
            "/console/merchants",
            &[("name", "Ada Foods")],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.html);
    let at = location(&r);
    let id = at
        .strip_prefix("/console/merchants/")
        .unwrap()
        .split('?')
        .next()
        .unwrap()
        .to_string();
    let page = b.get(&at).await;
    assert!(page.html.contains("Merchant created."));
    assert!(!page.html.contains("svc_test_"), "keys are never shown");
    // An empty name is the API's 400, on the field.
    let r = b
        .submit(
            "/console/merchants",
            "/console/merchants",
            &[("name", "  ")],
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r.html.contains("(name)"));
    let found = b.get("/console/merchants?q=ada").await;
    assert!(found.html.contains(&id));
    assert!(b
        .get(&format!("/console/merchants?q={id}"))
        .await
        .html
        .contains("Ada Foods"));

    let page = format!("/console/merchants/{id}");
    let r = b.submit(&page, &page, &[("action", "live")]).await;
    assert_eq!(r.status, 303, "{}", r.html);
    let r = b
        .submit(&page, &page, &[("action", "tier"), ("tier", "verified")])
        .await;
    assert_eq!(r.status, 303);
    let r = b
        .submit(
            &page,
            &page,
            &[
                ("action", "limits"),
                ("threshold", "75000"),
                ("per_payout", "100000"),
                ("daily", "300000"),
            ],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.html);
    let r = b
        .submit(
            &page,
            &page,
            &[
                ("action", "patch"),
                ("patch", r#"{"card_api_enabled": true}"#),
            ],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.html);
    let s = app
        .admin_get(&format!("/admin/v1/merchants/{id}"))
        .await
        .body["settings"]
        .clone();
    assert_eq!(s["live_approved"], true);
    assert_eq!(s["payout_tier"], "verified");
    assert_eq!(s["payout_approval_threshold"], 75000);
    assert_eq!(
        s["payout_limits"],
        json!({"per_payout": 100000, "daily": 300000})
    );
    assert_eq!(s["card_api_enabled"], true);
    // Bad settings are the API's errors, naming the field; nothing changes.
    let r = b
        .submit(&page, &page, &[("action", "tier"), ("tier", "gold")])
        .await;
    assert_eq!(r.status, 400, "{}", r.html);
    let r = b
        .submit(&page, &page, &[("action", "patch"), ("patch", "{not json")])
        .await;
    assert_eq!(r.status, 400);
    assert!(r.html.contains("the patch is not JSON"));
    let after = app
        .admin_get(&format!("/admin/v1/merchants/{id}"))
        .await
        .body["settings"]
        .clone();
    assert_eq!(after, s);
    let audit = app
        .admin_get(&format!(
            "/admin/v1/audit?merchant={id}&action=merchant.live_approved"
        ))
        .await;
    assert_eq!(audit.body["data"][0]["origin"], "console");
    assert_eq!(b.get("/console/merchants/nope").await.status, 404);
}

#[tokio::test]
async fn fx_rates_are_published_and_charted() {
    let app = spawn_app().await;
    let b = ConsoleBrowser::sign_in(&app).await;
    for rate in ["150000", "155000", "160000"] {
        let r = b
            .submit("/console/fx", "/console/fx", &[("rate", rate)])
            .await;
        assert_eq!(r.status, 303, "{}", r.html);
    }
    let page = b.get("/console/fx?done=published").await;
    assert!(page.html.contains("Rate published."));
    assert!(page.html.contains("₦1,600.00 per US dollar"));
    assert!(page.html.contains("<svg") && page.html.contains("<polyline"));
    let r = b
        .submit("/console/fx", "/console/fx", &[("rate", "0")])
        .await;
    assert_eq!(r.status, 400);
    let r = b
        .submit("/console/fx", "/console/fx", &[("rate", "abc")])
        .await;
    assert_eq!(r.status, 400);
    assert!(r.html.contains("(rate)"));
}

#[tokio::test]
async fn the_health_page_plots_the_health_ring_and_its_fragment_refreshes() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    app.paid_intent(&m.test_key, 10000).await;
    let b = ConsoleBrowser::sign_in(&app).await;
    let p = b.get("/console/health").await;
    assert!(p
        .html
        .contains(r#"<script src="/console/assets/console.js" defer></script>"#));
    for title in [
        "Live actors",
        "Activations and passivations",
        "Mailbox depth",
        "Restarts",
        "Store writer commits",
        "Batches per commit",
        "Commit latency",
        "Writer queue depth",
        "Timers",
        "Webhook deliveries",
        "Event stream subscribers",
        "Actors by kind",
        "payment_intent",
    ] {
        assert!(p.html.contains(title), "{title}");
    }
    let live = b.get("/console/health/live").await;
    assert_eq!(live.status, 200);
    assert!(live.html.contains("Live actors") && !live.html.contains("<html"));
}
