//! Invoices: states and their events, numbers, record_payment, the test
//! helper, and reconciliation (payments in the capture's batch, virtual
//! account credits oldest due first, credit balance, the last-naira race,
//! overdue on the manual clock).

use serde_json::{json, Value};

use crate::helpers::{spawn_app, Resp, TestApp};
use crate::virtual_accounts::{active, customer, id, transfer};

async fn today(app: &TestApp) -> chrono::NaiveDate {
    let now = app.now().await + chrono::Duration::hours(1);
    now.date_naive()
}

async fn create(app: &TestApp, k: &str, body: Value) -> Resp {
    app.post(k, "/v1/invoices", body).await
}

async fn invoice_body(app: &TestApp, cust: &str, unit: i64, days: i64, extra: Value) -> Value {
    let due = today(app).await + chrono::Duration::days(days);
    let mut b = json!({
        "customer": cust,
        "currency": "NGN",
        "line_items": [{"description": "Rice, 50kg", "quantity": 2, "unit_amount": unit}],
        "due_date": due.to_string(),
    });
    for (key, v) in extra.as_object().unwrap() {
        b[key] = v.clone();
    }
    b
}

pub(crate) async fn open_invoice(
    app: &TestApp,
    k: &str,
    cust: &str,
    unit: i64,
    days: i64,
    extra: Value,
) -> Value {
    let mut extra = extra;
    extra["finalize"] = json!(true);
    let r = create(app, k, invoice_body(app, cust, unit, days, extra).await).await;
    r.assert_status(201);
    assert_ne!(r.body["status"], "draft", "{}", r.text);
    r.body
}

pub(crate) async fn get_inv(app: &TestApp, k: &str, inv: &Value) -> Value {
    let r = app.get(k, &format!("/v1/invoices/{}", id(inv))).await;
    r.assert_status(200);
    r.body
}

async fn credit(app: &TestApp, k: &str, cust: &str) -> i64 {
    let r = app.get(k, &format!("/v1/customers/{cust}")).await;
    r.body["credit_balance"].as_i64().unwrap()
}

async fn events_of(app: &TestApp, k: &str, t: &str) -> Vec<Value> {
    let r = app.get(k, &format!("/v1/events?type={t}&limit=100")).await;
    r.assert_status(200);
    r.body["data"].as_array().unwrap().clone()
}

async fn pay(app: &TestApp, k: &str, inv: &Value, body: Value) -> Resp {
    app.post(
        k,
        &format!("/v1/test_helpers/invoices/{}/pay", id(inv)),
        body,
    )
    .await
}

