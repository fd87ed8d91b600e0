# Sourced by the benchmark scripts: one release kobo on a fresh port, and
# the merchant its load runs as.
#
#   bench_token PREFIX             sets TOKEN (an admin token kobo accepts)
#   bench_server_start BIN DATA OUT [serve flags...]
#                                  starts BIN/kobo on DATA (system clock,
#                                  per-IP limit off), its stdout and stderr
#                                  in OUT; sets PID and BASE once it listens
#   bench_merchant NAME            prints a new merchant's test secret key
#                                  (the highest per-key rate: the defaults
#                                  would refuse most of a load with 429)
#   LOADFLAGS                      the flags of a benchmark's `kobo load`

bench_token() {
  # kobo refuses an admin token shorter than 32 characters.
  TOKEN=$1-$(od -An -N24 -tx1 /dev/urandom | tr -d " \n")
}

bench_server_start() {
  local bin=$1 data=$2 out=$3
  shift 3
  : >"$out/stdout"
  RUST_LOG=warn "$bin/kobo" serve --listen 127.0.0.1:0 --data "$data" --admin-token "$TOKEN" \
    --ip-rate-limit 0 "$@" >"$out/stdout" 2>"$out/stderr" &
  PID=$!
  for _ in $(seq 600); do grep -q "kobo listening on" "$out/stdout" 2>/dev/null && break; sleep 0.1; done
  BASE=$(grep -o 'http://[0-9.:]*' "$out/stdout" | head -1)
}

bench_merchant() {
  curl -s -X POST "$BASE/admin/v1/merchants" -H "Authorization: Bearer $TOKEN" \
    -d "{\"name\":\"$1\",\"settings\":{\"rate_limits\":{\"test_per_second\":100000,\"live_per_second\":100000}}}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["test_secret_key"])'
}

# The load generator (`kobo load`, src/cli/load/): one JSON line per run, no
# progress line, no money audit (a benchmark run), never failing on errors
# (they are counted in the line).
LOADFLAGS="--json - --quiet --audit false --max-error-rate 1"
