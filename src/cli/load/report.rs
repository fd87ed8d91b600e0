//! What `kobo load` measured: per operation an HdrHistogram of latencies
//! (microseconds, 3 significant digits), counts of successes and of errors
//! by `"<status> <code>"`, and a per-second timeline (completions, errors,
//! latency percentiles) for the plots; then the final report (JSON through
//! serde, text for the terminal).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use serde::Serialize;

use super::scenario::{Op, OpError};

/// Highest latency recorded as such (60 s); slower ones count as 60 s.
const MAX_MICROS: u64 = 60_000_000;

/// A whole-run histogram: 1 µs to 60 s, 3 significant digits.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid histogram bounds")
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, MAX_MICROS)
}

struct Second {
    ok: u64,
    errors: u64,
    /// 2 significant digits, grown only as far as the values recorded
    /// (a long run keeps one per operation per second).
    latency: Histogram<u32>,
}

struct OpStats {
    latency: Histogram<u64>,
    ok: u64,
    errors: BTreeMap<String, u64>,
    timeline: Vec<Second>,
}

impl OpStats {
    fn new() -> OpStats {
        OpStats {
            latency: histogram(),
            ok: 0,
            errors: BTreeMap::new(),
            timeline: Vec::new(),
        }
    }
}

struct State {
    ops: BTreeMap<Op, OpStats>,
    all: Histogram<u64>,
    ok: u64,
    errors: u64,
    first_error: Option<String>,
    late: u64,
    unsent: u64,
    max_send_delay: Duration,
}

/// Collects every operation's outcome (shared by the workers).
pub struct Recorder {
    pub started: Instant,
    state: Mutex<State>,
}

/// Totals so far, for the progress line.
pub struct Progress {
    pub ok: u64,
    pub errors: u64,
    pub p99_ms: f64,
    pub late: u64,
}

impl Recorder {
    pub fn new(started: Instant) -> Recorder {
        Recorder {
            started,
            state: Mutex::new(State {
                ops: BTreeMap::new(),
                all: histogram(),
                ok: 0,
                errors: 0,
                first_error: None,
                late: 0,
                unsent: 0,
                max_send_delay: Duration::ZERO,
            }),
        }
    }

    /// One operation, meant to start at `intended`, ended at `done`.
    pub fn record(&self, op: Op, intended: Instant, done: Instant, result: Result<(), OpError>) {
        let latency = micros(done.saturating_duration_since(intended));
        let second = done.saturating_duration_since(self.started).as_secs() as usize;
        let mut s = self.state.lock();
        let stats = s.ops.entry(op).or_insert_with(OpStats::new);
        while stats.timeline.len() <= second {
            stats.timeline.push(Second {
                ok: 0,
                errors: 0,
                latency: Histogram::new(2).expect("valid histogram precision"),
            });
        }
        let slot = &mut stats.timeline[second];
        match result {
            Ok(()) => {
                slot.ok += 1;
                // Within bounds by `micros`.
                let _ = slot.latency.record(latency);
                let _ = stats.latency.record(latency);
                stats.ok += 1;
                let _ = s.all.record(latency);
                s.ok += 1;
            }
            Err(e) => {
                slot.errors += 1;
                *stats.errors.entry(e.0.clone()).or_default() += 1;
                s.errors += 1;
                s.first_error
                    .get_or_insert_with(|| format!("{}: {}", op.name(), e.0));
            }
        }
    }

    /// An open-loop request that started `delay` after its intended time
    /// because the in-flight cap held it back or the scheduler fell behind.
    pub fn late(&self, delay: Duration) {
        let mut s = self.state.lock();
        s.late += 1;
        s.max_send_delay = s.max_send_delay.max(delay);
    }

    /// Open-loop starts that the run's end came before (the in-flight cap
    /// full until then).
    pub fn unsent(&self, n: u64) {
        self.state.lock().unsent += n;
    }

