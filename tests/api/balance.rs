//! The ledger as merchants see it: balance, balance transactions, statements.

use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn the_balance_lists_every_bucket_with_one_entry_per_currency_zeros_included() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let r = app.get(&m.test_key, "/v1/balance").await;
    r.assert_status(200);
    assert_eq!(r.body["object"], "balance");
    assert_eq!(r.body["livemode"], false);
    for bucket in [
        "available",
        "pending",
        "reserve",
        "payout_in_flight",
        "refund_in_flight",
        "dispute_hold",
    ] {
        let entries = r.body[bucket].as_array().unwrap();
        assert_eq!(entries.len(), 2, "{bucket}");
        assert!(entries.iter().all(|e| e["amount"] == 0));
    }
}

#[tokio::test]
async fn a_capture_posts_the_net_to_pending_with_gross_and_fee_and_an_exact_balance_after() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let first = app.paid_intent(&m.test_key, 100000).await; // fee 1000 + vat 75
    let second = app.paid_intent(&m.test_key, 50000).await; // fee 500 + vat 38
    let lines = app.all_lines(&m.test_key).await;
    assert_eq!(lines.len(), 2);
    // newest first
    assert_eq!(lines[0]["source"], second["id"]);
    assert_eq!(lines[1]["source"], first["id"]);
    assert_eq!(lines[1]["amount"], 100000 - 1075);
    assert_eq!(lines[1]["gross"], 100000);
    assert_eq!(lines[1]["fee"], 1075);
    assert_eq!(lines[1]["balance_after"], 98925);
    assert_eq!(lines[0]["balance_after"], 98925 + 50000 - 538);
    assert_eq!(lines[0]["type"], "payment");
    assert_eq!(lines[0]["bucket"], "pending");
    assert_eq!(lines[0]["object"], "balance_transaction");
    assert!(lines[0]["id"]
        .as_str()
        .unwrap()
        .chars()
        .all(|c| c.is_ascii_digit()));
    let pending = app.balance(&m.test_key, "pending", "NGN").await;
    let sum: i64 = lines.iter().map(|l| l["amount"].as_i64().unwrap()).sum();
    assert_eq!(pending, sum);
}

#[tokio::test]
async fn balance_transactions_filter_by_currency_bucket_type_and_lagos_dates() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    app.paid_intent(&m.test_key, 100000).await;
    let usd = app
        .create_intent(&m.test_key, json!({"amount": 1000, "currency": "USD"}))
        .await;
    app.post(
        &m.test_key,
        &format!(
            "/v1/test_helpers/payment_intents/{}/succeed",
            usd["id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await
    .assert_status(200);
    let count = |path: String| {
        let app = &app;
        let key = m.test_key.clone();
        async move {
            let r = app.get(&key, &path).await;
            r.assert_status(200);
            r.body["data"].as_array().unwrap().len()
        }
    };
    assert_eq!(
        count("/v1/balance_transactions?currency=USD".into()).await,
        1
    );
    assert_eq!(
        count("/v1/balance_transactions?bucket=pending".into()).await,
        2
    );
    assert_eq!(
        count("/v1/balance_transactions?bucket=available".into()).await,
        0
    );
    assert_eq!(
        count("/v1/balance_transactions?type=payments".into()).await,
        2
    );
    assert_eq!(
        count("/v1/balance_transactions?type=releases,refunds".into()).await,
        0
    );
    let today = app
        .now()
        .await
        .with_timezone(&chrono_tz::Africa::Lagos)
        .date_naive();
    let tomorrow = today.succ_opt().unwrap();
    assert_eq!(
        count(format!("/v1/balance_transactions?from={today}&to={today}")).await,
        2
    );
    assert_eq!(
        count(format!("/v1/balance_transactions?from={tomorrow}")).await,
        0
    );
    assert_eq!(
        count(format!(
            "/v1/balance_transactions?to={}",
            today.pred_opt().unwrap()
        ))
        .await,
        0
    );

    for (q, param) in [
        ("currency=EUR", "currency"),
        ("bucket=wallet", "bucket"),
        ("type=payments,gifts", "type"),
        ("from=2026-13-01", "from"),
        ("limit=0", "limit"),
        ("starting_after=abc", "starting_after"),
        ("brand=not-a-uuid", "brand"),
        ("colour=red", "colour"),
    ] {
        app.get(&m.test_key, &format!("/v1/balance_transactions?{q}"))
            .await
            .assert_error(
                400,
                if param == "colour" {
                    "parameter_unknown"
                } else {
                    "parameter_invalid"
                },
                Some(param),
            );
    }
}

#[tokio::test]
async fn balance_transactions_page_with_a_digit_cursor_without_skipping_or_repeating() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    for amount in [10000, 20000, 30000, 40000, 50000] {
        app.paid_intent(&m.test_key, amount).await;
    }
    let page1 = app
        .get(&m.test_key, "/v1/balance_transactions?limit=2")
        .await;
    assert_eq!(page1.body["has_more"], true);
    let mut seen: Vec<String> = page1.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect();
    let mut after = seen.last().unwrap().clone();
    loop {
        // New money arriving between pages must not disturb the walk.
        app.paid_intent(&m.test_key, 1000).await;
        let r = app
            .get(
                &m.test_key,
                &format!("/v1/balance_transactions?limit=2&starting_after={after}"),
            )
            .await;
        let ids: Vec<String> = r.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["id"].as_str().unwrap().to_string())
            .collect();
        seen.extend(ids.clone());
        if !r.body["has_more"].as_bool().unwrap() {
            break;
        }
        after = ids.last().unwrap().clone();
    }
    assert_eq!(seen.len(), 5);
    let mut sorted = seen.clone();
    sorted.sort_by_key(|s| std::cmp::Reverse(s.parse::<u64>().unwrap()));
    sorted.dedup();
    assert_eq!(sorted, seen, "newest first, each once");
}

