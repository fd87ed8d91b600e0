#!/usr/bin/env bash
# Bytes stored per payment intent (docs/performance.md): a fresh release
# kobo, INTENTS creates at 64 connections, then the store file's size
# divided by INTENTS (the file as redb left it: pages, free pages and all).
# Then FLOWS flows (create + sandbox transfer) on the same store. After each
# phase the server is stopped and `kobo check --sizes` lists every table's
# rows and bytes; the script prints what one create and one flow added per
# table (rows, key and value bytes, JSON or compact values).
#
#   scripts/store_bytes.sh [INTENTS] [BIN_DIR] [FLOWS]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_server.sh
INTENTS=${1:-50000}
BIN=${2:-${CARGO_TARGET_DIR:-target}/release}
FLOWS=${3:-10000}
DATA=$(mktemp -d)
bench_token bytes
PID=
start() { bench_server_start "$BIN" "$DATA/store" "$DATA"; }
stop() { kill "$PID" && wait "$PID" 2>/dev/null || true; PID=; }
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; wait 2>/dev/null; rm -rf "$DATA"' EXIT
start
KEY=$(bench_merchant "Bytes Ltd")
stop
"$BIN/kobo" check --data "$DATA/store" --sizes >"$DATA/sizes0"
before=$(stat -c %s "$DATA/store/kobo.redb")
start
"$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix create --connections 64 \
  --duration 100000 --max-ops "$INTENTS" >"$DATA/load.json"
stop
after=$(stat -c %s "$DATA/store/kobo.redb")
"$BIN/kobo" check --data "$DATA/store" --sizes >"$DATA/sizes1"
start
"$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix flow --connections 64 \
  --duration 100000 --max-ops "$FLOWS" >"$DATA/flow.json"
stop
"$BIN/kobo" check --data "$DATA/store" --sizes >"$DATA/sizes2"
echo "creates: $(python3 -c "import json; r=json.load(open('$DATA/load.json')); print(r['ops'], 'ops,', r['ops_per_sec'], 'ops/s,', r['errors'], 'errors')")"
echo "flows:   $(python3 -c "import json; r=json.load(open('$DATA/flow.json')); print(r['ops'], 'ops,', r['ops_per_sec'], 'ops/s,', r['errors'], 'errors')")"
python3 - "$DATA" "$INTENTS" "$FLOWS" <<'PY'
import sys
data, intents, flows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def read(n):
    rows = {}
    for line in open(f"{data}/sizes{n}").read().splitlines()[1:]:
        if line.startswith("#"):
            continue
        t, *v = line.split()
        rows[t] = list(map(int, v))
    return rows
s0, s1, s2 = read(0), read(1), read(2)
def show(title, a, b, n):
    print(f"\n{title} (per operation, over {n}):")
    print(f"| table | rows | key B | value B | key+value B | json/compact values |")
    print("|---|---|---|---|---|---|")
    total = 0
    for t in sorted(set(a) | set(b), key=lambda t: -(sum(b.get(t, [0]*5)[1:3]) - sum(a.get(t, [0]*5)[1:3]))):
        x, y = a.get(t, [0] * 5), b.get(t, [0] * 5)
        d = [j - i for i, j in zip(x, y)]
        if not any(d[:3]):
            continue
        kv = d[1] + d[2]
        total += kv
        print(f"| {t} | {d[0]/n:.2f} | {d[1]/n:.0f} | {d[2]/n:.0f} | {kv/n:.0f} | {d[3]}/{d[4]} |")
    print(f"| all | | | | {total/n:.0f} | |")
show("one create", s0, s1, intents)
show("one flow (create + transfer)", s1, s2, flows)
PY
echo
echo "pages after the creates: $(grep '^#' "$DATA/sizes1")"
echo "pages after the flows:   $(grep '^#' "$DATA/sizes2")"
echo "store file: $before bytes empty, $after bytes after $INTENTS creates"
python3 -c "print(f'bytes per payment intent: {($after - $before) / $INTENTS:.0f}')"