#[tokio::test]
async fn draft_update_finalize_numbers_and_totals() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = customer(&app, k, json!({"email": "ada@example.com"})).await;
    let body = invoice_body(
        &app,
        &ada,
        10_000,
        7,
        json!({"tax_rate_bps": 750, "memo": "Thanks"}),
    )
    .await;
    let idem = app.next_key();
    let r = app
        .post_with_key(k, "/v1/invoices", &idem, body.clone())
        .await;
    r.assert_status(201);
    let d = r.body.clone();
    assert_eq!(d["object"], "invoice");
    assert_eq!(d["status"], "draft");
    assert_eq!(d["number"], Value::Null);
    assert_eq!(d["hosted_url"], Value::Null);
    assert_eq!(d["subtotal"], 20_000);
    assert_eq!(d["tax"], 1_500);
    assert_eq!(d["total"], 21_500);
    assert_eq!(d["amount_remaining"], 21_500);
    assert_eq!(d["livemode"], false);
    let replay = app.post_with_key(k, "/v1/invoices", &idem, body).await;
    assert!(replay.replayed());
    assert_eq!(replay.body, d);
    // Tax rounds half up: 7.5% of 333 = 24.975 -> 25.
    let path = format!("/v1/invoices/{}", id(&d));
    let u = app
        .post(k, &path, json!({"line_items": [{"description": "x", "quantity": 1, "unit_amount": 333}], "metadata": {"po": "7"}}))
        .await;
    u.assert_status(200);
    assert_eq!(u.body["tax"], 25);
    assert_eq!(u.body["total"], 358);
    assert_eq!(u.body["metadata"]["po"], "7");
    // Validation names the param.
    let mut bad = invoice_body(&app, &ada, 1, 1, json!({})).await;
    bad["line_items"] = json!([{"description": "x", "quantity": 0, "unit_amount": 1}]);
    create(&app, k, bad).await.assert_error(
        400,
        "parameter_invalid",
        Some("line_items[0].quantity"),
    );
    let mut past = invoice_body(&app, &ada, 1, 0, json!({})).await;
    past["due_date"] = json!("2001-01-01");
    create(&app, k, past)
        .await
        .assert_error(400, "parameter_invalid", Some("due_date"));
    let mut nobody = invoice_body(&app, &ada, 1, 1, json!({})).await;
    nobody["customer"] = json!(uuid::Uuid::new_v4().to_string());
    create(&app, k, nobody)
        .await
        .assert_error(404, "resource_missing", Some("customer"));
    // Finalize: numbered, hosted page, event.
    let f = app.post(k, &format!("{path}/finalize"), json!({})).await;
    f.assert_status(200);
    assert_eq!(f.body["status"], "open");
    assert_eq!(f.body["number"], "INV-000001");
    assert!(f.body["hosted_url"].as_str().unwrap().contains("/i/"));
    assert!(f.body["finalized_at"].is_string());
    app.post(k, &format!("{path}/finalize"), json!({}))
        .await
        .assert_error(409, "invoice_not_draft", None);
    app.post(k, &path, json!({"memo": "late"}))
        .await
        .assert_error(409, "invoice_not_draft", None);
    app.post(k, &format!("{path}/delete"), json!({}))
        .await
        .assert_error(409, "invoice_not_draft", None);
    assert_eq!(events_of(&app, k, "invoice.finalized").await.len(), 1);
    // Numbers: gap-free per brand and mode, concurrent finalizes included.
    let mut drafts = Vec::new();
    for _ in 0..6 {
        let c = customer(
            &app,
            k,
            json!({"email": format!("c{}@example.com", drafts.len())}),
        )
        .await;
        let r = create(&app, k, invoice_body(&app, &c, 100, 3, json!({})).await).await;
        r.assert_status(201);
        drafts.push(id(&r.body));
    }
    let paths: Vec<String> = drafts
        .iter()
        .map(|d| format!("/v1/invoices/{d}/finalize"))
        .collect();
    let finals =
        futures_util::future::join_all(paths.iter().map(|p| app.post(k, p, json!({})))).await;
    let mut numbers: Vec<String> = finals
        .iter()
        .map(|r| {
            r.assert_status(200);
            r.body["number"].as_str().unwrap().to_string()
        })
        .collect();
    numbers.sort();
    let want: Vec<String> = (2..=7).map(|n| format!("INV-{n:06}")).collect();
    assert_eq!(numbers, want);
    // The live mode has its own sequence.
    let lc = customer(&app, &m.live_key, json!({"email": "live@example.com"})).await;
    let l = create(
        &app,
        &m.live_key,
        invoice_body(&app, &lc, 100, 3, json!({"finalize": true})).await,
    )
    .await;
    l.assert_status(201);
    assert_eq!(l.body["number"], "INV-000001");
    // Delete a draft.
    let dr = create(&app, k, invoice_body(&app, &ada, 100, 3, json!({})).await).await;
    let del = app
        .post(
            k,
            &format!("/v1/invoices/{}/delete", id(&dr.body)),
            json!({}),
        )
        .await;
    del.assert_status(200);
    assert_eq!(del.body["deleted"], true);
    app.get(k, &format!("/v1/invoices/{}", id(&dr.body)))
        .await
        .assert_status(404);
    // Other merchants see nothing.
    let other = app.merchant().await;
    app.get(&other.test_key, &path).await.assert_status(404);
    // Lists, filters.
    let all = app.get(k, &format!("/v1/invoices?customer={ada}")).await;
    assert_eq!(all.body["data"].as_array().unwrap().len(), 1);
    let open = app.get(k, "/v1/invoices?status=open&limit=100").await;
    assert_eq!(open.body["data"].as_array().unwrap().len(), 7);
    app.get(k, "/v1/invoices?status=nope").await.assert_error(
        400,
        "parameter_invalid",
        Some("status"),
    );
}

