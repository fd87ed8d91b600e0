//! The money audit after a `kobo load` run: reads back what the server
//! acknowledged and its books, then checks, with pure functions over the
//! fetched data (unit-tested below, a broken ledger included):
//! - every acknowledged write is present: each object the tool was answered
//!   with is retrievable, in the status the tool last saw or a later one;
//! - the balance transactions sum to the balance, per bucket and currency,
//!   and each line's `balance_after` is the running sum of its bucket;
//! - each successful payment is captured exactly once (one `payment` line
//!   into `pending` per successful intent, none for the others);
//! - no payout is debited or paid twice (per payout at most one `payout`
//!   line out of `available` and one out of `payout_in_flight`).
//!
//! Money moves on after the last answer (refunds confirm within seconds,
//! payouts at the next status query), so the books are read until the
//! balance is the same before and after reading the lines.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use anyhow::{bail, Result};
use futures_util::{stream, StreamExt};
use serde::Serialize;
use serde_json::Value;

use super::scenario::{Acknowledged, Api, Kind};

/// One balance transaction, the fields the audit reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub id: u64,
    pub kind: String,
    pub bucket: String,
    pub currency: String,
    pub amount: i64,
    pub balance_after: i64,
    pub source: Option<String>,
}

impl Line {
    fn from_json(v: &Value) -> Option<Line> {
        Some(Line {
            id: v["id"].as_str()?.parse().ok()?,
            kind: v["type"].as_str()?.to_string(),
            bucket: v["bucket"].as_str()?.to_string(),
            currency: v["currency"].as_str()?.to_string(),
            amount: v["amount"].as_i64()?,
            balance_after: v["balance_after"].as_i64()?,
            source: v["source"].as_str().map(str::to_string),
        })
    }
}

/// `(bucket, currency)` -> amount, from `GET /v1/balance`.
pub type Balance = BTreeMap<(String, String), i64>;

fn balance_from_json(v: &Value) -> Option<Balance> {
    let mut out = Balance::new();
    for bucket in [
        "pending",
        "available",
        "reserve",
        "payout_in_flight",
        "refund_in_flight",
        "dispute_hold",
    ] {
        for e in v[bucket].as_array()? {
            out.insert(
                (bucket.to_string(), e["currency"].as_str()?.to_string()),
                e["amount"].as_i64()?,
            );
        }
    }
    Some(out)
}

/// An acknowledged object: what the tool last saw, and what it reads now
/// (`None`: not found).
#[derive(Clone, Debug)]
pub struct ReadBack {
    pub kind: Kind,
    pub id: String,
    pub seen: String,
    pub now: Option<String>,
}

/// Whether status `now` may follow status `seen` (or is it): terminal
/// statuses stay, the others may move on but never back to the start.
pub fn same_or_later(kind: Kind, seen: &str, now: &str) -> bool {
    if seen == now {
        return true;
    }
    match kind {
        Kind::PaymentIntent => match seen {
            "created" => true,
            "successful" | "canceled" => false,
            // processing, failed (another attempt may follow), abandoned.
            _ => now != "created",
        },
        Kind::Refund => seen == "pending",
        Kind::Payout => match seen {
            "awaiting_approval" => true,
            "queued" => now != "awaiting_approval",
            "processing" => matches!(now, "paid" | "failed"),
            _ => false,
        },
        Kind::WebhookEndpoint => true,
    }
}

/// Every acknowledged object is there, in a status at least as far along.
pub fn check_acknowledged(read: &[ReadBack]) -> Vec<String> {
    let mut out = Vec::new();
    for r in read {
        match &r.now {
            None => out.push(format!(
                "{:?} {} was acknowledged but is missing",
                r.kind, r.id
            )),
            Some(now) if !same_or_later(r.kind, &r.seen, now) => out.push(format!(
                "{:?} {} went back from {} to {now}",
                r.kind, r.id, r.seen
            )),
            _ => {}
        }
    }
    out
}

