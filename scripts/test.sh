#!/usr/bin/env bash
# The project's test command: installs the toolchains (no-op when present), then runs every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# CI also builds and tests the LLVM back end (feature `llvm`): LLVM 16 from Debian.
export WAVEFUSE_LLVM=1
# ... and the Python package (python/): its venv .venv-py (PyTorch, pytest, maturin).
export WAVEFUSE_PY=1
bash scripts/install-deps.sh
# shellcheck source=/dev/null
source .venv-cuda/wavefuse-env.sh
export INSTA_UPDATE=no # a stale or missing snapshot fails instead of being written
export CI="${CI:-}"

# (The facade's `pipeline` feature is on in this build through examples/own_kernels, which uses it:
# `--features wavefuse/pipeline` would also name the DSL core, which the harness calls `wavefuse`.)
# One build of the workspace with the LLVM back end on (its snapshots, sync audit, gfx906 code
# objects through LLVM's AMDGPU back end, PTX through ptxas); every other test runs in it too.
FEATURES=(--features wavefuse-tests/llvm,wavefuse-harness/llvm,wavefuse-cli/llvm)
rc=0
cargo fmt --all --check || rc=$? # unformatted code fails CI
python3 scripts/check-links.py || rc=$? # every relative Markdown link resolves
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace "${FEATURES[@]}" --no-fail-fast || rc=$?
else
    cargo test --workspace "${FEATURES[@]}" --no-fail-fast || rc=$?
fi
cargo test --workspace "${FEATURES[@]}" --doc || rc=$? # nextest does not run doctests
cargo check -q -p wavefuse-cli --bin wavefuse || rc=$? # the default build needs no LLVM
RUSTDOCFLAGS="-D warnings" cargo doc --workspace "${FEATURES[@]}" --no-deps -q || rc=$? # docs build without warnings
# The Python package (DESIGN.md §10): built by maturin into .venv-py (an abi3 extension, the same
# build `pip install ./python` makes), then its tests: the simulator device against a float64
# reference for every kernel of the set and a .wfir kernel, bad arguments, opcheck, torch.compile
# without graph breaks; the GPU tests say "skipped: no GPU" here.
t0=$SECONDS
if VIRTUAL_ENV="$PWD/.venv-py" .venv-py/bin/maturin develop -q -m python/Cargo.toml; then
    .venv-py/bin/python -m pytest -q -rs -p no:cacheprovider python/tests || rc=$?
    # The decoder example (issue 37) at its tiny config on the CPU: checkpoints, config errors,
    # TP 1/2/4, and paths (a), (b), (c) on the package's simulator device agreeing on tokens.
    PYTHONPATH="$PWD/examples/decoder" .venv-py/bin/python -m pytest -q -rs -p no:cacheprovider \
        examples/decoder/tests || rc=$?
else
    rc=1
fi
echo "[test] Python package and decoder example: built and tested in $((SECONDS - t0))s"
exit "$rc"