#[tokio::test]
async fn record_payment_partial_paid_and_wrong_states() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = customer(&app, k, json!({"email": "ada@example.com"})).await;
    let inv = open_invoice(
        &app,
        k,
        &ada,
        5_000,
        5,
        json!({"allow_partial_payments": true, "minimum_payment": 1_000}),
    )
    .await;
    let path = format!("/v1/invoices/{}", id(&inv));
    let rp_path = format!("{path}/record_payment");
    let rp = |amount: i64| app.post(k, &rp_path, json!({"amount": amount, "note": "cash"}));
    rp(500)
        .await
        .assert_error(400, "parameter_invalid", Some("amount"));
    rp(20_000)
        .await
        .assert_error(409, "amount_exceeds_remaining", None);
    let p = rp(4_000).await;
    p.assert_status(200);
    assert_eq!(p.body["status"], "open");
    assert_eq!(p.body["amount_paid"], 4_000);
    assert_eq!(p.body["amount_remaining"], 6_000);
    assert_eq!(p.body["payments"][0]["method"], "out_of_band");
    assert_eq!(p.body["payments"][0]["payment_intent"], Value::Null);
    assert_eq!(events_of(&app, k, "invoice.partially_paid").await.len(), 1);
    // No ledger lines for money outside kobo.
    assert_eq!(app.balance(k, "pending", "NGN").await, 0);
    app.post(k, &format!("{path}/void"), json!({}))
        .await
        .assert_error(409, "invoice_has_payments", None);
    let u = app
        .post(k, &format!("{path}/mark_uncollectible"), json!({}))
        .await;
    u.assert_status(200);
    assert_eq!(u.body["status"], "uncollectible");
    assert_eq!(
        events_of(&app, k, "invoice.marked_uncollectible")
            .await
            .len(),
        1
    );
    // uncollectible -> paid.
    let done = rp(6_000).await;
    done.assert_status(200);
    assert_eq!(done.body["status"], "paid");
    assert!(done.body["paid_at"].is_string());
    let paid = events_of(&app, k, "invoice.paid").await;
    assert_eq!(paid.len(), 1);
    assert_eq!(paid[0]["data"]["object"]["status"], "paid");
    rp(1).await.assert_error(409, "invoice_not_payable", None);
    app.post(k, &format!("{path}/void"), json!({}))
        .await
        .assert_error(409, "invoice_not_payable", None);
    // No partial payments: only the whole.
    let whole = open_invoice(&app, k, &ada, 5_000, 5, json!({})).await;
    app.post(
        k,
        &format!("/v1/invoices/{}/record_payment", id(&whole)),
        json!({"amount": 100}),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("amount"));
    // Void an untouched invoice; void is final.
    let v = app
        .post(k, &format!("/v1/invoices/{}/void", id(&whole)), json!({}))
        .await;
    v.assert_status(200);
    assert_eq!(v.body["status"], "void");
    assert!(v.body["voided_at"].is_string());
    assert_eq!(events_of(&app, k, "invoice.voided").await.len(), 1);
    app.post(
        k,
        &format!("/v1/invoices/{}/mark_uncollectible", id(&whole)),
        json!({}),
    )
    .await
    .assert_error(409, "invoice_not_payable", None);
    // The test helper is 404 to live keys.
    app.post(
        &m.live_key,
        &format!("/v1/test_helpers/invoices/{}/pay", id(&inv)),
        json!({}),
    )
    .await
    .assert_status(404);
}

