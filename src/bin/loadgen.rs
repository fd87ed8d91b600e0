//! `kobo-loadgen`: a small HTTP load generator for kobo's benchmarks.
//! Replaced by `kobo load` (src/cli/load/, README "For load testers"),
//! which runs the same scenarios with the same output fields; kept only
//! until the scripts under scripts/ call `kobo load` instead.
//!
//! Each of `--connections` tasks loops for `--seconds`, one request (or flow)
//! at a time, and records latencies. Scenarios:
//! - `healthz`: GET /healthz (this machine's HTTP ceiling);
//! - `create`: durable payment intent creates (each with its own
//!   Idempotency-Key);
//! - `flow`: create, then pay it with the sandbox transfer.
//!
//! Prints one JSON line: ops/s, p50/p99/p99.9/max latency (ms), errors.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use serde_json::json;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Scenario {
    Healthz,
    Create,
    Flow,
}

#[derive(Parser, Debug)]
struct Args {
    #[arg(long)]
    base: String,
    #[arg(long, default_value = "")]
    key: String,
    #[arg(long, value_enum)]
    scenario: Scenario,
    #[arg(long, default_value_t = 16)]
    connections: usize,
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Stop after this many operations in total (0: no limit).
    #[arg(long, default_value_t = 0)]
    max_ops: u64,
}

async fn one(client: &reqwest::Client, a: &Args, n: u64, worker: usize) -> Result<(), String> {
    let check = |r: reqwest::Response, want: u16| async move {
        let s = r.status().as_u16();
        let body = r.bytes().await.map_err(|e| e.to_string())?;
        if s == want {
            Ok(body)
        } else {
            Err(format!("status {s}: {}", String::from_utf8_lossy(&body)))
        }
    };
    match a.scenario {
        Scenario::Healthz => {
            let r = client
                .get(format!("{}/healthz", a.base))
                .send()
                .await
                .map_err(|e| e.to_string())?;
            check(r, 200).await.map(|_| ())
        }
        Scenario::Create | Scenario::Flow => {
            let idem = format!("lg-{worker}-{n}-{}", uuid::Uuid::new_v4().simple());
            let r = client
                .post(format!("{}/v1/payment_intents", a.base))
                .bearer_auth(&a.key)
                .header("Idempotency-Key", &idem)
                .json(&json!({"amount": 250000, "currency": "NGN"}))
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let body = check(r, 201).await?;
            if let Scenario::Flow = a.scenario {
                let v: serde_json::Value =
                    serde_json::from_slice(&body).map_err(|e| e.to_string())?;
                let id = v["id"].as_str().ok_or("no id")?;
                let r = client
                    .post(format!(
                        "{}/v1/test_helpers/payment_intents/{id}/simulate_transfer",
                        a.base
                    ))
                    .bearer_auth(&a.key)
                    .header("Idempotency-Key", format!("{idem}-pay"))
                    .json(&json!({}))
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                check(r, 200).await?;
            }
            Ok(())
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Arc::new(Args::parse());
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.connections)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.seconds);
    let total = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..args.connections {
        let (client, args, total) = (client.clone(), args.clone(), total.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(1 << 16);
            let mut errors = 0u64;
            let mut first_error = None;
            let mut n = 0u64;
            while Instant::now() < deadline {
                let k = total.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if args.max_ops > 0 && k >= args.max_ops {
                    break;
                }
                n += 1;
                let t = Instant::now();
                match one(&client, &args, n, w).await {
                    Ok(()) => lat.push(t.elapsed().as_micros() as u64),
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert(e);
                    }
                }
            }
            (lat, errors, first_error)
        }));
    }
    let mut lat = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    for t in tasks {
        let (l, e, f) = t.await.expect("task");
        lat.extend(l);
        errors += e;
        if first_error.is_none() {
            first_error = f;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    lat.sort_unstable();
    let pct = |p: f64| {
        if lat.is_empty() {
            0.0
        } else {
            lat[((lat.len() as f64 - 1.0) * p).round() as usize] as f64 / 1000.0
        }
    };
    println!(
        "{}",
        json!({
            "scenario": format!("{:?}", args.scenario).to_lowercase(),
            "connections": args.connections,
            "ops": lat.len(),
            "seconds": (elapsed * 100.0).round() / 100.0,
            "ops_per_sec": (lat.len() as f64 / elapsed).round(),
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
            "p999_ms": pct(0.999),
            "max_ms": pct(1.0),
            "errors": errors,
            "first_error": first_error,
        })
    );
}
