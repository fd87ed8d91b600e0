#!/usr/bin/env bash
# Fuzzes the public API: schemathesis 4 (installed from PyPI into
# .venv-fuzz/) generates requests for every operation in GET
# /v1/openapi.json, valid and invalid, and fails on any 5xx
# (`not_a_server_error`) or any response the document does not describe
# (`response_schema_conformance`).
#
#   scripts/fuzz.sh [path/to/kobo]     (default target/debug/kobo)
#
# It builds nothing: scripts/test.sh calls it after `cargo test`. The server
# runs on a free loopback port with a fresh data directory and the manual
# clock; a merchant made through the operator API gives the test key every
# request carries. Every POST gets a fresh Idempotency-Key
# (scripts/fuzz/hooks.py). The run is bounded by FUZZ_MAX_TIME seconds
# (default 110) and FUZZ_MAX_EXAMPLES cases per operation (default 100).
# The operator API (/admin/v1) is not in the document and is not fuzzed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

BIN=${1:-target/debug/kobo}
MAX_TIME=${FUZZ_MAX_TIME:-110}
MAX_EXAMPLES=${FUZZ_MAX_EXAMPLES:-100}
VENV=$ROOT/.venv-fuzz
SCHEMATHESIS='schemathesis>=4,<5'

# Merchant settings for the fuzzed merchant (a JSON object): its rate
# limits are lifted so the fuzzer's cases are not spent on 429s (the 429
# answer itself is covered by tests/api/rate_limits.rs).
FUZZ_MERCHANT_SETTINGS=${FUZZ_MERCHANT_SETTINGS:-'{"rate_limits": {"test_per_second": 100000, "live_per_second": 100000}}'}
# Extra `kobo serve` flags: one client address sends everything here.
FUZZ_SERVE_FLAGS=${FUZZ_SERVE_FLAGS:---ip-rate-limit 0}

[ -x "$BIN" ] || { echo "fuzz: no kobo binary at $BIN (build it first)" >&2; exit 2; }

# --- schemathesis in a local virtual environment ---------------------------
if ! "$VENV/bin/python" -c 'import schemathesis, sys; sys.exit(not schemathesis.__version__.startswith("4."))' 2>/dev/null; then
  PY=python3
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    # Debian's python3 keeps venv's pip bootstrap in python3-venv (and a
    # machine without python3 gets both).
    export DEBIAN_FRONTEND=noninteractive
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update
    $SUDO apt-get install -y --no-install-recommends python3 python3-venv
    PY=/usr/bin/python3
  fi
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "$SCHEMATHESIS"
fi

# --- the server -------------------------------------------------------------
WORK=$(mktemp -d)
SERVER=""
cleanup() {
  if [ -n "$SERVER" ] && kill -0 "$SERVER" 2>/dev/null; then
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ADMIN_TOKEN=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
# shellcheck disable=SC2086 # FUZZ_SERVE_FLAGS is a list of flags
"$BIN" serve --listen 127.0.0.1:0 --clock manual --data "$WORK/data" \
  --admin-token "$ADMIN_TOKEN" $FUZZ_SERVE_FLAGS \
  >"$WORK/stdout" 2>"$WORK/server.log" &
SERVER=$!

BASE=""
for _ in $(seq 1 300); do
  line=$(head -n 1 "$WORK/stdout" 2>/dev/null || true)
  case "$line" in
    "kobo listening on http://"*) BASE=${line#kobo listening on }; break ;;
  esac
  kill -0 "$SERVER" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$BASE" ]; then
  echo "fuzz: the server did not start; its log:" >&2
  tail -n 50 "$WORK/server.log" >&2
  exit 1
fi

# The merchant, and a few events for GET /v1/stream to replay (its fuzzed
# Last-Event-ID values resume from early positions), so the documented
# event schema meets real events.
KEY=$(BASE=$BASE ADMIN_TOKEN=$ADMIN_TOKEN SETTINGS=$FUZZ_MERCHANT_SETTINGS "$VENV/bin/python" - <<'EOF'
import json, os, urllib.request, uuid

def call(path, token, body=None, idempotent=True):
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    if idempotent:
        headers["Idempotency-Key"] = str(uuid.uuid4())
    req = urllib.request.Request(
        os.environ["BASE"] + path,
        data=json.dumps(body or {}).encode(),
        headers=headers,
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)

merchant = {"name": "Fuzz"}
if os.environ["SETTINGS"]:
    merchant["settings"] = json.loads(os.environ["SETTINGS"])
key = call("/admin/v1/merchants", os.environ["ADMIN_TOKEN"], merchant, idempotent=False)["test_secret_key"]
paid = call("/v1/payment_intents", key, {"amount": 500000, "currency": "NGN", "reference": "fuzz-paid"})
call(f"/v1/payment_intents/{paid['id']}/bank_transfer", key)
call(f"/v1/test_helpers/payment_intents/{paid['id']}/simulate_transfer", key)
canceled = call("/v1/payment_intents", key, {"amount": 1000, "currency": "NGN", "reference": "fuzz-canceled"})
call(f"/v1/payment_intents/{canceled['id']}/cancel", key)
print(key)
EOF
)

# --- the run ----------------------------------------------------------------
echo "fuzz: schemathesis $("$VENV/bin/schemathesis" --version | awk '{print $NF}') against $BASE (at most ${MAX_TIME}s, ${MAX_EXAMPLES} cases per operation)"
start=$(date +%s)
status=0
SCHEMATHESIS_HOOKS=hooks PYTHONPATH="$ROOT/scripts/fuzz${PYTHONPATH:+:$PYTHONPATH}" \
  "$VENV/bin/schemathesis" --config-file "$ROOT/scripts/fuzz/schemathesis.toml" \
  run "$BASE/v1/openapi.json" \
  --checks not_a_server_error,response_schema_conformance \
  --header "Authorization: Bearer $KEY" \
  --max-examples "$MAX_EXAMPLES" \
  --max-time "$MAX_TIME" \
  --workers 1 \
  --generation-database none \
  --report junit --report-junit-path "$WORK/junit.xml" \
  || status=$?
elapsed=$(( $(date +%s) - start ))

# A crash the fuzzer could not see (a panic in a spawned task) still counts.
if ! kill -0 "$SERVER" 2>/dev/null; then
  echo "fuzz: the server died during the run; its log:" >&2
  tail -n 50 "$WORK/server.log" >&2
  status=1
elif grep -q 'panicked' "$WORK/server.log"; then
  echo "fuzz: the server panicked during the run:" >&2
  grep -A5 'panicked' "$WORK/server.log" | head -n 40 >&2
  status=1
fi

# The summary: the run's test groups (one per operation, and the stateful
# phase) that passed and failed (a failure or an error in any phase).
counts=$("$VENV/bin/python" - "$WORK/junit.xml" <<'EOF' 2>/dev/null || echo "? ?"
import sys, xml.etree.ElementTree as ET
groups = {}
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    bad = case.find("failure") is not None or case.find("error") is not None
    groups[case.get("name")] = groups.get(case.get("name"), False) or bad
print(sum(not bad for bad in groups.values()), sum(groups.values()))
EOF
)
read -r passed failed <<<"$counts"
if [ "$status" -eq 0 ]; then
  echo "fuzz: no 5xx and no schema violation in ${elapsed}s (test groups: operations, and the stateful phase)"
else
  echo "fuzz: FAILED (exit $status) after ${elapsed}s (test groups: operations, and the stateful phase)"
  [ "$failed" != "0" ] || failed=1
fi
echo "fuzz: $passed passed, $failed failed"
exit "$status"
