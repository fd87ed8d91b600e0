//! Conventions shared by every call: the error body, request validation with
//! named params, the body size limit, the list envelope and cursor pages.

use std::collections::HashSet;

use reqwest::Method;
use serde_json::{json, Map, Value};

use crate::helpers::{ngn, spawn_app, Resp, TestApp};

/// The spec's error body: `{error: {type, code, message, param}}`, all
/// strings except `param`, which is null outside 400s.
#[track_caller]
fn assert_error_shape(r: &Resp) {
    let e = &r.body["error"];
    assert!(e.is_object(), "no error object: {}", r.text);
    assert!(
        e["type"].as_str().is_some_and(|s| !s.is_empty()),
        "body: {}",
        r.text
    );
    assert!(
        e["code"].as_str().is_some_and(|s| !s.is_empty()),
        "body: {}",
        r.text
    );
    assert!(
        e["message"].as_str().is_some_and(|s| !s.is_empty()),
        "body: {}",
        r.text
    );
    assert!(
        e.get("param").is_some(),
        "param is on every error: {}",
        r.text
    );
    assert!(
        r.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json")),
        "headers: {:?}",
        r.headers
    );
}

fn ids(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect()
}

/// Creates `n` intents in order and returns their ids, oldest first.
async fn create_many(app: &TestApp, key: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..n {
        let pi = app.create_intent(key, ngn(10_000 + i as i64)).await;
        out.push(pi["id"].as_str().unwrap().to_string());
    }
    out
}

/// Walks the list at `path` (which already has a `?`) with `limit`, returning
/// every id in order and the page sizes.
async fn walk(app: &TestApp, key: &str, path: &str, limit: usize) -> (Vec<String>, Vec<usize>) {
    let mut out = Vec::new();
    let mut sizes = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let url = match &after {
            Some(a) => format!("{path}&limit={limit}&starting_after={a}"),
            None => format!("{path}&limit={limit}"),
        };
        let r = app.get(key, &url).await;
        r.assert_status(200);
        let data = r.body["data"].as_array().unwrap().clone();
        sizes.push(data.len());
        after = data.last().map(|l| l["id"].as_str().unwrap().to_string());
        out.extend(ids(&data));
        if !r.body["has_more"].as_bool().unwrap() {
            return (out, sizes);
        }
        assert!(sizes.len() < 1000, "the walk does not end");
    }
}

fn newest_first(mut created: Vec<String>) -> Vec<String> {
    created.reverse();
    created
}

#[tokio::test]
async fn an_unknown_path_answers_404_with_the_error_body() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    for path in ["/v1/nothing_here", "/v1/payment_intents/x/y/z", "/nowhere"] {
        let r = app.get(&m.test_key, path).await;
        r.assert_status(404);
        assert_error_shape(&r);
        assert_eq!(r.error_type(), "invalid_request_error", "body: {}", r.text);
        assert!(r.body["error"]["param"].is_null(), "body: {}", r.text);
    }
    let r = app.post(&m.test_key, "/v1/nothing_here", json!({})).await;
    r.assert_status(404);
    assert_error_shape(&r);
}

#[tokio::test]
async fn a_wrong_method_answers_405_with_the_error_body() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let pi = app.create_intent(&m.test_key, ngn(10_000)).await;
    let id = pi["id"].as_str().unwrap();
    let cases = [
        (Method::DELETE, "/v1/payment_intents".to_string()),
        (Method::PUT, "/v1/payment_intents".to_string()),
        (Method::DELETE, format!("/v1/payment_intents/{id}")),
        (Method::POST, format!("/v1/payment_intents/{id}")),
        (Method::GET, format!("/v1/payment_intents/{id}/cancel")),
        (Method::PATCH, "/v1/balance".to_string()),
    ];
    for (method, path) in cases {
        let idem = app.next_key();
        let r = app
            .send(
                method.clone(),
                &path,
                Some(&m.test_key),
                Some(&idem),
                Some(&json!({})),
            )
            .await;
        assert_eq!(r.status, 405, "{method} {path}: {}", r.text);
        assert_error_shape(&r);
        assert!(r.body["error"]["param"].is_null(), "body: {}", r.text);
    }
    // The refused calls changed nothing.
    let r = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    assert_eq!(r.body["status"], "created");
    assert_eq!(app.all_intents(&m.test_key).await.len(), 1);
}

