#!/usr/bin/env bash
# The GPU suite at a small Llama-style model's shapes (config.json: hidden 2048, intermediate
# 5632, 32 heads of 64, 4 KV heads, eps 1e-5), TP 1 and 2 with the ranks on one GPU, quick mode
# (QUICK=1: batch 1, 1,000 back-to-back launches; else batch 1, 3, 8 and 10,000), TP sizes $TPS. Writes under $OUT.
set -uo pipefail
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
R=bench/results/2026-12-01-h200-model-config
timeout 500 carry/wavefuse gpu-suite ${QUICK:+--quick} --tp ${TPS:-1,2} --model-config $R/config.json --out "$OUT/gpu-suite.json" > "$OUT/gpu-suite.txt" 2>&1
echo "rc=$?"
tail -30 "$OUT/gpu-suite.txt"
