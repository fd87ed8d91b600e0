#!/usr/bin/env bash
# The test command (README): on a fresh machine it installs what the tests
# need (Debian's Chromium and chromedriver for the browser tests, python3,
# nodejs and php-cli for the signature examples, curl, PostgreSQL for the
# second store engine; rustfmt and clippy; schemathesis from PyPI into
# .venv-fuzz/), then runs formatting, lints, every unit, property and
# black-box test of the workspace (the black-box suite twice: on the
# embedded redb store, then on PostgreSQL; its main flows a third time
# owning every shard, KOBO_TEST_OWN_ALL_SHARDS), and the API fuzz run
# (scripts/fuzz.sh, about two minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
rustup component add rustfmt clippy >/dev/null 2>&1 || true
# Debian packages the tests need, installed when missing: Chromium and
# chromedriver (tests/api/browser.rs and docs.rs drive them), and the
# interpreters that run the signature examples of docs/examples/
# (tests/api/listen.rs). The tests fail (never skip) without them.
missing=()
{ [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; } || missing+=(chromium chromium-driver)
command -v python3 >/dev/null || missing+=(python3)
command -v node >/dev/null || missing+=(nodejs)
command -v php >/dev/null || missing+=(php-cli)
command -v curl >/dev/null || missing+=(curl)
# PostgreSQL's server binaries (initdb, pg_ctl, postgres): the store's
# PostgreSQL tests start a throw-away cluster of their own with them
# (storage/src/pg/cluster.rs); the package's own cluster is not used.
if [ -z "${KOBO_PG_BIN:-}" ] && ! command -v initdb >/dev/null \
  && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
# A failing test's message ends its output (where CI's excerpt of the log
# shows it), not a backtrace after it.
export RUST_BACKTRACE=0
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
# The black-box suite again, every server on a fresh PostgreSQL database
# (--store postgres://...).
KOBO_TEST_STORE=postgres cargo test --test api
# The main money flows once more with the server owning every shard as a
# cluster node would (debug builds only): a batch of a merchant's rows
# that does not name its merchant fails its test (about 90 s).
KOBO_TEST_OWN_ALL_SHARDS=1 cargo test --test api -- payment_intents cards \
  refunds payouts webhooks webhook_attempts subscriptions invoices \
  payment_links customers virtual_account settlement usdt
# The binary `cargo test` built for the black-box tests.
scripts/fuzz.sh target/debug/kobo
