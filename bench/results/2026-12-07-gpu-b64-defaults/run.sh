#!/usr/bin/env bash
# Issue 40, one short device call: the batch-64 defaults after the units-of-16 rule (their own
# binary) at the four shapes, `--schedule tuned` at 4352 -> 5120 (the committed store's passes of
# 16), and Marlin/tinygemm/cuBLAS FP16 at batch 64, in one call. Every wavefuse row is checked
# against the f64 reference before it is timed.
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-b64-defaults/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
M=/tmp/marlin
bash bench/marlin-build.sh $M "$OUT/marlin-build.txt" &
BUILD=$!
for shape in n17408 k17408 n4352 k4352; do run_ab "d-$shape" $shape 64 ""; done
# shellcheck disable=SC2046
timeout 40 $W ab gemv_int4 $(cfg k4352) --shapes "$(pre k4352)-b64" --timing graphs --iters 200 --schedule tuned \
    > "$OUT/t-k4352.txt" 2>&1
echo "tuned k4352: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
wait $BUILD
timeout 90 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408,17408x5120,5120x4352,4352x5120 --batches 64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
grep -E "^\|" "$OUT/others.txt" > "$FINAL/others.md"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/[dt]-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|schedule: tuned for" "$f" | cut -c1-150; done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
