//! Plans and subscriptions on the manual clock: plan rules, every state
//! change of a subscription (trial, first payment, renewals at 08:00
//! Lagos, a failed debit and each retry, send_invoice past due and
//! canceled, incomplete expiry, cancel now and at period end, plan change
//! with proration, invoice-limit completion) and a clock jump over several
//! periods billing each period once, in order.

use chrono::{DateTime, Timelike, Utc};
use chrono_tz::Africa::Lagos;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, Resp, TestApp};
use crate::mandates::active;

pub(crate) fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

pub(crate) async fn plan(app: &TestApp, k: &str, extra: Value) -> Value {
    let mut body =
        json!({"name": "Gold", "amount": 500_000, "currency": "NGN", "interval": "month"});
    for (key, v) in extra.as_object().unwrap() {
        body[key] = v.clone();
    }
    let r = app.post(k, "/v1/plans", body).await;
    r.assert_status(201);
    r.body
}

pub(crate) async fn subscribe(app: &TestApp, k: &str, body: Value) -> Resp {
    app.post(k, "/v1/subscriptions", body).await
}

pub(crate) async fn get_sub(app: &TestApp, k: &str, s: &str) -> Value {
    let r = app.get(k, &format!("/v1/subscriptions/{s}")).await;
    r.assert_status(200);
    r.body
}

/// The subscription's invoices, oldest first.
pub(crate) async fn invoices_of(app: &TestApp, k: &str, s: &str) -> Vec<Value> {
    let r = app
        .get(k, &format!("/v1/invoices?subscription={s}&limit=100"))
        .await;
    r.assert_status(200);
    let mut v = r.body["data"].as_array().unwrap().clone();
    v.reverse();
    v
}

pub(crate) async fn events_of(app: &TestApp, k: &str, t: &str) -> Vec<Value> {
    let r = app.get(k, &format!("/v1/events?type={t}&limit=100")).await;
    r.assert_status(200);
    r.body["data"].as_array().unwrap().clone()
}

/// The invoice's payment intents (newest first).
async fn intents_of(app: &TestApp, k: &str, customer: &str) -> Vec<Value> {
    let r = app
        .get(
            k,
            &format!("/v1/payment_intents?customer={customer}&limit=100"),
        )
        .await;
    r.assert_status(200);
    r.body["data"].as_array().unwrap().clone()
}

