#!/usr/bin/env bash
# The LLVM back end's differential run (issue 8), prepared here, run on an NVIDIA GPU machine that
# has neither cargo nor LLVM:
#   here:  bash scripts/llvm-diff.sh
#          -> carry/wavefuse (release, default features: no LLVM needed to run it), carry/cache
#             (prebuilt NVRTC cubins, as scripts/build-gpu-binary.sh), carry/llvm-ptx/ (the LLVM
#             PTX of every kernel at TP 1 and 4, manifest.json with LLVM's compile times)
#   there: carry/wavefuse llvm-diff --ptx carry/llvm-ptx --json llvm-diff.json --md llvm-diff.md
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

WAVEFUSE_LLVM=1 bash scripts/install-deps.sh
# shellcheck source=/dev/null
source .venv-cuda/wavefuse-env.sh
bash scripts/build-gpu-binary.sh
rm -rf carry/llvm-ptx
cargo run -q --release -p wavefuse-cli --features llvm --bin wavefuse -- llvm ptx --out carry/llvm-ptx
echo "on the GPU machine: carry/wavefuse llvm-diff --ptx carry/llvm-ptx --json llvm-diff.json --md llvm-diff.md"