#[tokio::test]
async fn missing_required_fields_are_named() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let cases = [
        (json!({}), "amount"),
        (json!({"currency": "NGN"}), "amount"),
        (json!({"amount": 10_000}), "currency"),
        (json!({"amount": null, "currency": "NGN"}), "amount"),
        (json!({"amount": 10_000, "currency": null}), "currency"),
    ];
    for (body, param) in cases {
        let r = app
            .post(&m.test_key, "/v1/payment_intents", body.clone())
            .await;
        r.assert_error(400, "parameter_missing", Some(param));
        assert_eq!(r.error_type(), "invalid_request_error", "{body}");
    }
    assert!(app.all_intents(&m.test_key).await.is_empty());
}

#[tokio::test]
async fn invalid_fields_are_named_and_change_nothing() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let mut many = Map::new();
    for i in 0..21 {
        many.insert(format!("k{i}"), json!("v"));
    }
    let base = |extra: Value| {
        let mut b = json!({"amount": 10_000, "currency": "NGN"});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let cases: Vec<(Value, &str)> = vec![
        (json!({"amount": 99, "currency": "NGN"}), "amount"),
        (json!({"amount": 99, "currency": "USD"}), "amount"),
        (json!({"amount": 0, "currency": "NGN"}), "amount"),
        (json!({"amount": -100, "currency": "NGN"}), "amount"),
        (json!({"amount": 1.5, "currency": "NGN"}), "amount"),
        (json!({"amount": 100.5, "currency": "NGN"}), "amount"),
        (json!({"amount": "100", "currency": "NGN"}), "amount"),
        (json!({"amount": true, "currency": "NGN"}), "amount"),
        (
            json!({"amount": 1_000_000_000_001_i64, "currency": "NGN"}),
            "amount",
        ),
        (json!({"amount": u64::MAX, "currency": "NGN"}), "amount"),
        (json!({"amount": 10_000, "currency": "EUR"}), "currency"),
        (json!({"amount": 10_000, "currency": 566}), "currency"),
        (base(json!({"fee_bearer": "x"})), "fee_bearer"),
        (
            base(json!({"metadata": Value::Object(many.clone())})),
            "metadata",
        ),
        (base(json!({"metadata": "not an object"})), "metadata"),
        (
            base(json!({"customer_email": "not-an-email"})),
            "customer_email",
        ),
        (
            base(json!({"customer_email": "ada at example.com"})),
            "customer_email",
        ),
        (base(json!({"return_url": "not a url"})), "return_url"),
        (base(json!({"return_url": "/checkout/done"})), "return_url"),
        (base(json!({"brand": "not-a-uuid"})), "brand"),
        (base(json!({"customer": "not-a-uuid"})), "customer"),
        (base(json!({"reference": 12345})), "reference"),
    ];
    for (body, param) in &cases {
        let r = app
            .post(&m.test_key, "/v1/payment_intents", body.clone())
            .await;
        assert_eq!(r.status, 400, "{body}: {}", r.text);
        r.assert_error(400, "parameter_invalid", Some(param));
        assert_eq!(r.error_type(), "invalid_request_error");
    }
    // A nested object as a metadata value: the param names metadata (the
    // offending key may be named after it).
    let r = app
        .post(
            &m.test_key,
            "/v1/payment_intents",
            base(json!({"metadata": {"order": {"id": 1}}})),
        )
        .await;
    r.assert_error(400, "parameter_invalid", None);
    let param = r.param().unwrap_or("");
    assert!(param.starts_with("metadata"), "param {param}: {}", r.text);

    // None of them created anything.
    assert!(app.all_intents(&m.test_key).await.is_empty());
    assert_eq!(app.balance(&m.test_key, "pending", "NGN").await, 0);
}