pub(crate) async fn advance_to(app: &TestApp, t: DateTime<Utc>) {
    // Whole seconds, rounded up: the clock lands at `t` or within the
    // second after it.
    let now = app.now().await;
    let ms = (t - now).num_milliseconds().max(0);
    app.advance((ms + 999) / 1000).await;
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

fn lagos_hour(v: &Value) -> (u32, u32) {
    let t = time(v).with_timezone(&Lagos);
    (t.hour(), t.minute())
}

/// A customer with an active mandate, and the mandate.
pub(crate) async fn mandated(app: &TestApp, k: &str) -> (String, String) {
    let m = active(app, k).await;
    (m["customer"].as_str().unwrap().to_string(), id(&m))
}

#[tokio::test]
async fn plans_check_their_fields_and_change_only_name_and_metadata() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let base = json!({"name": "Gold", "amount": 500_000, "currency": "NGN", "interval": "month"});
    let with = |f: &str, v: Value| {
        let mut b = base.clone();
        b[f] = v;
        b
    };
    for (body, code, param) in [
        (
            with("interval_count", json!(13)),
            "parameter_invalid",
            "interval_count",
        ),
        (
            with("interval_count", json!(0)),
            "parameter_invalid",
            "interval_count",
        ),
        (
            json!({"name": "G", "amount": 500_000, "currency": "NGN", "interval": "year", "interval_count": 2}),
            "parameter_invalid",
            "interval_count",
        ),
        (
            with("trial_days", json!(91)),
            "parameter_invalid",
            "trial_days",
        ),
        (with("amount", json!(99)), "parameter_invalid", "amount"),
        (
            with("amount", json!(1_000_000_000_001_i64)),
            "parameter_invalid",
            "amount",
        ),
        (
            with("currency", json!("EUR")),
            "parameter_invalid",
            "currency",
        ),
        (
            with("interval", json!("fortnight")),
            "parameter_invalid",
            "interval",
        ),
        (
            json!({"amount": 500_000, "currency": "NGN", "interval": "month"}),
            "parameter_missing",
            "name",
        ),
    ] {
        app.post(k, "/v1/plans", body)
            .await
            .assert_error(400, code, Some(param));
    }
    assert!(app.get(k, "/v1/plans").await.body["data"]
        .as_array()
        .unwrap()
        .is_empty());
    let p = plan(
        &app,
        k,
        json!({"interval_count": 3, "trial_days": 14, "invoice_limit": 4}),
    )
    .await;
    assert_eq!(
        (
            &p["object"],
            &p["interval"],
            &p["interval_count"],
            &p["trial_days"],
            &p["invoice_limit"],
            &p["active"],
            &p["livemode"]
        ),
        (
            &json!("plan"),
            &json!("month"),
            &json!(3),
            &json!(14),
            &json!(4),
            &json!(true),
            &json!(false)
        )
    );
    let path = format!("/v1/plans/{}", id(&p));
    app.post(k, &path, json!({"amount": 1000}))
        .await
        .assert_error(400, "parameter_unknown", Some("amount"));
    let r = app
        .post(
            k,
            &path,
            json!({"name": "Gold Plus", "metadata": {"tier": "2"}}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(
        (
            &r.body["name"],
            &r.body["amount"],
            &r.body["metadata"]["tier"]
        ),
        (&json!("Gold Plus"), &json!(500_000), &json!("2"))
    );
    assert_eq!(events_of(&app, k, "plan.updated").await.len(), 1);
    let r = app.post(k, &format!("{path}/archive"), json!({})).await;
    r.assert_status(200);
    assert_eq!(r.body["active"], false);
    let archived = app.get(k, "/v1/plans?active=false").await;
    assert_eq!(archived.body["data"][0]["id"], p["id"]);
    assert!(app.get(k, "/v1/plans?active=true").await.body["data"]
        .as_array()
        .unwrap()
        .is_empty());
    let (customer, _) = mandated(&app, k).await;
    subscribe(
        &app,
        k,
        json!({"customer": customer, "plan": id(&p), "collection_method": "send_invoice"}),
    )
    .await
    .assert_error(409, "plan_archived", None);
    app.get(k, &format!("/v1/plans/{}", uuid::Uuid::new_v4()))
        .await
        .assert_status(404);
}

#[tokio::test]
async fn a_mandate_subscription_is_incomplete_until_its_first_debit_then_renews_at_0800_lagos() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let p = plan(&app, k, json!({})).await;
    let (customer, mandate) = mandated(&app, k).await;
    // Body checks first.
    subscribe(
        &app,
        k,
        json!({"customer": customer, "plan": id(&p), "collection_method": "mandate"}),
    )
    .await
    .assert_error(400, "parameter_missing", Some("mandate"));
    subscribe(&app, k, json!({"customer": uuid::Uuid::new_v4(), "plan": id(&p), "collection_method": "mandate", "mandate": mandate}))
        .await
        .assert_error(404, "resource_missing", Some("customer"));
    let r = subscribe(&app, k, json!({"customer": customer, "plan": id(&p), "collection_method": "mandate", "mandate": mandate})).await;
    r.assert_status(201);
    let s = id(&r.body);
    assert_eq!(
        (&r.body["status"], &r.body["current_period"]),
        (&json!("incomplete"), &json!(1))
    );
    // One unfinished subscription per customer and plan.
    subscribe(&app, k, json!({"customer": customer, "plan": id(&p), "collection_method": "mandate", "mandate": mandate}))
        .await
        .assert_error(409, "subscription_exists", None);
    let invs = invoices_of(&app, k, &s).await;
    assert_eq!(invs.len(), 1);
    assert_eq!(
        (
            &invs[0]["status"],
            &invs[0]["total"],
            &invs[0]["subscription"]
        ),
        (&json!("open"), &json!(500_000), &json!(s))
    );
    let pis = intents_of(&app, k, &customer).await;
    assert_eq!((pis.len(), &pis[0]["status"]), (1, &json!("processing")));
    // The bank answers a minute later: paid, active.
    app.advance(60).await;
    let now = get_sub(&app, k, &s).await;
    assert_eq!(now["status"], "active");
    assert_eq!(events_of(&app, k, "subscription.activated").await.len(), 1);
    assert_eq!(invoices_of(&app, k, &s).await[0]["status"], "paid");
    assert_eq!(lagos_hour(&now["current_period_end"]), (8, 0));
    assert_eq!(now["next_charge_at"], now["current_period_end"]);
    // Two renewals, each at 08:00 Lagos, each debited once.
    for period in 2..=3 {
        let end = time(&get_sub(&app, k, &s).await["current_period_end"]);
        advance_to(&app, end - chrono::Duration::seconds(1)).await;
        assert_eq!(
            invoices_of(&app, k, &s).await.len(),
            period - 1,
            "nothing billed before 08:00"
        );
        app.advance(61).await;
        let now = get_sub(&app, k, &s).await;
        assert_eq!(
            (&now["status"], &now["current_period"]),
            (&json!("active"), &json!(period))
        );
        assert_eq!(time(&now["current_period_start"]), end);
        let invs = invoices_of(&app, k, &s).await;
        assert_eq!(invs.len(), period);
        assert!(invs.iter().all(|i| i["status"] == "paid"));
        assert_eq!(intents_of(&app, k, &customer).await.len(), period);
    }
    let events = app.get(k, "/v1/events?limit=100").await;
    assert!(events.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["type"] == "subscription.created"));
}

