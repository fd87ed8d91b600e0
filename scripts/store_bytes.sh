#!/usr/bin/env bash
# Bytes stored per payment intent (docs/performance.md): a fresh release
# kobo, INTENTS creates at 64 connections, then the store file's size
# divided by INTENTS (the file as redb left it: pages, free pages and all).
# Also prints one create's response and its size.
#
#   scripts/store_bytes.sh [INTENTS] [BIN_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
# The load generator (`kobo load`, src/cli/load/): one JSON line per run, no
# progress line, no money audit (a benchmark run), never failing on errors
# (they are counted in the line).
LOADFLAGS="--json - --quiet --audit false --max-error-rate 1"
INTENTS=${1:-50000}
BIN=${2:-${CARGO_TARGET_DIR:-target}/release}
DATA=$(mktemp -d)
TOKEN=bytes-$(od -An -N24 -tx1 /dev/urandom | tr -d " \n")
RUST_LOG=warn "$BIN/kobo" serve --listen 127.0.0.1:0 --data "$DATA" --admin-token "$TOKEN" \
  --ip-rate-limit 0 >"$DATA/stdout" 2>"$DATA/stderr" &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do grep -q "kobo listening on" "$DATA/stdout" 2>/dev/null && break; sleep 0.1; done
BASE=$(grep -o 'http://[0-9.:]*' "$DATA/stdout" | head -1)
KEY=$(curl -s -X POST "$BASE/admin/v1/merchants" -H "Authorization: Bearer $TOKEN" \
  -d '{"name":"Bytes Ltd","settings":{"rate_limits":{"test_per_second":100000,"live_per_second":100000}}}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["test_secret_key"])')
before=$(stat -c %s "$DATA/kobo.redb")
"$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix create --connections 64 \
  --duration 100000 --max-ops "$INTENTS" >"$DATA/load.json"
after=$(stat -c %s "$DATA/kobo.redb")
echo "load: $(cat "$DATA/load.json")"
echo "store file: $before bytes empty, $after bytes after $INTENTS creates"
python3 -c "print(f'bytes per payment intent: {($after - $before) / $INTENTS:.0f}')"
