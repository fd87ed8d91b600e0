//! Operations: an online backup under payment traffic restored into a new
//! directory (every acknowledged write there, replays identical, sequences
//! continuing), corrupt backups and occupied directories refused, `kobo
//! check` clean on real stores and naming planted breaches, and the
//! operator audit log (every action, filters, no secret, no way to edit).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{kobo, spawn_app, spawn_app_with, unstarted_app, Resp, TestApp};

/// `kobo check --data DIR`: (exit code, stdout and stderr).
pub fn check_data(dir: &Path) -> (i32, String) {
    let out = kobo(["check".as_ref(), "--data".as_ref(), dir.as_os_str()]);
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `kobo check` on `app`'s store: its data directory, or its PostgreSQL
/// database (`--store`).
pub fn check_app(app: &TestApp) -> (i32, String) {
    match &app.store {
        None => check_data(&app.data_dir()),
        Some(url) => {
            let out = kobo(["check", "--store", url]);
            (
                out.status.code().unwrap_or(-1),
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            )
        }
    }
}

/// Stops `app` (SIGKILL) and asserts `kobo check` finds its store clean.
pub fn assert_check_clean(app: &mut TestApp) {
    app.kill();
    let (code, text) = check_app(app);
    assert_eq!(code, 0, "kobo check found breaches:\n{text}");
    assert!(text.contains("kobo check: clean"), "{text}");
}

fn run(args: &[&str]) -> (i32, String) {
    let out = kobo(args);
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn request_id(r: &Resp) -> String {
    r.headers
        .get("request-id")
        .expect("every answer carries its Request-Id")
        .to_str()
        .unwrap()
        .to_string()
}

#[derive(Clone, Debug)]
struct Acked {
    idem: String,
    path: String,
    body: Value,
    status: u16,
    response: String,
    /// The payment intent it created or paid.
    id: String,
    at: Instant,
}

/// A worker of payment traffic: creates intents and pays every second one,
/// recording each acknowledged request.
async fn traffic(
    client: reqwest::Client,
    base: String,
    key: String,
    worker: usize,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<Acked>>>,
) {
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let idem = format!("ops-{worker}-{n}-{}", uuid::Uuid::new_v4().simple());
        let body = json!({"amount": 20_000 + (n % 50) * 100, "currency": "NGN", "reference": idem});
        let res = client
            .post(format!("{base}/v1/payment_intents"))
            .bearer_auth(&key)
            .header("Idempotency-Key", &idem)
            .json(&body)
            .send()
            .await
            .expect("the server answers during a backup");
        assert_eq!(res.status().as_u16(), 201);
        let text = res.text().await.unwrap();
        let id = serde_json::from_str::<Value>(&text).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        acked.lock().unwrap().push(Acked {
            idem: idem.clone(),
            path: "/v1/payment_intents".into(),
            body,
            status: 201,
            response: text,
            id: id.clone(),
            at: Instant::now(),
        });
        if n % 2 == 0 {
            let path = format!("/v1/test_helpers/payment_intents/{id}/simulate_transfer");
            let pay_key = format!("{idem}-pay");
            let res = client
                .post(format!("{base}{path}"))
                .bearer_auth(&key)
                .header("Idempotency-Key", &pay_key)
                .json(&json!({}))
                .send()
                .await
                .expect("the server answers during a backup");
            assert_eq!(res.status().as_u16(), 200);
            let text = res.text().await.unwrap();
            acked.lock().unwrap().push(Acked {
                idem: pay_key,
                path,
                body: json!({}),
                status: 200,
                response: text,
                id,
                at: Instant::now(),
            });
        }
    }
}

/// `text` with the server's base URL taken out (a restored server listens
/// on another port).
fn unbased(text: &str, base: &str) -> String {
    text.replace(base, "BASE")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_during_payment_traffic_restores_every_acknowledged_write() {
    let mut app = spawn_app().await;
    if app.skip_on_postgres("kobo's backups and restores are of the embedded store") {
        return;
    }
    let m = app.merchant().await;
    // Before the traffic: payments, released money, a payout paid out.
    let mut settled = Vec::new();
    for i in 0..6 {
        settled.push(app.paid_intent(&m.test_key, 50_000 + i * 1_000).await);
    }
    app.post(
        &m.test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await
    .assert_status(200);
    let acct = app
        .post(
            &m.test_key,
            "/v1/bank_accounts",
            json!({"bank_code": "058", "account_number": "0123456789"}),
        )
        .await;
    let acct = acct.body["id"].as_str().unwrap().to_string();
    let payout = app
        .post(
            &m.test_key,
            "/v1/payouts",
            json!({"amount": 30_000, "currency": "NGN", "bank_account_id": acct}),
        )
        .await;
    payout.assert_status(201);
    let payout_id = payout.body["id"].as_str().unwrap().to_string();
    // Sent and paid before the traffic starts (nothing changes it later).
    app.advance(3600).await;
    let r = app
        .get(&m.test_key, &format!("/v1/payouts/{payout_id}"))
        .await;
    assert_eq!(r.body["status"], "paid", "{}", r.text);

    let acked = Arc::new(Mutex::new(Vec::<Acked>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let workers: Vec<_> = (0..8)
        .map(|w| {
            tokio::spawn(traffic(
                client.clone(),
                app.base.clone(),
                m.test_key.clone(),
                w,
                stop.clone(),
                acked.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let sent = Instant::now();
    let backup = app.admin_post("/admin/v1/backups", json!({})).await;
    let answered = Instant::now();
    backup.assert_status(201);
    tokio::time::sleep(Duration::from_millis(400)).await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let before: Vec<&Acked> = acked.iter().filter(|a| a.at < sent).collect();
    assert!(before.len() > 20, "too little traffic before the backup");
    assert!(
        acked.iter().any(|a| a.at > answered),
        "traffic went on after the backup"
    );
    let file = PathBuf::from(backup.body["path"].as_str().unwrap());
    assert!(file.starts_with(app.data_dir().join("backups")), "{file:?}");
    assert_eq!(backup.body["object"], "backup");
    assert_eq!(backup.body["checksum"].as_str().unwrap().len(), 64);
    let manifest = &backup.body["manifest"];
    assert!(manifest["tables"]["payment_intents"].as_u64().unwrap() >= 6 + before.len() as u64 / 2);
    assert!(manifest["seq_high_water"].as_u64().unwrap() > 0);

    // Restore into a new directory (with the old server's key files) and
    // serve it beside the old one.
    let mut restored = unstarted_app(&[]);
    let (code, text) = run(&[
        "restore",
        "--from",
        s(&file),
        "--data",
        s(&restored.data_dir()),
        "--keys-from",
        s(&app.data_dir()),
    ]);
    assert_eq!(code, 0, "{text}");
    restored.start(&[]);

    // Every write acknowledged before the backup was asked for is there;
    // objects no later write changed read exactly as on the old server.
    let paid_at: HashMap<&str, Instant> = acked
        .iter()
        .filter(|a| a.status == 200)
        .map(|a| (a.id.as_str(), a.at))
        .collect();
    for a in &before {
        let path = format!("/v1/payment_intents/{}", a.id);
        let now = restored.get(&m.test_key, &path).await;
        assert_eq!(now.status, 200, "acknowledged intent {} lost", a.id);
        let changed_later = paid_at.get(a.id.as_str()).is_some_and(|t| *t >= sent);
        if !changed_later {
            let old = app.get(&m.test_key, &path).await;
            assert_eq!(
                unbased(&now.text, &restored.base),
                unbased(&old.text, &app.base),
                "intent {} reads differently after the restore",
                a.id
            );
        }
        // The saved response replays, byte for byte.
        let replay = restored
            .post_with_key(&m.test_key, &a.path, &a.idem, a.body.clone())
            .await;
        assert_eq!(replay.status, a.status, "{}", replay.text);
        assert!(replay.replayed(), "{} was not replayed", a.idem);
        assert_eq!(replay.text, a.response, "the replay of {} differs", a.idem);
    }
    // Writes acknowledged after the backup answered may be absent; whatever
    // the backup holds reads as one of the states the old server answered.
    for a in acked.iter().filter(|a| a.status == 201 && a.at > answered) {
        let r = restored
            .get(&m.test_key, &format!("/v1/payment_intents/{}", a.id))
            .await;
        assert!(r.status == 200 || r.status == 404, "{}", r.text);
    }
    for pi in &settled {
        let path = format!("/v1/payment_intents/{}", pi["id"].as_str().unwrap());
        let (old, now) = (
            app.get(&m.test_key, &path).await,
            restored.get(&m.test_key, &path).await,
        );
        assert_eq!(
            unbased(&now.text, &restored.base),
            unbased(&old.text, &app.base)
        );
    }
    let path = format!("/v1/payouts/{payout_id}");
    assert_eq!(
        restored.get(&m.test_key, &path).await.text,
        app.get(&m.test_key, &path).await.text
    );
    // The ledger: every restored line is the old server's line with that
    // id; every capture acknowledged before the backup is there.
    let old_lines: HashMap<String, Value> = app
        .all_lines(&m.test_key)
        .await
        .into_iter()
        .map(|l| (l["id"].as_str().unwrap().to_string(), l))
        .collect();
    let new_lines = restored.all_lines(&m.test_key).await;
    let sources: HashSet<&str> = new_lines
        .iter()
        .map(|l| l["source"].as_str().unwrap())
        .collect();
    for l in &new_lines {
        assert_eq!(Some(l), old_lines.get(l["id"].as_str().unwrap()));
    }
    for a in before.iter().filter(|a| a.status == 200) {
        assert!(sources.contains(a.id.as_str()), "capture of {} lost", a.id);
    }
    let sum: i64 = new_lines
        .iter()
        .filter(|l| l["bucket"] == "pending")
        .map(|l| l["amount"].as_i64().unwrap())
        .sum();
    assert_eq!(restored.balance(&m.test_key, "pending", "NGN").await, sum);

    // Sequences continue: new intents list first, nothing is shadowed.
    let listed = restored.all_intents(&m.test_key).await;
    let mut fresh = Vec::new();
    for _ in 0..5 {
        fresh.push(
            restored
                .create_intent(&m.test_key, json!({"amount": 10_000, "currency": "NGN"}))
                .await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let after = restored.all_intents(&m.test_key).await;
    assert_eq!(after.len(), listed.len() + 5);
    let ids: Vec<&str> = after.iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
    let newest: Vec<String> = ids[..5].iter().rev().map(|s| s.to_string()).collect();
    assert_eq!(newest, fresh);

    // The restore is in the restored store's audit log.
    let log = restored.admin_get("/admin/v1/audit?limit=1").await;
    log.assert_status(200);
    let entry = &log.body["data"][0];
    assert_eq!(entry["action"], "store.restored");
    assert_eq!(entry["origin"], "kobo restore");
    assert_eq!(entry["detail"]["checksum"], backup.body["checksum"]);

    // Both stores, and the backup file, check clean.
    let (code, text) = run(&["check", "--from", s(&file)]);
    assert_eq!(code, 0, "{text}");
    assert_check_clean(&mut restored);
    assert_check_clean(&mut app);
}

#[tokio::test]
async fn a_corrupt_or_truncated_backup_and_an_occupied_directory_are_refused() {
    let mut app = spawn_app().await;
    if app.skip_on_postgres("kobo's backups and restores are of the embedded store") {
        return;
    }
    let m = app.merchant().await;
    for _ in 0..3 {
        app.paid_intent(&m.test_key, 25_000).await;
    }
    // A running server's store is locked: the offline command says what
    // to use instead.
    let out = app.dir.path().join("offline.kobo-backup");
    let (code, text) = run(&["backup", "--data", s(&app.data_dir()), "--out", s(&out)]);
    assert_ne!(code, 0);
    assert!(text.contains("kobo admin backup"), "{text}");
    let (code, text) = check_data(&app.data_dir());
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("kobo check --from"), "{text}");

    // Stopped, it backs up offline (and records it in the store's log).
    app.kill();
    let (code, text) = run(&["backup", "--data", s(&app.data_dir()), "--out", s(&out)]);
    assert_eq!(code, 0, "{text}");
    let summary: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(summary["object"], "backup");
    // Never over an existing file.
    let (code, text) = run(&["backup", "--data", s(&app.data_dir()), "--out", s(&out)]);
    assert_ne!(code, 0);
    assert!(text.contains("already exists"), "{text}");

    let good = std::fs::read(&out).unwrap();
    let mut flipped = good.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x01;
    let cases = [
        ("flipped", flipped),
        ("truncated", good[..good.len() - 1000].to_vec()),
        ("cut short", good[..good.len() / 3].to_vec()),
        ("without its checksum", good[..good.len() - 32].to_vec()),
    ];
    for (name, bytes) in cases {
        let bad = app.dir.path().join(format!("{name}.kobo-backup"));
        std::fs::write(&bad, bytes).unwrap();
        let target = app.dir.path().join(format!("restore-{name}"));
        let (code, text) = run(&["restore", "--from", s(&bad), "--data", s(&target)]);
        assert_ne!(code, 0, "{name}: restored");
        assert!(text.contains("is not a usable backup"), "{name}: {text}");
        assert!(
            !target.exists(),
            "{name}: the restore wrote into {target:?}"
        );
        let (code, text) = run(&["check", "--from", s(&bad)]);
        assert_eq!(code, 2, "{name}: {text}");
    }

    // Only into an empty directory: not over a store, not beside other files.
    let (code, text) = run(&["restore", "--from", s(&out), "--data", s(&app.data_dir())]);
    assert_ne!(code, 0);
    assert!(text.contains("already holds a store"), "{text}");
    let cluttered = app.dir.path().join("cluttered");
    std::fs::create_dir_all(&cluttered).unwrap();
    std::fs::write(cluttered.join("notes.txt"), "x").unwrap();
    let (code, text) = run(&["restore", "--from", s(&out), "--data", s(&cluttered)]);
    assert_ne!(code, 0);
    assert!(text.contains("is not empty"), "{text}");
    assert!(!cluttered.join("kobo.redb").exists());

    // The good file restores, and the restored store serves.
    let mut fresh = unstarted_app(&[]);
    let (code, text) = run(&["restore", "--from", s(&out), "--data", s(&fresh.data_dir())]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("card-fingerprint-key"), "{text}");
    fresh.start(&[]);
    assert_eq!(fresh.all_intents(&m.test_key).await.len(), 3);
    let log = fresh.admin_get("/admin/v1/audit?limit=1").await;
    assert_eq!(log.body["data"][0]["action"], "store.restored");
    assert_eq!(
        log.body["data"][0]["detail"]["checksum"],
        summary["checksum"]
    );
    // The offline backup is in the log of the store it copied (after the
    // snapshot, so not in the backup itself).
    app.start(&[]);
    let log = app.admin_get("/admin/v1/audit?limit=1").await;
    let entry = &log.body["data"][0];
    assert_eq!(entry["action"], "backup.created");
    assert_eq!(entry["origin"], "kobo backup");
    assert!(entry["request_id"].is_null());
    assert_eq!(entry["detail"]["checksum"], summary["checksum"]);
}

/// The physical key of `id` in an index of `merchant|mode|seq -> id` form,
/// and the ledger line of a payment, found by scanning the store.
fn plant_breaches(app: &TestApp, lose_capture_of: &str, unindex: &str) {
    use kobo_storage::{decode, Batch, Table};
    let store = app.open_store().unwrap();
    let lose = uuid::Uuid::parse_str(lose_capture_of).unwrap();
    let unindex = uuid::Uuid::parse_str(unindex).unwrap();
    let read = store.read().unwrap();
    let mut line_key = None;
    read.scan_prefix(Table::LedgerLines, &[], None, |k, v| {
        // Ledger lines are stored compact (postcard): read as their type.
        let line: kobo_actors::ledger::LedgerLine = decode(v).unwrap();
        if line.source == lose
            && line.bucket == kobo_actors::ledger::Bucket::Pending
            && line.entry_type == kobo_actors::ledger::EntryType::Payment
        {
            line_key = Some(k.to_vec());
            return Ok(false);
        }
        Ok(true)
    })
    .unwrap();
    let mut index_key = None;
    read.scan_prefix(Table::PaymentIntentIndex, &[], None, |k, v| {
        if v == unindex.as_bytes() {
            index_key = Some(k.to_vec());
            return Ok(false);
        }
        Ok(true)
    })
    .unwrap();
    drop(read);
    let mut batch = Batch::new();
    batch
        .delete(Table::LedgerLines, line_key.expect("the capture's line"))
        .delete(
            Table::PaymentIntentIndex,
            index_key.expect("the intent's list entry"),
        );
    store.apply(&batch).unwrap();
}

#[tokio::test]
async fn kobo_check_is_clean_after_real_traffic_and_names_each_planted_breach() {
    let mut app = spawn_app().await;
    let m = app
        .create_merchant(json!({"reserve": {"percent_bps": 1000, "days": 90}}))
        .await;
    let mut paid = Vec::new();
    for i in 0..8 {
        paid.push(
            app.paid_intent(&m.test_key, 40_000 + i * 500).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let open = app
        .create_intent(
            &m.test_key,
            json!({"amount": 7_000, "currency": "NGN", "reference": "open-1"}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.post(
        &m.test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await
    .assert_status(200);
    let acct = app
        .post(
            &m.test_key,
            "/v1/bank_accounts",
            json!({"bank_code": "058", "account_number": "0123456789"}),
        )
        .await;
    let acct = acct.body["id"].as_str().unwrap().to_string();
    for amount in [20_000, 15_000] {
        app.post(
            &m.test_key,
            "/v1/payouts",
            json!({"amount": amount, "currency": "NGN", "bank_account_id": acct}),
        )
        .await
        .assert_status(201);
    }
    let r = app
        .post(
            &m.test_key,
            "/v1/refunds",
            json!({"payment_intent": paid[1], "amount": 5_000}),
        )
        .await;
    assert!(r.status == 201 || r.status == 200, "{}", r.text);
    app.advance(3600).await;
    app.kill();

    let (code, text) = check_app(&app);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("kobo check: clean"), "{text}");
    for section in [
        "decode",
        "ledger",
        "captures",
        "payouts_in_flight",
        "releases",
        "indexes",
        "timers",
        "idempotency",
        "sequence",
    ] {
        assert!(text.contains(section), "{section} missing from\n{text}");
    }

    // One capture's ledger line removed, one intent's list entry dropped.
    plant_breaches(&app, &paid[4], &open);
    let (code, text) = check_app(&app);
    assert_eq!(code, 1, "{text}");
    let breaches: Vec<&str> = text.lines().filter(|l| l.starts_with("BREACH ")).collect();
    let named = |section: &str, what: &str| {
        breaches
            .iter()
            .any(|l| l.starts_with(&format!("BREACH {section}:")) && l.contains(what))
    };
    assert!(named("ledger", "ledger lines sum to"), "{text}");
    assert!(named("ledger", "a line before it is missing"), "{text}");
    assert!(named("captures", &paid[4]), "{text}");
    assert!(named("indexes", &open), "{text}");
    assert!(named("indexes", "payment_intent_index"), "{text}");
    assert!(text.contains("breaches in"), "{text}");
}

/// A store with customers (one deleted), a virtual-account transfer and a
/// payment link's payments: `customer_id`, `credit` (the transfer's
/// payment intent) and `link` ids.
async fn resources_store(app: &TestApp) -> (String, String, String) {
    use crate::payment_links::{create_link, fixed, pay};
    use crate::virtual_accounts::{active, customer, id, transfer};
    let k = &app.merchant().await.test_key;
    let ada = customer(app, k, json!({"email": "Ada.Obi@Example.com"})).await;
    let gone = customer(app, k, json!({"email": "gone@example.com"})).await;
    app.post(k, &format!("/v1/customers/{gone}/delete"), json!({}))
        .await
        .assert_status(200);
    let account = id(&active(app, k, &ada).await);
    let body = json!({"amount": 50_000, "session_id": "000013250303090000123456789012"});
    let credit = transfer(app, k, &account, body).await;
    credit.assert_status(200);
    let link = create_link(app, k, fixed(150_000)).await;
    for email in ["p@example.com", "q@example.com"] {
        let r = pay(app, k, &link, json!({"email": email})).await;
        r.assert_status(200);
        assert_eq!(r.body["status"], "successful");
    }
    (ada, id(&credit.body), id(&link))
}

/// Deletes customer `customer`'s email row and the credit row of payment
/// intent `credit`; truncates link `link`'s counters row to 5 bytes.
fn plant_resource_breaches(app: &TestApp, customer: &str, credit: &str, link: &str) {
    use kobo_storage::{Batch, Table};
    let store = app.open_store().unwrap();
    let row_of = |table: Table, id: &str| {
        let id = uuid::Uuid::parse_str(id).unwrap();
        let mut found = None;
        let read = store.read().unwrap();
        read.scan_prefix(table, &[], None, |k, v| {
            if v == id.as_bytes() {
                found = Some(k.to_vec());
            }
            Ok(found.is_none())
        })
        .unwrap();
        found.unwrap_or_else(|| panic!("{} has no row of {id}", table.name()))
    };
    let mut batch = Batch::new();
    batch
        .delete(
            Table::CustomerEmails,
            row_of(Table::CustomerEmails, customer),
        )
        .delete(
            Table::VirtualAccountCredits,
            row_of(Table::VirtualAccountCredits, credit),
        )
        .put_raw(
            Table::PaymentLinkCounters,
            uuid::Uuid::parse_str(link).unwrap().as_bytes().to_vec(),
            vec![0, 0, 0, 0, 1],
        );
    store.apply(&batch).unwrap();
}

#[tokio::test]
async fn kobo_check_knows_customers_virtual_accounts_and_payment_links() {
    let mut app = spawn_app().await;
    let (customer, credit, link) = resources_store(&app).await;
    app.kill();
    let (code, text) = check_app(&app);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("kobo check: clean"), "{text}");
    for section in ["customers", "credits", "links"] {
        assert!(text.contains(section), "{section} missing from\n{text}");
    }

    plant_resource_breaches(&app, &customer, &credit, &link);
    let (code, text) = check_app(&app);
    assert_eq!(code, 1, "{text}");
    let breaches: Vec<&str> = text.lines().filter(|l| l.starts_with("BREACH ")).collect();
    let named = |section: &str, what: &[&str]| {
        breaches.iter().any(|l| {
            l.starts_with(&format!("BREACH {section}:")) && what.iter().all(|w| l.contains(w))
        })
    };
    assert!(
        named(
            "customers",
            &[&customer, "customer_emails", "Ada.Obi@Example.com"]
        ),
        "{text}"
    );
    assert!(
        named("credits", &[&credit, "virtual_account_credits"]),
        "{text}"
    );
    assert!(
        named("decode", &["payment_link_counters", "5 bytes"]),
        "{text}"
    );
    assert_eq!(breaches.len(), 3, "{text}");
}

/// SHA-256 (hex) of `v`'s canonical JSON without secret fields (the
/// procedure of docs/operations.md).
fn digest(v: &Value) -> String {
    use sha2::{Digest, Sha256};
    const SECRET: &[&str] = &[
        "secret_key",
        "test_secret_key",
        "live_secret_key",
        "secret",
        "client_secret",
        "client_secret_hash",
        "webhook_secret",
        "signing_secret",
        "admin_token",
        "token",
        "otp",
        "pin",
        "cvc",
        "card_number",
        "account_number",
        "key_hash",
        "key_hash_test",
        "key_hash_live",
        "password",
    ];
    fn canonical(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> =
                    m.keys().filter(|k| !SECRET.contains(&k.as_str())).collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.to_string()).to_string());
                    out.push(':');
                    canonical(&m[*k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canonical(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    canonical(v, &mut text);
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Every page of the audit log under `query` (walking `starting_after`).
async fn audit_pages(app: &TestApp, query: &str) -> (Vec<Value>, String) {
    let mut out = Vec::new();
    let mut texts = String::new();
    let mut after: Option<String> = None;
    loop {
        let mut path = format!("/admin/v1/audit?limit=3{query}");
        if let Some(a) = &after {
            path.push_str(&format!("&starting_after={a}"));
        }
        let r = app.admin_get(&path).await;
        r.assert_status(200);
        texts.push_str(&r.text);
        let data = r.body["data"].as_array().unwrap().clone();
        after = data.last().map(|e| e["id"].as_str().unwrap().to_string());
        out.extend(data);
        if !r.body["has_more"].as_bool().unwrap() {
            return (out, texts);
        }
    }
}

#[tokio::test]
async fn every_operator_action_is_in_the_audit_log_and_no_secret_is() {
    let mut app = spawn_app_with(&[]).await;
    let mut expected: Vec<(&str, String, String)> = Vec::new(); // action, request id, target
    let mut secrets: Vec<String> = vec![app.admin_token.clone()];

    let r = app
        .admin_post(
            "/admin/v1/merchants",
            json!({"name": "Audit Ltd", "settings": {
                "payout_approval_threshold": 50_000,
                "rate_limits": {"live_per_second": 100000, "test_per_second": 100000},
            }}),
        )
        .await;
    r.assert_status(201);
    let merchant = r.body["id"].as_str().unwrap().to_string();
    secrets.push(r.body["test_secret_key"].as_str().unwrap().into());
    secrets.push(r.body["live_secret_key"].as_str().unwrap().into());
    expected.push(("merchant.created", request_id(&r), merchant.clone()));
    let mpath = format!("/admin/v1/merchants/{merchant}");

    let r = app
        .admin_post(&mpath, json!({"settings": {"card_api_enabled": true}}))
        .await;
    r.assert_status(200);
    expected.push((
        "merchant.settings_updated",
        request_id(&r),
        merchant.clone(),
    ));
    let r = app
        .admin_post(&mpath, json!({"settings": {"live_approved": true}}))
        .await;
    r.assert_status(200);
    expected.push(("merchant.live_approved", request_id(&r), merchant.clone()));
    let mut test_key = String::new();
    for mode in ["test", "live"] {
        let r = app
            .admin_post(&format!("{mpath}/roll_keys"), json!({"mode": mode}))
            .await;
        r.assert_status(200);
        let key = r.body["secret_key"].as_str().unwrap().to_string();
        if mode == "test" {
            test_key = key.clone();
        }
        secrets.push(key);
        expected.push(("merchant.key_rolled", request_id(&r), merchant.clone()));
    }

    // Two payouts held for approval: one approved, one rejected.
    app.paid_intent(&test_key, 1_000_000).await;
    app.post(
        &test_key,
        "/v1/test_helpers/balance/release_pending",
        json!({}),
    )
    .await
    .assert_status(200);
    let acct = app
        .post(
            &test_key,
            "/v1/bank_accounts",
            json!({"bank_code": "058", "account_number": "0123456789"}),
        )
        .await;
    let acct = acct.body["id"].as_str().unwrap().to_string();
    secrets.push("0123456789".into());
    let mut held = Vec::new();
    for amount in [60_000, 70_000] {
        let r = app
            .post(
                &test_key,
                "/v1/payouts",
                json!({"amount": amount, "currency": "NGN", "bank_account_id": acct}),
            )
            .await;
        assert_eq!(r.body["status"], "awaiting_approval", "{}", r.text);
        held.push(r.body["id"].as_str().unwrap().to_string());
    }
    let r = app
        .admin_post(&format!("/admin/v1/payouts/{}/approve", held[0]), json!({}))
        .await;
    r.assert_status(200);
    expected.push(("payout.approved", request_id(&r), held[0].clone()));
    let r = app
        .admin_post(&format!("/admin/v1/payouts/{}/reject", held[1]), json!({}))
        .await;
    r.assert_status(200);
    expected.push(("payout.rejected", request_id(&r), held[1].clone()));

    let r = app
        .admin_post("/admin/v1/fx_rates", json!({"rate": 160_000}))
        .await;
    r.assert_status(201);
    expected.push((
        "fx_rate.published",
        request_id(&r),
        r.body["id"].as_str().unwrap().into(),
    ));

    let r = app
        .admin_post(
            &format!("{mpath}/usdt_wallets"),
            json!({"address": format!("T{}", "A".repeat(33)), "network": "TRC20", "label": "treasury"}),
        )
        .await;
    r.assert_status(201);
    let wallet = r.body["id"].as_str().unwrap().to_string();
    expected.push(("usdt_wallet.added", request_id(&r), wallet.clone()));
    let r = app
        .send(
            reqwest::Method::DELETE,
            &format!("{mpath}/usdt_wallets/{wallet}"),
            Some(&app.admin_token.clone()),
            None,
            None,
        )
        .await;
    r.assert_status(200);
    expected.push(("usdt_wallet.removed", request_id(&r), wallet.clone()));

    let r = app
        .admin_post("/admin/v1/clock/advance", json!({"seconds": 60}))
        .await;
    r.assert_status(200);
    expected.push(("clock.advanced", request_id(&r), "manual".into()));
    let r = app.admin_post("/admin/v1/backups", json!({})).await;
    if app.store.is_none() {
        // (On PostgreSQL a backup is refused: tests/api/postgres.rs.)
        r.assert_status(201);
        expected.push((
            "backup.created",
            request_id(&r),
            r.body["file"].as_str().unwrap().into(),
        ));
    }

    // A webhook endpoint's signing secret (merchant API, not an operator
    // action) must not leak into the log either.
    let r = app
        .post(
            &test_key,
            "/v1/webhook_endpoints",
            json!({"url": "https://hooks.example.com/kobo", "events": []}),
        )
        .await;
    r.assert_status(201);
    secrets.push(r.body["secret"].as_str().unwrap().into());

    // A restart moving the manual clock (--clock-start) is recorded too.
    let later = app.now().await + chrono::Duration::days(2);
    app.kill();
    app.start(&["--clock-start", &later.to_rfc3339()]);

    let (log, text) = audit_pages(&app, "").await;
    for (action, rid, target) in &expected {
        let found: Vec<&Value> = log
            .iter()
            .filter(|e| e["request_id"] == rid.as_str())
            .collect();
        assert_eq!(found.len(), 1, "{action}: {found:?}");
        let e = found[0];
        assert_eq!(e["action"], *action);
        assert_eq!(e["target"]["id"], target.as_str(), "{action}");
        assert_eq!(e["origin"], "admin_api");
        assert_eq!(e["object"], "audit_entry");
        if action.starts_with("merchant.")
            || action.starts_with("payout.")
            || action.starts_with("usdt_wallet.")
        {
            assert_eq!(e["merchant"], merchant.as_str(), "{action}");
        }
    }
    let set = log
        .iter()
        .find(|e| e["action"] == "clock.set")
        .expect("clock.set");
    assert_eq!(set["origin"], "kobo serve");
    assert!(set["request_id"].is_null());
    assert_eq!(log[0]["action"], "clock.set", "newest first");
    let times: Vec<chrono::DateTime<chrono::Utc>> = log
        .iter()
        .map(|e| e["created_at"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first");
    // Digests of the before and after; field names, never values.
    let approve = log
        .iter()
        .find(|e| e["action"] == "merchant.live_approved")
        .unwrap();
    assert_eq!(approve["changed"], json!(["settings.live_approved"]));
    assert_ne!(approve["before_digest"], approve["after_digest"]);
    assert_eq!(approve["before_digest"].as_str().unwrap().len(), 64);
    // The digest is what docs/operations.md says: SHA-256 of the view's
    // JSON, secrets removed, keys sorted, no spaces.
    let view = app.admin_get(&mpath).await.body;
    assert_eq!(approve["after_digest"], digest(&view).as_str());
    let rolled = log
        .iter()
        .find(|e| e["action"] == "merchant.key_rolled")
        .unwrap();
    assert!(rolled["before_digest"].is_string() && rolled["after_digest"].is_string());

    // No secret anywhere in the log.
    for secret in &secrets {
        assert!(
            !text.contains(secret.as_str()),
            "the audit log holds a secret: {secret}"
        );
    }

    // Filters: merchant, action, time range; bad filters are 400.
    let (mine, _) = audit_pages(&app, &format!("&merchant={merchant}")).await;
    assert_eq!(
        mine.len(),
        expected
            .iter()
            .filter(|(a, ..)| !a.starts_with("fx_rate")
                && !a.starts_with("clock")
                && !a.starts_with("backup"))
            .count()
    );
    assert!(mine.iter().all(|e| e["merchant"] == merchant.as_str()));
    let (rolls, _) = audit_pages(&app, "&action=merchant.key_rolled").await;
    assert_eq!(rolls.len(), 2);
    let (mine_rolls, _) = audit_pages(
        &app,
        &format!("&merchant={merchant}&action=merchant.key_rolled"),
    )
    .await;
    assert_eq!(mine_rolls.len(), 2);
    let advanced = log
        .iter()
        .find(|e| e["action"] == "clock.advanced")
        .unwrap();
    let at = advanced["created_at"].as_str().unwrap();
    let (window, _) = audit_pages(&app, &format!("&from={at}&to={at}")).await;
    assert!(!window.is_empty());
    assert!(window.iter().all(|e| e["created_at"] == at));
    let (since, _) = audit_pages(&app, &format!("&from={at}")).await;
    assert!(since.iter().any(|e| e["action"] == "clock.set"));
    assert!(since.iter().all(|e| e["action"] != "merchant.created"));
    for (query, param) in [
        ("action=merchant.deleted", "action"),
        ("from=yesterday", "from"),
        ("merchant=nope", "merchant"),
        ("sort=asc", "sort"),
        ("from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z", "from"),
    ] {
        let r = app.admin_get(&format!("/admin/v1/audit?{query}")).await;
        assert_eq!(r.status, 400, "{query}: {}", r.text);
        assert_eq!(r.param(), Some(param), "{query}");
    }

    // Read-only: no way to edit or delete an entry, and the token is needed.
    let id = log[0]["id"].as_str().unwrap();
    for (method, path, status) in [
        (reqwest::Method::POST, "/admin/v1/audit".to_string(), 405),
        (reqwest::Method::DELETE, "/admin/v1/audit".to_string(), 405),
        (reqwest::Method::PUT, "/admin/v1/audit".to_string(), 405),
        (reqwest::Method::PATCH, "/admin/v1/audit".to_string(), 405),
        (reqwest::Method::GET, format!("/admin/v1/audit/{id}"), 404),
        (reqwest::Method::POST, format!("/admin/v1/audit/{id}"), 404),
        (
            reqwest::Method::DELETE,
            format!("/admin/v1/audit/{id}"),
            404,
        ),
    ] {
        let r = app
            .send(
                method.clone(),
                &path,
                Some(&app.admin_token.clone()),
                None,
                Some(&json!({})),
            )
            .await;
        assert_eq!(r.status, status, "{method} {path}");
    }
    let r = app
        .send(reqwest::Method::GET, "/admin/v1/audit", None, None, None)
        .await;
    r.assert_status(401);
    let (again, _) = audit_pages(&app, "").await;
    assert_eq!(again, log);
    assert_check_clean(&mut app);
}

/// Two subscriptions of one customer debited for their first period; then
/// the store is changed behind kobo's back: subscription `a`'s open claim
/// deleted, `b`'s timer row deleted, and a second debit claim of `b`'s
/// first period naming its successful debit (a period debited twice).
#[tokio::test]
async fn kobo_check_names_planted_subscription_breaches() {
    use kobo_storage::{Batch, Table};
    let mut app = spawn_app().await;
    let k = app.merchant().await.test_key;
    let (customer, mandate) = crate::subscriptions::mandated(&app, &k).await;
    let mut subs = Vec::new();
    for amount in [100_000, 200_000] {
        let p = crate::subscriptions::plan(&app, &k, json!({"interval": "day", "amount": amount}))
            .await;
        let r = app
            .post(
                &k,
                "/v1/subscriptions",
                json!({"customer": customer, "plan": p["id"], "collection_method": "mandate", "mandate": mandate}),
            )
            .await;
        r.assert_status(201);
        subs.push(uuid::Uuid::parse_str(r.body["id"].as_str().unwrap()).unwrap());
    }
    app.advance(60).await;
    for s in &subs {
        let r = app.get(&k, &format!("/v1/subscriptions/{s}")).await;
        assert_eq!(r.body["status"], "active", "{}", r.text);
    }
    app.kill();
    let (code, text) = check_app(&app);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("subscriptions"), "{text}");

    let (a, b) = (subs[0], subs[1]);
    let store = app.open_store().unwrap();
    let rows = |table: Table, keep: &dyn Fn(&[u8], &[u8]) -> bool| {
        let mut found = Vec::new();
        store
            .read()
            .unwrap()
            .scan_prefix(table, &[], None, |k, v| {
                if keep(k, v) {
                    found.push((k.to_vec(), v.to_vec()));
                }
                Ok(true)
            })
            .unwrap();
        found
    };
    let claim = rows(Table::SubscriptionOpen, &|_, v| v == a.as_bytes());
    let timer = rows(Table::Timers, &|k, _| k.ends_with(b.as_bytes()));
    let charge = rows(Table::SubscriptionCharges, &|k, _| {
        k.starts_with(b.as_bytes())
    });
    assert_eq!((claim.len(), timer.len(), charge.len()), (1, 1, 1));
    let mut again = charge[0].0.clone();
    *again.last_mut().unwrap() ^= 0x40;
    let mut batch = Batch::new();
    batch
        .delete(Table::SubscriptionOpen, claim[0].0.clone())
        .delete(Table::Timers, timer[0].0.clone())
        .put_raw(Table::SubscriptionCharges, again, charge[0].1.clone());
    store.apply(&batch).unwrap();
    drop(store);

    let (code, text) = check_app(&app);
    assert_eq!(code, 1, "{text}");
    let breaches: Vec<&str> = text.lines().filter(|l| l.starts_with("BREACH ")).collect();
    let named = |what: &[&str]| {
        breaches
            .iter()
            .any(|l| l.starts_with("BREACH subscriptions:") && what.iter().all(|w| l.contains(w)))
    };
    let (a, b) = (a.to_string(), b.to_string());
    assert!(named(&[&a, "without its open claim"]), "{text}");
    assert!(named(&[&b, "timer row is missing"]), "{text}");
    assert!(named(&["debited successfully 2 times"]), "{text}");
    assert_eq!(breaches.len(), 3, "{text}");
}