#[tokio::test]
async fn a_trial_sends_trial_will_end_three_days_before_and_bills_at_its_end() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let p = plan(&app, k, json!({"trial_days": 10})).await;
    let (customer, mandate) = mandated(&app, k).await;
    let r = subscribe(&app, k, json!({"customer": customer, "plan": id(&p), "collection_method": "mandate", "mandate": mandate})).await;
    r.assert_status(201);
    let s = id(&r.body);
    assert_eq!(
        (&r.body["status"], &r.body["current_period"]),
        (&json!("trialing"), &json!(0))
    );
    let end = time(&r.body["trial_end"]);
    assert_eq!(lagos_hour(&r.body["trial_end"]), (8, 0));
    assert!(
        invoices_of(&app, k, &s).await.is_empty(),
        "no invoice during the trial"
    );
    advance_to(
        &app,
        end - chrono::Duration::days(3) - chrono::Duration::seconds(1),
    )
    .await;
    assert!(events_of(&app, k, "subscription.trial_will_end")
        .await
        .is_empty());
    app.advance(1).await;
    assert_eq!(
        events_of(&app, k, "subscription.trial_will_end")
            .await
            .len(),
        1
    );
    advance_to(&app, end).await;
    let now = get_sub(&app, k, &s).await;
    assert_eq!(
        (&now["status"], &now["current_period"]),
        (&json!("trialing"), &json!(1))
    );
    assert_eq!(invoices_of(&app, k, &s).await.len(), 1);
    app.advance(60).await;
    assert_eq!(get_sub(&app, k, &s).await["status"], "active");
    assert_eq!(events_of(&app, k, "subscription.activated").await.len(), 1);
}

