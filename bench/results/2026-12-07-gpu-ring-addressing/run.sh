#!/usr/bin/env bash
# Issue 40, one device call: the weights' asynchronous LDS ring (`async_stages`) after its copies
# address the LDS by a 32-bit shared address declared once (ed4730a; before, ptxas rebuilt the
# generic shared window for every copy). Side by side with the register loads of the same tile,
# at 5120 -> 17408 and 17408 -> 5120: the defaults with 2, 3 and 4 ring stages and with register
# double buffering (pipeline_depth=2) at batch 16 and 32, the ring on the batch-64 default (its
# phased stage through the ring), and the 2026-12-06-gpu-async-ring rows c2 / c1 at batch 1.
# Every row is checked against the f64 reference before it is timed.
# Usage, repository root, carry/ (the release binary, its COMMIT):
#   bash bench/results/2026-12-07-gpu-ring-addressing/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
C2="k_unit_words=8,mma_scale=weight,k_split=4"
for shape in n17408 k17408; do
  run_ab "d-$shape" $shape "1 16 32 64" ""
  for s in 2 3 4; do run_ab "r$s-$shape" $shape "16 32 64" "async_stages=$s,pipeline_depth=1"; done
  run_ab "p2-$shape" $shape "16 32" "pipeline_depth=2"
  run_ab "c2-$shape" $shape "1" "$C2"
  run_ab "c1-$shape" $shape "1" "$C2,async_stages=2"
done
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/[dcpr]*-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused|error" "$f" | cut -c1-150; done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
tar czf "$FINAL/results.tgz" -C "$OUT" .
