#!/usr/bin/env bash
# The project's main job: installs the toolchains (no-op when present), then prints the report.
# Arguments are passed on to `wavefuse report`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh >&2
# shellcheck source=/dev/null
source .venv-cuda/wavefuse-env.sh
exec cargo run --release -p wavefuse-kernels --bin wavefuse -- report "$@"
