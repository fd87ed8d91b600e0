//! A seeded simulation of invoices, virtual-account credits and credit
//! balances: random invoices (whole-only and partial, drafts finalized
//! later), transfers into the customers' virtual accounts (new and repeated
//! session ids), the pay test helper (right and wrong amounts),
//! `record_payment`, voids and clock jumps, checked against a reference model
//! of every invoice and every customer's credit balance. Every naira sent is
//! applied once: to an invoice, or to the credit balance (and from there at
//! most once to a finalized invoice). A divergence prints the seed; rerun
//! one with `KOBO_SIM_SEED=<seed> cargo test --test api simulation_invoices`.

use chrono::NaiveDate;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::helpers::{spawn_app, TestApp};
use crate::virtual_accounts::{customer, id, transfer};

#[derive(Clone, Copy, PartialEq, Debug)]
enum St {
    Draft,
    Open,
    Paid,
    Void,
}

impl St {
    fn name(self) -> &'static str {
        match self {
            St::Draft => "draft",
            St::Open => "open",
            St::Paid => "paid",
            St::Void => "void",
        }
    }
}

struct Inv {
    id: String,
    cust: usize,
    total: i64,
    paid: i64,
    partial: bool,
    due: NaiveDate,
    /// Creation order (the tie-break after the due date).
    seq: usize,
    st: St,
}

impl Inv {
    fn remaining(&self) -> i64 {
        self.total - self.paid
    }
}

struct Cust {
    id: String,
    account: String,
    credit: i64,
    /// Session ids already sent into the account.
    sessions: Vec<String>,
}

async fn today(app: &TestApp) -> NaiveDate {
    // Lagos is UTC+1.
    (app.now().await + chrono::Duration::hours(1)).date_naive()
}

/// The model of a finalize: the customer's credit balance pays the invoice
/// (all of it, or a part when partial payments are allowed; a whole-only
/// invoice only if the credit covers it).
fn finalize_model(inv: &mut Inv, c: &mut Cust) {
    inv.st = St::Open;
    let take = if inv.partial {
        c.credit.min(inv.total)
    } else if c.credit >= inv.total {
        inv.total
    } else {
        0
    };
    inv.paid += take;
    c.credit -= take;
    if inv.remaining() == 0 {
        inv.st = St::Paid;
    }
}

/// The model of a virtual-account credit: the customer's open invoices,
/// oldest due date first, then oldest created; the rest is credit.
fn credit_model(invs: &mut [Inv], c: &mut Cust, cust: usize, amount: i64) {
    let mut order: Vec<usize> = (0..invs.len())
        .filter(|&i| invs[i].cust == cust && invs[i].st == St::Open)
        .collect();
    order.sort_by_key(|&i| (invs[i].due, invs[i].seq));
    let mut left = amount;
    for i in order {
        let inv = &mut invs[i];
        let rem = inv.remaining();
        let take = if inv.partial {
            left.min(rem)
        } else if left >= rem {
            rem
        } else {
            0
        };
        inv.paid += take;
        left -= take;
        if inv.remaining() == 0 {
            inv.st = St::Paid;
        }
    }
    c.credit += left;
}

#[allow(clippy::too_many_arguments)]
async fn check(
    app: &TestApp,
    k: &str,
    seed: u64,
    step: usize,
    invs: &[Inv],
    custs: &[Cust],
    sent: i64,
    out_of_band: i64,
) {
    let mut kobo_applied = 0;
    let mut credit_applied = 0;
    let mut oob_applied = 0;
    for inv in invs {
        let r = app.get(k, &format!("/v1/invoices/{}", inv.id)).await;
        r.assert_status(200);
        let b = &r.body;
        let ctx = format!(
            "seed {seed} step {step}: invoice {} (total {}, partial {}, due {}, seq {})",
            inv.id, inv.total, inv.partial, inv.due, inv.seq
        );
        assert_eq!(b["status"], inv.st.name(), "{ctx}: status; {b}");
        assert_eq!(b["amount_paid"], inv.paid, "{ctx}: amount_paid; {b}");
        assert_eq!(
            b["amount_remaining"],
            inv.remaining(),
            "{ctx}: amount_remaining; {b}"
        );
        for p in b["payments"].as_array().unwrap() {
            let a = p["amount"].as_i64().unwrap();
            match p["method"].as_str().unwrap() {
                "kobo" => kobo_applied += a,
                "credit_balance" => credit_applied += a,
                "out_of_band" => oob_applied += a,
                m => panic!("{ctx}: unknown payment method {m}"),
            }
        }
    }
    let mut credit_now = 0;
    for (i, c) in custs.iter().enumerate() {
        let r = app.get(k, &format!("/v1/customers/{}", c.id)).await;
        r.assert_status(200);
        assert_eq!(
            r.body["credit_balance"], c.credit,
            "seed {seed} step {step}: credit_balance of customer {i} ({})",
            c.id
        );
        credit_now += r.body["credit_balance"].as_i64().unwrap();
    }
    // Every naira sent is applied once: to an invoice by its payment, or to
    // the credit balance (still there, or consumed once at a finalize).
    assert_eq!(
        sent,
        kobo_applied + credit_now + credit_applied,
        "seed {seed} step {step}: money sent vs kobo payments {kobo_applied} + credit \
         {credit_now} + credit applied at finalize {credit_applied}"
    );
    assert_eq!(
        oob_applied, out_of_band,
        "seed {seed} step {step}: out-of-band payments"
    );
}