#[tokio::test]
async fn boundary_values_are_accepted() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let mut twenty = Map::new();
    for i in 0..20 {
        twenty.insert(format!("k{i}"), json!("v"));
    }
    // A customer of this merchant (customers come from mandates today).
    let customer = app
        .post(
            &m.test_key,
            "/v1/mandates",
            json!({"customer_email": "ada@example.com"}),
        )
        .await
        .body["customer"]
        .as_str()
        .unwrap()
        .to_string();
    let cases = [
        json!({"amount": 100, "currency": "NGN"}),
        json!({"amount": 100, "currency": "USD"}),
        json!({"amount": 1_000_000_000_000_i64, "currency": "NGN"}),
        json!({"amount": 10_000, "currency": "NGN", "metadata": Value::Object(twenty)}),
        json!({"amount": 10_000, "currency": "NGN", "fee_bearer": "customer",
               "customer_email": "ada@example.com", "return_url": "https://shop.example.com/done",
               "customer": customer, "description": "two shirts",
               "reference": "order-77"}),
    ];
    for body in &cases {
        let r = app
            .post(&m.test_key, "/v1/payment_intents", body.clone())
            .await;
        assert_eq!(r.status, 201, "{body}: {}", r.text);
        assert_eq!(r.body["amount"], body["amount"]);
        assert_eq!(r.body["currency"], body["currency"]);
    }
    assert_eq!(app.all_intents(&m.test_key).await.len(), cases.len());
}

#[tokio::test]
async fn an_unknown_body_field_is_named() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let r = app
        .post(
            &m.test_key,
            "/v1/payment_intents",
            json!({"amount": 10_000, "currency": "NGN", "colour": "blue"}),
        )
        .await;
    r.assert_error(400, "parameter_unknown", Some("colour"));
    assert_eq!(r.error_type(), "invalid_request_error");

    // On an action that takes no body as well.
    let pi = app.create_intent(&m.test_key, ngn(10_000)).await;
    let id = pi["id"].as_str().unwrap();
    let r = app
        .post(
            &m.test_key,
            &format!("/v1/payment_intents/{id}/cancel"),
            json!({"reason": "x"}),
        )
        .await;
    r.assert_error(400, "parameter_unknown", Some("reason"));
    let r = app
        .get(&m.test_key, &format!("/v1/payment_intents/{id}"))
        .await;
    assert_eq!(r.body["status"], "created");
    assert_eq!(app.all_intents(&m.test_key).await.len(), 1);
}

#[tokio::test]
async fn malformed_json_is_refused_on_param_body() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let auth = format!("Bearer {}", m.test_key);
    let bodies: [&[u8]; 4] = [
        b"{nope",
        b"{\"amount\": 10000, \"currency\": \"NGN\"",
        b"{\"amount\": 10000,, \"currency\": \"NGN\"}",
        b"\xff\xfe{}",
    ];
    for body in bodies {
        let idem = app.next_key();
        let r = app
            .send_raw(
                Method::POST,
                "/v1/payment_intents",
                &[("authorization", &auth), ("idempotency-key", &idem)],
                Some(body.to_vec()),
            )
            .await;
        r.assert_error(400, "parameter_invalid", Some("body"));
        assert_eq!(r.error_type(), "invalid_request_error");
    }
    assert!(app.all_intents(&m.test_key).await.is_empty());
}

#[tokio::test]
async fn a_body_over_1_mib_is_refused_with_413() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let auth = format!("Bearer {}", m.test_key);
    const MIB: usize = 1 << 20;
    // A valid body padded with whitespace to an exact size.
    let padded = |size: usize| {
        let mut b = br#"{"amount": 10000, "currency": "NGN"}"#.to_vec();
        b.resize(size, b' ');
        b
    };

    let idem = app.next_key();
    let r = app
        .send_raw(
            Method::POST,
            "/v1/payment_intents",
            &[("authorization", &auth), ("idempotency-key", &idem)],
            Some(padded(MIB + 1)),
        )
        .await;
    r.assert_error(413, "body_too_large", None);
    assert_eq!(r.error_type(), "invalid_request_error");
    assert!(r.body["error"]["param"].is_null(), "body: {}", r.text);

    let idem = app.next_key();
    let r = app
        .send_raw(
            Method::POST,
            "/v1/payment_intents",
            &[("authorization", &auth), ("idempotency-key", &idem)],
            Some(padded(4 * MIB)),
        )
        .await;
    r.assert_error(413, "body_too_large", None);
    assert!(app.all_intents(&m.test_key).await.is_empty());

    // Exactly 1 MiB is not over the limit.
    let idem = app.next_key();
    let r = app
        .send_raw(
            Method::POST,
            "/v1/payment_intents",
            &[("authorization", &auth), ("idempotency-key", &idem)],
            Some(padded(MIB)),
        )
        .await;
    r.assert_status(201);
    assert_eq!(app.all_intents(&m.test_key).await.len(), 1);
}