/// The lines of each bucket and currency add up to the balance, and each
/// line's `balance_after` is its bucket's running sum.
pub fn check_ledger(lines: &[Line], balance: &Balance) -> Vec<String> {
    let mut out = Vec::new();
    let mut sorted: Vec<&Line> = lines.iter().collect();
    sorted.sort_by_key(|l| l.id);
    let mut sums: BTreeMap<(String, String), i64> = BTreeMap::new();
    for l in sorted {
        let sum = sums
            .entry((l.bucket.clone(), l.currency.clone()))
            .or_default();
        *sum += l.amount;
        if *sum != l.balance_after {
            out.push(format!(
                "line {} ({} {} {}): balance_after {} but the lines up to it sum to {}",
                l.id, l.kind, l.bucket, l.currency, l.balance_after, sum
            ));
            // Follow the books from here, so one fault is one finding.
            *sum = l.balance_after;
        }
    }
    let mut keys: Vec<&(String, String)> = balance.keys().chain(sums.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let lines_sum: i64 = lines
            .iter()
            .filter(|l| l.bucket == key.0 && l.currency == key.1)
            .map(|l| l.amount)
            .sum();
        let shown = balance.get(key).copied().unwrap_or(0);
        if lines_sum != shown {
            out.push(format!(
                "{} {}: the balance shows {shown} but its lines sum to {lines_sum}",
                key.0, key.1
            ));
        }
    }
    out
}

/// One capture (a `payment` line into `pending`) per successful payment,
/// none for a payment that is not successful.
pub fn check_captures(lines: &[Line], intents: &[ReadBack]) -> Vec<String> {
    let mut captures: HashMap<&str, usize> = HashMap::new();
    for l in lines {
        if l.kind == "payment" && l.bucket == "pending" && l.amount > 0 {
            if let Some(s) = &l.source {
                *captures.entry(s.as_str()).or_default() += 1;
            }
        }
    }
    let mut out = Vec::new();
    for (source, n) in &captures {
        if *n > 1 {
            out.push(format!("payment {source} captured {n} times"));
        }
    }
    for r in intents.iter().filter(|r| r.kind == Kind::PaymentIntent) {
        let n = captures.get(r.id.as_str()).copied().unwrap_or(0);
        match r.now.as_deref() {
            Some("successful") if n == 0 => out.push(format!(
                "payment {} is successful but was never captured",
                r.id
            )),
            Some(s) if s != "successful" && n > 0 => {
                out.push(format!("payment {} is {s} but was captured", r.id))
            }
            _ => {}
        }
    }
    out.sort();
    out
}

