#!/usr/bin/env bash
# The project's test command: installs the toolchains (no-op when present), then runs every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
# shellcheck source=/dev/null
source .venv-cuda/wavefuse-env.sh
export INSTA_UPDATE=no # a stale or missing snapshot fails instead of being written
export CI="${CI:-}"

rc=0
cargo fmt --all --check || rc=$? # unformatted code fails CI
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast || rc=$?
else
    cargo test --workspace --no-fail-fast || rc=$?
fi
cargo test --workspace --doc || rc=$? # nextest does not run doctests
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q || rc=$? # docs build without warnings
exit "$rc"
