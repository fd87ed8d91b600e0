#!/usr/bin/env bash
# Resident memory with many payment intents (docs/performance.md):
# creates INTENTS intents (default 1,000,000) with 64 connections, sampling
# the server's RSS as the store grows; then runs flows (create + transfer,
# which activate actors) and shows RSS before and after idle actors are
# passivated. Last, the server is stopped and started again on the same
# store, timing start-up (until it listens, and until /readyz answers 200).
#
#   scripts/memory.sh [INTENTS] [STORE_CACHE_MB]
#
# Without STORE_CACHE_MB the server's default cache is used. BIN_DIR
# (environment) names a directory holding a release kobo instead of
# building.
set -euo pipefail
cd "$(dirname "$0")/.."
# The load generator (`kobo load`, src/cli/load/): one JSON line per run, no
# progress line, no money audit (a benchmark run), never failing on errors
# (they are counted in the line).
LOADFLAGS="--json - --quiet --audit false --max-error-rate 1"
INTENTS=${1:-1000000}
CACHE=()
if [ -n "${2:-}" ]; then CACHE=(--store-cache-mb "$2"); fi
if [ -z "${BIN_DIR:-}" ]; then
  cargo build --release --bin kobo >&2
  BIN_DIR=${CARGO_TARGET_DIR:-target}/release
fi
BIN=$BIN_DIR
DATA=$(mktemp -d)
# kobo refuses an admin token shorter than 32 characters.
TOKEN=mem-$(od -An -N24 -tx1 /dev/urandom | tr -d " \n")
RUST_LOG=warn "$BIN/kobo" serve --listen 127.0.0.1:0 --data "$DATA" --admin-token "$TOKEN" \
  --ip-rate-limit 0 --actor-idle-secs 5 "${CACHE[@]}" >"$DATA/stdout" 2>"$DATA/stderr" &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do grep -q "kobo listening on" "$DATA/stdout" 2>/dev/null && break; sleep 0.1; done
BASE=$(grep -o 'http://[0-9.:]*' "$DATA/stdout" | head -1)
# Everything comes from 127.0.0.1: the per-IP limit is off (above) and the
# load generator's merchant gets the highest per-key rate (docs/api.md,
# "Rate limits"); the defaults would refuse most of the load with 429.
KEY=$(curl -s -X POST "$BASE/admin/v1/merchants" -H "Authorization: Bearer $TOKEN" \
  -d '{"name":"Memory Ltd","settings":{"rate_limits":{"test_per_second":100000,"live_per_second":100000}}}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["test_secret_key"])')
rss() { awk '/VmRSS/ {print $2/1024 " MiB"}' /proc/$PID/status; }
live() { curl -s "$BASE/admin/v1/actors" -H "Authorization: Bearer $TOKEN" | python3 -c 'import json,sys; print({k["kind"]: k["live"] for k in json.load(sys.stdin)["kinds"]})'; }

echo "start: rss $(rss)"
STEP=$((INTENTS / 4))
for i in 1 2 3 4; do
  "$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix create --connections 64 --duration 100000 --max-ops $STEP >/dev/null
  echo "after $((i * STEP)) intents: rss $(rss), store $(du -sh "$DATA" | cut -f1)"
done
"$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix flow --connections 64 --duration 20
echo "after 20 s of flows: rss $(rss), live actors $(live)"
sleep 8
echo "8 s later (idle actors passivated): rss $(rss), live actors $(live)"
kill $PID
wait $PID 2>/dev/null || true
: >"$DATA/stdout"
START=$(date +%s.%N)
RUST_LOG=warn "$BIN/kobo" serve --listen 127.0.0.1:0 --data "$DATA" --admin-token "$TOKEN" \
  --ip-rate-limit 0 "${CACHE[@]}" >"$DATA/stdout" 2>"$DATA/stderr" &
PID=$!
for _ in $(seq 6000); do grep -q "kobo listening on" "$DATA/stdout" 2>/dev/null && break; sleep 0.01; done
LISTEN=$(date +%s.%N)
BASE=$(grep -o 'http://[0-9.:]*' "$DATA/stdout" | head -1)
for _ in $(seq 6000); do [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/readyz")" = 200 ] && break; sleep 0.01; done
READY=$(date +%s.%N)
python3 -c "print(f'restart on the same store: listening after {$LISTEN - $START:.2f} s, ready after {$READY - $START:.2f} s')"
echo "after restart: rss $(rss)"
