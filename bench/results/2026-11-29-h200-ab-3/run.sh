#!/usr/bin/env bash
# The A/B table of every kernel at TP 4 and TP 1 with the current defaults, Nsight Compute
# profiles at TP 1 of the generated kernels in $NCU_KERNELS (default gemv_int4), and the FFN block (scripts/ffn-h200.sh), on the
# H200 from the repository root (carry/ from scripts/build-gpu-binary.sh). Results in $OUT.
#   OUT=... bash bench/results/2026-11-29-h200-ab-3/run.sh   (scripts/ab-h200.sh until issue 35)
set -uo pipefail
OUT=${OUT:-/tmp/ab-out}
mkdir -p "$OUT"
export WAVEFUSE_CACHE_DIR=${WAVEFUSE_CACHE_DIR:-$PWD/carry/cache}
export WAVEFUSE_COMMIT=${WAVEFUSE_COMMIT:-$(cat carry/COMMIT 2>/dev/null || echo unknown)}
nvidia-smi --query-gpu=name,driver_version --format=csv >"$OUT/device.txt"
timeout 300 carry/wavefuse ab --shapes qwen27b-tp4,qwen27b-tp1 --json "$OUT/ab.json" --md "$OUT/ab.md" >"$OUT/ab.txt" 2>&1
echo "ab rc $?" >>"$OUT/ab.txt"
for k in ${NCU_KERNELS:-gemv_int4}; do
    timeout 120 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
        --section SchedulerStats --section LaunchStats -k "regex:^$k" \
        carry/wavefuse run "$k" --device gpu --tp 1 >"$OUT/ncu-$k-tp1.txt" 2>&1
done
mkdir -p "$OUT/ffn"
OUT="$OUT/ffn" timeout 240 bash scripts/ffn-h200.sh >"$OUT/ffn.log" 2>&1
tar czf "$OUT/ffn.tgz" -C "$OUT" ffn && rm -rf "$OUT/ffn"