#[tokio::test]
async fn kobo_payments_apply_in_the_capture_and_the_last_naira_race_makes_credit() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = customer(&app, k, json!({"email": "ada@example.com"})).await;
    let inv = open_invoice(
        &app,
        k,
        &ada,
        5_000,
        5,
        json!({"allow_partial_payments": true}),
    )
    .await;
    let p = pay(&app, k, &inv, json!({"amount": 3_000})).await;
    p.assert_status(200);
    assert_eq!(p.body["status"], "successful");
    let after = get_inv(&app, k, &inv).await;
    assert_eq!(after["amount_paid"], 3_000);
    assert_eq!(after["payments"][0]["method"], "kobo");
    assert_eq!(after["payments"][0]["payment_intent"], p.body["id"]);
    // The capture is in the ledger.
    assert!(app.balance(k, "pending", "NGN").await > 0);
    // Race: several payments each for all that remains (7,000).
    let racers =
        futures_util::future::join_all((0..4).map(|_| pay(&app, k, &inv, json!({})))).await;
    let ok: Vec<&Resp> = racers.iter().filter(|r| r.status == 200).collect();
    assert!(!ok.is_empty());
    let done = get_inv(&app, k, &inv).await;
    assert_eq!(done["status"], "paid");
    assert_eq!(done["amount_paid"], 10_000);
    let kobo_payments = done["payments"].as_array().unwrap().len();
    assert_eq!(kobo_payments, 2, "exactly one racer applied: {done}");
    // Every racer that succeeded after the first became credit.
    let late = ok.len() as i64 - 1;
    let refused = racers.iter().filter(|r| r.status == 409).count() as i64;
    assert_eq!(late + refused + 1, 4);
    assert_eq!(credit(&app, k, &ada).await, late * 7_000);
    assert_eq!(events_of(&app, k, "invoice.paid").await.len(), 1);
    // A payment for a paid invoice cannot be created.
    pay(&app, k, &inv, json!({}))
        .await
        .assert_error(409, "invoice_not_payable", None);
    let bola = customer(&app, k, json!({"email": "bola@example.com"})).await;
    pay(
        &app,
        k,
        &open_invoice(
            &app,
            k,
            &bola,
            1,
            5,
            json!({"allow_partial_payments": true}),
        )
        .await,
        json!({"amount": 5}),
    )
    .await
    .assert_error(409, "amount_exceeds_remaining", None);
}

#[tokio::test]
async fn credits_apply_oldest_due_first_whole_only_where_required_and_rest_is_credit() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = customer(&app, k, json!({"email": "ada@example.com"})).await;
    let acct = active(&app, k, &ada).await;
    // Oldest due first: B (due in 2 days, whole only, 10,000), A (due in
    // 5 days, partial, 20,000), C (due in 9 days, whole only, 4,000).
    let a = open_invoice(
        &app,
        k,
        &ada,
        10_000,
        5,
        json!({"allow_partial_payments": true}),
    )
    .await;
    let b = open_invoice(&app, k, &ada, 5_000, 2, json!({})).await;
    let c = open_invoice(&app, k, &ada, 2_000, 9, json!({})).await;
    assert!(a["payment_instructions"]["account_number"].is_string());
    // 8,000: B takes nothing (not whole), A takes 8,000.
    transfer(
        &app,
        k,
        &id(&acct),
        json!({"amount": 8_000, "session_id": "S1"}),
    )
    .await
    .assert_status(200);
    assert_eq!(get_inv(&app, k, &b).await["amount_paid"], 0);
    assert_eq!(get_inv(&app, k, &a).await["amount_paid"], 8_000);
    // A repeat of the session id applies nothing more.
    transfer(
        &app,
        k,
        &id(&acct),
        json!({"amount": 8_000, "session_id": "S1"}),
    )
    .await;
    assert_eq!(get_inv(&app, k, &a).await["amount_paid"], 8_000);
    // 30,000: B 10,000 (paid), A 12,000 (paid), C 4,000 (paid), 4,000 credit.
    transfer(
        &app,
        k,
        &id(&acct),
        json!({"amount": 30_000, "session_id": "S2"}),
    )
    .await
    .assert_status(200);
    for inv in [&a, &b, &c] {
        assert_eq!(get_inv(&app, k, inv).await["status"], "paid");
    }
    assert_eq!(credit(&app, k, &ada).await, 4_000);
    // Credit is applied to the next finalized invoice.
    let d = open_invoice(&app, k, &ada, 500, 3, json!({})).await;
    assert_eq!(d["status"], "paid");
    assert_eq!(d["payments"][0]["method"], "credit_balance");
    assert_eq!(credit(&app, k, &ada).await, 3_000);
    // Whole-only invoice larger than the credit: credit stays.
    let e = open_invoice(&app, k, &ada, 5_000, 3, json!({})).await;
    assert_eq!(e["amount_paid"], 0);
    assert_eq!(credit(&app, k, &ada).await, 3_000);
    assert_eq!(e["status"], "open");
    // A transfer short of it (whole only) pays nothing: all of it is credit.
    transfer(
        &app,
        k,
        &id(&acct),
        json!({"amount": 8_000, "session_id": "S3"}),
    )
    .await
    .assert_status(200);
    assert_eq!(get_inv(&app, k, &e).await["status"], "open");
    assert_eq!(credit(&app, k, &ada).await, 11_000);
}

