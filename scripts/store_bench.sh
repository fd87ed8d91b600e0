#!/usr/bin/env bash
# The two store engines side by side (docs/performance.md, "PostgreSQL
# store"): one release kobo on the embedded redb store, then one on a
# PostgreSQL 15 database (a throw-away cluster made with initdb in a temp
# dir, fsync and synchronous_commit on, on a Unix socket), each driven by
# `kobo load` on the same 2 cores; durable payment intent creates and
# create-then-simulate_transfer flows, RUNS times per point; medians.
#
#   scripts/store_bench.sh [SECONDS_PER_RUN] [RUNS] [CONNECTIONS...]
#
# CONNECTIONS defaults to "1 16 64". BIN_DIR (environment) names a directory
# holding a release kobo instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_RUN=${1:-10}
RUNS=${2:-3}
shift $(($# < 2 ? $# : 2))
CONNS=${*:-1 16 64}
if [ -z "${BIN_DIR:-}" ]; then
  cargo build --release --bin kobo >&2
  BIN_DIR=${CARGO_TARGET_DIR:-target}/release
fi
BIN=$BIN_DIR
source scripts/throwaway_pg.sh
pg_find_bin
WORK=$(mktemp -d)
chmod 755 "$WORK"
PID=
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  pg_stop
  rm -rf "$WORK"
}
trap cleanup EXIT
pg_start 100
PG_URL=$(pg_url postgres)
LOADFLAGS="--json - --quiet --audit false --max-error-rate 1"
TOKEN=bench-$(od -An -N24 -tx1 /dev/urandom | tr -d " \n")

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { printf '%s\n' "${out[@]}" | python3 -c "import json,sys; [print(json.loads(l)['$1']) for l in sys.stdin]" | median; }

declare -A RESULT
echo "| store | scenario | connections | ops/s (median of $RUNS) | p50 ms | p99 ms | errors |"
echo "|---|---|---|---|---|---|---|"
for store in redb postgres; do
  DATA="$WORK/data-$store"
  STORE_ARGS=()
  [ "$store" = postgres ] && STORE_ARGS=(--store "$PG_URL")
  RUST_LOG=warn "$BIN/kobo" serve --listen 127.0.0.1:0 --data "$DATA" --admin-token "$TOKEN" \
    --ip-rate-limit 0 "${STORE_ARGS[@]}" >"$WORK/stdout-$store" 2>"$WORK/stderr-$store" &
  PID=$!
  for _ in $(seq 100); do grep -q "kobo listening on" "$WORK/stdout-$store" 2>/dev/null && break; sleep 0.1; done
  BASE=$(grep -o 'http://[0-9.:]*' "$WORK/stdout-$store" | head -1)
  KEY=$(curl -s -X POST "$BASE/admin/v1/merchants" -H "Authorization: Bearer $TOKEN" \
    -d '{"name":"Bench Ltd","settings":{"rate_limits":{"test_per_second":100000,"live_per_second":100000}}}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["test_secret_key"])')
  for c in $CONNS; do
    for s in create flow; do
      out=()
      for r in $(seq "$RUNS"); do
        out+=("$("$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix "$s" --connections "$c" --duration "$SECONDS_PER_RUN")")
      done
      RESULT[$store-$s-$c]=$(field ops_per_sec)
      echo "| $store | $s | $c | ${RESULT[$store-$s-$c]} | $(field p50_ms) | $(field p99_ms) | $(field errors) |"
    done
  done
  echo "<!-- $store: $(curl -s "$BASE/metrics" | grep -E '^kobo_store_(commits_total|batches_total)' | tr '\n' ' ') -->"
  kill "$PID" && wait "$PID" 2>/dev/null || true
  PID=
done
echo
echo "postgres / redb (same run):"
for c in $CONNS; do
  for s in create flow; do
    python3 -c "import sys; r, p = float(sys.argv[1]), float(sys.argv[2]); print(f'  {sys.argv[3]} at {sys.argv[4]}: {p:.0f} / {r:.0f} = {p / r:.3f}' if r else '')" \
      "${RESULT[redb-$s-$c]}" "${RESULT[postgres-$s-$c]}" "$s" "$c"
  done
done