async fn run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let app = spawn_app().await;
    let m = app.merchant().await;
    let k = m.test_key.as_str();

    // Three customers, each with a virtual account the bank opens at its
    // first check, five minutes of clock time after creation.
    let mut custs: Vec<Cust> = Vec::new();
    for i in 0..3 {
        let cid = customer(&app, k, json!({"email": format!("c{i}@example.com")})).await;
        let a = app
            .post(k, "/v1/virtual_accounts", json!({"customer": cid}))
            .await;
        a.assert_status(201);
        custs.push(Cust {
            id: cid,
            account: id(&a.body),
            credit: 0,
            sessions: Vec::new(),
        });
    }
    app.advance(6 * 60).await;
    for c in &custs {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let r = app
                .get(k, &format!("/v1/virtual_accounts/{}", c.account))
                .await;
            if r.body["status"] == "active" {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "seed {seed}: account never activated: {}",
                r.text
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    let mut invs: Vec<Inv> = Vec::new();
    let mut sent: i64 = 0;
    let mut out_of_band: i64 = 0;
    let mut session_n = 0;

    for step in 0..60 {
        let ci = rng.gen_range(0..custs.len());
        let what: String = match rng.gen_range(0..12) {
            // A new invoice: finalized at once, or left a draft.
            0..=2 => {
                let unit = rng.gen_range(1..60i64) * 500;
                let partial = rng.gen_bool(0.5);
                let days = rng.gen_range(0..6i64);
                let due = today(&app).await + chrono::Duration::days(days);
                let finalize = rng.gen_bool(0.75);
                let r = app
                    .post(
                        k,
                        "/v1/invoices",
                        json!({
                            "customer": custs[ci].id,
                            "currency": "NGN",
                            "line_items": [{"description": "Rice", "quantity": 2, "unit_amount": unit}],
                            "due_date": due.to_string(),
                            "allow_partial_payments": partial,
                            "finalize": finalize,
                        }),
                    )
                    .await;
                r.assert_status(201);
                let mut inv = Inv {
                    id: id(&r.body),
                    cust: ci,
                    total: 2 * unit,
                    paid: 0,
                    partial,
                    due,
                    seq: invs.len(),
                    st: St::Draft,
                };
                if finalize {
                    finalize_model(&mut inv, &mut custs[ci]);
                }
                invs.push(inv);
                format!(
                    "invoice {} for c{ci}: {} partial {partial} due {due} finalize {finalize}",
                    id(&r.body),
                    2 * unit
                )
            }
            // Finalize a draft.
            3 => {
                let drafts: Vec<usize> = (0..invs.len())
                    .filter(|&i| invs[i].st == St::Draft)
                    .collect();
                if drafts.is_empty() {
                    continue;
                }
                let i = drafts[rng.gen_range(0..drafts.len())];
                let r = app
                    .post(
                        k,
                        &format!("/v1/invoices/{}/finalize", invs[i].id),
                        json!({}),
                    )
                    .await;
                r.assert_status(200);
                let c = invs[i].cust;
                finalize_model(&mut invs[i], &mut custs[c]);
                format!("finalize {}", invs[i].id)
            }
            // A transfer with a new session id.
            4..=6 => {
                let amount = rng.gen_range(1..80i64) * 250;
                session_n += 1;
                let sid = format!("S{seed}N{session_n}");
                let r = transfer(
                    &app,
                    k,
                    &custs[ci].account,
                    json!({"amount": amount, "session_id": sid}),
                )
                .await;
                r.assert_status(200);
                assert_eq!(r.body["status"], "successful", "{}", r.text);
                sent += amount;
                custs[ci].sessions.push(sid.clone());
                credit_model(&mut invs, &mut custs[ci], ci, amount);
                format!("transfer {amount} into c{ci} session {sid}")
            }
            // A session id sent again (any amount): nothing applies.
            7 => {
                if custs[ci].sessions.is_empty() {
                    continue;
                }
                let n = custs[ci].sessions.len();
                let sid = custs[ci].sessions[rng.gen_range(0..n)].clone();
                let amount = rng.gen_range(1..80i64) * 250;
                let r = transfer(
                    &app,
                    k,
                    &custs[ci].account,
                    json!({"amount": amount, "session_id": sid}),
                )
                .await;
                r.assert_status(200);
                format!("repeat session {sid} into c{ci} ({amount})")
            }
            // The pay helper: a right amount, too much, or a part of a
            // whole-only invoice; or an invoice that takes no payment.
            8..=9 => {
                if invs.is_empty() {
                    continue;
                }
                let i = rng.gen_range(0..invs.len());
                let path = format!("/v1/test_helpers/invoices/{}/pay", invs[i].id);
                let rem = invs[i].remaining();
                if invs[i].st != St::Open {
                    let r = app.post(k, &path, json!({})).await;
                    r.assert_error(409, "invoice_not_payable", None);
                    format!("pay {} ({:?}): refused", invs[i].id, invs[i].st)
                } else if rng.gen_bool(0.15) {
                    let r = app.post(k, &path, json!({"amount": rem + 1})).await;
                    r.assert_error(409, "amount_exceeds_remaining", None);
                    format!("pay {} {}: too much", invs[i].id, rem + 1)
                } else if !invs[i].partial && rem > 1 && rng.gen_bool(0.15) {
                    let r = app.post(k, &path, json!({"amount": rem - 1})).await;
                    r.assert_error(400, "parameter_invalid", Some("amount"));
                    format!("pay {} {}: part of a whole-only", invs[i].id, rem - 1)
                } else {
                    let amount = if invs[i].partial {
                        rng.gen_range(1..=rem)
                    } else {
                        rem
                    };
                    let body = if amount == rem && rng.gen_bool(0.5) {
                        json!({})
                    } else {
                        json!({"amount": amount})
                    };
                    let r = app.post(k, &path, body).await;
                    r.assert_status(200);
                    assert_eq!(r.body["status"], "successful", "{}", r.text);
                    sent += amount;
                    let inv = &mut invs[i];
                    inv.paid += amount;
                    if inv.remaining() == 0 {
                        inv.st = St::Paid;
                    }
                    format!("pay {} {amount}", inv.id)
                }
            }
            // Cash: outside kobo.
            10 => {
                let open: Vec<usize> = (0..invs.len())
                    .filter(|&i| invs[i].st == St::Open)
                    .collect();
                if open.is_empty() {
                    continue;
                }
                let i = open[rng.gen_range(0..open.len())];
                let rem = invs[i].remaining();
                let amount = if invs[i].partial {
                    rng.gen_range(1..=rem)
                } else {
                    rem
                };
                let r = app
                    .post(
                        k,
                        &format!("/v1/invoices/{}/record_payment", invs[i].id),
                        json!({"amount": amount, "note": "cash"}),
                    )
                    .await;
                r.assert_status(200);
                out_of_band += amount;
                let inv = &mut invs[i];
                inv.paid += amount;
                if inv.remaining() == 0 {
                    inv.st = St::Paid;
                }
                format!("record_payment {} {amount}", inv.id)
            }
            // Void (only with nothing paid), or a clock jump.
            _ => {
                let open: Vec<usize> = (0..invs.len())
                    .filter(|&i| invs[i].st == St::Open)
                    .collect();
                if open.is_empty() || rng.gen_bool(0.5) {
                    let secs = rng.gen_range(3600..2 * 86_400i64);
                    app.advance(secs).await;
                    format!("advance {secs}s")
                } else {
                    let i = open[rng.gen_range(0..open.len())];
                    let r = app
                        .post(k, &format!("/v1/invoices/{}/void", invs[i].id), json!({}))
                        .await;
                    if invs[i].paid > 0 {
                        r.assert_error(409, "invoice_has_payments", None);
                        format!("void {}: refused", invs[i].id)
                    } else {
                        r.assert_status(200);
                        invs[i].st = St::Void;
                        format!("void {}", invs[i].id)
                    }
                }
            }
        };
        if step % 10 == 9 {
            eprintln!("seed {seed} step {step}: {what}: checking");
            check(&app, k, seed, step, &invs, &custs, sent, out_of_band).await;
        } else {
            eprintln!("seed {seed} step {step}: {what}");
        }
    }
    check(&app, k, seed, 60, &invs, &custs, sent, out_of_band).await;
    // The walk did something: money moved both ways.
    assert!(sent > 0, "seed {seed}: nothing sent");
}

#[tokio::test]
async fn a_seeded_simulation_of_invoices_credits_and_credit_balances_applies_every_naira_once() {
    let seeds: Vec<u64> = match std::env::var("KOBO_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(s) => vec![s],
        None => vec![7, 2024],
    };
    for seed in seeds {
        run(seed).await;
    }
}