#[tokio::test]
async fn a_failed_debit_is_retried_1_3_5_and_7_days_after_then_the_subscription_is_canceled() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    // Debits of amounts ending in 51 kobo fail in the sandbox.
    let p = plan(&app, k, json!({"amount": 500_051, "trial_days": 5})).await;
    let (customer, mandate) = mandated(&app, k).await;
    let r = subscribe(&app, k, json!({"customer": customer, "plan": id(&p), "collection_method": "mandate", "mandate": mandate})).await;
    let s = id(&r.body);
    let end = time(&r.body["trial_end"]);
    advance_to(&app, end).await;
    app.advance(60).await;
    let now = get_sub(&app, k, &s).await;
    assert_eq!(now["status"], "past_due");
    assert_eq!(events_of(&app, k, "subscription.past_due").await.len(), 1);
    let failed_at = end;
    for (n, day) in [1i64, 3, 5, 7].iter().enumerate() {
        let retry = failed_at + chrono::Duration::days(*day);
        advance_to(&app, retry - chrono::Duration::seconds(1)).await;
        assert_eq!(
            intents_of(&app, k, &customer).await.len(),
            n + 1,
            "no retry before day {day}"
        );
        app.advance(61).await;
        let pis = intents_of(&app, k, &customer).await;
        assert_eq!(pis.len(), n + 2, "retry {day} days after the failure");
        assert_eq!(pis[0]["status"], "failed");
        assert_eq!(lagos_hour(&pis[0]["created_at"]), (8, 0));
    }
    let now = get_sub(&app, k, &s).await;
    assert_eq!(
        (&now["status"], &now["cancellation_reason"]),
        (&json!("canceled"), &json!("payment_failed"))
    );
    assert_eq!(invoices_of(&app, k, &s).await[0]["status"], "uncollectible");
    assert_eq!(events_of(&app, k, "subscription.canceled").await.len(), 1);
    app.advance(30 * 86_400).await;
    assert_eq!(
        intents_of(&app, k, &customer).await.len(),
        5,
        "nothing more after the cancel"
    );
    app.post(k, &format!("/v1/subscriptions/{s}/cancel"), json!({}))
        .await
        .assert_error(409, "subscription_ended", None);
    crate::operations::assert_check_clean(&mut app);
}

#[tokio::test]
async fn a_past_due_subscription_is_active_again_when_its_invoice_is_paid() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let p = plan(&app, k, json!({"amount": 500_051, "trial_days": 5})).await;
    let (customer, mandate) = mandated(&app, k).await;
    let r = subscribe(&app, k, json!({"customer": customer, "plan": id(&p), "collection_method": "mandate", "mandate": mandate})).await;
    let s = id(&r.body);
    advance_to(&app, time(&r.body["trial_end"])).await;
    app.advance(60).await;
    assert_eq!(get_sub(&app, k, &s).await["status"], "past_due");
    let inv = &invoices_of(&app, k, &s).await[0];
    app.post(
        k,
        &format!("/v1/test_helpers/invoices/{}/pay", id(inv)),
        json!({}),
    )
    .await
    .assert_status(200);
    app.advance(0).await;
    let now = get_sub(&app, k, &s).await;
    assert_eq!(now["status"], "active");
    // No retry of a paid invoice.
    app.advance(8 * 86_400).await;
    let pis = intents_of(&app, k, &customer).await;
    assert_eq!(pis.iter().filter(|p| p["status"] == "failed").count(), 1);
}