#[tokio::test]
async fn a_list_has_the_envelope_and_is_newest_first() {
    let app = spawn_app().await;
    let m = app.merchant().await;

    let r = app.get(&m.test_key, "/v1/payment_intents").await;
    r.assert_status(200);
    assert_eq!(r.body["object"], "list");
    assert_eq!(r.body["data"], json!([]));
    assert_eq!(r.body["has_more"], false);

    let created = create_many(&app, &m.test_key, 3).await;
    // Even across clock moves, newest first.
    app.advance(60).await;
    let later = app.create_intent(&m.test_key, ngn(50_000)).await;
    let mut expected = created.clone();
    expected.push(later["id"].as_str().unwrap().to_string());

    let r = app.get(&m.test_key, "/v1/payment_intents").await;
    r.assert_status(200);
    assert_eq!(r.body["object"], "list");
    assert_eq!(r.body["has_more"], false);
    let data = r.body["data"].as_array().unwrap();
    assert_eq!(ids(data), newest_first(expected));
    for item in data {
        assert_eq!(item["object"], "payment_intent");
        assert_eq!(item["livemode"], false);
    }
    let times: Vec<chrono::DateTime<chrono::Utc>> = data
        .iter()
        .map(|i| i["created_at"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
}

#[tokio::test]
async fn limit_is_1_to_100_and_defaults_to_20() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    for bad in ["0", "101", "-1", "x", "1.5", ""] {
        let r = app
            .get(&m.test_key, &format!("/v1/payment_intents?limit={bad}"))
            .await;
        r.assert_error(400, "parameter_invalid", Some("limit"));
    }

    let created = create_many(&app, &m.test_key, 21).await;
    let all = newest_first(created);

    let r = app.get(&m.test_key, "/v1/payment_intents").await;
    r.assert_status(200);
    assert_eq!(ids(r.body["data"].as_array().unwrap()), all[..20].to_vec());
    assert_eq!(r.body["has_more"], true);

    let r = app.get(&m.test_key, "/v1/payment_intents?limit=1").await;
    assert_eq!(ids(r.body["data"].as_array().unwrap()), all[..1].to_vec());
    assert_eq!(r.body["has_more"], true);

    let r = app.get(&m.test_key, "/v1/payment_intents?limit=21").await;
    assert_eq!(ids(r.body["data"].as_array().unwrap()), all);
    assert_eq!(r.body["has_more"], false);

    let r = app.get(&m.test_key, "/v1/payment_intents?limit=100").await;
    assert_eq!(ids(r.body["data"].as_array().unwrap()), all);
    assert_eq!(r.body["has_more"], false);
}

#[tokio::test]
async fn starting_after_walks_every_item_exactly_once() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let created = create_many(&app, &m.test_key, 25).await;
    let (walked, sizes) = walk(&app, &m.test_key, "/v1/payment_intents?", 7).await;
    assert_eq!(walked, newest_first(created.clone()));
    assert_eq!(sizes, vec![7, 7, 7, 4]);

    // A page size that divides the count: the last full page says no more,
    // or one empty page follows; either way nothing repeats.
    let (walked, _) = walk(&app, &m.test_key, "/v1/payment_intents?", 5).await;
    assert_eq!(walked, newest_first(created));
}

