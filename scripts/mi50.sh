#!/usr/bin/env bash
# For a machine with one or more AMD MI50/MI60 (gfx906) and ROCm: build wavefuse, then run what
# can run there — the generated HIP kernels' resources and the MI50 time model (`check`), the
# kernel set on the GPU against the f64 reference (`run --device gpu --target gfx906`), and the
# GPU suite with back-to-back stress launches (`gpu-suite`, HIP), the A/B table timed on the MI50
# with HIP events and graphs (`ab --runtime hip`: generated vs the hand-written HIP references),
# a short timed `tune --arch gfx906`, and with 2–4 GPUs the per-device suite and `mgpu-bench` —
# and pack everything into one archive to attach to an issue. Nothing here has run on an MI50 in this project yet: the
# results are the first measurements, whatever they say.
#
#   bash scripts/mi50.sh [OUT_DIR]        (default: ./mi50-results; needs hipcc on PATH)
#
# Exit status: 0 when every step exited 0.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${1:-$PWD/mi50-results}
mkdir -p "$OUT"
status=0
step() { # name, then the command
    local name=$1; shift
    echo "== $name: $*" | tee -a "$OUT/steps.txt"
    "$@" > "$OUT/$name.txt" 2>&1
    local rc=$?
    echo "   exit $rc" | tee -a "$OUT/steps.txt"
    [ $rc = 0 ] || status=1
}
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    git rev-parse --short=12 HEAD 2>/dev/null
    (rocminfo 2>/dev/null | grep -E "Marketing Name|gfx" | sort -u) || echo "rocminfo: not found"
    hipcc --version 2>&1 | head -3
    cat /sys/module/amdgpu/version 2>/dev/null || echo "amdgpu version: unknown"
} > "$OUT/machine.txt"
if ! command -v cargo > /dev/null; then
    echo "error: cargo not found; install Rust (https://rustup.rs) first" >&2
    exit 2
fi
step build cargo build --release -p wavefuse-cli --bin wavefuse
W=$PWD/target/release/wavefuse
[ -x "$W" ] || { echo "error: the build failed (see $OUT/build.txt)" >&2; exit 1; }
export WAVEFUSE_COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
step check "$W" check --target gfx906 --tp 4
step check-tp1 "$W" check --target gfx906 --tp 1
for k in gemv_int4 gemv_int4_dual_silu gemv_int4_qkv gemv_int4_allreduce_rmsnorm allreduce_residual_rmsnorm; do
    for tp in 1 4; do
        step run-$k-tp$tp "$W" run "$k" --tp $tp --device gpu --target gfx906
    done
done
step gpu-suite "$W" gpu-suite --quick --runtime hip --out "$OUT/gpu-suite.json"
step ab-no-gpu "$W" ab --no-gpu --shapes qwen27b-tp4,qwen27b-tp1 --md "$OUT/ab-model.md"
step ab "$W" ab --runtime hip --shapes qwen27b-tp4,qwen27b-tp1 --json "$OUT/ab.json" --md "$OUT/ab.md"
step ab-graphs "$W" ab --runtime hip --timing graphs --shapes qwen27b-tp4,qwen27b-tp1 --json "$OUT/ab-graphs.json" --md "$OUT/ab-graphs.md"
step tune "$W" tune gemv_int4 --arch gfx906 --runtime hip --shapes qwen27b-tp1 --quick --no-cache-store --md "$OUT/tune.md"
step mgpu-same "$W" mgpu-bench --runtime hip --same-device --tp 4,2 --json "$OUT/mgpu-same.json"
gpus=$(rocminfo 2>/dev/null | grep -c "Name: *gfx906" || true)
if [ "${gpus:-0}" -ge 2 ]; then
    step gpu-suite-per-device "$W" gpu-suite --runtime hip --placement per-device --out "$OUT/gpu-suite-per-device.json"
    step mgpu "$W" mgpu-bench --runtime hip --json "$OUT/mgpu.json" --md "$OUT/mgpu.md"
else
    echo "== per-device suite and mgpu-bench: skipped, ${gpus:-0} gfx906 GPU(s) found" | tee -a "$OUT/steps.txt"
fi
tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
echo "results: $OUT.tgz (exit $status)"
exit $status
