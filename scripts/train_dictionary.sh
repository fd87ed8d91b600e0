#!/usr/bin/env bash
# Trains a zstd dictionary for the JSON kept inside stored values
# (actors/src/stored_json): starts a release kobo on a fresh store, has
# scripts/dictionary/samples.py make a sandbox merchant's usual answers and
# events, and trains on four of every five samples; prints how the fifth
# packs against dictionary 1 and the new one. Needs python3 and the zstd
# command line (`apt-get install zstd`).
#
#   scripts/train_dictionary.sh OUT [BIN_DIR] [MAX_BYTES]
#
# A dictionary in use never changes (stored texts name it by number): a new
# one becomes dictionary N+1 in stored_json. Dictionary 2 was made by this
# script with MAX_BYTES 8192 (docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_server.sh
OUT=${1:?output file}
BIN=${2:-target/release}
MAX=${3:-8192}
WORK=$(mktemp -d)
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$WORK"' EXIT
bench_token dict
bench_server_start "$BIN" "$WORK" "$WORK"
KEY=$(bench_merchant "Dictionary Samples")
python3 scripts/dictionary/samples.py "$BASE" "$KEY" "$WORK/all" >&2
mkdir -p "$WORK/train" "$WORK/held"
i=0
for f in "$WORK"/all/*; do
  if [ $((i % 5)) -eq 0 ]; then cp "$f" "$WORK/held/"; else cp "$f" "$WORK/train/"; fi
  i=$((i + 1))
done
zstd -q -f --train "$WORK"/train/* --maxdict="$MAX" -o "$OUT"
packed() {
  local total=0 n=0
  for f in "$WORK"/held/*; do
    total=$((total + $(zstd -q -1 --no-check --no-dictID -D "$1" -c "$f" | wc -c)))
    n=$((n + 1))
  done
  echo "$((total / n))"
}
echo "held-out samples: $(ls "$WORK/held" | wc -l); zstd -1 bytes per sample, dictionary 1 (as raw content): $(packed actors/src/stored_json/dictionary-1.json), $OUT: $(packed "$OUT")"
