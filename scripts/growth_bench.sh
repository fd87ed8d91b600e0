#!/usr/bin/env bash
# Creates as the store grows (docs/performance.md, issue 20: "no decline as
# the store grows from 0 to 1M intents"): a fresh release kobo (default
# flags, system clock), then SLICES consecutive runs of `kobo load --mix
# create` at CONNECTIONS, each stopping after PER_SLICE creates, on the same
# store and server. Prints each slice's rate, latencies and the store file's
# size after it, the server's CPU time and bytes written (/proc/PID/stat and
# /proc/PID/io: less sensitive to other load on a shared machine than the
# rate) per create in each slice, and the store writer thread's CPU time
# per create (the writer sets the pace), then the last slice against the
# first.
#
#   scripts/growth_bench.sh [SLICES] [PER_SLICE] [CONNECTIONS] [BIN_DIR]
#
# IDEMPOTENCY_KEYS=time-ordered makes the load generator send UUIDv7 keys
# instead of random ones (`kobo load --idempotency-keys`).
#
# Defaults: 10 slices of 100,000 creates at 64 connections (1,000,000
# intents), BIN_DIR target/release (built first when it has no kobo).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_server.sh
if [ -n "${IDEMPOTENCY_KEYS:-}" ]; then
  LOADFLAGS="$LOADFLAGS --idempotency-keys $IDEMPOTENCY_KEYS"
fi
SLICES=${1:-10}
PER_SLICE=${2:-100000}
CONNECTIONS=${3:-64}
BIN=${4:-${CARGO_TARGET_DIR:-target}/release}
if [ ! -x "$BIN/kobo" ]; then
  cargo build --release --bin kobo >&2
fi
DATA=$(mktemp -d)
bench_token growth
bench_server_start "$BIN" "$DATA/store" "$DATA"
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DATA"' EXIT
KEY=$(bench_merchant "Growth Ltd")
: >"$DATA/slices"
# The server's CPU time (clock ticks, user + system), bytes written, and
# the store writer thread's CPU time so far (the writer sets the pace).
ticks() { # user + system clock ticks in a /proc stat file
  sed 's/.*) //' "$1" | awk '{print $12 + $13}'
}
usage() {
  local writer
  writer=$(grep -l '^kobo-store-writ$' /proc/$PID/task/*/comm | head -1)
  echo "$(ticks /proc/$PID/stat) $(awk '/^write_bytes/ {print $2}' /proc/$PID/io) $(ticks "${writer%comm}stat")"
}
for s in $(seq "$SLICES"); do
  before=$(usage)
  line=$("$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix create \
    --connections "$CONNECTIONS" --duration 100000 --max-ops "$PER_SLICE")
  echo "$line $before $(usage) $(getconf CLK_TCK) $(stat -c %s "$DATA/store/kobo.redb")" >>"$DATA/slices"
  echo "slice $s: $line" >&2
done
echo "commits and batches:"
curl -s "$BASE/metrics" | grep -E '^kobo_store_(commits_total|batches_total)' || true
python3 - "$DATA/slices" "$PER_SLICE" "$CONNECTIONS" <<'PY'
import json, sys
path, per, conns = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = []
for l in open(path):
    j, cpu0, w0, wr0, cpu1, w1, wr1, hz, size = l.rsplit(" ", 8)
    r = json.loads(j)
    cpu_us = (int(cpu1) - int(cpu0)) / int(hz) * 1e6 / per
    writer_us = (int(wr1) - int(wr0)) / int(hz) * 1e6 / per
    written = (int(w1) - int(w0)) / per
    rows.append((r, cpu_us, writer_us, written, int(size)))
print(f"\n| intents in the store | creates/s @ {conns} | p50 ms | p99 ms | p99.9 ms | max ms | errors | server CPU us/create | writer thread us/create | written KB/create | store file |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for i, (r, cpu, writer, written, size) in enumerate(rows):
    print(f"| {i*per:,} - {(i+1)*per:,} | {r['ops_per_sec']:,.0f} | {r['p50_ms']} | {r['p99_ms']} | {r['p999_ms']} | {r['max_ms']} | {r['errors']} | {cpu:.0f} | {writer:.1f} | {written/1e3:.1f} | {size/1e6:,.0f} MB |")
(a, ca, wra, wa, _), (b, cb, wrb, wb, _) = rows[0], rows[-1]
print(f"\nlast slice / first slice: creates/s {b['ops_per_sec']:,.0f} / {a['ops_per_sec']:,.0f} = {b['ops_per_sec']/a['ops_per_sec']:.3f}; p99 {a['p99_ms']} -> {b['p99_ms']} ms; server CPU per create {ca:.0f} -> {cb:.0f} us ({cb/ca:.3f}); writer thread per create {wra:.1f} -> {wrb:.1f} us ({wrb/wra:.3f}); written per create {wa/1e3:.1f} -> {wb/1e3:.1f} KB")
PY
