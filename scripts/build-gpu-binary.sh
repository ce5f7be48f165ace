#!/usr/bin/env bash
# Builds the one binary a GPU machine needs (no cargo there) into carry/, the git-ignored folder
# that travels to it, and prebuilds the CUDA kernels it will run:
#   carry/wavefuse   the release binary (`wavefuse gpu-suite`, `wavefuse run … --device gpu`)
#   carry/qwen_ffn_block  the FFN-block example (`scripts/ffn-h200.sh`)
#   carry/own-kernels     the user-kernel example (`own-kernels check|launch`: the facade's pipeline)
#   carry/COMMIT     the commit it was built from (`-dirty` with uncommitted changes)
#   carry/cache/     sm_90 cubins of every kernel the suite, scripts/gpu-suite.sh and the example
#                    (generated and hand-written) run, compiled
#                    here with NVRTC: used as is where the GPU machine has the same NVRTC, and as
#                    prebuilt artifacts where it has none (a newer NVRTC there recompiles).
# Then, on the GPU machine, from the repository root: `bash scripts/gpu-suite.sh` (one GPU) or
# `bash scripts/multi-gpu.sh` (2 or more GPUs, issue 9).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo build --release -p wavefuse-cli -p qwen_ffn_block -p own-kernels --bin wavefuse --bin qwen_ffn_block --bin own-kernels
mkdir -p carry
cp target/release/wavefuse carry/wavefuse
cp target/release/qwen_ffn_block carry/qwen_ffn_block
cp target/release/own-kernels carry/own-kernels

commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit="$commit-dirty"
fi
echo "$commit" >carry/COMMIT

# NVRTC here: the project's CUDA wheels (scripts/install-deps.sh), when installed.
if [ -f .venv-cuda/wavefuse-env.sh ]; then
    # shellcheck source=/dev/null
    source .venv-cuda/wavefuse-env.sh
fi
rm -rf carry/cache
if ! WAVEFUSE_CACHE_DIR="$PWD/carry/cache" carry/wavefuse gpu-suite --prebuild 2>carry/prebuild.log; then
    tail -5 carry/prebuild.log >&2
    echo "warning: prebuilding failed (see carry/prebuild.log); the GPU machine compiles with its own NVRTC" >&2
fi
# The multi-GPU benchmark's kernels (scripts/multi-gpu.sh): the default schedules, one rank per GPU.
if ! WAVEFUSE_CACHE_DIR="$PWD/carry/cache" carry/wavefuse mgpu-bench --prebuild 2>>carry/prebuild.log; then
    echo "warning: prebuilding mgpu-bench failed (see carry/prebuild.log)" >&2
fi
if ! WAVEFUSE_CACHE_DIR="$PWD/carry/cache" carry/qwen_ffn_block --prebuild 2>>carry/prebuild.log; then
    echo "warning: prebuilding the FFN-block example failed (see carry/prebuild.log)" >&2
fi
tail -3 carry/prebuild.log
echo "commit $commit; carry/ holds $(du -sh carry | cut -f1) (limit 64 MiB)"