#[tokio::test]
async fn overdue_fires_once_at_eight_lagos_the_day_after_the_due_date() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = customer(&app, k, json!({"email": "ada@example.com"})).await;
    let inv = open_invoice(&app, k, &ada, 1_000, 1, json!({})).await;
    let paid = open_invoice(&app, k, &ada, 1_000, 1, json!({})).await;
    app.post(
        k,
        &format!("/v1/invoices/{}/record_payment", id(&paid)),
        json!({"amount": 2_000}),
    )
    .await
    .assert_status(200);
    let due =
        chrono::NaiveDate::parse_from_str(inv["due_date"].as_str().unwrap(), "%Y-%m-%d").unwrap();
    let fire = due
        .succ_opt()
        .unwrap()
        .and_hms_opt(7, 0, 0)
        .unwrap()
        .and_utc();
    let now = app.now().await;
    app.advance((fire - now).num_seconds() - 60).await;
    assert_eq!(get_inv(&app, k, &inv).await["overdue"], false);
    assert!(events_of(&app, k, "invoice.overdue").await.is_empty());
    app.advance(120).await;
    let o = get_inv(&app, k, &inv).await;
    assert_eq!(o["overdue"], true);
    assert_eq!(o["status"], "open");
    let ev = events_of(&app, k, "invoice.overdue").await;
    assert_eq!(ev.len(), 1, "only the unpaid invoice");
    let list = app.get(k, "/v1/invoices?overdue=true").await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 1);
    app.advance(3 * 86_400).await;
    assert_eq!(events_of(&app, k, "invoice.overdue").await.len(), 1);
}

