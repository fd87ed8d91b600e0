#!/usr/bin/env bash
# The test command (README): on a fresh machine it installs what the tests
# need (Debian's Chromium and chromedriver for the checkout page's browser
# test; rustfmt and clippy), then runs formatting, lints, and every unit,
# property and black-box test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup component add rustfmt clippy >/dev/null 2>&1 || true
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  # tests/api/browser.rs fails (never skips) without them.
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update
  $SUDO apt-get install -y chromium chromium-driver
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
