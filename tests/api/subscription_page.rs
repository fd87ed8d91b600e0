//! The customer's subscription page (`/s/<token>`) over HTTP: made by
//! `manage_link`, it shows the plan and the next charge escaped with no
//! script, cancels at the period's end only with its own form token, and
//! stops working when the link expires or is changed.

use serde_json::json;

use crate::helpers::pages::{location, open, post, submit};
use crate::helpers::spawn_app;
use crate::subscriptions::{get_sub, id, mandated, plan, subscribe};

#[tokio::test]
async fn the_page_shows_the_plan_and_next_charge_and_cancels_at_period_end_with_its_own_form() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let p = plan(&app, k, json!({"name": "Gold <b>& more</b>"})).await;
    let (customer, mandate) = mandated(&app, k).await;
    let r = subscribe(
        &app,
        k,
        json!({"customer": customer, "plan": id(&p), "collection_method": "mandate", "mandate": mandate}),
    )
    .await;
    let s = id(&r.body);
    app.advance(60).await;
    let link = app
        .post(k, &format!("/v1/subscriptions/{s}/manage_link"), json!({}))
        .await;
    link.assert_status(201);
    let now = app.now().await;
    let expires: chrono::DateTime<chrono::Utc> =
        link.body["expires_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        expires,
        chrono::SubsecRound::trunc_subsecs(now + chrono::Duration::hours(1), 0),
        "an hour, in whole seconds"
    );
    let url = link.body["url"].as_str().unwrap();
    let path = &url[url.find("/s/").unwrap()..];
    let page = open(&app, path).await;
    assert_eq!(page.status, 200, "{}", page.html);
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(!csp.contains("script-src"), "{csp}");
    assert!(!page.html.contains("<script"));
    assert!(page.html.contains("Gold &lt;b&gt;&amp; more&lt;/b&gt;"));
    assert!(!page.html.contains("<b>& more"));
    assert!(page
        .html
        .contains(r#"name="viewport" content="width=device-width"#));
    assert!(page.html.contains("5,000.00"), "the next charge's amount");
    assert!(page.html.contains(r#"id="next-charge""#));
    // Without the form's token: refused, nothing changes.
    let refused = post(&app, path, &[("nonce".into(), "a".repeat(22))]).await;
    assert_eq!(refused.status, 403);
    assert_eq!(get_sub(&app, k, &s).await["cancel_at_period_end"], false);
    // With it: canceled at the period's end, back to the page.
    let done = submit(&app, path, &page.html, &[]).await;
    assert_eq!(done.status, 303);
    assert_eq!(location(&done), path);
    let after = get_sub(&app, k, &s).await;
    assert_eq!(
        (&after["status"], &after["cancel_at_period_end"]),
        (&json!("active"), &json!(true))
    );
    let again = open(&app, path).await;
    assert!(again.html.contains(r#"id="ends-on""#));
    assert!(!again.html.contains("<form"));
    // The same form again changes nothing more.
    assert_eq!(submit(&app, path, &page.html, &[]).await.status, 303);
    assert_eq!(
        crate::subscriptions::events_of(&app, k, "subscription.updated")
            .await
            .iter()
            .filter(|e| e["data"]["object"]["cancel_at_period_end"] == true)
            .count(),
        1
    );
    // A changed token, then the link's hour passed: refused.
    let forged = path.replace(
        &s.replace('-', ""),
        &uuid::Uuid::new_v4().simple().to_string(),
    );
    assert_eq!(open(&app, &forged).await.status, 403);
    app.advance(3600).await;
    assert_eq!(open(&app, path).await.status, 403);
    // No link for an ended subscription.
    app.post(k, &format!("/v1/subscriptions/{s}/cancel"), json!({}))
        .await
        .assert_status(200);
    app.post(k, &format!("/v1/subscriptions/{s}/manage_link"), json!({}))
        .await
        .assert_error(409, "subscription_ended", None);
}
