#!/usr/bin/env bash
# CPU profile of a release kobo under load (docs/performance.md): starts the
# server on a fresh store, drives SCENARIO at CONNECTIONS with `kobo load`,
# records `perf record -g` on the server for SECONDS, then writes the top of
# `perf report` (self and children) and a flame graph (scripts/flamegraph.py).
#
#   scripts/profile.sh SCENARIO [CONNECTIONS] [SECONDS] [OUT_PREFIX] [BIN_DIR]
#
# OUT_PREFIX defaults to /tmp/kobo-profile-SCENARIO: writes PREFIX.txt and
# PREFIX.svg. BIN_DIR holds a release `kobo` (default
# target/release, built first). PREFILL (environment) creates that many
# payment intents first (at 64 connections, not recorded), to profile
# against a large store. CALL_GRAPH=dwarf records full stacks from DWARF
# unwinding (at 149 Hz: release kobo has no frame pointers, so `-g` stacks
# stop at the first Rust frame) and adds the callers of the C allocator to
# PREFIX.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_server.sh
SCENARIO=${1:?scenario: healthz, create or flow}
CONNECTIONS=${2:-64}
SECONDS_PER_RUN=${3:-12}
OUT=${4:-/tmp/kobo-profile-$SCENARIO}
BIN=${5:-}
if [ -z "$BIN" ]; then
  cargo build --release --bin kobo >&2
  BIN=${CARGO_TARGET_DIR:-target}/release
fi
DATA=$(mktemp -d)
bench_token prof
bench_server_start "$BIN" "$DATA" "$DATA"
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DATA"' EXIT
KEY=$(bench_merchant "Profile Ltd")
if [ "${PREFILL:-0}" -gt 0 ]; then
  "$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix create --connections 64 \
    --duration 100000 --max-ops "$PREFILL" >"$DATA/prefill.json"
fi
"$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix "$SCENARIO" \
  --connections "$CONNECTIONS" --duration "$((SECONDS_PER_RUN + 3))" >"$DATA/load.json" &
LOAD=$!
sleep 2
if [ "${CALL_GRAPH:-}" = dwarf ]; then
  perf record -F 149 --call-graph dwarf,16384 -p "$PID" -o "$DATA/perf.data" -- sleep "$SECONDS_PER_RUN" 2>/dev/null >&2
else
  perf record -F 499 -g -p "$PID" -o "$DATA/perf.data" -- sleep "$SECONDS_PER_RUN" 2>/dev/null >&2
fi
wait $LOAD
{
  [ -f "$DATA/prefill.json" ] && echo "prefill: $(cat "$DATA/prefill.json")"
  echo "load: $(cat "$DATA/load.json")"
} >"$OUT.txt"
# The samples' stacks, read once (with DWARF stacks this takes minutes):
# for the allocator's callers and the flame graph.
perf script -i "$DATA/perf.data" 2>/dev/null >"$DATA/stacks"
{
  echo "== by thread (share of samples)"
  perf report -i "$DATA/perf.data" --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -15 || true
  echo "== self (top 40)"
  perf report -i "$DATA/perf.data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -40 || true
  echo "== children (top 60)"
  perf report -i "$DATA/perf.data" --children --sort comm,symbol --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -70 || true
  if [ "${CALL_GRAPH:-}" = dwarf ]; then
    echo "== callers of malloc, realloc and free (share of all samples)"
    python3 scripts/alloc_callers.py 40 <"$DATA/stacks"
  fi
} | sed -E 's/[[:space:]]+-[[:space:]]+-[[:space:]]*$//; s/[[:space:]]+$//' | cut -c1-200 >>"$OUT.txt"
python3 scripts/flamegraph.py --title "kobo $SCENARIO @ $CONNECTIONS connections" <"$DATA/stacks" >"$OUT.svg"
echo "wrote $OUT.txt and $OUT.svg" >&2
