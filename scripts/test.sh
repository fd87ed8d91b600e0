#!/usr/bin/env bash
# The test command (README): on a fresh machine it installs what the tests
# need (Debian's Chromium and chromedriver for the checkout page's browser
# test; rustfmt and clippy; schemathesis from PyPI into .venv-fuzz/), then
# runs formatting, lints, every unit, property and black-box test of the
# workspace, and the API fuzz run (scripts/fuzz.sh, about two minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
rustup component add rustfmt clippy >/dev/null 2>&1 || true
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  # tests/api/browser.rs fails (never skips) without them.
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends chromium chromium-driver
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
# The binary `cargo test` built for the black-box tests.
scripts/fuzz.sh target/debug/kobo
