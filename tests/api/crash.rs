//! Crash consistency: drive concurrent creates and transfers, SIGKILL the
//! server at a random moment, restart on the same data directory and check
//! that everything acknowledged is there, replays replay, and the ledger's
//! lines sum to the balances. Repeated for several kill points. Each test
//! ends with `kobo check` on the store its kills left.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use serde_json::{json, Value};

use crate::helpers::spawn_app;

/// The kill point of a round: first `enough()` must hold (the round has had
/// traffic acknowledged, so every round tests something however slow the
/// shared machine is), then a random further moment while traffic still
/// flows. A round that gets nothing acknowledged within a minute fails.
pub(crate) async fn kill_point(enough: impl Fn() -> bool, further_ms: std::ops::Range<u64>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !enough() {
        assert!(
            std::time::Instant::now() < deadline,
            "the round's traffic was not acknowledged within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let further = rand::thread_rng().gen_range(further_ms);
    tokio::time::sleep(Duration::from_millis(further)).await;
}

#[derive(Clone)]
struct AckedCreate {
    idem: String,
    body: Value,
    response: String,
    id: String,
}

async fn drive(
    client: reqwest::Client,
    base: String,
    key: String,
    worker: usize,
    stop: Arc<AtomicBool>,
    creates: Arc<Mutex<Vec<AckedCreate>>>,
    transfers: Arc<Mutex<Vec<String>>>,
) {
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let idem = format!("crash-{worker}-{n}-{}", uuid::Uuid::new_v4().simple());
        let body = json!({"amount": 10_000 + (n % 97) * 100, "currency": "NGN", "reference": idem});
        let res = client
            .post(format!("{base}/v1/payment_intents"))
            .bearer_auth(&key)
            .header("Idempotency-Key", &idem)
            .json(&body)
            .send()
            .await;
        let Ok(res) = res else { return };
        if res.status().as_u16() != 201 {
            return;
        }
        let Ok(text) = res.text().await else { return };
        let id = serde_json::from_str::<Value>(&text).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        creates.lock().unwrap().push(AckedCreate {
            idem: idem.clone(),
            body,
            response: text,
            id: id.clone(),
        });
        if n % 2 == 0 {
            let res = client
                .post(format!(
                    "{base}/v1/test_helpers/payment_intents/{id}/simulate_transfer"
                ))
                .bearer_auth(&key)
                .header("Idempotency-Key", format!("{idem}-pay"))
                .json(&json!({}))
                .send()
                .await;
            match res {
                Ok(r) if r.status().as_u16() == 200 => {
                    if r.text().await.is_ok() {
                        transfers.lock().unwrap().push(id);
                    }
                }
                _ => return,
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_acknowledged_survives_sigkill_at_random_moments() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let creates = Arc::new(Mutex::new(Vec::<AckedCreate>::new()));
    let transfers = Arc::new(Mutex::new(Vec::<String>::new()));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();

    for round in 0..4 {
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..16)
            .map(|w| {
                tokio::spawn(drive(
                    client.clone(),
                    app.base.clone(),
                    m.test_key.clone(),
                    round * 100 + w,
                    stop.clone(),
                    creates.clone(),
                    transfers.clone(),
                ))
            })
            .collect();
        let before = creates.lock().unwrap().len();
        kill_point(|| creates.lock().unwrap().len() >= before + 6, 0..750).await;
        app.kill();
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.await.unwrap();
        }
        app.start(&[]);
        verify(&app, &m.test_key, &creates, &transfers, round).await;
    }
    assert!(
        creates.lock().unwrap().len() > 20,
        "the test drove too little traffic"
    );
    // The store left by the kills and restarts: every invariant holds.
    crate::operations::assert_check_clean(&mut app);
}

async fn verify(
    app: &crate::helpers::TestApp,
    key: &str,
    creates: &Arc<Mutex<Vec<AckedCreate>>>,
    transfers: &Arc<Mutex<Vec<String>>>,
    round: usize,
) {
    let acked = creates.lock().unwrap().clone();
    let paid: HashSet<String> = transfers.lock().unwrap().iter().cloned().collect();
    for c in &acked {
        let r = app.get(key, &format!("/v1/payment_intents/{}", c.id)).await;
        assert_eq!(
            r.status, 200,
            "round {round}: acknowledged intent {} lost",
            c.id
        );
        assert_eq!(r.body["reference"], c.body["reference"]);
        assert_eq!(r.body["amount"], c.body["amount"]);
        if paid.contains(&c.id) {
            assert_eq!(
                r.body["status"], "successful",
                "round {round}: acknowledged payment lost"
            );
        }
        let replay = app
            .post_with_key(key, "/v1/payment_intents", &c.idem, c.body.clone())
            .await;
        assert_eq!(replay.status, 201, "round {round}: {}", replay.text);
        assert!(replay.replayed(), "round {round}: not replayed");
        assert_eq!(replay.text, c.response, "round {round}: replay differs");
    }
    // The ledger: one payment line per successful intent, lines sum to the balance.
    let lines = app.all_lines(key).await;
    let sources: HashSet<&str> = lines
        .iter()
        .map(|l| l["source"].as_str().unwrap())
        .collect();
    assert_eq!(
        sources.len(),
        lines.len(),
        "round {round}: a payment was captured twice"
    );
    for id in &paid {
        assert!(
            sources.contains(id.as_str()),
            "round {round}: capture of {id} lost"
        );
    }
    let sum: i64 = lines.iter().map(|l| l["amount"].as_i64().unwrap()).sum();
    assert_eq!(
        app.balance(key, "pending", "NGN").await,
        sum,
        "round {round}"
    );
    let mut running = 0;
    for l in lines.iter().rev() {
        running += l["amount"].as_i64().unwrap();
        assert_eq!(
            l["balance_after"].as_i64().unwrap(),
            running,
            "round {round}"
        );
    }
    let mut successful = 0;
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            Some(a) => {
                format!("/v1/payment_intents?status=successful&limit=100&starting_after={a}")
            }
            None => "/v1/payment_intents?status=successful&limit=100".into(),
        };
        let r = app.get(key, &path).await;
        let data = r.body["data"].as_array().unwrap();
        successful += data.len();
        after = data.last().map(|d| d["id"].as_str().unwrap().to_string());
        if !r.body["has_more"].as_bool().unwrap() {
            break;
        }
    }
    assert_eq!(
        successful,
        lines.len(),
        "round {round}: successful intents and captures differ"
    );
}

