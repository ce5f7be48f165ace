#!/usr/bin/env bash
# The A/B table of every kernel at TP 4 and TP 1 with the current defaults, an Nsight Compute
# profile of the generated gemv_int4 at TP 1, and the FFN block (scripts/ffn-h200.sh), on the
# H200 from the repository root (carry/ from scripts/build-gpu-binary.sh). Results in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/ab-out}
mkdir -p "$OUT"
export WAVEFUSE_CACHE_DIR=${WAVEFUSE_CACHE_DIR:-$PWD/carry/cache}
export WAVEFUSE_COMMIT=${WAVEFUSE_COMMIT:-$(cat carry/COMMIT 2>/dev/null || echo unknown)}
nvidia-smi --query-gpu=name,driver_version --format=csv >"$OUT/device.txt"
timeout 300 carry/wavefuse ab --shapes qwen27b-tp4,qwen27b-tp1 --json "$OUT/ab.json" --md "$OUT/ab.md" >"$OUT/ab.txt" 2>&1
echo "ab rc $?" >>"$OUT/ab.txt"
timeout 120 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section LaunchStats -k regex:gemv_int4 \
    carry/wavefuse run gemv_int4 --device gpu --tp 1 >"$OUT/ncu-gemv_int4-tp1.txt" 2>&1
mkdir -p "$OUT/ffn"
OUT="$OUT/ffn" timeout 240 bash scripts/ffn-h200.sh >"$OUT/ffn.log" 2>&1
tar czf "$OUT/ffn.tgz" -C "$OUT" ffn && rm -rf "$OUT/ffn"
