#!/usr/bin/env bash
# Issue 40, one short device call: the batch-64 defaults after the units-of-16 rule (their own
# binary) at the four shapes, `--schedule tuned` at 4352 -> 5120 (the committed store's passes of
# 16), and Marlin/tinygemm/cuBLAS FP16 at batch 64, in one call. Every wavefuse row is checked
# against the f64 reference before it is timed.
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-b64-defaults/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
start_marlin
for shape in n17408 k17408 n4352 k4352; do run_ab "d-$shape" $shape 64 ""; done
# shellcheck disable=SC2046
timeout 40 $W ab gemv_int4 $(cfg k4352) --shapes "$(pre k4352)-b64" --timing graphs --iters 200 --schedule tuned \
    > "$OUT/t-k4352.txt" 2>&1
echo "tuned k4352: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
run_others 64
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/[dt]-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|schedule: tuned for" "$f" | cut -c1-150; done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
