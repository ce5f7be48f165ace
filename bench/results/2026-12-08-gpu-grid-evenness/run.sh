#!/usr/bin/env bash
# Issue 40: does the uneven grid of the tensor-core GEMV's defaults set its time? The same
# default kernel form (byte-identical but for the column count) at 5120 -> N for N = 17408 (the
# issue's shape), 21120 and 25344, batch 16 / 32 / 64, where the grid is a whole number of
# resident rounds at one N and not at another (see README.md); Marlin, tinygemm and cuBLAS FP16
# at the same shapes in the same call (their grids are persistent or tiled finely).
# Usage, repository root, carry/ (the release binary, its COMMIT; W= names another) plus
# carry/marlin: bash bench/results/2026-12-08-gpu-grid-evenness/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
D=bench/results/2026-12-08-gpu-grid-evenness
start_marlin
for N in 17408 21120 25344; do
  tag=n$N
  timeout 150 $W ab gemv_int4 --model-config $D/n$N-config.json --shapes "qwen27b-tp1-b16,qwen27b-tp1-b32,qwen27b-tp1-b64" \
      --timing graphs --iters 200 --json "$OUT/$tag.json" > "$OUT/$tag.txt" 2>&1
  echo "$tag: exit $? ($(el) s)" >> "$OUT/exits.txt"
  { tail -1 "$OUT/exits.txt"; grep -E " generated |ERROR|refused" "$OUT/$tag.txt" | cut -c1-150; } >> "$FINAL/progress.txt"
done
wait "$MARLIN_BUILD"
tail -1 "$OUT/marlin-build.txt" | tee -a "$FINAL/progress.txt"
timeout 150 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib /tmp/marlin/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408,5120x21120,5120x25344 --batches 16,32,64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
grep -E "^\|" "$OUT/others.txt" > "$FINAL/others.md"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/n*.txt; do
    echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused|WRONG" "$f" | cut -c1-150
  done
} > "$FINAL/summary.txt"
