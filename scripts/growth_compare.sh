#!/usr/bin/env bash
# Creates on a large store against creates on a fresh one, in alternating
# rounds of one sitting (docs/performance.md, issue 20: "no decline as the
# store grows"). scripts/growth_bench.sh measures one store's slices one
# after another, so a minute of outside load on this shared machine moves
# its last-slice/first-slice ratio by +-20%; here both stores take their
# turns within the same minutes, as scripts/bench_compare.sh does for two
# builds.
#
#   scripts/growth_compare.sh [SIZE] [SECONDS] [ROUNDS] [CONNECTIONS] [BIN_DIR]
#
# A release kobo (default flags, system clock) is filled with SIZE creates
# (default 1,000,000) and stays up; each round then starts a kobo on an
# empty store, runs SECONDS of creates at CONNECTIONS on it and stops it,
# then runs SECONDS of creates on the large store (which grows by that
# much each round). Prints each run's rate, the server's CPU time and bytes
# written per create (/proc/PID/stat and /proc/PID/io over that run), the
# medians with their ratios large/fresh, and each round's ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_server.sh
SIZE=${1:-1000000}
SECONDS_PER_RUN=${2:-10}
ROUNDS=${3:-5}
if [ "$ROUNDS" -lt 1 ]; then
  echo "ROUNDS must be at least 1" >&2
  exit 2
fi
CONNECTIONS=${4:-64}
BIN=${5:-${CARGO_TARGET_DIR:-target}/release}
if [ ! -x "$BIN/kobo" ]; then
  cargo build --release --bin kobo >&2
fi
WORK=$(mktemp -d)
PID=
LARGE_PID=
# The servers may be gone already (the reason a run failed): cleaning up
# goes on regardless.
trap 'kill $LARGE_PID $PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
bench_token growth
mkdir -p "$WORK/large"
bench_server_start "$BIN" "$WORK/large/store" "$WORK/large"
LARGE_PID=$PID
LARGE_BASE=$BASE
BASE=$LARGE_BASE
LARGE_KEY=$(bench_merchant "Large Ltd")
echo "filling the large store with $SIZE creates" >&2
"$BIN/kobo" load $LOADFLAGS --url "$LARGE_BASE" --key "$LARGE_KEY" --mix create \
  --connections 64 --duration 100000 --max-ops "$SIZE" >"$WORK/fill.json"
PID=

# The CPU time (clock ticks, user + system) and bytes written so far of
# process $1.
usage() {
  echo "$(sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}') $(awk '/^write_bytes/ {print $2}' "/proc/$1/io")"
}
# One run of creates against server $1 at $2 as key $3: the load's JSON line,
# then the server's usage before and after.
run() {
  local before line
  before=$(usage "$1")
  line=$("$BIN/kobo" load $LOADFLAGS --url "$2" --key "$3" --mix create \
    --connections "$CONNECTIONS" --duration "$SECONDS_PER_RUN")
  if [ -z "$line" ]; then
    echo "the load against $2 printed nothing" >&2
    return 1
  fi
  echo "$line $before $(usage "$1")"
}

: >"$WORK/runs"
for r in $(seq "$ROUNDS"); do
  mkdir -p "$WORK/fresh"
  bench_server_start "$BIN" "$WORK/fresh/store" "$WORK/fresh"
  key=$(bench_merchant "Fresh Ltd")
  line=$(run "$PID" "$BASE" "$key")
  echo "fresh $line" >>"$WORK/runs"
  kill "$PID"
  wait "$PID" 2>/dev/null || true
  PID=
  rm -rf "$WORK/fresh"
  line=$(run "$LARGE_PID" "$LARGE_BASE" "$LARGE_KEY")
  echo "large $line" >>"$WORK/runs"
  tail -2 "$WORK/runs" | python3 -c "
import json, sys
out = []
for l in sys.stdin:
    kind, rest = l.split(' ', 1)
    out.append(f\"{kind} {json.loads(rest.rsplit(' ', 4)[0])['ops_per_sec']:.0f}/s\")
print('round $r:', ', '.join(out))" >&2
done
python3 - "$WORK/runs" "$SIZE" "$CONNECTIONS" "$SECONDS_PER_RUN" "$(getconf CLK_TCK)" <<'PY'
import json, statistics, sys
path, size, conns, secs, hz = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
runs = {"fresh": [], "large": []}
for l in open(path):
    kind, rest = l.split(" ", 1)
    j, cpu0, w0, cpu1, w1 = rest.rsplit(" ", 4)
    r = json.loads(j)
    ops = max(r["ops"], 1)
    runs[kind].append({
        "rate": r["ops_per_sec"],
        "p99": r["p99_ms"],
        "errors": r["errors"],
        "cpu": (int(cpu1) - int(cpu0)) / hz * 1e6 / ops,
        "written": (int(w1) - int(w0)) / ops / 1000,
    })
med = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} for k, v in runs.items()}
print(f"| store | creates/s @ {conns} (median of {len(runs['fresh'])} x {secs} s) | p99 ms | errors | server CPU us/create | written KB/create |")
print("|---|---|---|---|---|---|")
names = {"fresh": "fresh (0 intents)", "large": f"large ({size:,} intents and up)"}
for k in ("fresh", "large"):
    m = med[k]
    print(f"| {names[k]} | {m['rate']:,.0f} | {m['p99']:.3f} | {m['errors']:.0f} | {m['cpu']:.0f} | {m['written']:.1f} |")
f, g = med["fresh"], med["large"]
print(f"large/fresh, medians: creates/s {g['rate'] / f['rate']:.3f}; server CPU per create {g['cpu'] / f['cpu']:.3f}; written per create {g['written'] / f['written']:.3f}")
# Each round's large run against the fresh run just before it, so a
# sitting's drift falls on both.
paired = [b["rate"] / a["rate"] for a, b in zip(runs["fresh"], runs["large"])]
print(f"large/fresh, round by round: creates/s {' '.join(f'{x:.3f}' for x in paired)} (median {statistics.median(paired):.3f})")
PY
