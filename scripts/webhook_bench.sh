#!/usr/bin/env bash
# Webhook delivery throughput (docs/performance.md, "Webhooks").
#
#   scripts/webhook_bench.sh [RUNS=3] [EVENTS=1000]
#
# Builds the release test binary, then runs the ignored `webhook_bench`
# test RUNS times: 10 endpoints on a local HTTPS receiver (its own loopback
# address, port 8443, a test CA passed with --webhook-ca), EVENTS payments
# each making one event, so EVENTS x 10 deliveries; then again with one of
# the 10 endpoints never answering. Prints each run and the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
events=${2:-1000}
cargo test --release --test api --no-run >/dev/null 2>&1 || cargo test --release --test api --no-run
out=$(mktemp)
for i in $(seq 1 "$runs"); do
  WEBHOOK_BENCH_EVENTS=$events cargo test --release --test api webhooks::webhook_bench \
    -- --ignored --exact --nocapture 2>/dev/null | grep '^webhook_bench' | tee -a "$out"
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for s in all_fast one_hanging; do
  for f in received_per_s recorded_per_s; do
    v=$(grep "scenario=$s " "$out" | sed -E "s/.* $f=([0-9.]+).*/\1/" | median)
    echo "median scenario=$s $f=$v"
  done
done
rm -f "$out"
