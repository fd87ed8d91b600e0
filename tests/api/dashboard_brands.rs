//! Brands made from the dashboard's settings page: an owner's form goes
//! through `POST /v1/brands`' own declaration and run (its validation, the
//! form's nonce as the Idempotency-Key), checked through the API; viewers
//! and developers get the 403 page and make nothing.

use serde_json::Value;

use crate::helpers::dashboard::person;
use crate::helpers::pages::{hidden, location};
use crate::helpers::{spawn_app, TestApp};

async fn brand_names(app: &TestApp, key: &str) -> Vec<String> {
    let r = app.get(key, "/v1/brands?limit=100").await;
    r.assert_status(200);
    r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b: &Value| b["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn an_owner_adds_a_brand_from_the_settings_page_through_the_api_once_per_form() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let before = brand_names(&app, &m.test_key).await;
    let owner = person(&app, &m, "ada@example.com", "owner").await;
    let page = owner.open(&app, "/dashboard/settings").await;
    assert!(page.html.contains("Add brand"));

    // The API's own refusal, shown; nothing made.
    let blank = owner
        .submit(
            &app,
            "/dashboard/settings",
            "/dashboard/settings/brands",
            &[("name", "   ")],
        )
        .await;
    assert_eq!(blank.status, 400, "{}", blank.html);
    assert!(blank.html.contains("name"), "{}", blank.html);
    let long = "x".repeat(201);
    let too_long = owner
        .submit(
            &app,
            "/dashboard/settings",
            "/dashboard/settings/brands",
            &[("name", &long)],
        )
        .await;
    assert_eq!(too_long.status, 400);
    assert_eq!(brand_names(&app, &m.test_key).await, before);

    // One form posted twice is one brand (the nonce is the key).
    let html = owner.open(&app, "/dashboard/settings").await.html;
    let form = html
        .split(r#"action="/dashboard/settings/brands""#)
        .nth(1)
        .unwrap();
    let (csrf, nonce) = (hidden(form, "csrf"), hidden(form, "nonce"));
    let name = "Ada <Kitchen> & Bar";
    for _ in 0..2 {
        let made = owner
            .post(
                &app,
                "/dashboard/settings/brands",
                &[("csrf", &csrf), ("nonce", &nonce), ("name", name)],
            )
            .await;
        assert_eq!(made.status, 303, "{}", made.html);
        assert_eq!(location(&made), "/dashboard/settings");
    }
    let after = brand_names(&app, &m.test_key).await;
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(after[0], name);
    // Test mode only: the live mode's brands are its own.
    assert!(!brand_names(&app, &m.live_key)
        .await
        .contains(&name.to_string()));
    // Shown escaped, and on the brand switch of every page.
    let page = owner.open(&app, "/dashboard/settings").await;
    assert!(page.html.contains("Ada &lt;Kitchen&gt; &amp; Bar"));
    assert!(!page.html.contains("<Kitchen>"));
    let r = app.get(&m.test_key, "/v1/brands?limit=1").await;
    let id = r.body["data"][0]["id"].as_str().unwrap();
    assert!(owner
        .open(&app, "/dashboard")
        .await
        .html
        .contains(&format!(r#"value="{id}""#)));
}

#[tokio::test]
async fn a_viewer_or_developer_adding_a_brand_gets_the_403_page_and_nothing_is_made() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let before = brand_names(&app, &m.test_key).await;
    for (email, role) in [
        ("vi@example.com", "viewer"),
        ("dev@example.com", "developer"),
    ] {
        let p = person(&app, &m, email, role).await;
        let page = p.open(&app, "/dashboard/settings").await;
        assert_eq!(page.status, 200);
        assert!(!page.html.contains("Add brand"), "{role}");
        let refused = p
            .submit(
                &app,
                "/dashboard/settings",
                "/dashboard/settings/brands",
                &[("name", "Sneaky")],
            )
            .await;
        assert_eq!(refused.status, 403, "{role}: {}", refused.html);
    }
    // Without the CSRF token an owner makes nothing either.
    let owner = person(&app, &m, "ada@example.com", "owner").await;
    let p = owner
        .post(
            &app,
            "/dashboard/settings/brands",
            &[("nonce", "abcdefgh1234"), ("name", "Sneaky")],
        )
        .await;
    assert_eq!(p.status, 403);
    assert_eq!(brand_names(&app, &m.test_key).await, before);
}