    pub fn progress(&self) -> Progress {
        let s = self.state.lock();
        Progress {
            ok: s.ok,
            errors: s.errors,
            p99_ms: ms(s.all.value_at_quantile(0.99)),
            late: s.late,
        }
    }

    /// The report of everything recorded, `elapsed` after the start.
    pub fn report(&self, setup: RunSetup, elapsed: Duration) -> Report {
        let s = self.state.lock();
        let secs = elapsed.as_secs_f64().max(1e-9);
        let operations = s
            .ops
            .iter()
            .map(|(op, st)| {
                (
                    op.name().to_string(),
                    OpReport {
                        ok: st.ok,
                        errors: st.errors.values().sum(),
                        ops_per_sec: round1(st.ok as f64 / secs),
                        latency: Latency::of(&st.latency),
                        errors_by: st.errors.clone(),
                        timeline: st
                            .timeline
                            .iter()
                            .enumerate()
                            .map(|(i, sec)| Point {
                                second: i as u64,
                                ok: sec.ok,
                                errors: sec.errors,
                                p50_ms: ms(sec.latency.value_at_quantile(0.5)),
                                p99_ms: ms(sec.latency.value_at_quantile(0.99)),
                            })
                            .collect(),
                    },
                )
            })
            .collect::<BTreeMap<_, _>>();
        let mut errors_by = BTreeMap::new();
        for st in s.ops.values() {
            for (k, v) in &st.errors {
                *errors_by.entry(k.clone()).or_default() += v;
            }
        }
        let all = Latency::of(&s.all);
        let attempted = s.ok + s.errors;
        Report {
            mode: setup.mode,
            rate: setup.rate,
            connections: setup.connections,
            max_in_flight: setup.max_in_flight,
            mix: setup.mix,
            scenario: setup.scenario,
            seconds: round2(secs),
            ops: s.ok,
            ops_per_sec: (s.ok as f64 / secs).round(),
            p50_ms: all.p50_ms,
            p90_ms: all.p90_ms,
            p99_ms: all.p99_ms,
            p999_ms: all.p999_ms,
            max_ms: all.max_ms,
            errors: s.errors,
            error_rate: if attempted == 0 {
                0.0
            } else {
                s.errors as f64 / attempted as f64
            },
            first_error: s.first_error.clone(),
            late: s.late,
            unsent: s.unsent,
            max_send_delay_ms: ms(s.max_send_delay.as_micros() as u64),
            errors_by,
            operations,
            webhooks: None,
            audit: None,
        }
    }
}

fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// How the run was driven (copied into the report).
pub struct RunSetup {
    pub mode: &'static str,
    pub rate: Option<f64>,
    pub connections: Option<usize>,
    pub max_in_flight: Option<usize>,
    pub mix: BTreeMap<String, u32>,
    /// The one operation of a single-operation mix (`kobo-loadgen`'s
    /// `scenario` field), else `"mix"`.
    pub scenario: String,
}

#[derive(Serialize, Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Latency {
        Latency {
            p50_ms: ms(h.value_at_quantile(0.5)),
            p90_ms: ms(h.value_at_quantile(0.9)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
        }
    }
}

/// One second of one operation (by completion time).
#[derive(Serialize, Clone, Debug)]
pub struct Point {
    pub second: u64,
    pub ok: u64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Serialize, Clone, Debug)]
pub struct OpReport {
    pub ok: u64,
    pub errors: u64,
    pub ops_per_sec: f64,
    #[serde(flatten)]
    pub latency: Latency,
    pub errors_by: BTreeMap<String, u64>,
    pub timeline: Vec<Point>,
}

