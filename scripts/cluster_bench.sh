#!/usr/bin/env bash
# Throughput of 1, 2 and 3 kobo cluster nodes on one PostgreSQL database
# (docs/performance.md, "The PostgreSQL store (issue 21 ...)"), beside a
# single-process kobo on the same PostgreSQL as the baseline. One
# throw-away PostgreSQL 15 cluster (initdb in a temp dir, fsync and
# synchronous_commit on, a Unix socket); each setup on a fresh database.
#
# For N nodes: `kobo serve --store URL --cluster --node-id nI` on
# 127.0.0.1:0 (advertised as their bound address), the first node's three
# server key files copied into the others' data directories before they
# start, then wait until the nodes' own counts of the shards they hold add
# up to all 256 and each holds some. One `kobo load` per node, all at once,
# CONNECTIONS (default 64) split between them, each with a merchant of its
# own, placed one of two ways:
#   local:     the merchant's shard is held by the node its load talks to
#              (nothing forwarded: clients that know the owner);
#   forwarded: it is held by the next node (every request forwarded once:
#              the worst a load balancer unaware of owners can do; a random
#              spread forwards (N-1)/N).
# A node creates a merchant in a shard it holds; one probe request and the
# node's kobo_forwarded_requests_total confirm the owner. Scenarios `create` and `flow` (create then
# simulate_transfer), RUNS runs of SECONDS_PER_RUN each; the ops/s of a run
# is the sum over the drivers; medians. The forwarded share is the nodes'
# forwarded requests (kobo_forwarded_requests_total) over the requests the
# drivers sent (one per create, two per flow).
#
#   scripts/cluster_bench.sh [SECONDS_PER_RUN] [RUNS] [CONNECTIONS]
#
# BIN_DIR (environment) names a directory holding a release kobo instead of
# building.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_RUN=${1:-5}
RUNS=${2:-3}
CONNS=${3:-64}
if [ -z "${BIN_DIR:-}" ]; then
  cargo build --release --bin kobo >&2
  BIN_DIR=${CARGO_TARGET_DIR:-target}/release
fi
KOBO=$BIN_DIR/kobo
source scripts/throwaway_pg.sh
pg_find_bin
WORK=$(mktemp -d)
chmod 755 "$WORK"
PIDS=()
stop_nodes() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
cleanup() {
  stop_nodes
  pg_stop
  rm -rf "$WORK"
}
trap cleanup EXIT
pg_start 300
LOADFLAGS="--json - --quiet --audit false --max-error-rate 1"
TOKEN=bench-$(od -An -N24 -tx1 /dev/urandom | tr -d " \n")
KEYFILES="card-fingerprint-key checkout-credential-key sandbox-form-key"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
admin() { curl -sf "$1$2" -H "Authorization: Bearer $TOKEN" "${@:3}"; }

# Starts one kobo (`cluster` or `single`) with data dir $WORK/$2 on database
# $3; sets BASE to its URL.
start_node() {
  local kind=$1 name=$2 db=$3
  local args=(serve --listen 127.0.0.1:0 --data "$WORK/$name" --admin-token "$TOKEN"
    --ip-rate-limit 0 --store "$(pg_url "$db")")
  [ "$kind" = cluster ] && args+=(--cluster --node-id "$name")
  RUST_LOG=warn "$KOBO" "${args[@]}" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=($!)
  for _ in $(seq 300); do grep -q "kobo listening on" "$WORK/$name.out" 2>/dev/null && break; sleep 0.1; done
  BASE=$(grep -o 'http://[0-9.:]*' "$WORK/$name.out" | head -1)
  [ -n "$BASE" ] || { echo "$name did not start:" >&2; cat "$WORK/$name.err" >&2; exit 1; }
}

# Sum of a metric's samples on a node (lines starting with the name).
metric() {
  curl -sf "$1/metrics" | awk -v m="$2" -v f="${3:-}" \
    'index($0, m) == 1 && (f == "" || index($0, f)) {s += $NF} END {printf "%d\n", s}'
}

new_merchant() {
  admin "$1" /admin/v1/merchants -X POST \
    -d '{"name":"Bench Ltd","settings":{"rate_limits":{"test_per_second":100000,"live_per_second":100000}}}' |
    json '["test_secret_key"]'
}

# Whether node $1 serves key $2 itself (a probe it does not forward).
owns() {
  local before after
  before=$(metric "$1" kobo_forwarded_requests_total)
  curl -sf -o /dev/null "$1/v1/payment_intents?limit=1" -H "Authorization: Bearer $2"
  after=$(metric "$1" kobo_forwarded_requests_total)
  [ "$before" = "$after" ]
}

