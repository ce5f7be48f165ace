#!/usr/bin/env bash
# Issue 40, one short device call: the new sm_90 default at batch 9-16 (a GEMV alone in units of 8
# K-words, 191b887) against the previous default (binary 4a773bd, carried in carry/old), alternating
# twice: `ab gemv_int4 --timing graphs` at 5120 -> 17408 batch 9 and 16 and 17408 -> 5120 batch 16.
#   bash bench/results/2026-12-06-h100-units8-check/run.sh
source bench/device-prelude.sh
C=bench/results/2026-12-03-h200-marlin/k17408-config.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for round in 1 2; do
  for side in old new; do
    B=carry/wavefuse; [ $side = old ] && B=carry/old/wavefuse
    timeout 40 $B ab gemv_int4 --shapes qwen27b-tp1-b9,qwen27b-tp1-b16 --timing graphs --iters 200 \
        > "$OUT/r$round-$side-n.txt" 2>&1
    timeout 40 $B ab gemv_int4 --model-config $C --shapes qwen27b-tp1-b16 --timing graphs --iters 200 \
        > "$OUT/r$round-$side-k.txt" 2>&1
  done
done
for f in "$OUT"/r*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |error" "$f" | cut -c1-120; done > "$OUT/summary.txt"
cat "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
tar czf "$FINAL/results.tgz" -C "$OUT" .
