//! Virtual-account credits under SIGKILL (the crash suite's fifth test):
//! workers send transfers into three accounts, drawing session ids from a
//! small pool so the same credit is often in flight twice at once; the
//! server is killed at a random moment (between a credit's arrival at the
//! bank and its record, and between the record and the answer), restarted,
//! and every account refreshed. Then: at most one payment intent per
//! (account, session id), every acknowledged transfer's intent is that
//! one, each intent has exactly one capture, the pending lines sum to the
//! pending balance; sending every transfer again answers the same intents
//! and leaves exactly one intent and one capture per session id sent;
//! and `kobo check` finds the store clean.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, TestApp};

type Sent = Arc<Mutex<Vec<(String, String, i64)>>>;
type Acked = Arc<Mutex<Vec<(String, String, String)>>>;

/// A session id always carries the same amount.
fn amount_of(session: &str) -> i64 {
    10_000 + i64::from(session.bytes().map(u32::from).sum::<u32>() % 50) * 100
}

async fn worker(
    client: reqwest::Client,
    (base, key): (String, String),
    accounts: Vec<String>,
    round: usize,
    stop: Arc<AtomicBool>,
    (sent, acked): (Sent, Acked),
) {
    while !stop.load(Ordering::Relaxed) {
        let (account, session) = {
            let mut rng = rand::thread_rng();
            let a = accounts[rng.gen_range(0..accounts.len())].clone();
            (a, format!("R{round}S{}", rng.gen_range(0..12)))
        };
        let amount = amount_of(&session);
        sent.lock()
            .unwrap()
            .push((account.clone(), session.clone(), amount));
        let r = client
            .post(format!(
                "{base}/v1/test_helpers/virtual_accounts/{account}/simulate_transfer"
            ))
            .bearer_auth(&key)
            .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
            .json(&json!({"amount": amount, "session_id": session}))
            .send()
            .await;
        let Ok(r) = r else { return };
        if r.status().as_u16() != 200 {
            return;
        }
        let Ok(body) = r.json::<Value>().await else {
            return;
        };
        let pi = body["id"].as_str().unwrap().to_string();
        acked.lock().unwrap().push((account, session, pi));
    }
}

/// Every payment intent of `account`, keyed by session id (two for one
/// session id fail the test).
async fn credits(app: &TestApp, key: &str, account: &str) -> HashMap<String, Value> {
    let mut out = HashMap::new();
    let mut after: Option<String> = None;
    loop {
        let mut path = format!("/v1/payment_intents?limit=100&virtual_account={account}");
        if let Some(a) = &after {
            path.push_str(&format!("&starting_after={a}"));
        }
        let r = app.get(key, &path).await;
        r.assert_status(200);
        let data = r.body["data"].as_array().unwrap().clone();
        after = data.last().map(|p| p["id"].as_str().unwrap().to_string());
        for p in data {
            let session = p["sender"]["session_id"].as_str().unwrap().to_string();
            assert_eq!(p["status"], "successful");
            assert_eq!(p["amount"].as_i64().unwrap(), amount_of(&session));
            let dup = out.insert(session.clone(), p);
            assert!(dup.is_none(), "two payment intents for session {session}");
        }
        if !r.body["has_more"].as_bool().unwrap() {
            return out;
        }
    }
}

/// Refreshes every account, then checks the credits against what was
/// acknowledged and the ledger; answers the (account, session) -> intent map.
async fn verify(
    app: &TestApp,
    key: &str,
    accounts: &[String],
    acked: &Acked,
    round: usize,
) -> HashMap<(String, String), String> {
    let mut found = HashMap::new();
    for a in accounts {
        app.post(key, &format!("/v1/virtual_accounts/{a}/refresh"), json!({}))
            .await
            .assert_status(200);
        for (session, p) in credits(app, key, a).await {
            found.insert((a.clone(), session), p["id"].as_str().unwrap().to_string());
        }
    }
    for (a, session, pi) in acked.lock().unwrap().iter() {
        let listed = found.get(&(a.clone(), session.clone()));
        assert_eq!(
            listed,
            Some(pi),
            "round {round}: acknowledged {session} into {a} lost or doubled"
        );
    }
    let lines = app.all_lines(key).await;
    let pending: Vec<&Value> = lines.iter().filter(|l| l["bucket"] == "pending").collect();
    let mut captured = HashSet::new();
    for l in &pending {
        assert_eq!(l["type"], "payment", "round {round}");
        let source = l["source"].as_str().unwrap().to_string();
        assert!(
            captured.insert(source.clone()),
            "round {round}: {source} captured twice"
        );
    }
    let intents: HashSet<String> = found.values().cloned().collect();
    assert_eq!(
        captured, intents,
        "round {round}: captures and intents differ"
    );
    let sum: i64 = pending.iter().map(|l| l["amount"].as_i64().unwrap()).sum();
    assert_eq!(
        app.balance(key, "pending", "NGN").await,
        sum,
        "round {round}"
    );
    found
}

