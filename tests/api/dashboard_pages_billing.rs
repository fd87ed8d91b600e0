//! The dashboard's customer, mandate, payment link, invoice, subscription
//! and plan pages, black-box over HTTP: each shows the objects made through
//! the API for the signed-in merchant (and escapes what the merchant
//! typed), another merchant's ids answer the 404 page, and a subscription's
//! cancel at period end is refused to a viewer (403) and taken for an owner
//! through the API's own path.

use serde_json::{json, Value};

use crate::helpers::dashboard::{person, Dash};
use crate::helpers::pages::location;
use crate::helpers::{spawn_app, Merchant, TestApp};
use crate::invoices::open_invoice;
use crate::payment_links::{create_link, fixed};
use crate::subscriptions::{get_sub, id, mandated, plan, subscribe};

/// What one merchant made through the API: a customer with a mandate (its
/// name edited to hold markup), a plan, a send_invoice subscription (and
/// its first invoice), another open invoice, a payment link.
pub(crate) struct Made {
    pub customer: String,
    pub mandate: String,
    pub plan: Value,
    pub subscription: String,
    pub invoice: Value,
    pub link: Value,
}

pub(crate) async fn make(app: &TestApp, m: &Merchant) -> Made {
    let k = &m.test_key;
    let (customer, mandate) = mandated(app, k).await;
    app.post(
        k,
        &format!("/v1/customers/{customer}"),
        json!({"name": "Ada <b>Obi</b> & Sons"}),
    )
    .await
    .assert_status(200);
    let plan = plan(app, k, json!({"name": "Gold <i>plan</i>"})).await;
    let r = subscribe(
        app,
        k,
        json!({"customer": customer, "plan": id(&plan), "collection_method": "send_invoice", "days_until_due": 3}),
    )
    .await;
    r.assert_status(201);
    let subscription = id(&r.body);
    let invoice = open_invoice(app, k, &customer, 250_000, 5, json!({})).await;
    let link = create_link(app, k, fixed(500_000)).await;
    Made {
        customer,
        mandate,
        plan,
        subscription,
        invoice,
        link,
    }
}

/// Every page of `made` a session opens.
pub(crate) fn pages(made: &Made) -> Vec<String> {
    vec![
        format!("/dashboard/customers/{}", made.customer),
        format!("/dashboard/mandates/{}", made.mandate),
        format!("/dashboard/payment_links/{}", id(&made.link)),
        format!("/dashboard/invoices/{}", id(&made.invoice)),
        format!("/dashboard/subscriptions/{}", made.subscription),
    ]
}

async fn ok(dash: &Dash, app: &TestApp, path: &str) -> String {
    let p = dash.open(app, path).await;
    assert_eq!(p.status, 200, "{path}: {}", p.html);
    let csp = p.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{path}: {csp}"
    );
    p.html
}