# Runs one scenario RUNS times with one driver per base URL (keys in
# KEYS[]); prints "ops_per_sec p50 p99 errors forwarded_share".
drive() {
  local s=$1; shift
  local bases=("$@") n=${#bases[@]} r i
  local sums=() p50s=() p99s=() errs=() shares=()
  for r in $(seq "$RUNS"); do
    local fwd0=0 fwd1=0 b
    for b in "${bases[@]}"; do fwd0=$((fwd0 + $(metric "$b" kobo_forwarded_requests_total))); done
    local jobs=()
    for i in $(seq 0 $((n - 1))); do
      local c=$((CONNS / n + (i < CONNS % n ? 1 : 0)))
      "$KOBO" load $LOADFLAGS --url "${bases[$i]}" --key "${KEYS[$i]}" --mix "$s" \
        --connections "$c" --duration "$SECONDS_PER_RUN" >"$WORK/load-$i.json" &
      jobs+=($!)
    done
    for j in "${jobs[@]}"; do wait "$j"; done
    for b in "${bases[@]}"; do fwd1=$((fwd1 + $(metric "$b" kobo_forwarded_requests_total))); done
    local line
    line=$(cat "$WORK"/load-*.json | python3 -c '
import json, sys
rs = [json.loads(l) for l in sys.stdin if l.strip()]
print(sum(r["ops_per_sec"] for r in rs), max(r["p50_ms"] for r in rs),
      max(r["p99_ms"] for r in rs), sum(r["errors"] for r in rs),
      sum(r["ops"] + r["errors"] for r in rs))')
    rm -f "$WORK"/load-*.json
    read -r o p5 p9 e ops <<<"$line"
    sums+=("$o"); p50s+=("$p5"); p99s+=("$p9"); errs+=("$e")
    local k=1
    [ "$s" = flow ] && k=2
    local f=$((fwd1 - fwd0)) q=$((ops * k))
    shares+=("$(python3 -c "print(round($f / $q, 3) if $q else 0)")")
  done
  echo "$(printf '%s\n' "${sums[@]}" | median) $(printf '%s\n' "${p50s[@]}" | median)" \
    "$(printf '%s\n' "${p99s[@]}" | median) $(printf '%s\n' "${errs[@]}" | median)" \
    "$(printf '%s\n' "${shares[@]}" | median)"
}

# The writers' batches per commit, over every node of a setup.
writer_counts() {
  local what=$1 b c=0 n=0; shift
  for b in "$@"; do
    c=$((c + $(metric "$b" kobo_store_commits_total)))
    n=$((n + $(metric "$b" kobo_store_batches_total)))
  done
  echo "<!-- $what: $n batches in $c commits -->"
}

row() {
  local setup=$1 placement=$2 s=$3; shift 3
  read -r o p5 p9 e f <<<"$(drive "$s" "$@")"
  printf '| %s | %s | %s | %.0f | %s | %s | %s | %s |\n' "$setup" "$placement" "$s" "$o" "$p5" "$p9" "$e" "$f"
}

echo "| setup | placement | scenario | ops/s (sum, median of $RUNS) | p50 ms (worst driver) | p99 ms (worst driver) | errors | forwarded share |"
echo "|---|---|---|---|---|---|---|---|"

# The baseline: one single-process kobo on PostgreSQL.
as_pg "$PGBIN/createdb" -h "$WORK/pg" -U kobo kobo_single
start_node single single kobo_single
KEYS=("$(new_merchant "$BASE")")
for s in create flow; do row "single process" "-" "$s" "$BASE"; done
writer_counts "single process" "$BASE"
stop_nodes

for N in 1 2 3; do
  db=kobo_n$N
  as_pg "$PGBIN/createdb" -h "$WORK/pg" -U kobo "$db"
  BASES=()
  for i in $(seq 1 "$N"); do
    if [ "$i" -gt 1 ]; then
      mkdir -p "$WORK/n$i"
      for f in $KEYFILES; do cp -p "$WORK/n1/$f" "$WORK/n$i/$f"; done
    fi
    start_node cluster "n$i" "$db"
    BASES+=("$BASE")
  done
  # Every shard held, by every node's own count, each holding some.
  for _ in $(seq 300); do
    total=0 each=1
    for b in "${BASES[@]}"; do
      o=$(admin "$b" /admin/v1/cluster | json '["shards_owned"]' 2>/dev/null || echo 0)
      total=$((total + o)); [ "$o" -gt 0 ] || each=0
    done
    live=$(admin "${BASES[0]}" /admin/v1/cluster | json '["nodes"].__len__()' 2>/dev/null || echo 0)
    [ "$total" = 256 ] && [ "$each" = 1 ] && [ "$live" = "$N" ] && break
    sleep 0.2
  done
  [ "$total" = 256 ] || { echo "N=$N: shards held $total of 256" >&2; exit 1; }
  # A merchant held by each node: a node creates merchants in its own
  # shards (actors/src/admin.rs); the probe checks it.
  declare -A OWNED=()
  for i in $(seq 0 $((N - 1))); do
    OWNED[$i]=$(new_merchant "${BASES[$i]}")
    owns "${BASES[$i]}" "${OWNED[$i]}" || { echo "n$((i + 1)) does not hold its merchant" >&2; exit 1; }
  done
  KEYS=()
  for i in $(seq 0 $((N - 1))); do KEYS+=("${OWNED[$i]}"); done
  for s in create flow; do row "$N node$([ "$N" -gt 1 ] && echo s)" local "$s" "${BASES[@]}"; done
  if [ "$N" -gt 1 ]; then
    KEYS=()
    for i in $(seq 0 $((N - 1))); do KEYS+=("${OWNED[$(((i + 1) % N))]}"); done
    for s in create flow; do row "$N nodes" forwarded "$s" "${BASES[@]}"; done
  fi
  unset OWNED
  writer_counts "$N node(s)" "${BASES[@]}"
  stop_nodes
done
