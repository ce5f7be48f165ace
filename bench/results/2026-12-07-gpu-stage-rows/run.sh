#!/usr/bin/env bash
# Issue 40: the activation stage's copy loop walking batch rows (each lane one K-word, the
# addresses a constant stride per trip) against the flat walk (row and word divided out of the
# entry index every trip), the generated defaults at every row whose kernel the change touches
# (batch 2, 8 and 64 at 5120 -> 17408 and 5120 -> 4352, 64 at 17408 -> 5120; 16 unchanged as
# a control), the base binary and the new one
# alternating in one call.
# Usage, repository root, carry/wavefuse (the new build, its COMMIT) and carry/wavefuse-base
# (the build of the commit before, 6fdeac9): bash bench/results/2026-12-07-gpu-stage-rows/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
NEW=$W
for shape in n17408 n4352 k17408; do
  for which in base new; do
    W=carry/wavefuse; [ $which = base ] && W=carry/wavefuse-base
    run_ab "$which-$shape" $shape "$([ $shape = k17408 ] && echo 16 64 || echo 2 8 16 64)" ""
  done
done
W=carry/wavefuse-base run_ab "base2-n17408" n17408 "64" ""
W=$NEW
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/*-*.txt; do
    echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused|WRONG" "$f" | cut -c1-140
  done
} > "$FINAL/summary.txt"
rm -rf "$FINAL/ab"