#[tokio::test]
async fn the_billing_pages_show_the_merchants_customers_mandates_links_invoices_subscriptions_and_plans(
) {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let made = make(&app, &m).await;
    let dash = person(&app, &m, "ada@example.com", "viewer").await;

    // Lists.
    let customers = ok(&dash, &app, "/dashboard/customers").await;
    assert!(customers.contains(&format!("/dashboard/customers/{}", made.customer)));
    assert!(customers.contains(r#"<label for="f-email">Email</label>"#));
    // Searched by email, the API list's own filter.
    let found = ok(&dash, &app, "/dashboard/customers?email=ADA%40example.com").await;
    assert!(found.contains(&made.customer), "{found}");
    let none = ok(
        &dash,
        &app,
        "/dashboard/customers?email=nobody%40example.com",
    )
    .await;
    assert!(!none.contains(&made.customer));
    assert!(none.contains("No customers yet."));
    let mandates = ok(&dash, &app, "/dashboard/mandates").await;
    assert!(mandates.contains(&format!("/dashboard/mandates/{}", made.mandate)));
    let links = ok(&dash, &app, "/dashboard/payment_links").await;
    assert!(links.contains(&id(&made.link)) && links.contains("₦5,000.00"));
    let invoices = ok(&dash, &app, "/dashboard/invoices").await;
    assert!(invoices.contains(&id(&made.invoice)));
    assert_eq!(invoices.matches("/dashboard/invoices/").count(), 2);
    // The status filter.
    let paid = ok(&dash, &app, "/dashboard/invoices?status=paid").await;
    assert!(!paid.contains(&id(&made.invoice)));
    assert!(paid.contains(r#"<option value="paid" selected>"#));
    let subs = ok(&dash, &app, "/dashboard/subscriptions").await;
    assert!(subs.contains(&made.subscription));
    assert!(subs.contains("Gold &lt;i&gt;plan&lt;/i&gt;"), "{subs}");
    let canceled = ok(&dash, &app, "/dashboard/subscriptions?status=canceled").await;
    assert!(!canceled.contains(&made.subscription));
    let plans = ok(&dash, &app, "/dashboard/plans").await;
    assert!(plans.contains(&id(&made.plan)) && plans.contains("₦5,000.00"));

    // Details.
    let customer = ok(&dash, &app, &pages(&made)[0]).await;
    assert!(customer.contains("Ada &lt;b&gt;Obi&lt;/b&gt; &amp; Sons"));
    assert!(!customer.contains("<b>Obi</b>"), "merchant text is escaped");
    assert!(customer.contains(&made.mandate), "their mandates");
    assert!(customer.contains(&id(&made.invoice)), "their invoices");
    assert!(customer.contains(&made.subscription), "their subscriptions");
    assert!(customer.contains("Virtual accounts"));
    let mandate = ok(&dash, &app, &pages(&made)[1]).await;
    assert!(mandate.contains("status-active"));
    assert!(mandate.contains(&format!("/dashboard/customers/{}", made.customer)));
    let link = ok(&dash, &app, &pages(&made)[2]).await;
    let url = made.link["url"].as_str().unwrap();
    assert!(link.contains(&format!(r#"<a href="{url}">"#)), "{link}");
    let invoice = ok(&dash, &app, &pages(&made)[3]).await;
    assert!(invoice.contains("Rice, 50kg") && invoice.contains("₦5,000.00"));
    let hosted = made.invoice["hosted_url"].as_str().unwrap();
    assert!(
        invoice.contains(&format!(r#"<a href="{hosted}">"#)),
        "{invoice}"
    );
    let sub = ok(&dash, &app, &pages(&made)[4]).await;
    assert!(sub.contains("Gold &lt;i&gt;plan&lt;/i&gt;"));
    assert!(sub.contains("send_invoice"));
    assert!(sub.contains("/dashboard/invoices/"), "its first invoice");
    assert!(
        !sub.contains("Cancel at period end"),
        "a viewer is not offered the cancel button"
    );
}

#[tokio::test]
async fn another_merchants_customers_mandates_links_invoices_and_subscriptions_answer_404() {
    let app = spawn_app().await;
    let a = app.merchant().await;
    let b = app.merchant().await;
    let made = make(&app, &a).await;
    let dash = person(&app, &b, "bola@example.com", "owner").await;
    for path in pages(&made) {
        let p = dash.open(&app, &path).await;
        assert_eq!(p.status, 404, "{path}");
        assert!(!p.html.contains("Obi"), "{path}");
    }
    for list in [
        "/dashboard/customers",
        "/dashboard/mandates",
        "/dashboard/payment_links",
        "/dashboard/invoices",
        "/dashboard/subscriptions",
        "/dashboard/plans",
    ] {
        let html = ok(&dash, &app, list).await;
        assert!(!html.contains(&made.customer) && !html.contains(&made.subscription));
        assert!(!html.contains(&id(&made.invoice)) && !html.contains(&id(&made.link)));
    }
    // Nor can b's owner cancel a's subscription.
    let own = make(&app, &b).await;
    let path = format!("/dashboard/subscriptions/{}/cancel", made.subscription);
    let p = dash.submit(&app, &pages(&own)[4], &path, &[]).await;
    assert_eq!(p.status, 404);
    let s = get_sub(&app, &a.test_key, &made.subscription).await;
    assert_eq!(s["cancel_at_period_end"], false);
}

#[tokio::test]
async fn a_viewer_cannot_cancel_a_subscription_and_an_owner_cancels_it_at_period_end() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let made = make(&app, &m).await;
    let page = format!("/dashboard/subscriptions/{}", made.subscription);
    let action = format!("{page}/cancel");
    let viewer = person(&app, &m, "vic@example.com", "viewer").await;
    let p = viewer.submit(&app, &page, &action, &[]).await;
    assert_eq!(p.status, 403);
    let s = get_sub(&app, &m.test_key, &made.subscription).await;
    assert_eq!(s["cancel_at_period_end"], false);

    let owner = person(&app, &m, "ada@example.com", "owner").await;
    let html = ok(&owner, &app, &page).await;
    assert!(html.contains("Cancel at period end"));
    assert!(html.contains(r#"name="csrf""#) && html.contains(r#"name="nonce""#));
    // Without the CSRF token: refused, nothing changes.
    let p = owner.post(&app, &action, &[("nonce", "abcdefgh12")]).await;
    assert_eq!(p.status, 403);
    assert_eq!(
        get_sub(&app, &m.test_key, &made.subscription).await["cancel_at_period_end"],
        false
    );
    let p = owner.submit(&app, &page, &action, &[]).await;
    assert_eq!(p.status, 303, "{}", p.html);
    assert_eq!(location(&p), page);
    let s = get_sub(&app, &m.test_key, &made.subscription).await;
    assert_eq!(s["cancel_at_period_end"], true);
    assert_ne!(s["status"], "canceled", "still runs until its period ends");
    let html = ok(&owner, &app, &page).await;
    assert!(!html.contains("Cancel at period end"));
    assert!(html.contains("<dt>Cancels at period end</dt><dd>yes</dd>"));
}

#[tokio::test]
async fn the_subscriptions_lists_older_link_and_status_filter_keep_the_plan_filter() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let gold = id(&plan(&app, k, json!({"name": "Gold"})).await);
    let silver = id(&plan(&app, k, json!({"name": "Silver"})).await);
    let mut customers = Vec::new();
    for n in 0..27 {
        let c = app
            .post(
                k,
                "/v1/customers",
                json!({"email": format!("c{n}@example.com")}),
            )
            .await;
        c.assert_status(201);
        customers.push(id(&c.body));
    }
    let mut golds = Vec::new();
    for c in &customers[..26] {
        let r = subscribe(
            &app,
            k,
            json!({"customer": c, "plan": gold, "collection_method": "send_invoice", "days_until_due": 3}),
        )
        .await;
        r.assert_status(201);
        golds.push(id(&r.body));
    }
    // Newer than every gold one: first on an unfiltered second page.
    let r = subscribe(
        &app,
        k,
        json!({"customer": customers[26], "plan": silver, "collection_method": "send_invoice", "days_until_due": 3}),
    )
    .await;
    r.assert_status(201);
    let silver_sub = id(&r.body);
    let owner = person(&app, &m, "ada@example.com", "owner").await;

    let first = ok(
        &owner,
        &app,
        &format!("/dashboard/subscriptions?plan={gold}"),
    )
    .await;
    assert!(!first.contains(&silver_sub));
    let older = first
        .split(r#"<p><a href=""#)
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("an older link")
        .replace("&amp;", "&");
    assert!(older.contains(&format!("plan={gold}")), "{older}");
    let second = ok(&owner, &app, &older).await;
    assert!(!second.contains(&silver_sub), "the plan filter was dropped");
    assert!(second.contains(&golds[0]), "the oldest gold subscription");
    // The status filter's form keeps the plan too.
    assert!(
        first.contains(&format!(
            r#"<input type="hidden" name="plan" value="{gold}">"#
        )),
        "{first}"
    );
}