#[tokio::test]
async fn a_walk_never_skips_or_repeats_while_new_intents_arrive() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let original = create_many(&app, &m.test_key, 15).await;
    let original_set: HashSet<String> = original.iter().cloned().collect();

    let mut walked = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let url = match &after {
            Some(a) => format!("/v1/payment_intents?limit=4&starting_after={a}"),
            None => "/v1/payment_intents?limit=4".to_string(),
        };
        let r = app.get(&m.test_key, &url).await;
        r.assert_status(200);
        let data = r.body["data"].as_array().unwrap().clone();
        after = data.last().map(|l| l["id"].as_str().unwrap().to_string());
        walked.extend(ids(&data));
        pages += 1;
        if !r.body["has_more"].as_bool().unwrap() {
            break;
        }
        // New intents between page fetches.
        create_many(&app, &m.test_key, 2).await;
        assert!(pages < 100, "the walk does not end");
    }
    let unique: HashSet<String> = walked.iter().cloned().collect();
    assert_eq!(unique.len(), walked.len(), "an item repeated: {walked:?}");
    for id in &original {
        assert!(unique.contains(id), "{id} was skipped");
    }
    // Items of the original set come in newest-first order.
    let originals_walked: Vec<String> = walked
        .iter()
        .filter(|i| original_set.contains(*i))
        .cloned()
        .collect();
    assert_eq!(originals_walked, newest_first(original));
    // 15 + 2 per page boundary exist now; a fresh walk sees all exactly once.
    let total = app.all_intents(&m.test_key).await;
    assert_eq!(total.len(), 15 + 2 * (pages - 1));
}

#[tokio::test]
async fn the_status_filter_lists_only_that_status() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let key = &m.test_key;

    let created = app.create_intent(key, ngn(10_000)).await;
    let canceled = app.create_intent(key, ngn(11_000)).await;
    let processing = app.create_intent(key, ngn(12_000)).await;
    let created2 = app.create_intent(key, ngn(13_000)).await;
    let successful = app.paid_intent(key, 14_000).await;

    let id = |v: &Value| v["id"].as_str().unwrap().to_string();
    app.post(
        key,
        &format!("/v1/payment_intents/{}/cancel", id(&canceled)),
        json!({}),
    )
    .await
    .assert_status(200);
    app.post(
        key,
        &format!("/v1/payment_intents/{}/bank_transfer", id(&processing)),
        json!({}),
    )
    .await
    .assert_status(200);

    let expect = [
        ("created", vec![id(&created2), id(&created)]),
        ("canceled", vec![id(&canceled)]),
        ("processing", vec![id(&processing)]),
        ("successful", vec![id(&successful)]),
        ("failed", vec![]),
        ("abandoned", vec![]),
    ];
    for (status, want) in &expect {
        let r = app
            .get(key, &format!("/v1/payment_intents?status={status}"))
            .await;
        r.assert_status(200);
        assert_eq!(r.body["object"], "list");
        let data = r.body["data"].as_array().unwrap();
        assert_eq!(&ids(data), want, "status={status}");
        assert!(data.iter().all(|i| i["status"] == *status));
    }
    // Pages within a status filter.
    let (walked, _) = walk(&app, key, "/v1/payment_intents?status=created", 1).await;
    assert_eq!(walked, vec![id(&created2), id(&created)]);

    // A cursor that has since left the filtered status still pages on:
    // cancel each created intent while walking the created list.
    let r = app
        .get(key, "/v1/payment_intents?status=created&limit=1")
        .await;
    let page1 = ids(r.body["data"].as_array().unwrap());
    assert_eq!(page1, vec![id(&created2)]);
    assert_eq!(r.body["has_more"], true);
    app.post(
        key,
        &format!("/v1/payment_intents/{}/cancel", id(&created2)),
        json!({}),
    )
    .await
    .assert_status(200);
    let r = app
        .get(
            key,
            &format!(
                "/v1/payment_intents?status=created&limit=1&starting_after={}",
                id(&created2)
            ),
        )
        .await;
    r.assert_status(200);
    assert_eq!(ids(r.body["data"].as_array().unwrap()), vec![id(&created)]);
    assert_eq!(r.body["has_more"], false);
    let r = app.get(key, "/v1/payment_intents?status=canceled").await;
    assert_eq!(
        ids(r.body["data"].as_array().unwrap()),
        vec![id(&created2), id(&canceled)]
    );

    // A processing intent abandoned after 30 minutes moves lists.
    app.advance(31 * 60).await;
    let r = app.get(key, "/v1/payment_intents?status=abandoned").await;
    assert_eq!(
        ids(r.body["data"].as_array().unwrap()),
        vec![id(&processing)]
    );
    let r = app.get(key, "/v1/payment_intents?status=processing").await;
    assert_eq!(r.body["data"], json!([]));

    for bad in ["nope", "CREATED", ""] {
        let r = app
            .get(key, &format!("/v1/payment_intents?status={bad}"))
            .await;
        r.assert_error(400, "parameter_invalid", Some("status"));
    }
}

