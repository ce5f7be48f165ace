#!/usr/bin/env bash
# The project's main job: installs the toolchains (no-op when present), then, for the kernel set on
# the embedded default workload:
#   1. `wavefuse report --tp 4`: validate every kernel and evaluate it with the f64 reference;
#   2. `wavefuse ab`: generate for gfx906 and sm_90, compile with hipcc and NVRTC (resource table
#      of generated and hand-written versions side by side), check correctness (on a GPU against
#      the f64 reference, then time both versions; without one, in the CPU simulator, and say that
#      no timing was possible).
# Arguments are passed on to `wavefuse ab` (e.g. `--shapes qwen27b-tp4,qwen27b-tp1`, kernel names).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh >&2
# shellcheck source=/dev/null
source .venv-cuda/wavefuse-env.sh
cargo build --release -q -p wavefuse-cli --bin wavefuse
target/release/wavefuse report --tp 4
echo
exec target/release/wavefuse ab "$@"