/// Three customers' accounts, active.
async fn open_accounts(app: &TestApp, key: &str) -> Vec<String> {
    let mut accounts = Vec::new();
    for n in 0..3 {
        let email = format!("c{n}@example.com");
        let c = app
            .post(key, "/v1/customers", json!({"email": email}))
            .await;
        let body = json!({"customer": c.body["id"]});
        let a = app.post(key, "/v1/virtual_accounts", body).await;
        a.assert_status(201);
        let id = a.body["id"].as_str().unwrap().to_string();
        let path = format!("/v1/virtual_accounts/{id}/refresh");
        app.post(key, &path, json!({})).await.assert_status(200);
        accounts.push(id);
    }
    accounts
}

/// Every transfer sent, again: the same intents as `found`, and then
/// exactly one intent per session id sent.
async fn resend_all(
    app: &TestApp,
    key: &str,
    accounts: &[String],
    (sent, acked): (&Sent, &Acked),
    found: HashMap<(String, String), String>,
    round: usize,
) {
    let sent_now = sent.lock().unwrap().clone();
    for (a, session, amount) in &sent_now {
        let path = format!("/v1/test_helpers/virtual_accounts/{a}/simulate_transfer");
        let body = json!({"amount": amount, "session_id": session});
        let r = app.post(key, &path, body).await;
        r.assert_status(200);
        if let Some(pi) = found.get(&(a.clone(), session.clone())) {
            assert_eq!(
                r.body["id"],
                pi.as_str(),
                "round {round}: {session} doubled"
            );
        }
    }
    let distinct: HashSet<(String, String)> = sent_now
        .iter()
        .map(|(a, s, _)| (a.clone(), s.clone()))
        .collect();
    let all = verify(app, key, accounts, acked, round).await;
    assert_eq!(
        all.len(),
        distinct.len(),
        "round {round}: one intent per session id sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_account_credits_are_recorded_once_across_sigkill() {
    let mut app = spawn_app().await;
    let key = app.merchant().await.test_key;
    let accounts = open_accounts(&app, &key).await;
    let sent: Sent = Arc::default();
    let acked: Acked = Arc::default();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    for round in 0..3 {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                tokio::spawn(worker(
                    client.clone(),
                    (app.base.clone(), key.clone()),
                    accounts.clone(),
                    round,
                    stop.clone(),
                    (sent.clone(), acked.clone()),
                ))
            })
            .collect();
        let before = acked.lock().unwrap().len();
        crate::crash::kill_point(|| acked.lock().unwrap().len() >= before + 4, 0..650).await;
        app.kill();
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        app.start(&[]);
        let found = verify(&app, &key, &accounts, &acked, round).await;
        resend_all(&app, &key, &accounts, (&sent, &acked), found, round).await;
    }
    let acked = acked.lock().unwrap().len();
    assert!(acked > 10, "the test drove too little traffic ({acked})");
    // How often a kill fell between a transfer's arrival at the bank and
    // its record (the start-up delivered its notification again).
    let log = std::fs::read_to_string(app.log_path()).unwrap_or_default();
    let redelivered = log
        .lines()
        .filter(|l| l.contains("delivering transfer notifications"))
        .count();
    eprintln!(
        "virtual account crash test: {} transfers sent, {acked} acknowledged before the kills, \
         {redelivered} restarts delivered unrecorded notifications",
        sent.lock().unwrap().len()
    );
    crate::operations::assert_check_clean(&mut app);
}