#[tokio::test]
async fn the_statement_export_is_csv_of_the_filtered_lines_oldest_first() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let a = app.paid_intent(&m.test_key, 100000).await;
    let b = app.paid_intent(&m.test_key, 200000).await;
    let r = app
        .get(&m.test_key, "/v1/balance_transactions/export?currency=NGN")
        .await;
    r.assert_status(200);
    assert_eq!(r.body["object"], "statement_export");
    assert_eq!(r.body["content_type"], "text/csv");
    assert_eq!(r.body["rows"], 2);
    assert_eq!(r.body["truncated"], false);
    assert!(r.body["file_name"].as_str().unwrap().ends_with(".csv"));
    let data = r.body["data"].as_str().unwrap();
    let mut rows = csv::Reader::from_reader(data.as_bytes());
    let headers: Vec<String> = rows.headers().unwrap().iter().map(str::to_string).collect();
    assert_eq!(
        headers,
        [
            "id",
            "created_at",
            "type",
            "currency",
            "bucket",
            "amount",
            "balance_after",
            "gross",
            "fee",
            "source",
            "brand",
            "description"
        ]
    );
    let records: Vec<csv::StringRecord> = rows.records().map(Result::unwrap).collect();
    assert_eq!(records.len(), 2);
    assert_eq!(&records[0][9], a["id"].as_str().unwrap());
    assert_eq!(&records[1][9], b["id"].as_str().unwrap());
    assert_eq!(&records[1][5], (200000 - 2150).to_string());
    app.get(&m.test_key, "/v1/balance_transactions/export?limit=5")
        .await
        .assert_error(400, "parameter_unknown", Some("limit"));
}

#[tokio::test]
async fn the_balance_of_the_default_brand_equals_the_business_total() {
    let app = spawn_app().await;
    let m = app.merchant().await;
    let paid = app.paid_intent(&m.test_key, 100000).await;
    let brand = paid["brand"].as_str().unwrap();
    let branded = app
        .get(&m.test_key, &format!("/v1/balance?brand={brand}"))
        .await;
    branded.assert_status(200);
    let total = app.get(&m.test_key, "/v1/balance").await;
    assert_eq!(branded.body["pending"], total.body["pending"]);
    assert_eq!(branded.body["brand"], brand);
    app.get(
        &m.test_key,
        &format!("/v1/balance?brand={}", uuid::Uuid::new_v4()),
    )
    .await
    .assert_error(400, "parameter_invalid", Some("brand"));
}

#[tokio::test]
async fn test_and_live_ledgers_are_separate() {
    let app = spawn_app().await;
    let m = app.create_merchant(json!({"live_approved": true})).await;
    app.paid_intent(&m.test_key, 100000).await;
    assert_eq!(app.balance(&m.live_key, "pending", "NGN").await, 0);
    assert!(app.all_lines(&m.live_key).await.is_empty());
    let live = app.get(&m.live_key, "/v1/balance").await;
    assert_eq!(live.body["livemode"], true);
}