#[tokio::test]
async fn a_send_invoice_subscription_goes_past_due_after_the_due_date_and_is_canceled_7_days_later()
{
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let p = plan(&app, k, json!({"interval": "week"})).await;
    let (customer, _) = mandated(&app, k).await;
    let r = subscribe(&app, k, json!({"customer": customer, "plan": id(&p), "collection_method": "send_invoice", "days_until_due": 3})).await;
    r.assert_status(201);
    let s = id(&r.body);
    let inv = &invoices_of(&app, k, &s).await[0];
    assert_eq!(inv["status"], "open");
    app.post(
        k,
        &format!("/v1/test_helpers/invoices/{}/pay", id(inv)),
        json!({}),
    )
    .await
    .assert_status(200);
    app.advance(0).await;
    assert_eq!(get_sub(&app, k, &s).await["status"], "active");
    // The renewal's invoice goes unpaid.
    let end = time(&get_sub(&app, k, &s).await["current_period_end"]);
    advance_to(&app, end).await;
    let invs = invoices_of(&app, k, &s).await;
    assert_eq!(invs.len(), 2);
    let due: chrono::NaiveDate = invs[1]["due_date"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        due,
        end.with_timezone(&Lagos).date_naive() + chrono::Days::new(3)
    );
    // Past due at 08:00 Lagos the day after the due date.
    let past_due = due
        .succ_opt()
        .unwrap()
        .and_hms_opt(7, 0, 0)
        .unwrap()
        .and_utc();
    advance_to(&app, past_due - chrono::Duration::seconds(1)).await;
    assert_eq!(get_sub(&app, k, &s).await["status"], "active");
    app.advance(1).await;
    assert_eq!(get_sub(&app, k, &s).await["status"], "past_due");
    advance_to(
        &app,
        past_due + chrono::Duration::days(7) - chrono::Duration::seconds(1),
    )
    .await;
    assert_eq!(get_sub(&app, k, &s).await["status"], "past_due");
    app.advance(1).await;
    let now = get_sub(&app, k, &s).await;
    assert_eq!(
        (&now["status"], &now["cancellation_reason"]),
        (&json!("canceled"), &json!("payment_failed"))
    );
    assert_eq!(invoices_of(&app, k, &s).await[1]["status"], "uncollectible");
}

#[tokio::test]
async fn an_incomplete_subscription_is_canceled_after_23_hours_and_its_invoice_voided() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let p = plan(&app, k, json!({})).await;
    let (customer, _) = mandated(&app, k).await;
    let r = subscribe(
        &app,
        k,
        json!({"customer": customer, "plan": id(&p), "collection_method": "send_invoice"}),
    )
    .await;
    let s = id(&r.body);
    assert_eq!(r.body["status"], "incomplete");
    app.advance(23 * 3600 - 1).await;
    assert_eq!(get_sub(&app, k, &s).await["status"], "incomplete");
    app.advance(1).await;
    let now = get_sub(&app, k, &s).await;
    assert_eq!(
        (&now["status"], &now["cancellation_reason"]),
        (&json!("canceled"), &json!("first_payment_not_made"))
    );
    assert_eq!(invoices_of(&app, k, &s).await[0]["status"], "void");
    // The customer may subscribe to the plan again.
    subscribe(
        &app,
        k,
        json!({"customer": customer, "plan": id(&p), "collection_method": "send_invoice"}),
    )
    .await
    .assert_status(201);
    crate::operations::assert_check_clean(&mut app);
}

