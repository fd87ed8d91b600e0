#!/usr/bin/env bash
# What filling a store costs, build against build (docs/performance.md,
# issue 20: "no decline as the store grows"): each round, for each build in
# turn, starts a release kobo on an empty store, fills it with SIZE creates
# at 64 connections and stops it. Prints per fill the rate, the server's
# CPU time and bytes written per create (/proc/PID/stat and /proc/PID/io
# over the fill) and the store's size on disk per create. A fill's figures
# are the whole growth's average, so a cost that grows with the store shows
# in them without a first-slice/last-slice ratio.
#
#   scripts/fill_cost.sh SIZE ROUNDS BIN_DIR...
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_server.sh
SIZE=${1:?SIZE: creates a fill}
ROUNDS=${2:?ROUNDS}
shift 2
if [ $# -lt 1 ]; then
  echo "name at least one BIN_DIR holding a release kobo" >&2
  exit 2
fi
WORK=
PID=
trap 'kill $PID 2>/dev/null || true; wait 2>/dev/null || true; [ -z "$WORK" ] || rm -rf "$WORK"' EXIT
# The CPU time (clock ticks, user + system) and bytes written so far of
# process $1.
usage() {
  echo "$(sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}') $(awk '/^write_bytes/ {print $2}' "/proc/$1/io")"
}
bench_token fill
for r in $(seq "$ROUNDS"); do
  for BIN in "$@"; do
    WORK=$(mktemp -d)
    bench_server_start "$BIN" "$WORK/store" "$WORK"
    KEY=$(bench_merchant "Fill Ltd")
    read -r cpu0 written0 < <(usage "$PID")
    start=$(date +%s.%N)
    "$BIN/kobo" load $LOADFLAGS --url "$BASE" --key "$KEY" --mix create --connections 64 \
      --duration 100000 --max-ops "$SIZE" >"$WORK/fill.json"
    end=$(date +%s.%N)
    read -r cpu1 written1 < <(usage "$PID")
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=
    stored=$(du -sb "$WORK/store" | cut -f1)
    awk -v r="$r" -v b="$BIN" -v n="$SIZE" -v t0="$start" -v t1="$end" -v c0="$cpu0" \
      -v c1="$cpu1" -v w0="$written0" -v w1="$written1" -v s="$stored" -v hz="$(getconf CLK_TCK)" \
      'BEGIN { printf "round %s %s: %.0f creates/s, %.1f us CPU, %.2f KB written, %.0f B stored a create\n",
        r, b, n / (t1 - t0), (c1 - c0) / hz / n * 1e6, (w1 - w0) / n / 1024, s / n }'
    rm -rf "$WORK"
    WORK=
  done
done