#[tokio::test]
async fn charge_mandate_debits_what_remains_or_a_part_and_applies_on_the_banks_success() {
    use crate::mandates::{active, answer, pending, refresh};
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = customer(&app, k, json!({"email": "ada@example.com"})).await;
    // ₦10,000 with part payments of at least ₦2,000.
    let inv = open_invoice(
        &app,
        k,
        &ada,
        500_000,
        5,
        json!({"allow_partial_payments": true, "minimum_payment": 200_000}),
    )
    .await;
    let path = format!("/v1/invoices/{}/charge_mandate", id(&inv));
    let mandate = active(&app, k).await;
    assert_eq!(mandate["customer"], ada.as_str(), "the mandate is Ada's");
    let mid = id(&mandate);
    // Body and mandate errors; nothing is charged.
    app.post(k, &path, json!({}))
        .await
        .assert_error(400, "parameter_missing", Some("mandate"));
    app.post(k, &path, json!({"mandate": uuid::Uuid::new_v4()}))
        .await
        .assert_status(404);
    app.post(k, &path, json!({"mandate": mid, "amount": 1_000_001}))
        .await
        .assert_error(409, "amount_exceeds_remaining", None);
    app.post(k, &path, json!({"mandate": mid, "amount": 100_000}))
        .await
        .assert_error(400, "parameter_invalid", Some("amount"));
    let bola_mandate = pending(&app, k, "bola@example.com").await;
    answer(&app, &bola_mandate, true).await.assert_status(200);
    refresh(&app, k, &id(&bola_mandate))
        .await
        .assert_status(200);
    app.post(k, &path, json!({"mandate": id(&bola_mandate)}))
        .await
        .assert_error(400, "parameter_invalid", Some("mandate"));
    let waiting = pending(&app, k, "ada@example.com").await;
    app.post(k, &path, json!({"mandate": id(&waiting)}))
        .await
        .assert_error(409, "mandate_not_active", None);
    assert!(get_inv(&app, k, &inv).await["payments"]
        .as_array()
        .unwrap()
        .is_empty());
    // A part: processing until the bank answers, then applied.
    let r = app
        .post(k, &path, json!({"mandate": mid, "amount": 400_000}))
        .await;
    r.assert_status(201);
    let pi = r.body.clone();
    assert_eq!(pi["status"], "processing");
    assert_eq!(pi["amount"], 400_000);
    assert_eq!(pi["customer"], ada.as_str());
    assert_eq!(pi["fee_bearer"], "merchant");
    assert_eq!(get_inv(&app, k, &inv).await["amount_paid"], 0);
    app.advance(60).await;
    let after = get_inv(&app, k, &inv).await;
    assert_eq!(after["amount_paid"], 400_000);
    assert_eq!(after["status"], "open");
    assert_eq!(after["payments"][0]["payment_intent"], pi["id"]);
    assert_eq!(after["payments"][0]["method"], "kobo");
    assert_eq!(events_of(&app, k, "invoice.partially_paid").await.len(), 1);
    // What remains, with an Idempotency-Key: a replay debits nothing more.
    let first = app
        .post_with_key(k, &path, "inv-rest", json!({"mandate": mid}))
        .await;
    first.assert_status(201);
    assert_eq!(first.body["amount"], 600_000);
    let replay = app
        .post_with_key(k, &path, "inv-rest", json!({"mandate": mid}))
        .await;
    replay.assert_status(201);
    assert_eq!(replay.body["id"], first.body["id"]);
    app.advance(60).await;
    let done = get_inv(&app, k, &inv).await;
    assert_eq!(done["status"], "paid");
    assert_eq!(done["amount_paid"], 1_000_000);
    assert_eq!(done["payments"].as_array().unwrap().len(), 2);
    assert_eq!(events_of(&app, k, "invoice.paid").await.len(), 1);
    assert_eq!(credit(&app, k, &ada).await, 0);
    // Not payable: paid, void, draft.
    app.post(k, &path, json!({"mandate": mid}))
        .await
        .assert_error(409, "invoice_not_payable", None);
    let other = open_invoice(&app, k, &ada, 100_000, 5, json!({})).await;
    app.post(k, &format!("/v1/invoices/{}/void", id(&other)), json!({}))
        .await
        .assert_status(200);
    app.post(
        k,
        &format!("/v1/invoices/{}/charge_mandate", id(&other)),
        json!({"mandate": mid}),
    )
    .await
    .assert_error(409, "invoice_not_payable", None);
    let draft = create(
        &app,
        k,
        invoice_body(&app, &ada, 100_000, 5, json!({})).await,
    )
    .await;
    draft.assert_status(201);
    app.post(
        k,
        &format!("/v1/invoices/{}/charge_mandate", id(&draft.body)),
        json!({"mandate": mid}),
    )
    .await
    .assert_error(409, "invoice_not_payable", None);
    // A whole-only invoice takes no part.
    let whole = open_invoice(&app, k, &ada, 100_000, 5, json!({})).await;
    app.post(
        k,
        &format!("/v1/invoices/{}/charge_mandate", id(&whole)),
        json!({"mandate": mid, "amount": 100_000}),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("amount"));
}

#[tokio::test]
async fn an_invoice_with_a_payment_processing_cannot_be_voided() {
    use crate::mandates::active;
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = &m.test_key;
    let ada = customer(&app, k, json!({"email": "ada@example.com"})).await;
    let inv = open_invoice(&app, k, &ada, 500_000, 5, json!({})).await;
    let mandate = active(&app, k).await;
    let r = app
        .post(
            k,
            &format!("/v1/invoices/{}/charge_mandate", id(&inv)),
            json!({"mandate": id(&mandate)}),
        )
        .await;
    r.assert_status(201);
    assert_eq!(r.body["status"], "processing");
    // Nothing is paid yet, but the bank is working on a debit for it.
    let void = format!("/v1/invoices/{}/void", id(&inv));
    app.post(k, &void, json!({}))
        .await
        .assert_error(409, "invoice_has_payments", None);
    assert_eq!(get_inv(&app, k, &inv).await["status"], "open");
    // Once the debit has succeeded the invoice is paid, and final.
    app.advance(60).await;
    assert_eq!(get_inv(&app, k, &inv).await["status"], "paid");
}
