//! Three kobo nodes on one PostgreSQL database (`--cluster`): payment,
//! payout and webhook traffic through all of them while one node is
//! SIGKILLed and another paused (SIGSTOP) past its leases, then resumed.
//! Afterwards the survivors hold every shard (taken within the failover
//! bound), nothing acknowledged is lost, every acknowledgement replays,
//! no payout moved money twice, every event reached its endpoint, the
//! ledgers balance (`kobo check`), no timer fired twice (automatic
//! settlement once per merchant and morning, one event per transition),
//! and the paused node's late writes were refused (the database's fence
//! alone: `cluster_fence`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{postgres_database, unstarted_app_on, Merchant, TestApp};
use crate::webhooks::Receiver;

/// The server key files every node of one database must share.
const KEY_FILES: [&str; 3] = [
    "card-fingerprint-key",
    "checkout-credential-key",
    "sandbox-form-key",
];

/// The failover bound docs/ARCHITECTURE.md promises (lease TTL + a tick,
/// with room for a loaded test machine).
pub(crate) const FAILOVER_BOUND: Duration = Duration::from_secs(10);

/// Starts node `id` on `url`; nodes after the first copy its key files.
pub(crate) fn node(url: &str, id: &str, first: Option<&TestApp>, flags: &[String]) -> TestApp {
    let mut app = unstarted_node(url, first, flags);
    app.start(&["--cluster", "--node-id", id]);
    app
}

/// A node on `url` not started yet (start it with `--cluster --node-id`),
/// with the key files of `first` when given.
pub(crate) fn unstarted_node(url: &str, first: Option<&TestApp>, flags: &[String]) -> TestApp {
    let app = unstarted_app_on(flags, Some(url.to_string()));
    if let Some(first) = first {
        std::fs::create_dir_all(app.data_dir()).unwrap();
        for name in KEY_FILES {
            std::fs::copy(first.data_dir().join(name), app.data_dir().join(name)).unwrap();
        }
    }
    app
}

/// Which node holds each shard, as `app` sees the leases.
async fn holders(app: &TestApp) -> HashMap<u64, String> {
    let r = app.admin_get("/admin/v1/cluster").await;
    r.assert_status(200);
    r.body["leases"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| {
            let node = l["node_id"].as_str()?;
            (l["remaining_ms"].as_u64()? > 0)
                .then(|| (l["shard"].as_u64().unwrap(), node.to_string()))
        })
        .collect()
}

/// Polls `app`'s view until every shard is held by one of `nodes` and each
/// of them holds some; answers how long that took. Panics past `bound`.
pub(crate) async fn wait_for_shards(app: &TestApp, nodes: &[&str], bound: Duration) -> Duration {
    wait_for_shards_while(app, nodes, bound, || {}).await
}

