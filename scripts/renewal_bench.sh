#!/usr/bin/env bash
# Subscription renewal throughput (docs/performance.md, "Subscription
# renewals").
#
#   scripts/renewal_bench.sh [RUNS=3] [SUBS=10000] [CUSTOMERS=100]
#
# Builds the release test binary, then runs the ignored `renewal_bench`
# test RUNS times: SUBS daily subscriptions collected by mandate
# (CUSTOMERS customers, each on SUBS/CUSTOMERS plans), all due at one
# 08:00 Lagos; the clock is moved to that instant, then a minute at a
# time until no debit is processing. Prints each run and the medians.
# On a shared machine run it under the build lock:
#   flock /tmp/kobo-cargo.lock scripts/renewal_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
subs=${2:-10000}
customers=${3:-100}
cargo test --release --test api --no-run >/dev/null 2>&1 || cargo test --release --test api --no-run
out=$(mktemp)
for i in $(seq 1 "$runs"); do
  RENEWAL_BENCH_SUBS=$subs RENEWAL_BENCH_CUSTOMERS=$customers \
    cargo test --release --test api renewal_bench::renewal_bench \
    -- --ignored --exact --nocapture 2>/dev/null | grep '^renewal_bench' | tee -a "$out"
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for f in renew_s debited_s renewals_per_s invoiced_per_s; do
  v=$(sed -E "s/.* $f=([0-9.]+).*/\1/" "$out" | median)
  echo "median $f=$v"
done
rm -f "$out"
