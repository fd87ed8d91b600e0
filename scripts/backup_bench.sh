#!/usr/bin/env bash
# A backup's effect on writes (docs/performance.md, "Backups"): a release
# kobo fills a store with INTENTS payment intents (64 connections), times
# one backup alone, then alternates ROUNDS of: SECONDS of durable creates at
# 64 connections with no backup ("quiet"), and SECONDS of the same while
# POST /admin/v1/backups runs back to back ("backup"; each file is deleted
# once written, so the store is being copied the whole time). Prints each
# run and the medians; `kobo check` runs on the last backup file.
#
#   scripts/backup_bench.sh [INTENTS] [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_server.sh
INTENTS=${1:-1000000}
SECONDS_PER_RUN=${2:-15}
ROUNDS=${3:-3}
cargo build --release --bin kobo >&2
BIN=${CARGO_TARGET_DIR:-target}/release
DATA=$(mktemp -d)
bench_token bench
bench_server_start "$BIN" "$DATA/data" "$DATA" --backup-dir "$DATA/backups"
LOOP=
trap 'kill $PID $LOOP 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DATA"' EXIT
KEY=$(bench_merchant "Bench Ltd")

backup() {
  curl -s -X POST "$BASE/admin/v1/backups" -H "Authorization: Bearer $TOKEN"
}
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

started=$(date +%s.%N)
"$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix create --connections 64 \
  --duration 100000 --max-ops "$INTENTS" >"$DATA/fill.json"
echo "filled $INTENTS intents in $(python3 -c "print(round($(date +%s.%N) - $started))") s: $(field ops_per_sec <"$DATA/fill.json") creates/s; store $(du -sh "$DATA/data" | cut -f1)"

t0=$(date +%s.%N)
backup >"$DATA/alone.json"
t1=$(date +%s.%N)
echo "one backup alone: $(python3 -c "print(round($t1 - $t0, 1))") s, $(field bytes <"$DATA/alone.json") bytes, $(python3 -c "import json; m=json.load(open('$DATA/alone.json'))['manifest']; print(m['records'], 'records,', m['tables']['payment_intents'], 'intents')")"
rm -f "$DATA"/backups/*.kobo-backup

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
quiet=()
busy=()
for r in $(seq "$ROUNDS"); do
  quiet+=("$("$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix create --connections 64 --duration "$SECONDS_PER_RUN")")
  echo "round $r quiet:  ${quiet[-1]}"
  rm -f "$DATA/stop"
  (
    n=0
    while [ ! -f "$DATA/stop" ]; do
      s0=$(date +%s.%N)
      backup >"$DATA/last.json"
      n=$((n + 1))
      echo "$(python3 -c "print(round($(date +%s.%N) - $s0, 1))")" >>"$DATA/durations"
      if [ ! -f "$DATA/stop" ]; then rm -f "$DATA"/backups/*.kobo-backup; fi
    done
  ) &
  LOOP=$!
  sleep 0.5
  busy+=("$("$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix create --connections 64 --duration "$SECONDS_PER_RUN")")
  touch "$DATA/stop"
  wait "$LOOP"
  LOOP=
  echo "round $r backup: ${busy[-1]} (backups took $(tr '\n' ' ' <"$DATA/durations")s)"
  rm -f "$DATA/durations"
  if [ "$r" != "$ROUNDS" ]; then rm -f "$DATA"/backups/*.kobo-backup; fi
done

col() { printf '%s\n' "$@" | python3 -c "import json,sys; [print(json.loads(l)['$KEYNAME']) for l in sys.stdin]" | median; }
echo
echo "| creates @ 64 connections | ops/s (median of $ROUNDS) | p50 ms | p99 ms | p99.9 ms | max ms |"
echo "|---|---|---|---|---|---|"
for which in quiet busy; do
  if [ "$which" = quiet ]; then set -- "${quiet[@]}"; label="no backup"; else set -- "${busy[@]}"; label="backups back to back"; fi
  row="| $label"
  for KEYNAME in ops_per_sec p50_ms p99_ms p999_ms max_ms; do row="$row | $(col "$@")"; done
  echo "$row |"
done
echo
echo "store: $(du -sh "$DATA/data" | cut -f1); last backup: $(field file <"$DATA/last.json")"
c0=$(date +%s.%N)
"$BIN/kobo" check --from "$DATA"/backups/*.kobo-backup --scratch "$DATA" | tail -1
echo "kobo check --from the last backup (restore into scratch, then check): $(python3 -c "print(round($(date +%s.%N) - $c0))") s"