/// The final report (`--json`); the totals at the top keep the field names
/// of the retired `kobo-loadgen` line (`ops`, `ops_per_sec`, `p50_ms`,
/// `p99_ms`, `p999_ms`, `max_ms`, `errors`, `first_error`).
#[derive(Serialize, Clone, Debug)]
pub struct Report {
    pub mode: &'static str,
    pub rate: Option<f64>,
    pub connections: Option<usize>,
    pub max_in_flight: Option<usize>,
    pub mix: BTreeMap<String, u32>,
    pub scenario: String,
    pub seconds: f64,
    pub ops: u64,
    pub ops_per_sec: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub errors: u64,
    pub error_rate: f64,
    pub first_error: Option<String>,
    /// Open loop: operations started after their intended time.
    pub late: u64,
    /// Open loop: operations due before the end but never started (the
    /// in-flight cap stayed full).
    pub unsent: u64,
    pub max_send_delay_ms: f64,
    pub errors_by: BTreeMap<String, u64>,
    pub operations: BTreeMap<String, OpReport>,
    pub webhooks: Option<super::webhook::Deliveries>,
    pub audit: Option<super::audit::AuditReport>,
}

impl Report {
    /// The report for a terminal.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let how = match (self.rate, self.connections) {
            (Some(r), _) => format!("open loop at {r}/s"),
            (_, Some(c)) => format!("closed loop, {c} connections"),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "kobo load: {how}, {:.1} s: {} ok ({}/s), {} errors ({:.2}%), {} late, {} not sent",
            self.seconds,
            self.ops,
            self.ops_per_sec,
            self.errors,
            self.error_rate * 100.0,
            self.late,
            self.unsent
        );
        let _ = writeln!(
            o,
            "{:<10} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "operation",
            "ok",
            "errors",
            "ops/s",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "p99.9 ms",
            "max ms"
        );
        for (name, r) in &self.operations {
            let l = r.latency;
            let _ = writeln!(
                o,
                "{name:<10} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                r.ok, r.errors, r.ops_per_sec, l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms
            );
        }
        for (name, r) in &self.operations {
            for (e, n) in &r.errors_by {
                let _ = writeln!(o, "  {name} error {e}: {n}");
            }
        }
        if let Some(w) = &self.webhooks {
            let _ = writeln!(
                o,
                "webhooks: {} deliveries received, {} verified, {} with a bad signature, {} events",
                w.received, w.verified, w.bad_signature, w.events
            );
        }
        if let Some(a) = &self.audit {
            let _ = writeln!(o, "{}", a.text());
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_counts_per_operation_and_measures_from_the_intended_time() {
        let t0 = Instant::now();
        let rec = Recorder::new(t0);
        let ms = Duration::from_millis;
        // Meant at 0, done at 10 ms: 10 ms even if it was sent late.
        rec.record(Op::Create, t0, t0 + ms(10), Ok(()));
        rec.record(Op::Create, t0 + ms(5), t0 + ms(25), Ok(()));
        rec.record(
            Op::Payout,
            t0,
            t0 + ms(1500),
            Err(OpError("409 payout_limit_exceeded".into())),
        );
        rec.late(ms(7));
        let setup = RunSetup {
            mode: "open",
            rate: Some(10.0),
            connections: None,
            max_in_flight: Some(4),
            mix: BTreeMap::new(),
            scenario: "mix".into(),
        };
        let r = rec.report(setup, Duration::from_secs(2));
        assert_eq!(r.ops, 2);
        assert_eq!(r.errors, 1);
        assert_eq!(r.late, 1);
        let create = &r.operations["create"];
        assert_eq!(create.ok, 2);
        assert!(
            (create.latency.max_ms - 20.0).abs() < 0.05,
            "{:?}",
            create.latency
        );
        assert!((create.latency.p50_ms - 10.0).abs() < 0.05);
        assert_eq!(create.ops_per_sec, 1.0);
        let payout = &r.operations["payout"];
        assert_eq!(payout.errors_by["409 payout_limit_exceeded"], 1);
        assert_eq!(payout.timeline.len(), 2);
        assert_eq!(payout.timeline[1].errors, 1);
        assert_eq!(r.errors_by["409 payout_limit_exceeded"], 1);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json["operations"]["create"]["p99_ms"],
            create.latency.p99_ms
        );
    }
}