#[tokio::test]
async fn the_customer_filter_lists_only_that_customers_intents() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let key = &m.test_key;
    let mut customers = Vec::new();
    for email in ["ada@example.com", "obi@example.com"] {
        let r = app
            .post(key, "/v1/mandates", json!({"customer_email": email}))
            .await;
        r.assert_status(201);
        customers.push(r.body["customer"].as_str().unwrap().to_string());
    }
    let (c1, c2) = (customers[0].clone(), customers[1].clone());

    let mut of_c1 = Vec::new();
    let mut of_c2 = Vec::new();
    for i in 0..3 {
        let pi = app
            .create_intent(
                key,
                json!({"amount": 10_000 + i, "currency": "NGN", "customer": c1}),
            )
            .await;
        assert_eq!(pi["customer"], c1.as_str());
        of_c1.push(pi["id"].as_str().unwrap().to_string());
        let pi = app
            .create_intent(
                key,
                json!({"amount": 20_000 + i, "currency": "NGN", "customer": c2}),
            )
            .await;
        of_c2.push(pi["id"].as_str().unwrap().to_string());
        app.create_intent(key, ngn(30_000 + i)).await;
    }

    let r = app
        .get(key, &format!("/v1/payment_intents?customer={c1}"))
        .await;
    r.assert_status(200);
    assert_eq!(
        ids(r.body["data"].as_array().unwrap()),
        newest_first(of_c1.clone())
    );
    assert_eq!(r.body["has_more"], false);
    let (walked, sizes) = walk(&app, key, &format!("/v1/payment_intents?customer={c2}"), 2).await;
    assert_eq!(walked, newest_first(of_c2.clone()));
    assert_eq!(sizes, vec![2, 1]);

    // With a status too.
    app.post(
        key,
        &format!("/v1/payment_intents/{}/cancel", of_c1[1]),
        json!({}),
    )
    .await
    .assert_status(200);
    let r = app
        .get(
            key,
            &format!("/v1/payment_intents?customer={c1}&status=canceled"),
        )
        .await;
    assert_eq!(
        ids(r.body["data"].as_array().unwrap()),
        vec![of_c1[1].clone()]
    );
    let r = app
        .get(
            key,
            &format!("/v1/payment_intents?customer={c1}&status=created"),
        )
        .await;
    assert_eq!(
        ids(r.body["data"].as_array().unwrap()),
        vec![of_c1[2].clone(), of_c1[0].clone()]
    );

    // A customer with no intents, and a customer that is not a uuid.
    let r = app
        .get(
            key,
            &format!("/v1/payment_intents?customer={}", uuid::Uuid::new_v4()),
        )
        .await;
    assert_eq!(r.body["data"], json!([]));
    let r = app.get(key, "/v1/payment_intents?customer=bob").await;
    r.assert_error(400, "parameter_invalid", Some("customer"));
}

#[tokio::test]
async fn starting_after_an_unknown_id_is_refused() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let other = app.merchant().await;
    create_many(&app, &m.test_key, 2).await;
    let foreign = app.create_intent(&other.test_key, ngn(10_000)).await;

    let unknown = uuid::Uuid::new_v4().to_string();
    let foreign_id = foreign["id"].as_str().unwrap().to_string();
    // An id of the same merchant's other mode is unknown too.
    app.admin_post(
        &format!("/admin/v1/merchants/{}", m.id),
        json!({"settings": {"live_approved": true}}),
    )
    .await
    .assert_status(200);
    let live = app.create_intent(&m.live_key, ngn(10_000)).await;
    let live_id = live["id"].as_str().unwrap().to_string();
    for cursor in [
        unknown.as_str(),
        "not-a-uuid",
        foreign_id.as_str(),
        live_id.as_str(),
    ] {
        let r = app
            .get(
                &m.test_key,
                &format!("/v1/payment_intents?starting_after={cursor}"),
            )
            .await;
        r.assert_error(400, "parameter_invalid", Some("starting_after"));
    }
}