/// [`wait_for_shards`], calling `between_polls` before each look.
async fn wait_for_shards_while(
    app: &TestApp,
    nodes: &[&str],
    bound: Duration,
    mut between_polls: impl FnMut(),
) -> Duration {
    let started = Instant::now();
    loop {
        between_polls();
        let held = holders(app).await;
        let all = held.len() == 256 && held.values().all(|n| nodes.contains(&n.as_str()));
        if all && nodes.iter().all(|n| held.values().any(|h| h == n)) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < bound,
            "after {:?} the shards are held by {:?}, expected all by {nodes:?}",
            started.elapsed(),
            held.values().collect::<HashSet<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Like [`wait_for_shards`], then waits until `app`'s view of who holds
/// each shard stays the same across three node ticks: a node that joined
/// has taken every shard it should, and no handover is under way.
async fn wait_for_settled_shards(app: &TestApp, nodes: &[&str], bound: Duration) {
    let started = Instant::now();
    wait_for_shards(app, nodes, bound).await;
    let mut last = holders(app).await;
    let mut unchanged = 0;
    while unchanged < 3 {
        assert!(
            started.elapsed() < bound,
            "after {:?} the shards still move between {nodes:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = holders(app).await;
        let settled = now.len() == 256 && now == last;
        unchanged = if settled { unchanged + 1 } else { 0 };
        last = now;
    }
}

/// Whether `app`'s process has exited (then it is forgotten).
fn exited(app: &mut TestApp) -> bool {
    if let Some(Ok(Some(_))) = app.child.as_mut().map(|c| c.try_wait()) {
        app.child = None;
        return true;
    }
    false
}

/// After SIGCONT, node `c` either stops itself (it was paused inside a
/// group commit: its next commit fails) and is restarted here, as an
/// operator's supervisor would, or rejoins: polled until `a` sees every
/// shard held by a or c, each holding some. Either may take a while on a
/// loaded machine, so neither is assumed from a fixed wait.
async fn wait_for_rejoin(a: &TestApp, c: &mut TestApp, bound: Duration) {
    let started = Instant::now();
    let mut restarted = false;
    wait_for_shards_while(a, &["node-a", "node-c"], bound, || {
        if !restarted && exited(c) {
            eprintln!(
                "node-c stopped itself {:?} after the pause; restarting it",
                started.elapsed()
            );
            c.start(&["--cluster", "--node-id", "node-c"]);
            restarted = true;
        }
    })
    .await;
}

/// Panics with the end of `app`'s log when its process has exited.
fn assert_running(app: &mut TestApp, name: &str) {
    if let Some(Ok(Some(status))) = app.child.as_mut().map(|c| c.try_wait()) {
        let log = std::fs::read_to_string(app.log_path()).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        panic!(
            "{name} exited ({status}); its log ends:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
}

/// One acknowledged write: where it went, what it answered.
#[derive(Clone, Debug)]
struct Acked {
    merchant: usize,
    path: String,
    idem: String,
    body: Value,
    response: Value,
}

/// The nodes a traffic worker talks to, and the switch that stops it.
#[derive(Clone)]
struct Nodes {
    client: reqwest::Client,
    bases: Vec<String>,
    stop: Arc<AtomicBool>,
}

/// POSTs with one Idempotency-Key until it is answered with anything but a
/// retryable failure (a dead or paused node, 503 `merchant_moving`, 409
/// `idempotency_key_in_use`), moving to the next node after each failure,
/// as a client with several node addresses would. `None` when the traffic
/// stopped first.
async fn post_until_answered(
    nodes: &Nodes,
    mut at: usize,
    key: &str,
    path: &str,
    idem: &str,
    body: &Value,
) -> Option<(u16, Value)> {
    let Nodes {
        client,
        bases,
        stop,
    } = nodes;
    loop {
        let r = client
            .post(format!("{}{path}", bases[at % bases.len()]))
            .bearer_auth(key)
            .header("Idempotency-Key", idem)
            .json(body)
            .send()
            .await;
        if let Ok(r) = r {
            let status = r.status().as_u16();
            if let Ok(v) = r.json::<Value>().await {
                let code = v["error"]["code"].as_str().unwrap_or_default();
                match (status, code) {
                    (503, "merchant_moving") => {}
                    // An earlier try with this key, given up on by the
                    // client (a paused or slow node), is still running
                    // where the merchant's owner is: retried once it ends.
                    (409, "idempotency_key_in_use") => {}
                    (503, _) => panic!("{path}: a 503 that is not merchant_moving: {v}"),
                    _ => return Some((status, v)),
                }
            }
        }
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        at += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// POSTs to the operator API through each node in turn until one answers
/// anything but 503 `merchant_moving` (the merchant's owner commits it).
async fn admin_post_until_answered(nodes: &[&TestApp], path: &str, body: Value) {
    let started = Instant::now();
    for at in 0.. {
        let r = nodes[at % nodes.len()].admin_post(path, body.clone()).await;
        if r.status != 503 {
            r.assert_status(200);
            return;
        }
        assert_eq!(r.body["error"]["code"], "merchant_moving", "{}", r.text);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{path}: {}",
            r.text
        );
    }
}

/// Asserts that no timer of merchant `mi` fired twice: at most one
/// automatic payout per morning (and at least one morning), one event
/// per type and object, and one `payout.paid` per paid payout.
async fn assert_timers_fired_once(app: &TestApp, mi: usize, key: &str) {
    let payouts = app.all_pages(key, "/v1/payouts").await;
    let mut mornings: HashMap<String, usize> = HashMap::new();
    for p in payouts.iter().filter(|p| p["automatic"] == true) {
        let day = p["created_at"].as_str().unwrap()[..10].to_string();
        *mornings.entry(day).or_default() += 1;
    }
    assert!(
        !mornings.is_empty(),
        "merchant {mi}: no automatic settlement ran"
    );
    assert!(
        mornings.values().all(|&n| n == 1),
        "merchant {mi}: automatic payouts per morning {mornings:?}"
    );
    let mut events: HashMap<(String, String), usize> = HashMap::new();
    for e in app.all_pages(key, "/v1/events").await {
        let object = e["data"]["object"]["id"].as_str().unwrap_or_default();
        *events
            .entry((e["type"].as_str().unwrap().to_string(), object.to_string()))
            .or_default() += 1;
    }
    let twice: Vec<_> = events.iter().filter(|(_, &n)| n > 1).collect();
    assert!(
        twice.is_empty(),
        "merchant {mi}: events recorded more than once {twice:?}"
    );
    for p in payouts.iter().filter(|p| p["status"] == "paid") {
        let id = p["id"].as_str().unwrap().to_string();
        assert_eq!(
            events.get(&("payout.paid".to_string(), id.clone())),
            Some(&1),
            "merchant {mi}: payout {id} paid without its one event"
        );
    }
}

/// Per bucket of NGN the balance lists: the sum of the merchant's `lines`
/// there, and its balance as `app` answers it. Every line is in one of
/// those buckets, in NGN.
async fn lines_against_balances(
    app: &TestApp,
    key: &str,
    lines: &[Value],
) -> Vec<(String, i64, i64)> {
    let r = app.get(key, "/v1/balance").await;
    r.assert_status(200);
    let buckets: Vec<(&String, &Vec<Value>)> = r
        .body
        .as_object()
        .unwrap()
        .iter()
        .filter_map(|(bucket, amounts)| Some((bucket, amounts.as_array()?)))
        .collect();
    for needed in ["pending", "available", "payout_in_flight"] {
        assert!(buckets.iter().any(|(b, _)| *b == needed), "{}", r.text);
    }
    let elsewhere: Vec<&Value> = lines
        .iter()
        .filter(|l| l["currency"] != "NGN" || !buckets.iter().any(|(b, _)| l["bucket"] == **b))
        .collect();
    assert!(
        elsewhere.is_empty(),
        "lines in no NGN bucket: {elsewhere:?}"
    );
    buckets
        .into_iter()
        .map(|(bucket, amounts)| {
            let sum: i64 = lines
                .iter()
                .filter(|l| l["bucket"] == *bucket)
                .map(|l| l["amount"].as_i64().unwrap())
                .sum();
            let balance = amounts
                .iter()
                .find(|e| e["currency"] == "NGN")
                .map_or(0, |e| e["amount"].as_i64().unwrap());
            (bucket.clone(), sum, balance)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_survive_a_sigkill_and_a_pause_without_losing_or_doubling_money() {
    // Three servers and a database on the test machine's cores: run once,
    // in the suite's PostgreSQL pass (KOBO_TEST_STORE=postgres), not twice.
    if crate::helpers::test_store().is_none() {
        eprintln!("skipped on the embedded store: runs in the PostgreSQL pass");
        return;
    }
    let rx = Receiver::start();
    let url = postgres_database();
    let flags = rx.flags();
    let mut a = node(&url, "node-a", None, &flags);
    let mut b = node(&url, "node-b", Some(&a), &flags);
    let mut c = node(&url, "node-c", Some(&a), &flags);
    wait_for_settled_shards(&a, &["node-a", "node-b", "node-c"], Duration::from_secs(60)).await;
    let bases = vec![a.base.clone(), b.base.clone(), c.base.clone()];

    // Merchants are made through every node, each with a funded balance,
    // bank accounts and a webhook endpoint.
    let mut merchants: Vec<Merchant> = Vec::new();
    for (i, app) in [&a, &b, &c, &a].into_iter().enumerate() {
        let m = app
            .create_merchant(json!({"payout_tier": "enterprise"}))
            .await;
        let via = [&a, &b, &c][(i + 1) % 3];
        // Every event from here on is for the endpoint.
        via.post(
            &m.test_key,
            "/v1/webhook_endpoints",
            json!({"url": rx.url(&format!("/m{i}")), "events": []}),
        )
        .await
        .assert_status(201);
        via.paid_intent(&m.test_key, 50_000_000).await;
        via.post(
            &m.test_key,
            "/v1/test_helpers/balance/release_pending",
            json!({}),
        )
        .await
        .assert_status(200);
        merchants.push(m);
    }
    let mut accounts = Vec::new();
    for m in &merchants {
        let r = c
            .post(
                &m.test_key,
                "/v1/bank_accounts",
                json!({"bank_code": "058", "account_number": "0123456789"}),
            )
            .await;
        r.assert_status(201);
        accounts.push(r.body["id"].as_str().unwrap().to_string());
    }
    // Traffic: each worker talks to its own node first; a create, then a
    // transfer into it, and every third round a payout.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .pool_idle_timeout(crate::helpers::IDLE_CONNECTION_REUSE)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
    let mut workers = Vec::new();
    for w in 0..9usize {
        let nodes = Nodes {
            client: client.clone(),
            bases: bases.clone(),
            stop: stop.clone(),
        };
        let (stop, acked) = (stop.clone(), acked.clone());
        let keys: Vec<String> = merchants.iter().map(|m| m.test_key.clone()).collect();
        let accounts = accounts.clone();
        workers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let mi = (w + n as usize) % keys.len();
                let mut steps = vec![(
                    "/v1/payment_intents".to_string(),
                    json!({"amount": 10_000 + n as i64, "currency": "NGN"}),
                )];
                if n.is_multiple_of(3) {
                    steps.push((
                        "/v1/payouts".to_string(),
                        json!({"amount": 1_000 + n as i64, "currency": "NGN", "bank_account_id": accounts[mi]}),
                    ));
                }
                for (path, body) in steps {
                    let idem = format!("w{w}-{n}-{}", uuid::Uuid::new_v4().simple());
                    let Some((status, response)) = post_until_answered(
                        &nodes, w, &keys[mi], &path, &idem, &body,
                    )
                    .await
                    else {
                        return;
                    };
                    assert_eq!(status, 201, "{path}: {response}");
                    if path == "/v1/payment_intents" {
                        let id = response["id"].as_str().unwrap().to_string();
                        let transfer = format!("/v1/test_helpers/payment_intents/{id}/simulate_transfer");
                        let t_idem = format!("{idem}-t");
                        let Some((status, paid)) = post_until_answered(
                            &nodes, w, &keys[mi], &transfer, &t_idem, &json!({}),
                        )
                        .await
                        else {
                            return;
                        };
                        assert_eq!(status, 200, "{paid}");
                        acked.lock().unwrap().push(Acked {
                            merchant: mi,
                            path: transfer,
                            idem: t_idem,
                            body: json!({}),
                            response: paid,
                        });
                    }
                    acked.lock().unwrap().push(Acked {
                        merchant: mi,
                        path,
                        idem,
                        body,
                        response,
                    });
                }
            }
        }));
    }
    let acked_count = || acked.lock().unwrap().len();
    let wait_for_traffic = |more: usize| {
        let target = acked_count() + more;
        let acked = acked.clone();
        async move {
            let started = Instant::now();
            while acked.lock().unwrap().len() < target {
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "traffic stalled"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait_for_traffic(60).await;

    // Node b dies; node c pauses. Node a takes every shard over.
    b.kill();
    let c_pid = c.child.as_ref().unwrap().id() as i32;
    unsafe { libc::kill(c_pid, libc::SIGSTOP) };
    let took = wait_for_shards(&a, &["node-a"], FAILOVER_BOUND).await;
    eprintln!("node-a held every shard {took:?} after the kill and the pause");
    wait_for_traffic(60).await;

    // Node c wakes up believing, for a moment, that it still owns its
    // shards: whatever it tries to write for them is refused, and it
    // rejoins under new leases.
    unsafe { libc::kill(c_pid, libc::SIGCONT) };
    // Paused inside a group commit, its database session was ended by the
    // server: its next commit fails and it stops itself (fail-stop, nothing
    // of it acknowledged); an operator's supervisor restarts it.
    wait_for_rejoin(&a, &mut c, Duration::from_secs(30)).await;
    assert_running(&mut a, "node-a");
    wait_for_traffic(60).await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    // Its leases are taken on sessions of their own, so node-c may rejoin
    // before its writer finds its session ended, at its first commit
    // after rejoining: then it has stopped by now, and is restarted.
    if exited(&mut c) {
        eprintln!("node-c stopped itself after rejoining; restarting it");
        c.start(&["--cluster", "--node-id", "node-c"]);
    }
    b.start(&["--cluster", "--node-id", "node-b"]);
    // Every handover done before the clocks move, so each shard's timers
    // fire on one node's clock.
    wait_for_settled_shards(&a, &["node-a", "node-b", "node-c"], Duration::from_secs(60)).await;
    for (app, name) in [(&mut a, "node-a"), (&mut b, "node-b"), (&mut c, "node-c")] {
        assert_running(app, name);
    }

    // Every payout due is sent (each node's manual clock moves).
    for app in [&a, &b, &c] {
        app.advance(120).await;
    }

    // Nothing acknowledged is lost, and every acknowledgement replays
    // byte for byte through any node.
    let acked = acked.lock().unwrap().clone();
    // Three waits for 60 acknowledgements each.
    assert!(
        acked.len() >= 180,
        "the test drove too little traffic: {}",
        acked.len()
    );
    for (i, x) in acked.iter().enumerate() {
        let via = [&a, &b, &c][i % 3];
        let key = &merchants[x.merchant].test_key;
        let again = via
            .post_with_key(key, &x.path, &x.idem, x.body.clone())
            .await;
        assert!(again.replayed(), "{} {} did not replay", x.path, x.idem);
        assert_eq!(again.body, x.response, "{} {}", x.path, x.idem);
    }

    // Automatic settlement from here on (the keys above replayed before
    // they expire): each shard's daily run fires on
    // that shard's owner. Four days on every node's clock hold two or
    // more business mornings; then the payouts they made are sent.
    for (m, acct) in merchants.iter().zip(&accounts) {
        let settings = json!({"settings": {"auto_settlement": {
            "enabled": true, "bank_account_id": acct, "minimum": 10_000
        }}});
        admin_post_until_answered(
            &[&a, &b, &c],
            &format!("/admin/v1/merchants/{}", m.id),
            settings,
        )
        .await;
    }
    for app in [&a, &b, &c] {
        app.advance(4 * 86_400).await;
    }
    for app in [&a, &b, &c] {
        app.advance(600).await;
    }
    // No timer fired twice: one automatic payout per merchant and morning,
    // one event per transition of each object, one `payout.paid` per
    // paid payout.
    for (mi, m) in merchants.iter().enumerate() {
        assert_timers_fired_once(&a, mi, &m.test_key).await;
    }

    // No payout moved money twice; money is conserved per merchant.
    for (mi, m) in merchants.iter().enumerate() {
        let lines = a.all_lines(&m.test_key).await;
        let mut by_payout: HashMap<String, Vec<i64>> = HashMap::new();
        for l in lines.iter().filter(|l| l["type"] == "payout") {
            if l["bucket"] == "available" {
                by_payout
                    .entry(l["source"].as_str().unwrap().to_string())
                    .or_default()
                    .push(l["amount"].as_i64().unwrap());
            }
        }
        for (payout, moves) in &by_payout {
            assert!(
                moves.len() == 1 || (moves.len() == 2 && moves[0] == -moves[1]),
                "payout {payout} moved {moves:?}"
            );
        }
        let sums = lines_against_balances(&a, &m.test_key, &lines).await;
        assert!(
            sums.iter().all(|(_, lines, balance)| lines == balance),
            "merchant {mi}: the ledger's lines do not sum to its balances \
             ((bucket, lines, balance) in NGN): {sums:?}"
        );
    }

    // Every event of every merchant reached its endpoint at least once.
    let delivered: HashSet<String> = rx
        .log
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.event_id())
        .collect();
    for m in &merchants {
        for e in a.all_pages(&m.test_key, "/v1/events").await {
            let id = e["id"].as_str().unwrap();
            let started = Instant::now();
            while !rx.log.lock().unwrap().iter().any(|r| r.event_id() == id)
                && !delivered.contains(id)
            {
                if started.elapsed() > Duration::from_secs(30) {
                    let queues = a.admin_get("/admin/v1/actors").await;
                    panic!(
                        "event {id} ({}) never delivered; node-a's queues: {}",
                        e["type"], queues.body["webhook_endpoints"]
                    );
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    // The paused node's late writes were refused (by its own lease
    // deadline or by the database's fence), and the store is clean.
    let metrics = c.admin_get("/admin/v1/cluster").await;
    eprintln!(
        "node-c after the pause: {} shards, nodes {}",
        metrics.body["shards_owned"], metrics.body["nodes"]
    );
    for app in [&mut b, &mut c] {
        app.kill();
    }
    crate::operations::assert_check_clean(&mut a);
}