/// Payouts under SIGKILL: drive payout creates (and clock advances that
/// send them and query their status) at random kill points; after each
/// restart every acknowledged payout exists, none is paid or returned twice,
/// and money is conserved: what was available at the start equals
/// available + in flight + paid out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payouts_are_never_lost_or_doubled_across_sigkill() {
    let mut app = spawn_app().await;
    let m = app
        .create_merchant(json!({"payout_tier": "enterprise"}))
        .await;
    for _ in 0..4 {
        app.paid_intent(&m.test_key, 50_000_000).await;
    }
    app.post(
        &m.test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await
    .assert_status(200);
    let start = app.balance(&m.test_key, "available", "NGN").await;
    let mut accounts = Vec::new();
    for number in ["0123456789", "1111119999", "1111118888", "1111117777"] {
        let r = app
            .post(
                &m.test_key,
                "/v1/bank_accounts",
                json!({"bank_code": "058", "account_number": number}),
            )
            .await;
        accounts.push(r.body["id"].as_str().unwrap().to_string());
    }
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    for round in 0..3 {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for w in 0..8 {
            let (client, base, key, stop, acked, accounts) = (
                client.clone(),
                app.base.clone(),
                m.test_key.clone(),
                stop.clone(),
                acked.clone(),
                accounts.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let body = json!({"amount": 10_000 + n, "currency": "NGN", "bank_account_id": accounts[(w + n as usize) % 4]});
                    let r = client
                        .post(format!("{base}/v1/payouts"))
                        .bearer_auth(&key)
                        .header("Idempotency-Key", format!("po-{round}-{w}-{n}"))
                        .json(&body)
                        .send()
                        .await;
                    let Ok(r) = r else { return };
                    if r.status().as_u16() != 201 {
                        return;
                    }
                    let Ok(v) = r.json::<Value>().await else { return };
                    acked.lock().unwrap().push(v["id"].as_str().unwrap().to_string());
                }
            }));
        }
        {
            // The clock moves too: sends and status queries run under load.
            let (client, base, token, stop) = (
                client.clone(),
                app.base.clone(),
                app.admin_token.clone(),
                stop.clone(),
            );
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let r = client
                        .post(format!("{base}/admin/v1/clock/advance"))
                        .bearer_auth(&token)
                        .json(&json!({"seconds": 30}))
                        .send()
                        .await;
                    if r.is_err() {
                        return;
                    }
                }
            }));
        }
        let before = acked.lock().unwrap().len();
        kill_point(|| acked.lock().unwrap().len() >= before + 4, 0..700).await;
        app.kill();
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        app.start(&[]);
        // Let every send and status query that is due run.
        app.advance(120).await;

        let ids = acked.lock().unwrap().clone();
        let lines = app.all_lines(&m.test_key).await;
        let mut paid_out = 0;
        for id in &ids {
            let p = app.get(&m.test_key, &format!("/v1/payouts/{id}")).await;
            assert_eq!(
                p.status, 200,
                "round {round}: acknowledged payout {id} lost"
            );
            let total = p.body["total_debited"].as_i64().unwrap();
            let mine: Vec<&Value> = lines
                .iter()
                .filter(|l| l["source"] == id.as_str())
                .collect();
            let in_flight: Vec<i64> = mine
                .iter()
                .filter(|l| l["bucket"] == "payout_in_flight")
                .map(|l| l["amount"].as_i64().unwrap())
                .collect();
            let available: Vec<i64> = mine
                .iter()
                .filter(|l| l["bucket"] == "available")
                .map(|l| l["amount"].as_i64().unwrap())
                .collect();
            match p.body["status"].as_str().unwrap() {
                "paid" => {
                    assert_eq!(in_flight, vec![-total, total], "round {round}: {id}");
                    assert_eq!(available, vec![-total], "round {round}: {id}");
                    paid_out += total;
                }
                "failed" | "canceled" => {
                    assert_eq!(in_flight, vec![-total, total], "round {round}: {id}");
                    assert_eq!(available, vec![total, -total], "round {round}: {id}");
                }
                _ => {
                    assert_eq!(in_flight, vec![total], "round {round}: {id}");
                    assert_eq!(available, vec![-total], "round {round}: {id}");
                }
            }
        }
        let available = app.balance(&m.test_key, "available", "NGN").await;
        let in_flight = app.balance(&m.test_key, "payout_in_flight", "NGN").await;
        // Payouts that were created but not acknowledged (killed mid-reply)
        // still moved money: count them from the ledger, not from `ids`.
        let all_paid: i64 = lines
            .iter()
            .filter(|l| {
                l["type"] == "payout"
                    && l["bucket"] == "payout_in_flight"
                    && l["amount"].as_i64().unwrap() < 0
            })
            .filter(|l| {
                !lines.iter().any(|o| {
                    o["source"] == l["source"]
                        && o["bucket"] == "available"
                        && o["amount"].as_i64().unwrap() > 0
                })
            })
            .map(|l| -l["amount"].as_i64().unwrap())
            .sum();
        assert!(all_paid >= paid_out);
        assert_eq!(
            start,
            available + in_flight + all_paid,
            "round {round}: money not conserved"
        );
    }
    assert!(
        acked.lock().unwrap().len() > 10,
        "the test drove too little traffic"
    );
    // The store left by the kills and restarts: every invariant holds.
    crate::operations::assert_check_clean(&mut app);
}

