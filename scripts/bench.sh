#!/usr/bin/env bash
# Load benchmark (docs/performance.md): a release kobo on loopback, driven by
# kobo-loadgen on the same 2 cores. For each connection count it measures
# GET /healthz (the HTTP ceiling), durable payment intent creates, and
# create-then-simulate_transfer flows; each RUNS times; prints medians.
#
#   scripts/bench.sh [SECONDS_PER_RUN] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_RUN=${1:-10}
RUNS=${2:-3}
cargo build --release --bin kobo --bin kobo-loadgen >&2
BIN=${CARGO_TARGET_DIR:-target}/release
DATA=$(mktemp -d)
# kobo refuses an admin token shorter than 32 characters.
TOKEN=bench-$(od -An -N24 -tx1 /dev/urandom | tr -d " \n")
RUST_LOG=warn "$BIN/kobo" serve --listen 127.0.0.1:0 --data "$DATA" --admin-token "$TOKEN" \
  --ip-rate-limit 0 >"$DATA/stdout" 2>"$DATA/stderr" &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do grep -q "kobo listening on" "$DATA/stdout" 2>/dev/null && break; sleep 0.1; done
BASE=$(grep -o 'http://[0-9.:]*' "$DATA/stdout" | head -1)
# Everything comes from 127.0.0.1: the per-IP limit is off (above) and the
# load generator's merchant gets the highest per-key rate (docs/api.md,
# "Rate limits"); the defaults would refuse most of the load with 429.
KEY=$(curl -s -X POST "$BASE/admin/v1/merchants" -H "Authorization: Bearer $TOKEN" \
  -d '{"name":"Bench Ltd","settings":{"rate_limits":{"test_per_second":100000,"live_per_second":100000}}}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["test_secret_key"])')

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "| scenario | connections | ops/s (median of $RUNS) | p50 ms | p99 ms | errors |"
echo "|---|---|---|---|---|---|"
for c in 1 16 64; do
  for s in healthz create flow; do
    out=()
    for r in $(seq "$RUNS"); do
      out+=("$("$BIN/kobo-loadgen" --base "$BASE" --key "$KEY" --scenario "$s" --connections "$c" --seconds "$SECONDS_PER_RUN")")
    done
    field() { printf '%s\n' "${out[@]}" | python3 -c "import json,sys; [print(json.loads(l)['$1']) for l in sys.stdin]" | median; }
    echo "| $s | $c | $(field ops_per_sec) | $(field p50_ms) | $(field p99_ms) | $(field errors) |"
  done
done
echo
echo "store: $(du -sh "$DATA" | cut -f1); commits and batches per commit:"
curl -s "$BASE/metrics" | grep -E '^kobo_store_(commits_total|batches_total|batches_per_commit_(sum|count))' || true