/// No payout debited twice from `available` or paid twice out of
/// `payout_in_flight`; each acknowledged payout debited once, and once paid
/// out of `payout_in_flight` when `paid`.
pub fn check_payouts(lines: &[Line], payouts: &[ReadBack]) -> Vec<String> {
    let mut debits: HashMap<&str, (usize, usize)> = HashMap::new();
    for l in lines.iter().filter(|l| l.kind == "payout" && l.amount < 0) {
        let Some(s) = &l.source else { continue };
        let e = debits.entry(s.as_str()).or_default();
        match l.bucket.as_str() {
            "available" => e.0 += 1,
            "payout_in_flight" => e.1 += 1,
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (source, (from_available, paid)) in &debits {
        if *from_available > 1 {
            out.push(format!("payout {source} debited {from_available} times"));
        }
        if *paid > 1 {
            out.push(format!("payout {source} paid {paid} times"));
        }
    }
    for r in payouts.iter().filter(|r| r.kind == Kind::Payout) {
        let (from_available, paid) = debits.get(r.id.as_str()).copied().unwrap_or((0, 0));
        if from_available == 0 && r.now.is_some() {
            out.push(format!("payout {} was never debited", r.id));
        }
        if r.now.as_deref() == Some("paid") && paid == 0 {
            out.push(format!(
                "payout {} is paid but left nothing in flight",
                r.id
            ));
        }
    }
    out.sort();
    out
}

/// The audit's outcome (in the report).
#[derive(Serialize, Clone, Debug)]
pub struct AuditReport {
    pub passed: bool,
    /// Acknowledged objects read back, by kind.
    pub objects: BTreeMap<String, usize>,
    pub balance_transactions: usize,
    pub successful_payments: usize,
    /// Every finding (empty when passed).
    pub findings: Vec<String>,
}

impl AuditReport {
    pub fn text(&self) -> String {
        let head = format!(
            "audit: {} ({} objects read back, {} balance transactions, {} successful payments)",
            if self.passed { "passed" } else { "FAILED" },
            self.objects.values().sum::<usize>(),
            self.balance_transactions,
            self.successful_payments
        );
        let mut lines = vec![head];
        lines.extend(self.findings.iter().take(50).map(|f| format!("  {f}")));
        if self.findings.len() > 50 {
            lines.push(format!("  ... and {} more", self.findings.len() - 50));
        }
        lines.join("\n")
    }
}

/// Every check over the fetched data.
pub fn audit(read: &[ReadBack], lines: &[Line], balance: &Balance) -> AuditReport {
    let mut findings = check_acknowledged(read);
    findings.extend(check_ledger(lines, balance));
    findings.extend(check_captures(lines, read));
    findings.extend(check_payouts(lines, read));
    let mut objects = BTreeMap::new();
    for r in read {
        *objects.entry(format!("{:?}", r.kind)).or_default() += 1;
    }
    AuditReport {
        passed: findings.is_empty(),
        objects,
        balance_transactions: lines.len(),
        successful_payments: read
            .iter()
            .filter(|r| r.kind == Kind::PaymentIntent && r.now.as_deref() == Some("successful"))
            .count(),
        findings,
    }
}

/// How many times the books are read before giving up on a still balance.
const READS: usize = 20;

/// Reads back every acknowledged object and the books, and audits them.
pub async fn run(api: &Api, acked: &Acknowledged, parallel: usize) -> Result<AuditReport> {
    let objects = acked.all();
    // Endpoints have no GET by id: read their list (at most 10 a mode).
    let endpoints = if objects.iter().any(|(k, _, _)| *k == Kind::WebhookEndpoint) {
        let list = api
            .get_patiently("/v1/webhook_endpoints")
            .await
            .map_err(|e| anyhow::anyhow!("audit: GET /v1/webhook_endpoints: {}", e.0))?;
        list["data"].as_array().cloned().unwrap_or_default()
    } else {
        Vec::new()
    };
    let endpoints = &endpoints;
    let read: Vec<Result<ReadBack>> = stream::iter(objects)
        .map(|(kind, id, seen)| async move {
            if kind == Kind::WebhookEndpoint {
                let now = endpoints
                    .iter()
                    .find(|e| e["id"] == id.as_str())
                    .map(|e| e["status"].as_str().unwrap_or("").to_string());
                return Ok(ReadBack {
                    kind,
                    id,
                    seen,
                    now,
                });
            }
            let now = match api.get_patiently(&format!("{}/{id}", kind.path())).await {
                Ok(v) => Some(v["status"].as_str().unwrap_or("").to_string()),
                Err(e) if e.0.starts_with("404 ") => None,
                Err(e) => bail!("audit: reading {:?} {id}: {}", kind, e.0),
            };
            Ok(ReadBack {
                kind,
                id,
                seen,
                now,
            })
        })
        .buffer_unordered(parallel.max(1))
        .collect()
        .await;
    let read = read.into_iter().collect::<Result<Vec<_>>>()?;
    for _ in 0..READS {
        let before = balance(api).await?;
        let lines = all_lines(api).await?;
        let after = balance(api).await?;
        if before == after {
            return Ok(audit(&read, &lines, &after));
        }
        // Money still moving (refund confirmations, payout status queries).
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    bail!("audit: the balance kept changing while the books were read")
}

async fn balance(api: &Api) -> Result<Balance> {
    let v = api
        .get_patiently("/v1/balance")
        .await
        .map_err(|e| anyhow::anyhow!("audit: GET /v1/balance: {}", e.0))?;
    balance_from_json(&v).ok_or_else(|| anyhow::anyhow!("audit: an unreadable balance: {v}"))
}

async fn all_lines(api: &Api) -> Result<Vec<Line>> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            Some(a) => format!("/v1/balance_transactions?limit=100&starting_after={a}"),
            None => "/v1/balance_transactions?limit=100".to_string(),
        };
        let page = api
            .get_patiently(&path)
            .await
            .map_err(|e| anyhow::anyhow!("audit: GET {path}: {}", e.0))?;
        let data = page["data"].as_array().cloned().unwrap_or_default();
        for v in &data {
            out.push(
                Line::from_json(v)
                    .ok_or_else(|| anyhow::anyhow!("audit: an unreadable line: {v}"))?,
            );
        }
        after = data
            .last()
            .and_then(|v| v["id"].as_str())
            .map(str::to_string);
        if page["has_more"] != true || after.is_none() {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: u64, kind: &str, bucket: &str, amount: i64, after: i64, source: &str) -> Line {
        Line {
            id,
            kind: kind.into(),
            bucket: bucket.into(),
            currency: "NGN".into(),
            amount,
            balance_after: after,
            source: Some(source.into()),
        }
    }

    fn back(kind: Kind, id: &str, seen: &str, now: Option<&str>) -> ReadBack {
        ReadBack {
            kind,
            id: id.into(),
            seen: seen.into(),
            now: now.map(str::to_string),
        }
    }

    /// The books of a run as the sandbox writes them: two payments, a
    /// refund of the first, a release, a payout paid.
    fn books() -> (Vec<Line>, Balance, Vec<ReadBack>) {
        let lines = vec![
            line(10, "payment", "pending", 989_250, 989_250, "pi1"),
            line(11, "payment", "pending", 247_325, 1_236_575, "pi2"),
            line(13, "refund", "pending", -10_000, 1_226_575, "re1"),
            line(14, "refund", "refund_in_flight", 10_000, 10_000, "re1"),
            line(15, "release", "pending", -1_226_575, 0, "pi1"),
            line(16, "release", "available", 1_226_575, 1_226_575, "pi1"),
            line(19, "refund", "refund_in_flight", -10_000, 0, "re1"),
            line(22, "payout", "available", -11_075, 1_215_500, "po1"),
            line(23, "payout", "payout_in_flight", 11_075, 11_075, "po1"),
            line(25, "payout", "payout_in_flight", -11_075, 0, "po1"),
        ];
        let mut balance = Balance::new();
        for b in [
            "pending",
            "refund_in_flight",
            "payout_in_flight",
            "reserve",
            "dispute_hold",
        ] {
            balance.insert((b.into(), "NGN".into()), 0);
        }
        balance.insert(("available".into(), "NGN".into()), 1_215_500);
        balance.insert(("available".into(), "USD".into()), 0);
        let read = vec![
            back(Kind::PaymentIntent, "pi1", "successful", Some("successful")),
            back(Kind::PaymentIntent, "pi2", "successful", Some("successful")),
            back(Kind::PaymentIntent, "pi3", "created", Some("created")),
            back(Kind::Refund, "re1", "pending", Some("succeeded")),
            back(Kind::Payout, "po1", "queued", Some("paid")),
        ];
        (lines, balance, read)
    }

    #[test]
    fn sound_books_pass_the_audit() {
        let (lines, balance, read) = books();
        let r = audit(&read, &lines, &balance);
        assert!(r.passed, "{:?}", r.findings);
        assert_eq!(r.successful_payments, 2);
        assert_eq!(r.balance_transactions, 10);
    }

    #[test]
    fn a_missing_line_is_caught_by_the_running_sum_and_the_bucket_total() {
        let (mut lines, balance, read) = books();
        lines.retain(|l| l.id != 13);
        let f = check_ledger(&lines, &balance);
        assert!(f.iter().any(|f| f.starts_with("line 15 ")), "{f:?}");
        assert!(f.iter().any(|f| f.starts_with("pending NGN")), "{f:?}");
        assert!(!audit(&read, &lines, &balance).passed);
    }

    #[test]
    fn a_doubled_capture_is_caught() {
        let (mut lines, mut balance, read) = books();
        // A second capture of pi2, booked consistently: only the capture
        // rule can see it.
        for l in lines
            .iter_mut()
            .filter(|l| l.bucket == "pending" && l.id > 11)
        {
            l.balance_after += 247_325;
        }
        lines.push(line(12, "payment", "pending", 247_325, 1_483_900, "pi2"));
        balance.insert(("pending".into(), "NGN".into()), 247_325);
        let f = check_captures(&lines, &read);
        assert_eq!(f, vec!["payment pi2 captured 2 times".to_string()]);
        assert!(check_ledger(&lines, &balance).is_empty());
        assert!(!audit(&read, &lines, &balance).passed);
    }

    #[test]
    fn a_balance_that_does_not_match_its_lines_is_caught() {
        let (lines, mut balance, read) = books();
        balance.insert(("available".into(), "NGN".into()), 1_215_501);
        let f = check_ledger(&lines, &balance);
        assert_eq!(
            f,
            vec![
                "available NGN: the balance shows 1215501 but its lines sum to 1215500".to_string()
            ]
        );
        assert!(!audit(&read, &lines, &balance).passed);
    }

    #[test]
    fn a_success_without_capture_and_a_capture_without_success_are_caught() {
        let (lines, _, _) = books();
        let read = vec![
            back(Kind::PaymentIntent, "pi1", "processing", Some("failed")),
            back(Kind::PaymentIntent, "pi9", "successful", Some("successful")),
        ];
        let f = check_captures(&lines, &read);
        assert_eq!(
            f,
            vec![
                "payment pi1 is failed but was captured".to_string(),
                "payment pi9 is successful but was never captured".to_string(),
            ]
        );
    }

    #[test]
    fn a_payout_paid_twice_or_never_debited_is_caught() {
        let (mut lines, _, mut read) = books();
        lines.push(line(
            26,
            "payout",
            "payout_in_flight",
            -11_075,
            -11_075,
            "po1",
        ));
        read.push(back(Kind::Payout, "po2", "queued", Some("queued")));
        let f = check_payouts(&lines, &read);
        assert_eq!(
            f,
            vec![
                "payout po1 paid 2 times".to_string(),
                "payout po2 was never debited".to_string()
            ]
        );
    }

    #[test]
    fn a_missing_object_or_one_gone_back_is_caught_and_moving_on_is_not() {
        let read = vec![
            back(Kind::PaymentIntent, "a", "successful", None),
            back(Kind::PaymentIntent, "b", "successful", Some("processing")),
            back(Kind::PaymentIntent, "c", "created", Some("successful")),
            back(Kind::Refund, "d", "pending", Some("succeeded")),
            back(Kind::Refund, "e", "succeeded", Some("pending")),
            back(Kind::Payout, "f", "queued", Some("paid")),
            back(Kind::Payout, "g", "paid", Some("processing")),
        ];
        let f = check_acknowledged(&read);
        assert_eq!(f.len(), 4, "{f:?}");
        assert!(f[0].contains(" a was acknowledged but is missing"));
        assert!(f[1].contains(" b went back"));
        assert!(f[2].contains(" e went back"));
        assert!(f[3].contains(" g went back"));
    }
}