#[tokio::test]
async fn a_duplicate_reference_is_refused() {
    let app = spawn_app().await;
    let m = app.live_merchant().await;
    let body = json!({"amount": 10_000, "currency": "NGN", "reference": "order-1"});

    let first = app.create_intent(&m.test_key, body.clone()).await;
    assert_eq!(first["reference"], "order-1");

    // A new request (new key, other amount) with the same reference.
    let r = app
        .post(
            &m.test_key,
            "/v1/payment_intents",
            json!({"amount": 20_000, "currency": "NGN", "reference": "order-1"}),
        )
        .await;
    r.assert_error(409, "duplicate_reference", None);
    assert_eq!(r.error_type(), "state_error");
    let all = app.all_intents(&m.test_key).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["id"], first["id"]);

    // Another reference is fine.
    app.create_intent(
        &m.test_key,
        json!({"amount": 10_000, "currency": "NGN", "reference": "order-2"}),
    )
    .await;

    // References are per merchant and mode.
    let live = app.create_intent(&m.live_key, body.clone()).await;
    assert_eq!(live["livemode"], true);
    let other = app.merchant().await;
    app.create_intent(&other.test_key, body.clone()).await;
    assert_eq!(app.all_intents(&m.test_key).await.len(), 2);
}

#[tokio::test]
async fn concurrent_creates_with_one_reference_make_one_intent() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let body = json!({"amount": 10_000, "currency": "NGN", "reference": "race-1"});
    let answers = futures_util::future::join_all(
        (0..10).map(|_| app.post(&m.test_key, "/v1/payment_intents", body.clone())),
    )
    .await;
    let created: Vec<&Resp> = answers.iter().filter(|r| r.status == 201).collect();
    assert_eq!(
        created.len(),
        1,
        "{:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    for r in answers.iter().filter(|r| r.status != 201) {
        r.assert_error(409, "duplicate_reference", None);
    }
    let all = app.all_intents(&m.test_key).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["id"], created[0].body["id"]);
}

#[tokio::test]
async fn checks_run_in_order_authentication_validation_lookup_state() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let unknown = uuid::Uuid::new_v4();

    // 401 before a missing Idempotency-Key and a bad body.
    let r = app
        .send(
            Method::POST,
            "/v1/payment_intents",
            None,
            None,
            Some(&json!({"amount": 1})),
        )
        .await;
    assert_eq!(r.status, 401, "body: {}", r.text);
    assert_eq!(r.error_type(), "authentication_error");
    // 403 (live account not activated) before validation.
    let r = app
        .post(&m.live_key, "/v1/payment_intents", json!({"amount": 1}))
        .await;
    r.assert_error(403, "account_not_activated", None);
    // 400 before 404: a bad request on an unknown intent.
    let r = app
        .send(
            Method::POST,
            &format!("/v1/payment_intents/{unknown}/cancel"),
            Some(&m.test_key),
            None,
            Some(&json!({})),
        )
        .await;
    r.assert_error(400, "parameter_missing", Some("Idempotency-Key"));
    let r = app
        .post(
            &m.test_key,
            &format!("/v1/payment_intents/{unknown}/cancel"),
            json!({"colour": "blue"}),
        )
        .await;
    r.assert_error(400, "parameter_unknown", Some("colour"));
    // 404 for the lookup.
    let r = app
        .post(
            &m.test_key,
            &format!("/v1/payment_intents/{unknown}/cancel"),
            json!({}),
        )
        .await;
    r.assert_status(404);
    assert_eq!(r.error_type(), "invalid_request_error");
    assert!(r.body["error"]["param"].is_null(), "body: {}", r.text);
    // 409 for the state, with a state_error type.
    let pi = app.paid_intent(&m.test_key, 10_000).await;
    let r = app
        .post(
            &m.test_key,
            &format!("/v1/payment_intents/{}/cancel", pi["id"].as_str().unwrap()),
            json!({}),
        )
        .await;
    r.assert_status(409);
    assert_eq!(r.error_type(), "state_error");
    assert!(r.body["error"]["param"].is_null(), "body: {}", r.text);
}
