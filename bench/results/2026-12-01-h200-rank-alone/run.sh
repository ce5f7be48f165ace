#!/usr/bin/env bash
# One device call: the rank-alone shapes and, side by side in the same run, the same kernels at
# Qwen 3.5 27B's TP 1 and TP 4 (all four ranks on the one GPU). Writes under $OUT.
set -uo pipefail
W=carry/wavefuse
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache
export WAVEFUSE_COMMIT=$(cat carry/COMMIT)
R=bench/results/2026-12-01-h200-rank-alone
K="gemv_int4 gemv_int4_dual_silu gemv_int4_allreduce_rmsnorm"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.csv"
$W ab $K --model-config $R/qwen27b-tp4-rank.json --tp 1 --json "$OUT/rank-alone.json" --md "$OUT/rank-alone.md" > "$OUT/rank-alone.txt" 2>&1
$W ab $K --tp 1,4 --json "$OUT/qwen27b.json" --md "$OUT/qwen27b.md" > "$OUT/qwen27b.txt" 2>&1
# The second repeat of the rank-alone run after the Qwen one (drift check).
$W ab $K --model-config $R/qwen27b-tp4-rank.json --tp 1 --json "$OUT/rank-alone-2.json" > "$OUT/rank-alone-2.txt" 2>&1
# Nothing broke on the GPU: the quick suite.
BUDGET_S=200 OUT="$OUT/suite" bash scripts/gpu-suite.sh > "$OUT/suite.txt" 2>&1 || true
tail -5 "$OUT/suite.txt"
grep -h -A12 "µs" "$OUT"/rank-alone.txt "$OUT"/qwen27b.txt | head -80
