#!/usr/bin/env bash
# Issue 40, one short device call: the new defaults (`whole_rounds`) themselves, from the
# binary that has them, at all 28 rows of the table — the check that the overrides
# timed in 2026-12-07-gpu-round-rules (byte-identical sources) are what the defaults run.
# Usage, repository root, carry/ (the release binary, its COMMIT):
#   bash bench/results/2026-12-07-gpu-new-defaults/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
for shape in n17408 k17408 n4352 k4352; do run_ab "a-$shape" $shape "1 2 4 8 16 32 64" ""; done
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/a-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused" "$f" | cut -c1-150; done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