/// Conversions and crypto payouts under SIGKILL, while the operator
/// publishes new rates: after each restart every acknowledged conversion
/// exists with its exact entry and replays byte for byte, every crypto
/// payout (acknowledged or not) reaches paid or failed with one event and
/// the right lines, no conversion used a rate other than the one it names,
/// and dollars are conserved: what was available at the start equals
/// available + in flight + sent as USDT + converted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversions_and_crypto_payouts_are_never_lost_or_doubled_across_sigkill() {
    use std::collections::HashMap;

    let mut app = spawn_app().await;
    let m = app
        .create_merchant(json!({"usdt": {"enabled": true, "fee_bps": 100}}))
        .await;
    for _ in 0..4 {
        let pi = app
            .create_intent(
                &m.test_key,
                json!({"amount": 10_000_000, "currency": "USD"}),
            )
            .await;
        app.post(
            &m.test_key,
            &format!(
                "/v1/test_helpers/payment_intents/{}/succeed",
                pi["id"].as_str().unwrap()
            ),
            json!({}),
        )
        .await
        .assert_status(200);
    }
    app.post(
        &m.test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await
    .assert_status(200);
    let start = app.balance(&m.test_key, "available", "USD").await;
    let rates = Arc::new(Mutex::new(HashMap::<String, i64>::new()));
    let first = app
        .admin_post("/admin/v1/fx_rates", json!({"rate": 150_000}))
        .await;
    rates.lock().unwrap().insert(
        first.body["id"].as_str().expect(&first.text).into(),
        150_000,
    );
    let mut wallets = Vec::new();
    for tail in ["ok", "dead"] {
        let address = format!("T{}{tail}", "Q".repeat(33 - tail.len()));
        let r = app
            .admin_post(
                &format!("/admin/v1/merchants/{}/usdt_wallets", m.id),
                json!({"address": address, "network": "TRC20"}),
            )
            .await;
        r.assert_status(201);
        wallets.push(r.body["id"].as_str().unwrap().to_string());
    }
    // (idempotency key, body, response) of each acknowledged conversion.
    let conversions = Arc::new(Mutex::new(Vec::<(String, Value, String)>::new()));
    let crypto = Arc::new(Mutex::new(Vec::<String>::new()));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    for round in 0..3 {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for w in 0..4 {
            let (client, base, key, stop, conversions) = (
                client.clone(),
                app.base.clone(),
                m.test_key.clone(),
                stop.clone(),
                conversions.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let Ok(r) = client
                        .get(format!("{base}/v1/fx"))
                        .bearer_auth(&key)
                        .send()
                        .await
                    else {
                        return;
                    };
                    let Ok(preview) = r.json::<Value>().await else {
                        return;
                    };
                    let idem = format!("fx-{round}-{w}-{n}");
                    let body =
                        json!({"usd_amount": 100 + n * 7 + w, "rate_id": preview["rate"]["id"]});
                    let Ok(r) = client
                        .post(format!("{base}/v1/fx/conversions"))
                        .bearer_auth(&key)
                        .header("Idempotency-Key", &idem)
                        .json(&body)
                        .send()
                        .await
                    else {
                        return;
                    };
                    let status = r.status().as_u16();
                    let Ok(text) = r.text().await else { return };
                    match status {
                        201 => conversions.lock().unwrap().push((idem, body, text)),
                        // A new rate came out between the preview and the
                        // conversion: quote again.
                        409 if text.contains("rate_changed") => {}
                        _ => return,
                    }
                }
            }));
        }
        for w in 0..4 {
            let (client, base, key, stop, crypto, wallets) = (
                client.clone(),
                app.base.clone(),
                m.test_key.clone(),
                stop.clone(),
                crypto.clone(),
                wallets.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let body = json!({"usd_amount": 1_000 + n, "wallet": wallets[(w + n) % 2], "otp": "123456"});
                    let Ok(r) = client
                        .post(format!("{base}/v1/usdt/payouts"))
                        .bearer_auth(&key)
                        .header("Idempotency-Key", format!("usdt-{round}-{w}-{n}"))
                        .json(&body)
                        .send()
                        .await
                    else {
                        return;
                    };
                    if r.status().as_u16() != 201 {
                        return;
                    }
                    let Ok(v) = r.json::<Value>().await else { return };
                    crypto.lock().unwrap().push(v["id"].as_str().unwrap().to_string());
                }
            }));
        }
        {
            // The operator publishes new rates under load.
            let (client, base, token, stop, rates) = (
                client.clone(),
                app.base.clone(),
                app.admin_token.clone(),
                stop.clone(),
                rates.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let mut rate = 150_000 + round as i64 * 1_000;
                while !stop.load(Ordering::Relaxed) {
                    rate += 7;
                    let Ok(r) = client
                        .post(format!("{base}/admin/v1/fx_rates"))
                        .bearer_auth(&token)
                        .json(&json!({"rate": rate}))
                        .send()
                        .await
                    else {
                        return;
                    };
                    let Ok(v) = r.json::<Value>().await else {
                        return;
                    };
                    rates
                        .lock()
                        .unwrap()
                        .insert(v["id"].as_str().unwrap().to_string(), rate);
                    tokio::time::sleep(Duration::from_millis(40)).await;
                }
            }));
        }
        let before = (
            conversions.lock().unwrap().len(),
            crypto.lock().unwrap().len(),
        );
        kill_point(
            || {
                conversions.lock().unwrap().len() >= before.0 + 4
                    && crypto.lock().unwrap().len() >= before.1 + 4
            },
            0..700,
        )
        .await;
        app.kill();
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        app.start(&[]);

        // Every crypto payout, acknowledged or not, is confirmed after the
        // restart (the partner is asked again).
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let payouts = loop {
            let mut all = Vec::new();
            let mut after: Option<String> = None;
            loop {
                let path = match &after {
                    Some(a) => format!("/v1/usdt/payouts?limit=100&starting_after={a}"),
                    None => "/v1/usdt/payouts?limit=100".into(),
                };
                let r = app.get(&m.test_key, &path).await;
                let data = r.body["data"].as_array().unwrap().clone();
                after = data.last().map(|p| p["id"].as_str().unwrap().to_string());
                all.extend(data);
                if !r.body["has_more"].as_bool().unwrap() {
                    break;
                }
            }
            let open = all
                .iter()
                .filter(|p| p["status"] == "queued" || p["status"] == "processing")
                .count();
            if open == 0 {
                break all;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: {open} crypto payouts unconfirmed after the restart"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let ids: HashSet<String> = payouts
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_string())
            .collect();
        for id in crypto.lock().unwrap().iter() {
            assert!(
                ids.contains(id),
                "round {round}: acknowledged crypto payout {id} lost"
            );
        }
        let lines = app.all_lines(&m.test_key).await;
        let mut by_source: HashMap<&str, Vec<&Value>> = HashMap::new();
        for l in &lines {
            by_source
                .entry(l["source"].as_str().unwrap())
                .or_default()
                .push(l);
        }
        let (mut sent, mut paid, mut failed) = (0i64, 0usize, 0usize);
        for p in &payouts {
            let id = p["id"].as_str().unwrap();
            let x = p["usd_amount"].as_i64().unwrap();
            let mut got: Vec<(String, i64)> = by_source[id]
                .iter()
                .rev()
                .map(|l| {
                    (
                        l["bucket"].as_str().unwrap().to_string(),
                        l["amount"].as_i64().unwrap(),
                    )
                })
                .collect();
            let mut want = vec![
                ("available".to_string(), -x),
                ("payout_in_flight".to_string(), x),
                ("payout_in_flight".to_string(), -x),
            ];
            if p["status"] == "failed" {
                want.push(("available".into(), x));
                failed += 1;
            } else {
                assert_eq!(p["status"], "paid", "round {round}");
                sent += x;
                paid += 1;
            }
            got.sort();
            want.sort();
            assert_eq!(got, want, "round {round}: lines of crypto payout {id}");
        }
        for (t, n) in [
            ("crypto_payout.paid", paid),
            ("crypto_payout.failed", failed),
        ] {
            let mut count = 0;
            let mut after: Option<String> = None;
            loop {
                let path = match &after {
                    Some(a) => format!("/v1/events?type={t}&limit=100&starting_after={a}"),
                    None => format!("/v1/events?type={t}&limit=100"),
                };
                let r = app.get(&m.test_key, &path).await;
                let data = r.body["data"].as_array().unwrap().clone();
                count += data.len();
                after = data.last().map(|e| e["id"].as_str().unwrap().to_string());
                if !r.body["has_more"].as_bool().unwrap() {
                    break;
                }
            }
            assert_eq!(count, n, "round {round}: {t} events");
        }
        // Conversions: acknowledged ones exist and replay; every one has
        // exactly its two lines at the rate it names.
        let rates = rates.lock().unwrap().clone();
        let acked = conversions.lock().unwrap().clone();
        for (idem, body, response) in acked.iter() {
            let replay = app
                .post_with_key(&m.test_key, "/v1/fx/conversions", idem, body.clone())
                .await;
            assert_eq!(replay.status, 201, "round {round}: {}", replay.text);
            assert!(replay.replayed(), "round {round}");
            assert_eq!(&replay.text, response, "round {round}: replay differs");
            let c: Value = serde_json::from_str(response).unwrap();
            let got = app
                .get(
                    &m.test_key,
                    &format!("/v1/fx/conversions/{}", c["id"].as_str().unwrap()),
                )
                .await;
            assert_eq!(
                got.status, 200,
                "round {round}: acknowledged conversion lost"
            );
        }
        let (mut converted_usd, mut ngn) = (0i64, 0i64);
        let mut conversion_lines = 0;
        for l in lines.iter().filter(|l| l["type"] == "conversion") {
            conversion_lines += 1;
            match l["currency"].as_str().unwrap() {
                "USD" => converted_usd -= l["amount"].as_i64().unwrap(),
                _ => ngn += l["amount"].as_i64().unwrap(),
            }
        }
        let mut after: Option<String> = None;
        let mut n_conversions = 0;
        loop {
            let path = match &after {
                Some(a) => format!("/v1/fx/conversions?limit=100&starting_after={a}"),
                None => "/v1/fx/conversions?limit=100".into(),
            };
            let r = app.get(&m.test_key, &path).await;
            let data = r.body["data"].as_array().unwrap().clone();
            for c in &data {
                n_conversions += 1;
                let id = c["id"].as_str().unwrap();
                let rate = c["rate"]["rate"].as_i64().unwrap();
                if let Some(published) = rates.get(c["rate"]["id"].as_str().unwrap()) {
                    assert_eq!(*published, rate, "round {round}: conversion {id}");
                }
                let usd = c["usd_amount"].as_i64().unwrap();
                let mine = &by_source[id];
                assert_eq!(mine.len(), 2, "round {round}: conversion {id}");
                for l in mine {
                    let want = if l["currency"] == "USD" {
                        -usd
                    } else {
                        (usd as i128 * rate as i128 / 100) as i64
                    };
                    assert_eq!(l["amount"].as_i64().unwrap(), want, "round {round}: {id}");
                }
            }
            after = data.last().map(|c| c["id"].as_str().unwrap().to_string());
            if !r.body["has_more"].as_bool().unwrap() {
                break;
            }
        }
        assert_eq!(conversion_lines, 2 * n_conversions, "round {round}");
        assert_eq!(
            app.balance(&m.test_key, "available", "NGN").await,
            ngn,
            "round {round}"
        );
        let available = app.balance(&m.test_key, "available", "USD").await;
        let in_flight = app.balance(&m.test_key, "payout_in_flight", "USD").await;
        assert_eq!(in_flight, 0, "round {round}");
        assert_eq!(
            start,
            available + in_flight + sent + converted_usd,
            "round {round}: dollars not conserved"
        );
        // balance_after is exact per brand, currency and bucket.
        let mut running: HashMap<(String, String, String), i64> = HashMap::new();
        for l in lines.iter().rev() {
            let v = running
                .entry((
                    l["brand"].as_str().unwrap().into(),
                    l["currency"].as_str().unwrap().into(),
                    l["bucket"].as_str().unwrap().into(),
                ))
                .or_default();
            *v += l["amount"].as_i64().unwrap();
            assert_eq!(l["balance_after"].as_i64().unwrap(), *v, "round {round}");
        }
    }
    println!(
        "acknowledged: {} conversions, {} crypto payouts; {} rates published",
        conversions.lock().unwrap().len(),
        crypto.lock().unwrap().len(),
        rates.lock().unwrap().len()
    );
    assert!(
        conversions.lock().unwrap().len() > 10 && crypto.lock().unwrap().len() > 10,
        "the test drove too little traffic"
    );
    // The store left by the kills and restarts: every invariant holds.
    crate::operations::assert_check_clean(&mut app);
}

