#!/usr/bin/env bash
# Load benchmark (docs/performance.md): a release kobo on loopback, driven by
# `kobo load` on the same 2 cores. For each connection count it measures
# GET /healthz (the HTTP ceiling), durable payment intent creates, and
# create-then-simulate_transfer flows; each RUNS times; prints medians.
# Then, in the same run, two peers at 64 connections, RUNS times each:
# - a bare actix-web server (benches/bare_actix.rs) answering /healthz;
# - PostgreSQL 15 (a throw-away cluster made with initdb in a temp dir,
#   fsync and synchronous_commit on): pgbench, 64 clients, one durable
#   single-row insert of a payment per transaction;
# and prints the ratios kobo healthz / bare actix, kobo creates / pgbench.
#
#   scripts/bench.sh [SECONDS_PER_RUN] [RUNS] [CONNECTIONS...]
#
# CONNECTIONS defaults to "1 16 64". BIN_DIR (environment) names a directory
# holding release kobo and bare-actix instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."
# The load generator (`kobo load`, src/cli/load/): one JSON line per run, no
# progress line, no money audit (a benchmark run), never failing on errors
# (they are counted in the line).
LOADFLAGS="--json - --quiet --audit false --max-error-rate 1"
SECONDS_PER_RUN=${1:-10}
RUNS=${2:-3}
shift $(($# < 2 ? $# : 2))
CONNS=${*:-1 16 64}
if [ -z "${BIN_DIR:-}" ]; then
  cargo build --release --bin kobo --bin bare-actix >&2
  BIN_DIR=${CARGO_TARGET_DIR:-target}/release
fi
BIN=$BIN_DIR
DATA=$(mktemp -d)
PGDIR=$(mktemp -d)
BARE_PID=
# kobo refuses an admin token shorter than 32 characters.
TOKEN=bench-$(od -An -N24 -tx1 /dev/urandom | tr -d " \n")
RUST_LOG=warn "$BIN/kobo" serve --listen 127.0.0.1:0 --data "$DATA" --admin-token "$TOKEN" \
  --ip-rate-limit 0 >"$DATA/stdout" 2>"$DATA/stderr" &
PID=$!
# PostgreSQL refuses to run as root: the throw-away cluster runs as nobody.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi; }
cleanup() {
  kill $PID 2>/dev/null && wait $PID 2>/dev/null
  [ -n "$BARE_PID" ] && kill "$BARE_PID" 2>/dev/null && wait "$BARE_PID" 2>/dev/null
  [ -f "$PGDIR/data/postmaster.pid" ] && as_pg pg_ctl -D "$PGDIR/data" -m immediate stop >/dev/null 2>&1
  rm -rf "$DATA" "$PGDIR"
}
trap cleanup EXIT
for _ in $(seq 100); do grep -q "kobo listening on" "$DATA/stdout" 2>/dev/null && break; sleep 0.1; done
BASE=$(grep -o 'http://[0-9.:]*' "$DATA/stdout" | head -1)
# Everything comes from 127.0.0.1: the per-IP limit is off (above) and the
# load generator's merchant gets the highest per-key rate (docs/api.md,
# "Rate limits"); the defaults would refuse most of the load with 429.
KEY=$(curl -s -X POST "$BASE/admin/v1/merchants" -H "Authorization: Bearer $TOKEN" \
  -d '{"name":"Bench Ltd","settings":{"rate_limits":{"test_per_second":100000,"live_per_second":100000}}}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["test_secret_key"])')

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { printf '%s\n' "${out[@]}" | python3 -c "import json,sys; [print(json.loads(l)['$1']) for l in sys.stdin]" | median; }

declare -A RESULT
echo "| scenario | connections | ops/s (median of $RUNS) | p50 ms | p99 ms | errors |"
echo "|---|---|---|---|---|---|"
for c in $CONNS; do
  for s in healthz create flow; do
    out=()
    for r in $(seq "$RUNS"); do
      out+=("$("$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix "$s" --connections "$c" --duration "$SECONDS_PER_RUN")")
    done
    RESULT[$s-$c]=$(field ops_per_sec)
    echo "| $s | $c | ${RESULT[$s-$c]} | $(field p50_ms) | $(field p99_ms) | $(field errors) |"
  done
done
echo
echo "store: $(du -sh "$DATA" | cut -f1); commits and batches per commit:"
curl -s "$BASE/metrics" | grep -E '^kobo_store_(commits_total|batches_total|batches_per_commit_(sum|count))' || true
kill $PID && wait $PID 2>/dev/null || true

# The bare actix-web peer.
"$BIN/bare-actix" 127.0.0.1:0 >"$DATA/bare.out" &
BARE_PID=$!
for _ in $(seq 100); do grep -q "listening on" "$DATA/bare.out" 2>/dev/null && break; sleep 0.1; done
BARE=$(grep -o 'http://[0-9.:]*' "$DATA/bare.out" | head -1)
out=()
for r in $(seq "$RUNS"); do
  out+=("$("$BIN/kobo" load $LOADFLAGS --url "$BARE" --mix healthz --connections 64 --duration "$SECONDS_PER_RUN")")
done
BARE_OPS=$(field ops_per_sec)
echo
echo "| peer | ops/s at 64 (median of $RUNS) | p50 ms | p99 ms | errors |"
echo "|---|---|---|---|---|"
echo "| bare actix-web /healthz | $BARE_OPS | $(field p50_ms) | $(field p99_ms) | $(field errors) |"
kill "$BARE_PID" && wait "$BARE_PID" 2>/dev/null || true
BARE_PID=

# The PostgreSQL peer: durable single-row inserts of a payment.
chown nobody "$PGDIR"
as_pg initdb -D "$PGDIR/data" -A trust -U bench >/dev/null
as_pg pg_ctl -D "$PGDIR/data" -l "$PGDIR/log" -w \
  -o "-c fsync=on -c synchronous_commit=on -c full_page_writes=on -c listen_addresses='' -c unix_socket_directories=$PGDIR -c max_connections=100" \
  start >/dev/null
as_pg psql -q -h "$PGDIR" -U bench -d postgres -c \
  "CREATE TABLE payments (id bigserial PRIMARY KEY, merchant uuid NOT NULL, amount bigint NOT NULL, currency text NOT NULL, status text NOT NULL, idempotency_key text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());" >/dev/null
cat >"$PGDIR/insert.sql" <<'SQL'
INSERT INTO payments (merchant, amount, currency, status, idempotency_key) VALUES ('0196a1b2-0000-7000-8000-000000000001', 250000, 'NGN', 'created', md5(random()::text));
SQL
chmod 644 "$PGDIR/insert.sql"
pg=()
for r in $(seq "$RUNS"); do
  pg+=("$(as_pg pgbench -n -h "$PGDIR" -U bench -c 64 -j 2 -T "$SECONDS_PER_RUN" -f "$PGDIR/insert.sql" postgres 2>/dev/null |
    awk '/^tps = / {print $3}')")
done
PG_OPS=$(printf '%s\n' "${pg[@]}" | median)
echo "| pgbench durable single-row inserts, 64 clients | $PG_OPS | | | |"
echo
echo "ratios (same run):"
python3 - "${RESULT[healthz-64]:-0}" "$BARE_OPS" "${RESULT[create-64]:-0}" "$PG_OPS" <<'PY'
import sys
kh, bare, kc, pg = map(float, sys.argv[1:])
if kh and bare:
    print(f"  kobo /healthz / bare actix-web /healthz = {kh:.0f} / {bare:.0f} = {kh / bare:.3f}")
if kc and pg:
    print(f"  kobo creates / pgbench inserts = {kc:.0f} / {pg:.0f} = {kc / pg:.3f}")
PY
