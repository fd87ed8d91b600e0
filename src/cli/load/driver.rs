//! How `kobo load` sends: closed loop (N workers, each starting its next
//! operation when the previous one ended) or open loop (operations started
//! at a fixed arrival rate whatever the answers, latency counted from each
//! one's intended start, so a slow server cannot hide its queueing: no
//! coordinated omission, as in wrk2 and vegeta). The open loop caps the
//! operations in flight; one that waits for room, or that the scheduler
//! starts more than [`LATE`] after its time, is counted late; the starts
//! still waiting for room when the run's time is up are not made, and
//! counted as not sent.
//!
//! A progress line goes to stderr once a second.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::report::Recorder;
use super::scenario::{Flows, Op};

/// A start this much after its intended time counts as late.
pub const LATE: Duration = Duration::from_millis(10);

#[derive(Clone, Copy, Debug)]
pub enum Mode {
    Closed { connections: usize },
    Open { rate: f64, max_in_flight: usize },
}

pub struct Plan {
    pub mode: Mode,
    pub duration: Duration,
    /// Stop after this many operations (0: no limit).
    pub max_ops: u64,
    pub progress: bool,
}

/// Runs the plan; returns when every operation started has ended.
pub async fn drive(plan: Plan, flows: Arc<Flows>, cycle: Arc<Vec<Op>>, rec: Arc<Recorder>) {
    let deadline = rec.started + plan.duration;
    let progress = plan.progress.then(|| {
        let rec = rec.clone();
        tokio::spawn(async move { progress_lines(rec).await })
    });
    match plan.mode {
        Mode::Closed { connections } => {
            let next = Arc::new(AtomicU64::new(0));
            let mut workers = Vec::new();
            for _ in 0..connections {
                let (flows, cycle, rec, next) =
                    (flows.clone(), cycle.clone(), rec.clone(), next.clone());
                workers.push(tokio::spawn(async move {
                    while Instant::now() < deadline {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        if plan.max_ops > 0 && n >= plan.max_ops {
                            break;
                        }
                        let op = cycle[(n % cycle.len() as u64) as usize];
                        let start = Instant::now();
                        let result = flows.run(op).await;
                        rec.record(op, start, Instant::now(), result);
                    }
                }));
            }
            for w in workers {
                let _ = w.await;
            }
        }
        Mode::Open {
            rate,
            max_in_flight,
        } => {
            let room = Arc::new(Semaphore::new(max_in_flight));
            let mut n: u64 = 0;
            loop {
                if plan.max_ops > 0 && n >= plan.max_ops {
                    break;
                }
                // The n-th start is due at n / rate seconds: a fixed
                // schedule, never shifted by slow answers.
                let intended = rec.started + Duration::from_secs_f64(n as f64 / rate);
                if intended >= deadline {
                    break;
                }
                tokio::time::sleep_until(intended.into()).await;
                let (permit, held_back) = match room.clone().try_acquire_owned() {
                    Ok(p) => (p, false),
                    Err(_) => {
                        let wait = room.clone().acquire_owned();
                        match tokio::time::timeout_at(deadline.into(), wait).await {
                            Ok(p) => (p.expect("never closed"), true),
                            // The run is over with starts still due: the
                            // rate was more than the server could take.
                            Err(_) => {
                                rec.unsent(scheduled(rate, plan.duration, plan.max_ops) - n);
                                break;
                            }
                        }
                    }
                };
                let delay = intended.elapsed();
                if held_back || delay > LATE {
                    rec.late(delay);
                }
                let op = cycle[(n % cycle.len() as u64) as usize];
                let (flows, rec) = (flows.clone(), rec.clone());
                tokio::spawn(async move {
                    let result = flows.run(op).await;
                    rec.record(op, intended, Instant::now(), result);
                    drop(permit);
                });
                n += 1;
            }
            // Every permit back: every operation ended.
            let _ = room.acquire_many(max_in_flight as u32).await;
        }
    }
    if let Some(p) = progress {
        p.abort();
        eprintln!();
    }
}

/// How many starts an open loop at `rate` schedules in `duration` (the
/// n-th at n / rate seconds, while before the end), at most `max_ops`.
fn scheduled(rate: f64, duration: Duration, max_ops: u64) -> u64 {
    let n = (rate * duration.as_secs_f64()).ceil() as u64;
    if max_ops > 0 {
        n.min(max_ops)
    } else {
        n
    }
}

/// Once a second: elapsed time, operations per second in that second,
/// errors and the p99 latency so far, late starts.
async fn progress_lines(rec: Arc<Recorder>) {
    let mut tick = tokio::time::interval_at(
        (rec.started + Duration::from_secs(1)).into(),
        Duration::from_secs(1),
    );
    let mut last = 0;
    loop {
        tick.tick().await;
        let p = rec.progress();
        let mut err = std::io::stderr().lock();
        // A terminal shows one line rewritten; a file gets one a second.
        let (start, end) = if err.is_terminal() {
            ("\r", "")
        } else {
            ("", "\n")
        };
        let _ = write!(
            err,
            "{start}[{:>4}s] {:>8} ops/s  {:>6} errors  p99 {:>8.2} ms  {:>6} late {end}",
            rec.started.elapsed().as_secs(),
            p.ok - last,
            p.errors,
            p.p99_ms,
            p.late
        );
        let _ = err.flush();
        last = p.ok;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_loop_schedules_rate_times_duration_starts_at_most_max_ops() {
        let s = Duration::from_secs;
        assert_eq!(scheduled(30.0, s(3), 0), 90);
        assert_eq!(scheduled(2.5, s(3), 0), 8);
        assert_eq!(scheduled(30.0, s(3), 10), 10);
    }
}