/// Mandate charges under SIGKILL: workers charge one active mandate with
/// fresh Idempotency-Keys while the clock moves (debits are sent and
/// queried), the server is killed at a random moment (between requests
/// and their replies, and between debits sent and their results saved),
/// restarted, and every key sent is replayed with its body. Each key maps
/// to exactly one payment intent, each intent has exactly one debit (one
/// direct-debit charge attempt, one capture), and nothing else exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mandate_charges_never_debit_twice_across_sigkill() {
    let mut app = spawn_app().await;
    let m = app.merchant().await;
    let key = m.test_key.clone();
    let mandate = app
        .post(
            &key,
            "/v1/mandates",
            json!({"customer_email": "ada@example.com"}),
        )
        .await;
    mandate.assert_status(201);
    let url = mandate.body["authorization_url"]
        .as_str()
        .unwrap()
        .to_string();
    let mid = mandate.body["id"].as_str().unwrap().to_string();
    let customer = mandate.body["customer"].as_str().unwrap().to_string();
    app.client
        .post(format!("{url}/approve"))
        .send()
        .await
        .unwrap();
    let r = app
        .post(&key, &format!("/v1/mandates/{mid}/refresh"), json!({}))
        .await;
    assert_eq!(r.body["status"], "active");

    // Every key sent (acknowledged or not) with its body.
    let sent = Arc::new(Mutex::new(Vec::<(String, Value)>::new()));
    let acked = Arc::new(Mutex::new(0usize));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    for round in 0..3 {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for w in 0..8 {
            let (client, base, key, stop, sent, acked, mid) = (
                client.clone(),
                app.base.clone(),
                key.clone(),
                stop.clone(),
                sent.clone(),
                acked.clone(),
                mid.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let idem = format!("dd-{round}-{w}-{n}");
                    let body = json!({"amount": 10_000 + (n % 50) * 100, "currency": "NGN"});
                    sent.lock().unwrap().push((idem.clone(), body.clone()));
                    let r = client
                        .post(format!("{base}/v1/mandates/{mid}/charge"))
                        .bearer_auth(&key)
                        .header("Idempotency-Key", &idem)
                        .json(&body)
                        .send()
                        .await;
                    let Ok(r) = r else { return };
                    if r.status().as_u16() != 201 || r.text().await.is_err() {
                        return;
                    }
                    *acked.lock().unwrap() += 1;
                }
            }));
        }
        {
            // The clock moves too: debits are sent and queried under load.
            let (client, base, token, stop) = (
                client.clone(),
                app.base.clone(),
                app.admin_token.clone(),
                stop.clone(),
            );
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let r = client
                        .post(format!("{base}/admin/v1/clock/advance"))
                        .bearer_auth(&token)
                        .json(&json!({"seconds": 20}))
                        .send()
                        .await;
                    if r.is_err() {
                        return;
                    }
                }
            }));
        }
        let before = *acked.lock().unwrap();
        kill_point(|| *acked.lock().unwrap() >= before + 4, 0..650).await;
        app.kill();
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        app.start(&[]);

        // Replay every key sent: each answers 201 with one payment intent.
        let sent_now = sent.lock().unwrap().clone();
        let mut by_key = std::collections::HashMap::new();
        for (idem, body) in &sent_now {
            let r = app
                .post_with_key(
                    &key,
                    &format!("/v1/mandates/{mid}/charge"),
                    idem,
                    body.clone(),
                )
                .await;
            r.assert_status(201);
            let again = app
                .post_with_key(
                    &key,
                    &format!("/v1/mandates/{mid}/charge"),
                    idem,
                    body.clone(),
                )
                .await;
            assert!(again.replayed(), "round {round}: {idem} not saved");
            assert_eq!(again.body["id"], r.body["id"]);
            by_key.insert(idem.clone(), r.body["id"].as_str().unwrap().to_string());
        }
        let ids: HashSet<String> = by_key.values().cloned().collect();
        assert_eq!(
            ids.len(),
            sent_now.len(),
            "round {round}: two keys, one intent"
        );

        // Every debit due runs to its end.
        app.advance(180).await;
        let mut listed = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let path = match &after {
                Some(a) => {
                    format!("/v1/payment_intents?limit=100&customer={customer}&starting_after={a}")
                }
                None => format!("/v1/payment_intents?limit=100&customer={customer}"),
            };
            let r = app.get(&key, &path).await;
            let data = r.body["data"].as_array().unwrap().clone();
            after = data.last().map(|p| p["id"].as_str().unwrap().to_string());
            listed.extend(data);
            if !r.body["has_more"].as_bool().unwrap() {
                break;
            }
        }
        let listed_ids: HashSet<String> = listed
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            listed_ids, ids,
            "round {round}: an intent without its key, or lost"
        );
        let lines = app.all_lines(&key).await;
        for p in &listed {
            let id = p["id"].as_str().unwrap();
            assert_eq!(p["status"], "successful", "round {round}: {id}");
            let attempts = app
                .get(&key, &format!("/v1/payment_intents/{id}/charge_attempts"))
                .await;
            let data = attempts.body["data"].as_array().unwrap();
            assert_eq!(data.len(), 1, "round {round}: {id} debited more than once");
            assert_eq!(data[0]["channel"], "direct_debit");
            let captures = lines
                .iter()
                .filter(|l| l["source"] == id && l["type"] == "payment" && l["bucket"] == "pending")
                .count();
            assert_eq!(captures, 1, "round {round}: {id} captured {captures} times");
        }
    }
    assert!(
        *acked.lock().unwrap() > 10,
        "the test drove too little traffic"
    );
    eprintln!(
        "mandate crash test: {} charges sent, {} acknowledged before the kills",
        sent.lock().unwrap().len(),
        acked.lock().unwrap()
    );
    // The store left by the kills and restarts: every invariant holds.
    crate::operations::assert_check_clean(&mut app);
}