#[tokio::test]
async fn cancel_now_or_at_the_period_end() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let gold = plan(&app, k, json!({})).await;
    let silver = plan(&app, k, json!({"name": "Silver"})).await;
    let (customer, mandate) = mandated(&app, k).await;
    let body = |p: &Value| json!({"customer": customer, "plan": id(p), "collection_method": "mandate", "mandate": mandate});
    let a = id(&subscribe(&app, k, body(&gold)).await.body);
    let b = id(&subscribe(&app, k, body(&silver)).await.body);
    app.advance(60).await;
    let r = app
        .post(k, &format!("/v1/subscriptions/{a}/cancel"), json!({}))
        .await;
    r.assert_status(200);
    assert_eq!(
        (&r.body["status"], &r.body["cancellation_reason"]),
        (&json!("canceled"), &json!("cancellation_requested"))
    );
    let r = app
        .post(
            k,
            &format!("/v1/subscriptions/{b}/cancel"),
            json!({"at_period_end": true}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(
        (
            &r.body["status"],
            &r.body["cancel_at_period_end"],
            &r.body["next_charge_at"]
        ),
        (&json!("active"), &json!(true), &Value::Null)
    );
    advance_to(&app, time(&r.body["current_period_end"])).await;
    let now = get_sub(&app, k, &b).await;
    assert_eq!(
        (&now["status"], &now["ended_at"]),
        (&json!("canceled"), &r.body["current_period_end"])
    );
    assert_eq!(invoices_of(&app, k, &a).await.len(), 1);
    assert_eq!(
        invoices_of(&app, k, &b).await.len(),
        1,
        "no renewal after a cancel at period end"
    );
    assert_eq!(events_of(&app, k, "subscription.canceled").await.len(), 2);
    let list = app.get(k, "/v1/subscriptions?status=canceled").await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_plan_change_now_bills_the_new_amount_less_the_unused_time_and_at_period_end_waits() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let gold = plan(
        &app,
        k,
        json!({"interval": "day", "interval_count": 10, "amount": 1_000_000}),
    )
    .await;
    let plat = plan(
        &app,
        k,
        json!({"name": "Platinum", "interval": "day", "interval_count": 10, "amount": 3_000_000}),
    )
    .await;
    let (customer, _) = mandated(&app, k).await;
    let r = subscribe(
        &app,
        k,
        json!({"customer": customer, "plan": id(&gold), "collection_method": "send_invoice"}),
    )
    .await;
    let s = id(&r.body);
    let first = &invoices_of(&app, k, &s).await[0];
    app.post(
        k,
        &format!("/v1/test_helpers/invoices/{}/pay", id(first)),
        json!({}),
    )
    .await
    .assert_status(200);
    app.advance(0).await;
    let now = get_sub(&app, k, &s).await;
    let (start, end) = (
        time(&now["current_period_start"]),
        time(&now["current_period_end"]),
    );
    // At the period's end: nothing billed now.
    let r = app
        .post(
            k,
            &format!("/v1/subscriptions/{s}"),
            json!({"plan": id(&plat)}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(
        (
            &r.body["plan"],
            &r.body["pending_change"]["plan"],
            &r.body["next_charge_amount"]
        ),
        (&gold["id"], &plat["id"], &json!(3_000_000))
    );
    assert_eq!(invoices_of(&app, k, &s).await.len(), 1);
    // Now, a third of a day in: the credit is the unused time, rounded down.
    app.advance(3 * 86_400 + 3600).await;
    let at = app.now().await;
    let r = app
        .post(
            k,
            &format!("/v1/subscriptions/{s}"),
            json!({"plan": id(&plat), "change_at": "now"}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(
        (
            &r.body["plan"],
            &r.body["current_period"],
            &r.body["pending_change"]
        ),
        (&plat["id"], &json!(2), &Value::Null)
    );
    assert_eq!(time(&r.body["current_period_start"]), at);
    let unused = (end - at).num_seconds() as i128;
    let total = (end - start).num_seconds() as i128;
    let credit = (1_000_000i128 * unused / total) as i64;
    let invs = invoices_of(&app, k, &s).await;
    assert_eq!(invs.len(), 2);
    assert_eq!(invs[1]["total"], 3_000_000 - credit);
    assert_eq!(invs[1]["line_items"][1]["amount"], -credit);
    app.post(
        k,
        &format!("/v1/subscriptions/{s}"),
        json!({"change_at": "now"}),
    )
    .await
    .assert_error(400, "parameter_missing", Some("plan"));
    crate::operations::assert_check_clean(&mut app);
}

#[tokio::test]
async fn the_invoice_limit_completes_the_subscription() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let p = plan(&app, k, json!({"interval": "week", "invoice_limit": 2})).await;
    let (customer, mandate) = mandated(&app, k).await;
    let r = subscribe(&app, k, json!({"customer": customer, "plan": id(&p), "collection_method": "mandate", "mandate": mandate})).await;
    let s = id(&r.body);
    app.advance(60).await;
    advance_to(
        &app,
        time(&get_sub(&app, k, &s).await["current_period_end"]),
    )
    .await;
    app.advance(60).await;
    let now = get_sub(&app, k, &s).await;
    assert_eq!(
        (
            &now["status"],
            &now["invoices_count"],
            &now["next_charge_at"]
        ),
        (&json!("active"), &json!(2), &Value::Null)
    );
    advance_to(&app, time(&now["current_period_end"])).await;
    let done = get_sub(&app, k, &s).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(events_of(&app, k, "subscription.completed").await.len(), 1);
    app.advance(30 * 86_400).await;
    assert_eq!(invoices_of(&app, k, &s).await.len(), 2);
}

#[tokio::test]
async fn a_clock_jump_over_three_periods_bills_each_period_once_in_order() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let p = plan(&app, k, json!({"interval": "week"})).await;
    let (customer, mandate) = mandated(&app, k).await;
    let r = subscribe(&app, k, json!({"customer": customer, "plan": id(&p), "collection_method": "mandate", "mandate": mandate})).await;
    let s = id(&r.body);
    app.advance(60).await;
    let end = time(&get_sub(&app, k, &s).await["current_period_end"]);
    // One jump over three renewals.
    advance_to(
        &app,
        end + chrono::Duration::days(14) + chrono::Duration::hours(1),
    )
    .await;
    let now = get_sub(&app, k, &s).await;
    assert_eq!(
        (&now["status"], &now["current_period"]),
        (&json!("active"), &json!(4))
    );
    let invs = invoices_of(&app, k, &s).await;
    let periods: Vec<&Value> = invs.iter().map(|i| &i["metadata"]["period"]).collect();
    assert_eq!(periods, vec![&json!(1), &json!(2), &json!(3), &json!(4)]);
    assert!(invs.iter().all(|i| i["status"] == "paid"));
    let pis = intents_of(&app, k, &customer).await;
    assert_eq!(pis.len(), 4, "one debit per period");
    // Each renewal's invoice made at its own 08:00.
    for (n, i) in invs.iter().enumerate().skip(1) {
        assert_eq!(
            time(&i["created_at"]),
            end + chrono::Duration::days(7 * (n as i64 - 1))
        );
    }
    // The renew helper bills the next period once within a period.
    let renew = format!("/v1/test_helpers/subscriptions/{s}/renew");
    let a = app.post(k, &renew, json!({})).await;
    a.assert_status(200);
    let b = app.post(k, &renew, json!({})).await;
    b.assert_status(200);
    assert_eq!(
        (&a.body["current_period"], &b.body["current_period"]),
        (&json!(5), &json!(5))
    );
    assert_eq!(invoices_of(&app, k, &s).await.len(), 5);
    app.post(&m.live_key, &renew, json!({}))
        .await
        .assert_status(404);
    crate::operations::assert_check_clean(&mut app);
}

/// Found that the create answered `latest_invoice: null` though its first
/// invoice was made before the answer.
#[tokio::test]
async fn the_create_answer_carries_the_first_invoice_and_a_replay_answers_the_same() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let (customer, mandate) = mandated(&app, k).await;
    let p = plan(&app, k, json!({})).await;
    let body = json!({"customer": customer, "plan": id(&p), "collection_method": "mandate", "mandate": mandate});
    let r = app
        .post_with_key(k, "/v1/subscriptions", "first-bill", body.clone())
        .await;
    r.assert_status(201);
    let invoices = invoices_of(&app, k, &id(&r.body)).await;
    assert_eq!(invoices.len(), 1);
    assert_eq!(r.body["latest_invoice"], invoices[0]["id"], "{}", r.text);
    assert_eq!(get_sub(&app, k, &id(&r.body)).await, r.body);
    let again = app
        .post_with_key(k, "/v1/subscriptions", "first-bill", body)
        .await;
    again.assert_status(201);
    assert_eq!(again.body, r.body);
    // A trial bills nothing at create.
    let t = plan(&app, k, json!({"trial_days": 7})).await;
    let r = subscribe(
        &app,
        k,
        json!({"customer": customer, "plan": id(&t), "collection_method": "send_invoice"}),
    )
    .await;
    r.assert_status(201);
    assert_eq!(r.body["latest_invoice"], Value::Null);
}
