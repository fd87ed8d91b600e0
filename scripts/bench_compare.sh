#!/usr/bin/env bash
# Two builds of kobo, measured in the same run (docs/performance.md): each
# round starts a fresh server of build A, then of build B, on an empty data
# directory, and drives one scenario at one connection count with the same
# `kobo load` (B's, or LOADER from the environment); the rounds alternate A and B so the machine's noise falls on
# both alike. Prints each run and the medians with the ratio B/A.
#
#   scripts/bench_compare.sh DIR_A DIR_B [SCENARIO] [CONNECTIONS] [SECONDS] [ROUNDS]
#
# DIR_A and DIR_B hold a release `kobo` (B's must have `kobo load`), e.g.
# two worktrees' target/release. SCENARIO is healthz, create or flow.
#
# Besides throughput and p99 it prints the server's CPU time per operation
# (user + system from /proc/PID/stat over the whole run, start-up and the
# merchant's creation included, divided by the operations). On 2 shared
# cores the server is bound by CPU, so this says where a change's
# throughput came from; it is not steadier than throughput (a run slowed by
# other load makes smaller commit groups and costs more per operation).
set -euo pipefail
# The load generator (`kobo load`, src/cli/load/): one JSON line per run, no
# progress line, no money audit (a benchmark run), never failing on errors
# (they are counted in the line).
LOADFLAGS="--json - --quiet --audit false --max-error-rate 1"
A=$1
B=$2
SCENARIO=${3:-create}
CONNECTIONS=${4:-64}
SECONDS_PER_RUN=${5:-10}
ROUNDS=${6:-5}
LOADER=${LOADER:-$B/kobo}

run_one() {
  local bin=$1 data token pid base key out
  data=$(mktemp -d)
  token=bench-$RANDOM$RANDOM$RANDOM$RANDOM-0123456789abcdefghij
  # Builds from before the per-IP limit do not know the flag.
  local flags=()
  if "$bin" serve --help | grep -q -- --ip-rate-limit; then flags+=(--ip-rate-limit 0); fi
  RUST_LOG=warn "$bin" serve --listen 127.0.0.1:0 --data "$data" --admin-token "$token" \
    "${flags[@]}" >"$data/stdout" 2>"$data/stderr" &
  pid=$!
  for _ in $(seq 100); do grep -q "kobo listening on" "$data/stdout" 2>/dev/null && break; sleep 0.1; done
  base=$(grep -o 'http://[0-9.:]*' "$data/stdout" | head -1)
  # The highest per-key rate where the build has rate limits; older builds
  # refuse the unknown setting, so fall back to no settings.
  key=$(curl -s -X POST "$base/admin/v1/merchants" -H "Authorization: Bearer $token" \
    -d '{"name":"Bench Ltd","settings":{"rate_limits":{"test_per_second":100000,"live_per_second":100000}}}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin).get("test_secret_key",""))')
  if [ -z "$key" ]; then
    key=$(curl -s -X POST "$base/admin/v1/merchants" -H "Authorization: Bearer $token" \
      -d '{"name":"Bench Ltd"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["test_secret_key"])')
  fi
  out=$("$LOADER" load $LOADFLAGS --url "$base" --key "$key" --mix "$SCENARIO" \
    --connections "$CONNECTIONS" --duration "$SECONDS_PER_RUN")
  # The server's CPU time (clock ticks) so far, added to the load's line.
  local ticks
  ticks=$(sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}')
  out=$(printf '%s\n' "$out" | python3 -c "
import json, os, sys
r = json.loads(sys.stdin.read())
r['server_cpu_us_per_op'] = round($ticks / os.sysconf('SC_CLK_TCK') * 1e6 / max(r['ops'], 1), 1)
print(json.dumps(r))")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$data"
  echo "$out"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { python3 -c "import json,sys; [print(json.loads(l)['$1']) for l in sys.stdin]"; }

results_a=()
results_b=()
for r in $(seq "$ROUNDS"); do
  results_a+=("$(run_one "$A/kobo")")
  results_b+=("$(run_one "$B/kobo")")
  echo "round $r: A $(printf '%s\n' "${results_a[-1]}" | field ops_per_sec) ops/s" \
    "($(printf '%s\n' "${results_a[-1]}" | field server_cpu_us_per_op) us CPU/op)," \
    "B $(printf '%s\n' "${results_b[-1]}" | field ops_per_sec) ops/s" \
    "($(printf '%s\n' "${results_b[-1]}" | field server_cpu_us_per_op) us CPU/op)" >&2
done
ma=$(printf '%s\n' "${results_a[@]}" | field ops_per_sec | median)
mb=$(printf '%s\n' "${results_b[@]}" | field ops_per_sec | median)
pa=$(printf '%s\n' "${results_a[@]}" | field p99_ms | median)
pb=$(printf '%s\n' "${results_b[@]}" | field p99_ms | median)
ea=$(printf '%s\n' "${results_a[@]}" | field errors | median)
eb=$(printf '%s\n' "${results_b[@]}" | field errors | median)
ca=$(printf '%s\n' "${results_a[@]}" | field server_cpu_us_per_op | median)
cb=$(printf '%s\n' "${results_b[@]}" | field server_cpu_us_per_op | median)
echo "| build | $SCENARIO ops/s at $CONNECTIONS (median of $ROUNDS) | p99 ms | errors | server CPU us/op |"
echo "|---|---|---|---|---|"
echo "| A ($A) | $ma | $pa | $ea | $ca |"
echo "| B ($B) | $mb | $pb | $eb | $cb |"
python3 -c "print(f'B/A throughput: {$mb/$ma:.3f}; B/A server CPU per op: {$cb/$ca:.3f}')"
