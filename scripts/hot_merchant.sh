#!/usr/bin/env bash
# One hot merchant (docs/performance.md, issue 20: ">= 20,000 ledger
# postings/s"): every `kobo load` operation is the one merchant's, so its
# one ledger actor (per merchant and mode) posts every line. For each MIX:
# a fresh release kobo (default flags, system clock), `kobo load --mix MIX`
# at CONNECTIONS for SECONDS, the server stopped, then `kobo check --sizes`
# counts the ledger lines (balance transactions) in the store: postings/s is
# the lines over the run's time, and lines per operation is what one flow
# posts.
#
#   scripts/hot_merchant.sh [SECONDS] [CONNECTIONS] [MIX...]
#
# MIX defaults to "transfer refund" (transfer: create + sandbox transfer,
# captured through the ledger; refund: the same and a partial refund).
# BIN_DIR (environment) holds the release kobo (default target/release).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_server.sh
LOADFLAGS="--json - --quiet --audit false --max-error-rate 1"
SECONDS_PER_RUN=${1:-10}
CONNECTIONS=${2:-64}
shift $(($# < 2 ? $# : 2))
MIXES=${*:-transfer refund}
BIN=${BIN_DIR:-${CARGO_TARGET_DIR:-target}/release}
DATA=
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; wait 2>/dev/null; [ -n "$DATA" ] && rm -rf "$DATA"' EXIT
echo "| mix @ $CONNECTIONS | operations/s | p99 ms | errors | ledger lines | lines per operation | **postings/s** |"
echo "|---|---|---|---|---|---|---|"
for mix in $MIXES; do
  DATA=$(mktemp -d)
  bench_token hot
  bench_server_start "$BIN" "$DATA/store" "$DATA"
  KEY=$(bench_merchant "Hot Ltd")
  "$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix "$mix" \
    --connections "$CONNECTIONS" --duration "$SECONDS_PER_RUN" >"$DATA/load.json"
  kill "$PID" && wait "$PID" 2>/dev/null || true
  PID=
  "$BIN/kobo" check --data "$DATA/store" --sizes >"$DATA/sizes"
  python3 - "$DATA" "$mix" <<'PY'
import json, sys
data, mix = sys.argv[1], sys.argv[2]
r = json.load(open(f"{data}/load.json"))
lines = 0
for l in open(f"{data}/sizes").read().splitlines()[1:]:
    if l.startswith("ledger_lines "):
        lines = int(l.split()[1])
secs = r["ops"] / r["ops_per_sec"]
print(f"| {mix} | {r['ops_per_sec']:,.0f} | {r['p99_ms']} | {r['errors']} | {lines:,} | {lines / max(r['ops'], 1):.2f} | **{lines / secs:,.0f}** |")
PY
  rm -rf "$DATA"
  DATA=
done
